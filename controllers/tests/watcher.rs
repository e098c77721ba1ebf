//! The watcher against the real API semantics: a watch that ends is resumed from the last
//! version, and one whose history was compacted away (410 Expired) relists and reports the
//! new state between Init and InitDone.

mod common;

use std::sync::{Arc, Mutex};

use common::{configmaps, create, env};
use futures::StreamExt;
use k1s_api::client::{
    Client, DeleteParams, ListParams, ObjectList, Patch, ResourceRef, Result, WatchParams,
    WatchStream, WriteParams,
};
use k1s_runtime::watcher::{self, Event};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Delegates to a real client; the watch open when [`Cutting::cut`] is called ends then.
struct Cutting {
    inner: Arc<dyn Client>,
    current: Mutex<Option<CancellationToken>>,
}

impl Cutting {
    fn cut(&self) {
        if let Some(t) = self.current.lock().unwrap().take() {
            t.cancel();
        }
    }
}

#[async_trait::async_trait]
impl Client for Cutting {
    async fn get(&self, r: &ResourceRef, name: &str) -> Result<Value> {
        self.inner.get(r, name).await
    }
    async fn list(&self, r: &ResourceRef, p: &ListParams) -> Result<ObjectList> {
        self.inner.list(r, p).await
    }
    async fn create(&self, r: &ResourceRef, o: Value, p: &WriteParams) -> Result<Value> {
        self.inner.create(r, o, p).await
    }
    async fn update(
        &self,
        r: &ResourceRef,
        o: Value,
        s: Option<&str>,
        p: &WriteParams,
    ) -> Result<Value> {
        self.inner.update(r, o, s, p).await
    }
    async fn patch(
        &self,
        r: &ResourceRef,
        n: &str,
        patch: &Patch,
        s: Option<&str>,
        p: &WriteParams,
    ) -> Result<Value> {
        self.inner.patch(r, n, patch, s, p).await
    }
    async fn delete(&self, r: &ResourceRef, n: &str, p: &DeleteParams) -> Result<Value> {
        self.inner.delete(r, n, p).await
    }
    async fn create_subresource(
        &self,
        r: &ResourceRef,
        n: &str,
        s: &str,
        b: Value,
    ) -> Result<Value> {
        self.inner.create_subresource(r, n, s, b).await
    }
    async fn watch(&self, r: &ResourceRef, p: &WatchParams) -> Result<WatchStream> {
        let stream = self.inner.watch(r, p).await?;
        let token = CancellationToken::new();
        *self.current.lock().unwrap() = Some(token.clone());
        Ok(Box::pin(stream.take_until(token.cancelled_owned())))
    }
}

fn name(ev: &Event) -> String {
    match ev {
        Event::Init => "init".into(),
        Event::InitDone => "done".into(),
        Event::InitApply(o) => format!("list {}", o["metadata"]["name"].as_str().unwrap()),
        Event::Apply(o) => format!("apply {}", o["metadata"]["name"].as_str().unwrap()),
        Event::Delete(o) => format!("delete {}", o["metadata"]["name"].as_str().unwrap()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_and_relists_after_compaction() {
    let env = env().await;
    let c = env.client.clone();
    let cms = configmaps("default");
    for n in ["a", "b", "c"] {
        create(&c, &cms, serde_json::json!({"metadata": {"name": n}})).await;
    }
    let cutting = Arc::new(Cutting {
        inner: c.clone(),
        current: Mutex::new(None),
    });
    let events = watcher::watcher(
        cutting.clone(),
        ResourceRef::new("", "v1", "configmaps", Some("default")),
        watcher::Config {
            page_size: 2,
            ..Default::default()
        },
    );
    tokio::pin!(events);
    let mut next = async || name(&events.next().await.unwrap());
    for want in ["init", "list a", "list b", "list c", "done"] {
        assert_eq!(next().await, want);
    }
    create(&c, &cms, serde_json::json!({"metadata": {"name": "d"}})).await;
    assert_eq!(next().await, "apply d");
    // The watch ends: the next one resumes after "d" (nothing is repeated).
    cutting.cut();
    c.delete(&cms, "a", &DeleteParams::default()).await.unwrap();
    assert_eq!(next().await, "delete a");
    // The watch ends again and, before it is resumed, history is compacted past it.
    cutting.cut();
    create(&c, &cms, serde_json::json!({"metadata": {"name": "e"}})).await;
    let now = c.list(&cms, &ListParams::default()).await.unwrap();
    env.rest
        .store
        .compact(now.resource_version.parse().unwrap())
        .await
        .unwrap();
    for want in ["init", "list b", "list c", "list d", "list e", "done"] {
        assert_eq!(next().await, want);
    }
}

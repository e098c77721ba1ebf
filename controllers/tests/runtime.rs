//! The runtime against the real API semantics: a controller reconciles every key, never the
//! same key twice at once, retries failures; leader election hands a lease over.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{configmaps, create, env, eventually};
use k1s_api::client::{Patch, ResourceRef, WriteParams};
use k1s_runtime::leader::{Config, Elector, LeaderError};
use k1s_runtime::{Action, Controller, ObjectKey, Reconcile, watcher};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Recorder {
    in_flight: Mutex<HashSet<ObjectKey>>,
    seen: Mutex<HashMap<ObjectKey, usize>>,
    overlapped: Mutex<bool>,
}

#[derive(Debug, thiserror::Error)]
#[error("first attempt fails")]
struct Flaky;

#[async_trait::async_trait]
impl Reconcile for Recorder {
    type Error = Flaky;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Flaky> {
        if !self.in_flight.lock().unwrap().insert(key.clone()) {
            *self.overlapped.lock().unwrap() = true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.in_flight.lock().unwrap().remove(key);
        let n = {
            let mut seen = self.seen.lock().unwrap();
            let n = seen.entry(key.clone()).or_default();
            *n += 1;
            *n
        };
        if key.name == "flaky" && n == 1 {
            return Err(Flaky);
        }
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_reconciles_each_key_alone_and_retries_failures() {
    let env = env().await;
    let c = env.client.clone();
    let cms = configmaps("default");
    create(&c, &cms, json!({"metadata": {"name": "before"}})).await;
    let ctrl = Controller::new(
        "test",
        c.clone(),
        ResourceRef::new("", "v1", "configmaps", None),
        watcher::Config {
            page_size: 1,
            ..Default::default()
        },
    )
    .workers(4);
    let store = ctrl.store();
    let rec = Arc::new(Recorder::default());
    let cancel = CancellationToken::new();
    let run = tokio::spawn(ctrl.run(rec.clone(), cancel.clone()));
    create(&c, &cms, json!({"metadata": {"name": "flaky"}})).await;
    create(&c, &cms, json!({"metadata": {"name": "busy"}})).await;
    // Many changes of one key while workers are free: never reconciled concurrently.
    for i in 0..30 {
        c.patch(
            &cms,
            "busy",
            &Patch::Merge(json!({"data": {"i": i.to_string()}})),
            None,
            &WriteParams::default(),
        )
        .await
        .unwrap();
    }
    let key = |n: &str| ObjectKey::new(Some("default"), n);
    eventually("every key reconciled, the flaky one twice", || {
        let seen = rec.seen.lock().unwrap().clone();
        async move {
            (seen.contains_key(&key("before"))
                && seen.contains_key(&key("busy"))
                && seen.get(&key("flaky")).copied().unwrap_or(0) >= 2)
                .then_some(())
        }
    })
    .await;
    let cached = eventually("the cache has the last change", || {
        let o = store.get(&key("busy"));
        async move { o.filter(|o| o["data"]["i"] == "29") }
    })
    .await;
    assert_eq!(cached["metadata"]["name"], "busy");
    assert!(
        !*rec.overlapped.lock().unwrap(),
        "a key was reconciled twice at once"
    );
    // A deletion reaches the reconciler too.
    let before_delete = rec.seen.lock().unwrap()[&key("before")];
    c.delete(&cms, "before", &Default::default()).await.unwrap();
    eventually("the deletion reconciled", || {
        let n = rec.seen.lock().unwrap()[&key("before")];
        let gone = store.get(&key("before")).is_none();
        async move { (n > before_delete && gone).then_some(()) }
    })
    .await;
    cancel.cancel();
    run.await.unwrap();
}

fn fast(identity: &str) -> Config {
    Config {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(100),
        ..Config::new("kube-system", "test-lock", identity)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_hands_over_and_detects_loss() {
    let env = env().await;
    let c = env.client.clone();
    let leases = ResourceRef::new("coordination.k8s.io", "v1", "leases", Some("kube-system"));
    let a_cancel = CancellationToken::new();
    let a_working = CancellationToken::new();
    let a = {
        let (c, cancel, working) = (c.clone(), a_cancel.clone(), a_working.clone());
        tokio::spawn(async move {
            Elector::new(c, fast("a"))
                .run(cancel, move |term| async move {
                    working.cancel();
                    term.cancelled().await;
                })
                .await
        })
    };
    a_working.cancelled().await;
    let lease = c.get(&leases, "test-lock").await.unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3);

    let b_cancel = CancellationToken::new();
    let b_working = CancellationToken::new();
    let b = {
        let (c, cancel, working) = (c.clone(), b_cancel.clone(), b_working.clone());
        tokio::spawn(async move {
            Elector::new(c, fast("b"))
                .run(cancel, move |term| async move {
                    working.cancel();
                    term.cancelled().await;
                })
                .await
        })
    };
    // While a renews, b stays a candidate; a's renewals show in renewTime.
    let first_renew = lease["spec"]["renewTime"].clone();
    eventually("a renews", || {
        let c = c.clone();
        let leases = leases.clone();
        let first_renew = first_renew.clone();
        async move {
            let l = c.get(&leases, "test-lock").await.ok()?;
            (l["spec"]["renewTime"] != first_renew).then_some(())
        }
    })
    .await;
    assert!(!b_working.is_cancelled());
    assert_eq!(
        c.get(&leases, "test-lock").await.unwrap()["spec"]["holderIdentity"],
        "a"
    );
    // a stops and releases: b takes over without waiting for expiry.
    a_cancel.cancel();
    assert!(a.await.unwrap().is_ok());
    b_working.cancelled().await;
    let lease = c.get(&leases, "test-lock").await.unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    // Someone else takes the lease from b: b cannot renew and gives up its term.
    loop {
        let mut stolen = c.get(&leases, "test-lock").await.unwrap();
        stolen["spec"]["holderIdentity"] = json!("intruder");
        stolen["spec"]["leaseDurationSeconds"] = json!(3600);
        match c
            .update(&leases, stolen, None, &WriteParams::default())
            .await
        {
            Ok(_) => break,
            Err(e) if e.is_conflict() => continue,
            Err(e) => panic!("{e}"),
        }
    }
    let ended = b.await.unwrap();
    assert!(matches!(ended, Err(LeaderError::Lost { .. })), "{ended:?}");
    b_cancel.cancel();
}

//! In-memory mirrors of parts of the store, for decisions made on every request (RBAC rules,
//! the node authorizer's graph).
//!
//! A [`Mirror`] keeps a projection of each object under one key prefix, fed by a list and then
//! a watch of the store ([`run`]), relisting after compaction or a lagging watch. It knows the
//! store revision it reflects, so a caller about to refuse a request can first wait until the
//! mirror has caught up with the store ([`Mirror::sync`]): a RoleBinding created a moment ago
//! then counts, as a client that just got its 201 expects.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k1s_store::{EventKind, KeyValue, ListRequest, Revision, Store, WatchItem, WatchOptions};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::encryption::Transformer;
use crate::registry::ResourceType;
use crate::rest::Rest;

/// How often a mirror learns the store's revision while someone waits in [`Mirror::sync`]
/// (bounds how long that wait is when nothing under its prefix changed)...
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// ... and for how long after the last wait it keeps doing so.
const FAST_PROGRESS_FOR: Duration = Duration::from_secs(30);
/// How often an idle mirror learns it: each progress is a wake-up, and five mirrors at 100 ms
/// were most of an idle server's CPU (issue #31).
const IDLE_PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// A projection of every object under a prefix, keyed by store key.
pub struct Mirror<T> {
    objects: RwLock<HashMap<String, T>>,
    /// The store revision the mirror reflects; 0 until the first list.
    revision: watch::Sender<Revision>,
    /// Rung by a [`Mirror::sync`] that has to wait: the watch switches to fast progress.
    wanted: tokio::sync::Notify,
}

impl<T> Mirror<T> {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            objects: RwLock::default(),
            revision: watch::Sender::new(0),
            wanted: tokio::sync::Notify::new(),
        })
    }

    /// Reads the objects.
    pub fn read<R>(&self, f: impl FnOnce(&HashMap<String, T>) -> R) -> R {
        f(&self.objects.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The store revision the mirror reflects.
    pub fn revision(&self) -> Revision {
        *self.revision.borrow()
    }

    /// Waits (at most `timeout`) until the mirror reflects the store as of now. Returns whether
    /// it did.
    pub async fn sync(&self, store: &dyn Store, timeout: Duration) -> bool {
        let Ok(target) = store.current_revision().await else {
            return false;
        };
        let mut rx = self.revision.subscribe();
        if *rx.borrow() < target {
            self.wanted.notify_one();
        }
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= target))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, T>> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
impl<T> Mirror<T> {
    /// Puts an object in directly (tests of the mirrors' users).
    pub fn write_for_test(&self, key: &str, t: T) {
        self.write().insert(key.to_owned(), t);
    }
}

/// Calls `on_change` once now and again after every change under `prefix` (several changes
/// may be reported by one call), until `cancel`; survives store errors and compaction by
/// starting over. For reconcilers that look at the whole prefix each time.
pub async fn follow<F, Fut>(
    store: Arc<dyn Store>,
    prefix: String,
    cancel: CancellationToken,
    mut on_change: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        let after = match store.current_revision().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%prefix, error = %e, "cannot read the store");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        on_change().await;
        let mut stream = store.watch(
            &prefix,
            after,
            WatchOptions {
                progress_interval: None,
            },
        );
        loop {
            let item = tokio::select! {
                () = cancel.cancelled() => return,
                item = stream.next() => item,
            };
            match item {
                Some(Ok(WatchItem::Event(_))) => on_change().await,
                Some(Ok(WatchItem::Progress(_))) => {}
                // Start over (compaction, slow watcher, store error).
                Some(Err(_)) | None => break,
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// How a mirror reads the stored objects it projects.
#[derive(Clone)]
pub enum Read {
    /// Parsed by the mirror, through the encryption transformer (so an encrypted resource
    /// mirrors as well as a plain one), without `status` and `metadata.managedFields` (see
    /// [`Skimmed`]).
    Skim(Arc<Transformer>),
    /// The REST layer's decode of each stored revision, shared with its watches and reads
    /// (see `rest::decoded`): for a resource they decode anyway (pods, which the scheduler and
    /// every kubelet watch), the mirror then parses nothing itself.
    Shared(Arc<Rest>, Arc<ResourceType>),
}

impl Read {
    fn read(&self, kv: &KeyValue) -> Option<Arc<Value>> {
        let read = match self {
            Read::Skim(encryption) => encryption
                .transform_from_storage(&kv.key, &kv.value)
                .map_err(|e| e.to_string())
                .and_then(|plain| {
                    serde_json::from_slice::<Skimmed>(&plain).map_err(|e| e.to_string())
                })
                .map(|s| Arc::new(s.0)),
            Read::Shared(rest, res) => rest.decode_shared(res, kv).map_err(|e| e.message),
        };
        read.map_err(
            |error| tracing::warn!(key = %kv.key, %error, "mirror: cannot read a stored object"),
        )
        .ok()
    }
}

/// Keeps `mirror` in step with the objects under `prefix` until `cancel` fires. `project`
/// turns a stored object, as `read` reads it, into what the mirror keeps (`None`: skip it).
pub async fn run<T: Send + Sync + 'static>(
    mirror: Arc<Mirror<T>>,
    store: Arc<dyn Store>,
    read: Read,
    prefix: String,
    project: fn(&Value) -> Option<T>,
    cancel: CancellationToken,
) {
    loop {
        // List everything under the prefix from one snapshot.
        let mut fresh = HashMap::new();
        let mut req = ListRequest {
            prefix: prefix.clone(),
            limit: 1000,
            ..Default::default()
        };
        let listed = loop {
            match store.list(req.clone()).await {
                Ok(page) => {
                    for kv in &page.kvs {
                        if let Some(t) = read.read(kv).and_then(|v| project(&v)) {
                            fresh.insert(kv.key.clone(), t);
                        }
                    }
                    if !page.more {
                        break Ok(page.revision);
                    }
                    req.start_after = page.kvs.last().map(|kv| kv.key.clone());
                    req.revision = Some(page.revision);
                }
                Err(e) => break Err(e),
            }
        };
        let mut at = match listed {
            Ok(rev) => rev,
            Err(e) => {
                tracing::warn!(%prefix, error = %e, "mirror: cannot list the store");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        *mirror.write() = fresh;
        mirror.revision.send_replace(at);
        // Progress comes every IDLE_PROGRESS_INTERVAL, or every PROGRESS_INTERVAL for a while
        // after a sync had to wait; switching restarts the watch from where it was.
        let mut fast_until: Option<tokio::time::Instant> = None;
        'watch: loop {
            let fast = fast_until.is_some_and(|t| tokio::time::Instant::now() < t);
            let mut stream = store.watch(
                &prefix,
                at,
                WatchOptions {
                    progress_interval: Some(if fast {
                        PROGRESS_INTERVAL
                    } else {
                        IDLE_PROGRESS_INTERVAL
                    }),
                },
            );
            loop {
                let item = tokio::select! {
                    () = cancel.cancelled() => return,
                    () = mirror.wanted.notified() => {
                        fast_until = Some(tokio::time::Instant::now() + FAST_PROGRESS_FOR);
                        if fast {
                            continue;
                        }
                        continue 'watch;
                    }
                    item = stream.next() => item,
                };
                match item {
                    Some(Ok(WatchItem::Event(ev))) => {
                        at = ev.revision();
                        let projected = match ev.kind {
                            EventKind::Put => read.read(&ev.kv).and_then(|v| project(&v)),
                            EventKind::Delete => None,
                        };
                        {
                            let mut objects = mirror.write();
                            match projected {
                                Some(t) => objects.insert(ev.kv.key, t),
                                None => objects.remove(&ev.kv.key),
                            };
                        }
                        mirror.revision.send_replace(at);
                    }
                    Some(Ok(WatchItem::Progress(rev))) => {
                        at = at.max(rev);
                        mirror.revision.send_replace(at);
                        if fast && fast_until.is_some_and(|t| tokio::time::Instant::now() >= t) {
                            fast_until = None;
                            continue 'watch;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!(%prefix, error = %e, "mirror: watch ended; relisting");
                        break 'watch;
                    }
                    None => break 'watch,
                }
            }
        }
    }
}

/// A stored object without what no mirror projects: its `status` and its
/// `metadata.managedFields` are skipped while parsing, not built and dropped (for pods they
/// are most of the object).
struct Skimmed(Value);

impl<'de> serde::Deserialize<'de> for Skimmed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SkimVisitor { depth: 0 }).map(Skimmed)
    }
}

/// Visits the object (`depth` 0), then its metadata (`depth` 1).
struct SkimVisitor {
    depth: u8,
}

impl<'de> serde::de::Visitor<'de> for SkimVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let skip = match self.depth {
                0 => key == "status",
                _ => key == "managedFields",
            };
            if skip {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else if self.depth == 0 && key == "metadata" {
                let meta = map.next_value_seed(SkimVisitor { depth: 1 })?;
                out.insert(key, meta);
            } else {
                out.insert(key, map.next_value::<Value>()?);
            }
        }
        Ok(Value::Object(out))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for SkimVisitor {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skimming_drops_status_and_managed_fields_only() {
        let stored = serde_json::json!({
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "n1", "status": "kept below the top level"},
            "status": {"phase": "Running"}
        });
        let bytes = serde_json::to_vec(&stored).unwrap();
        let Skimmed(v) = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
                "spec": {"nodeName": "n1", "status": "kept below the top level"}
            })
        );
        // Not an object: refused, as a plain parse of a stored object that is no object.
        assert!(serde_json::from_slice::<Skimmed>(b"[1]").is_err());
        assert!(serde_json::from_slice::<Skimmed>(b"{\"metadata\": 3}").is_err());
    }
    use k1s_store::redb::{RedbConfig, RedbStore};

    /// A mirror of `/p/` projecting each object's `n`, running until the token fires.
    fn mirror_of_p(store: &Arc<dyn Store>) -> (Arc<Mirror<i64>>, CancellationToken) {
        let m: Arc<Mirror<i64>> = Mirror::new();
        let cancel = CancellationToken::new();
        tokio::spawn(run(
            m.clone(),
            store.clone(),
            Read::Skim(Arc::new(Transformer::identity())),
            "/p/".into(),
            |v| v["n"].as_i64(),
            cancel.clone(),
        ));
        (m, cancel)
    }

    #[tokio::test]
    async fn follows_puts_and_deletes_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap());
        store
            .create("/p/a", br#"{"n":1}"#.to_vec().into())
            .await
            .unwrap();
        store
            .create("/q/x", br#"{"n":9}"#.to_vec().into())
            .await
            .unwrap();
        let (m, cancel) = mirror_of_p(&store);
        assert!(m.sync(store.as_ref(), Duration::from_secs(10)).await);
        assert_eq!(m.read(|o| o.get("/p/a").copied()), Some(1));
        assert_eq!(m.read(|o| o.len()), 1);
        store
            .create("/p/b", br#"{"n":2}"#.to_vec().into())
            .await
            .unwrap();
        store.delete("/p/a", None).await.unwrap();
        assert!(m.sync(store.as_ref(), Duration::from_secs(10)).await);
        assert_eq!(m.read(|o| o.keys().cloned().collect::<Vec<_>>()), ["/p/b"]);
        // A write elsewhere: the mirror catches up through progress notifications.
        store
            .create("/q/y", br#"{"n":3}"#.to_vec().into())
            .await
            .unwrap();
        assert!(m.sync(store.as_ref(), Duration::from_secs(10)).await);
        cancel.cancel();
    }

    #[tokio::test]
    async fn an_idle_mirror_catches_up_with_writes_elsewhere_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap());
        let (m, cancel) = mirror_of_p(&store);
        assert!(m.sync(store.as_ref(), Duration::from_secs(10)).await);
        // Writes outside the prefix move the store on; the idle mirror hears of it only every
        // IDLE_PROGRESS_INTERVAL, unless a sync asks: then well within it.
        for i in 0..3 {
            store
                .create(&format!("/q/{i}"), b"{}".to_vec().into())
                .await
                .unwrap();
        }
        assert!(
            m.sync(store.as_ref(), IDLE_PROGRESS_INTERVAL / 2).await,
            "a waiting sync switches the mirror to fast progress"
        );
        cancel.cancel();
    }

    #[tokio::test]
    async fn mirrors_encrypted_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap());
        let config = crate::encryption::config::EncryptionConfig::parse(
            std::path::Path::new("t"),
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [pods]\n  providers: [{aesgcm: {keys: [{name: k, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=}]}}]\n",
        )
        .unwrap();
        let t = Arc::new(Transformer::new(config));
        let key = "/registry/core/pods/d/a";
        let put = |n: &str| t.transform_to_storage(key, n.as_bytes().to_vec()).unwrap();
        let rev = store.create(key, put(r#"{"n":1}"#).into()).await.unwrap();
        let m: Arc<Mirror<i64>> = Mirror::new();
        let cancel = CancellationToken::new();
        tokio::spawn(run(
            m.clone(),
            store.clone(),
            Read::Skim(t.clone()),
            "/registry/core/pods/".into(),
            |v| v["n"].as_i64(),
            cancel.clone(),
        ));
        assert!(m.sync(store.as_ref(), Duration::from_secs(10)).await);
        assert_eq!(m.read(|o| o.get(key).copied()), Some(1));
        store
            .update(key, put(r#"{"n":2}"#).into(), rev)
            .await
            .unwrap();
        assert!(m.sync(store.as_ref(), Duration::from_secs(10)).await);
        assert_eq!(m.read(|o| o.get(key).copied()), Some(2));
        cancel.cancel();
    }
}

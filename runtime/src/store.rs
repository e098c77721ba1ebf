//! The cache a watcher feeds: objects by namespace/name behind `Arc` (cloning one is cheap),
//! with optional indexes (e.g. by owner UID, by node name).
//!
//! [`Writer`] is the only writer: it applies watcher events in order. A relist is built aside
//! between [`Event::Init`] and [`Event::InitDone`] and then swapped in whole, so readers never
//! see a half-listed state. [`Store`] handles are cheap clones for reconcilers; they read only.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::key::ObjectKey;
use crate::watcher::Event;

/// Computes the index values of an object (none: not indexed).
pub type IndexFn = Arc<dyn Fn(&Value) -> Vec<String> + Send + Sync>;

#[derive(Default)]
struct Inner {
    objects: HashMap<ObjectKey, Arc<Value>>,
    /// index name → index value → keys.
    indices: HashMap<String, HashMap<String, HashSet<ObjectKey>>>,
}

/// A read handle on the cache.
#[derive(Clone)]
pub struct Store {
    inner: Arc<RwLock<Inner>>,
    indexers: Arc<Vec<(String, IndexFn)>>,
    ready: watch::Receiver<bool>,
}

/// The one writer of a [`Store`].
pub struct Writer {
    store: Store,
    /// The state being listed between Init and InitDone.
    buffer: Option<HashMap<ObjectKey, Arc<Value>>>,
    ready: watch::Sender<bool>,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Writer {
    /// A writer (and its store) with the given indexes.
    pub fn new(indexers: Vec<(String, IndexFn)>) -> Self {
        let (tx, rx) = watch::channel(false);
        Self {
            store: Store {
                inner: Arc::default(),
                indexers: Arc::new(indexers),
                ready: rx,
            },
            buffer: None,
            ready: tx,
        }
    }

    /// A read handle.
    pub fn store(&self) -> Store {
        self.store.clone()
    }

    /// Applies one watcher event.
    pub fn apply(&mut self, ev: &Event) {
        match ev {
            Event::Init => self.buffer = Some(HashMap::new()),
            Event::InitApply(o) => {
                if let (Some(buf), Some(k)) = (self.buffer.as_mut(), ObjectKey::of(o)) {
                    buf.insert(k, o.clone());
                }
            }
            Event::InitDone => {
                let objects = self.buffer.take().unwrap_or_default();
                let mut indices: HashMap<String, HashMap<String, HashSet<ObjectKey>>> =
                    HashMap::new();
                for (name, f) in self.store.indexers.iter() {
                    let idx = indices.entry(name.clone()).or_default();
                    for (k, o) in &objects {
                        for v in f(o) {
                            idx.entry(v).or_default().insert(k.clone());
                        }
                    }
                }
                *self.store.write() = Inner { objects, indices };
                self.ready.send_replace(true);
            }
            Event::Apply(o) => {
                if let Some(k) = ObjectKey::of(o) {
                    let mut inner = self.store.write();
                    let old = inner.objects.insert(k.clone(), o.clone());
                    self.reindex(&mut inner, &k, old.as_deref(), Some(o));
                }
            }
            Event::Delete(o) => {
                if let Some(k) = ObjectKey::of(o) {
                    let mut inner = self.store.write();
                    let old = inner.objects.remove(&k);
                    self.reindex(&mut inner, &k, old.as_deref(), None);
                }
            }
        }
    }

    fn reindex(&self, inner: &mut Inner, k: &ObjectKey, old: Option<&Value>, new: Option<&Value>) {
        for (name, f) in self.store.indexers.iter() {
            let idx = inner.indices.entry(name.clone()).or_default();
            if let Some(old) = old {
                for v in f(old) {
                    if let Some(set) = idx.get_mut(&v) {
                        set.remove(k);
                        if set.is_empty() {
                            idx.remove(&v);
                        }
                    }
                }
            }
            if let Some(new) = new {
                for v in f(new) {
                    idx.entry(v).or_default().insert(k.clone());
                }
            }
        }
    }
}

/// Applies every event of `events` to `writer` and passes it on.
pub fn reflector<S>(mut writer: Writer, events: S) -> impl Stream<Item = Event>
where
    S: Stream<Item = Event>,
{
    events.map(move |ev| {
        writer.apply(&ev);
        ev
    })
}

impl Store {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.read().objects.get(key).cloned()
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<Value>> {
        self.read().objects.values().cloned().collect()
    }

    /// The cached objects of one namespace.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<Value>> {
        self.read()
            .objects
            .iter()
            .filter(|(k, _)| k.namespace.as_deref() == Some(namespace))
            .map(|(_, o)| o.clone())
            .collect()
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects whose index `index` has the value `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Value>> {
        let inner = self.read();
        inner
            .indices
            .get(index)
            .and_then(|idx| idx.get(value))
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| inner.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the first list has completed.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits for the first list to complete; false if cancelled (or the writer is gone) first.
    pub async fn wait_ready(&self, cancel: &CancellationToken) -> bool {
        let mut rx = self.ready.clone();
        tokio::select! {
            r = rx.wait_for(|r| *r) => r.is_ok(),
            () = cancel.cancelled() => false,
        }
    }
}

/// An index of objects by the UIDs of their owners.
pub fn owner_uid_index() -> (String, IndexFn) {
    (
        "owner-uid".into(),
        Arc::new(|o: &Value| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .map(|refs| {
                    refs.iter()
                        .filter_map(|r| r["uid"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        }),
    )
}

/// An index of pods by `spec.nodeName`.
pub fn node_name_index() -> (String, IndexFn) {
    (
        "node-name".into(),
        Arc::new(|o: &Value| {
            o["spec"]["nodeName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(|n| vec![n.to_owned()])
                .unwrap_or_default()
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, owner: &str) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": name, "namespace": "d",
            "ownerReferences": [{"uid": owner}]}}))
    }

    #[tokio::test]
    async fn relist_swaps_at_once_and_indexes_follow() {
        let w = Writer::new(vec![owner_uid_index()]);
        let s = w.store();
        assert!(!s.is_ready());
        let events = vec![
            Event::Init,
            Event::InitApply(obj("a", "o1")),
            Event::InitApply(obj("b", "o1")),
            Event::InitDone,
        ];
        let out: Vec<Event> = reflector(w, futures::stream::iter(events)).collect().await;
        assert_eq!(out.len(), 4);
        assert!(s.is_ready());
        assert_eq!(s.by_index("owner-uid", "o1").len(), 2);

        let mut w = Writer::new(vec![owner_uid_index()]);
        let s = w.store();
        for ev in [
            Event::Init,
            Event::InitApply(obj("a", "o1")),
            Event::InitDone,
        ] {
            w.apply(&ev);
        }
        // A relist in progress leaves the old state visible until InitDone.
        w.apply(&Event::Init);
        w.apply(&Event::InitApply(obj("c", "o2")));
        assert_eq!(s.keys(), vec![ObjectKey::new(Some("d"), "a")]);
        w.apply(&Event::InitDone);
        assert_eq!(s.keys(), vec![ObjectKey::new(Some("d"), "c")]);
        assert!(s.by_index("owner-uid", "o1").is_empty());
        assert_eq!(s.by_index("owner-uid", "o2").len(), 1);
        // Changes move index entries; deletes drop them.
        w.apply(&Event::Apply(obj("c", "o3")));
        assert!(s.by_index("owner-uid", "o2").is_empty());
        assert_eq!(s.by_index("owner-uid", "o3").len(), 1);
        w.apply(&Event::Delete(obj("c", "o3")));
        assert!(s.is_empty());
        assert!(s.by_index("owner-uid", "o3").is_empty());
    }

    #[tokio::test]
    async fn wait_ready_ends_on_cancel() {
        let w = Writer::default();
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(!w.store().wait_ready(&cancel).await);
    }
}

//! Typed informers: a watcher's events decoded into a k8s-openapi type and turned into
//! [`Change`]s (`Added`/`Modified`/`Deleted`), relists included, plus a typed cache
//! ([`Store`]) that components read.
//!
//! This is what client-go's shared informers give kube-scheduler and kube-proxy: a relist is
//! not a stream of "apply" events but a diff against what was known, so an object deleted
//! while the watch was down is reported as [`Change::Deleted`] once the relist completes.
//! Objects are decoded without `metadata.managedFields` ([`k1s_api::trimmed`]), as upstream's
//! informers of the scheduler and the proxy drop them: no component here reads them.
//!
//! [`Changes`] is the pure diffing state (unit-tested on event sequences); [`run`] drives it
//! from a watcher until cancelled; [`feed`] runs it into a component's own shared state (the
//! proxy's and the policy controller's trackers) and wakes its sync loop; [`Writer`]/[`Store`]
//! keep the typed objects by key for readers that look things up rather than react to each
//! change.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt;
use k1s_api::client::{Client, ResourceRef};
use k1s_api::trimmed;
use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::key::ObjectKey;
use crate::watcher::{self, Event};

/// One informer event of a typed object.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    Added(T),
    Modified(T),
    Deleted(T),
}

impl<T> Change<T> {
    /// The object the change carries (its last state for a deletion).
    pub fn object(&self) -> &T {
        match self {
            Change::Added(o) | Change::Modified(o) | Change::Deleted(o) => o,
        }
    }
}

/// The relist diff: what a watcher's events mean as typed changes.
pub struct Changes<K> {
    /// The last state of each object, as the watch delivered it (a shared pointer): decoded
    /// again only for what a relist finds gone.
    known: HashMap<ObjectKey, Arc<Value>>,
    /// The keys of the relist under way.
    listed: Option<HashSet<ObjectKey>>,
    /// Whether a first list completed.
    synced: bool,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K> Default for Changes<K> {
    fn default() -> Self {
        Self {
            known: HashMap::new(),
            listed: None,
            synced: false,
            _kind: std::marker::PhantomData,
        }
    }
}

impl<K: DeserializeOwned> Changes<K> {
    /// Whether a first complete list has been seen.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// The changes one watcher event stands for (none for a list's frame markers, except the
    /// deletions a completed relist reveals). Objects that do not decode as `K` are skipped
    /// (logged): a watched kind's objects are validated by the API server, so this is a bug
    /// or a version skew, not something to stop for.
    pub fn apply(&mut self, ev: Event) -> Vec<Change<K>> {
        let (obj, deleted) = match ev {
            Event::Init => {
                self.listed = Some(HashSet::new());
                return Vec::new();
            }
            Event::InitDone => {
                self.synced = true;
                let Some(listed) = self.listed.take() else {
                    return Vec::new();
                };
                let gone: Vec<ObjectKey> = self
                    .known
                    .keys()
                    .filter(|k| !listed.contains(*k))
                    .cloned()
                    .collect();
                return gone
                    .into_iter()
                    .filter_map(|k| self.known.remove(&k))
                    .filter_map(|o| decode::<K>(&o))
                    .map(Change::Deleted)
                    .collect();
            }
            Event::InitApply(o) | Event::Apply(o) => (o, false),
            Event::Delete(o) => (o, true),
        };
        let Some(key) = ObjectKey::of(&obj) else {
            return Vec::new();
        };
        let Some(typed) = decode::<K>(&obj) else {
            return Vec::new();
        };
        if let Some(listed) = self.listed.as_mut() {
            listed.insert(key.clone());
        }
        let change = if deleted {
            self.known.remove(&key);
            Change::Deleted(typed)
        } else if self.known.insert(key, obj).is_some() {
            Change::Modified(typed)
        } else {
            Change::Added(typed)
        };
        vec![change]
    }
}

fn decode<K: DeserializeOwned>(obj: &Value) -> Option<K> {
    match trimmed::decode_without_managed_fields::<K>(obj) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(
                namespace = obj["metadata"]["namespace"].as_str().unwrap_or(""),
                name = obj["metadata"]["name"].as_str().unwrap_or(""),
                kind = obj["kind"].as_str().unwrap_or(""),
                error = %e,
                "cannot decode a watched object"
            );
            None
        }
    }
}

/// Lists and watches `resource` and hands each typed change to `on_change` until `cancel`;
/// `on_synced` is called once, after the first complete list has been delivered.
pub async fn run<K, F>(
    client: Arc<dyn Client>,
    resource: ResourceRef,
    config: watcher::Config,
    mut on_change: F,
    on_synced: impl FnOnce() + Send,
    cancel: CancellationToken,
) where
    K: DeserializeOwned + Send + 'static,
    F: FnMut(Change<K>) + Send,
{
    let stream = watcher::watcher(client, resource, config);
    futures::pin_mut!(stream);
    let mut changes = Changes::<K>::default();
    let mut on_synced = Some(on_synced);
    loop {
        let ev = tokio::select! {
            () = cancel.cancelled() => return,
            ev = stream.next() => match ev { Some(ev) => ev, None => return },
        };
        for c in changes.apply(ev) {
            on_change(c);
        }
        if changes.synced()
            && let Some(f) = on_synced.take()
        {
            f();
        }
    }
}

/// Spawns (on `tasks`) an informer of `K` that applies each change to the shared `state` with
/// `apply` and marks its first complete list with `synced`, waking `wake` after each: the
/// front half of a component that keeps its own picture and syncs it in one loop.
#[allow(clippy::too_many_arguments)]
pub fn feed<K, S>(
    tasks: &tokio_util::task::TaskTracker,
    client: &Arc<dyn Client>,
    config: watcher::Config,
    state: &Arc<std::sync::Mutex<S>>,
    wake: &Arc<tokio::sync::Notify>,
    apply: fn(&mut S, Change<K>),
    synced: fn(&mut S),
    cancel: &CancellationToken,
) where
    K: k8s_openapi::Resource + DeserializeOwned + Send + 'static,
    S: Send + 'static,
{
    let (s, w) = (state.clone(), wake.clone());
    let (s2, w2) = (state.clone(), wake.clone());
    tasks.spawn(run::<K, _>(
        client.clone(),
        ResourceRef::of::<K>(None),
        config,
        move |c| {
            // A poisoned lock still holds a usable picture: the next sync rebuilds from it.
            apply(&mut s.lock().unwrap_or_else(PoisonError::into_inner), c);
            w.notify_one();
        },
        move || {
            synced(&mut s2.lock().unwrap_or_else(PoisonError::into_inner));
            w2.notify_one();
        },
        cancel.clone(),
    ));
}

/// A typed read handle on a cache of one kind, by namespace/name.
pub struct Store<K> {
    objects: Arc<RwLock<HashMap<ObjectKey, Arc<K>>>>,
    ready: watch::Receiver<bool>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            ready: self.ready.clone(),
        }
    }
}

/// The one writer of a typed [`Store`].
pub struct Writer<K> {
    store: Store<K>,
    ready: watch::Sender<bool>,
}

impl<K: Metadata<Ty = ObjectMeta>> Default for Writer<K> {
    fn default() -> Self {
        let (tx, rx) = watch::channel(false);
        Self {
            store: Store {
                objects: Arc::default(),
                ready: rx,
            },
            ready: tx,
        }
    }
}

/// The cache key of a typed object.
pub fn key_of<K: Metadata<Ty = ObjectMeta>>(o: &K) -> ObjectKey {
    let m = o.metadata();
    ObjectKey::new(m.namespace.as_deref(), m.name.as_deref().unwrap_or(""))
}

impl<K: Metadata<Ty = ObjectMeta>> Writer<K> {
    /// A read handle.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Applies one change; returns the object as cached (for an addition or a modification)
    /// and the one it replaced.
    pub fn apply(&mut self, change: Change<K>) -> (Option<Arc<K>>, Option<Arc<K>>) {
        let mut objects = self
            .store
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        match change {
            Change::Added(o) | Change::Modified(o) => {
                let o = Arc::new(o);
                let old = objects.insert(key_of(&*o), o.clone());
                (Some(o), old)
            }
            Change::Deleted(o) => (None, objects.remove(&key_of(&o))),
        }
    }

    /// Marks the store as holding a complete list.
    pub fn mark_ready(&self) {
        self.ready.send_replace(true);
    }
}

impl<K> Store<K> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ObjectKey, Arc<K>>> {
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.read().get(key).cloned()
    }

    /// Every object (in no particular order).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Whether a first complete list is in.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits for the first complete list; false if cancelled first.
    pub async fn wait_ready(&self, cancel: &CancellationToken) -> bool {
        let mut rx = self.ready.clone();
        tokio::select! {
            r = rx.wait_for(|r| *r) => r.is_ok(),
            () = cancel.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn cm(name: &str, rv: &str) -> Arc<Value> {
        Arc::new(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
                         "managedFields": [{"manager": "x"}]},
        }))
    }

    fn names(cs: &[Change<ConfigMap>]) -> Vec<String> {
        cs.iter()
            .map(|c| {
                let n = c.object().metadata.name.clone().unwrap_or_default();
                match c {
                    Change::Added(_) => format!("+{n}"),
                    Change::Modified(_) => format!("~{n}"),
                    Change::Deleted(_) => format!("-{n}"),
                }
            })
            .collect()
    }

    #[test]
    fn a_relist_reports_what_vanished_as_deleted() {
        let mut c = Changes::<ConfigMap>::default();
        let mut out = Vec::new();
        for ev in [
            Event::Init,
            Event::InitApply(cm("a", "1")),
            Event::InitApply(cm("b", "2")),
            Event::InitDone,
        ] {
            out.extend(c.apply(ev));
        }
        assert_eq!(names(&out), ["+a", "+b"]);
        assert!(c.synced());
        out.clear();
        for ev in [
            Event::Apply(cm("c", "3")),
            Event::Delete(cm("c", "4")),
            Event::Apply(cm("a", "5")),
            // The watch expired: b was deleted meanwhile, d created.
            Event::Init,
            Event::InitApply(cm("a", "5")),
            Event::InitApply(cm("d", "6")),
            Event::InitDone,
        ] {
            out.extend(c.apply(ev));
        }
        assert_eq!(names(&out), ["+c", "-c", "~a", "~a", "+d", "-b"]);
    }

    #[test]
    fn objects_are_decoded_without_managed_fields() {
        let mut c = Changes::<ConfigMap>::default();
        let out = c.apply(Event::Apply(cm("a", "1")));
        assert!(out[0].object().metadata.managed_fields.is_none());
        // Not a ConfigMap: skipped, not a panic.
        let bad = Arc::new(json!({"metadata": {"name": "x", "namespace": "ns"}, "data": 5}));
        assert!(c.apply(Event::Apply(bad)).is_empty());
    }

    #[tokio::test]
    async fn the_typed_store_follows_changes_and_says_when_ready() {
        let mut w = Writer::<ConfigMap>::default();
        let s = w.store();
        assert!(!s.is_ready());
        let mut c = Changes::<ConfigMap>::default();
        for ev in [Event::Init, Event::InitApply(cm("a", "1")), Event::InitDone] {
            for ch in c.apply(ev) {
                w.apply(ch);
            }
        }
        w.mark_ready();
        assert!(s.wait_ready(&CancellationToken::new()).await);
        assert_eq!(s.len(), 1);
        let (_, old) = w.apply(Change::Deleted(
            serde_json::from_value((*cm("a", "2")).clone()).unwrap(),
        ));
        assert!(old.is_some());
        assert!(s.get(&ObjectKey::new(Some("ns"), "a")).is_none());
    }
}

//! What admission reads on every create, remembered between writes to it: the small lists of
//! LimitRanges, ResourceQuotas, PriorityClasses and webhook configurations, and single objects (a namespace, a pod's
//! ServiceAccount or PriorityClass), each kept as a list of at most one under its key.
//!
//! Every write to the store goes through [`Noting`], which counts the writes under each
//! remembered resource's prefix. A remembered list is used while no write under its
//! resource's prefix was made since it was read, and for at most [`KEEP`]: a write through this
//! server is seen by the next create, as a read of the store would see it; a write made by
//! another API server sharing an etcd cluster is seen within [`KEEP`] (upstream's admission
//! plugins read the same kinds from informers, which lag in the same way).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use k1s_store::{
    KeyValue, ListRequest, ListResponse, Result, Revision, Store, WatchOptions, WatchStream,
};
use serde_json::Value;

/// The longest a remembered list is used.
pub(crate) const KEEP: Duration = Duration::from_secs(1);

/// Lists remembered by prefix, and the write counts that say whether they still hold.
pub(crate) struct Remembered {
    /// The resources whose lists are remembered (their store prefixes), each with the number
    /// of writes made under it.
    resources: Vec<(String, AtomicU64)>,
    lists: Mutex<HashMap<String, Entry>>,
    /// [`KEEP`], shorter in tests.
    keep_for: Duration,
}

struct Entry {
    /// The write count of the resource when the list was read.
    writes: u64,
    read_at: Instant,
    items: Vec<Arc<Value>>,
}

/// What a caller about to read a list from the store keeps, to remember it afterwards.
pub(crate) struct Reading {
    writes: u64,
}

impl Remembered {
    /// Remembers lists under the store prefixes `resources` (e.g. `/registry/limitranges/`).
    pub fn new(resources: Vec<String>) -> Self {
        Self::keeping_for(resources, KEEP)
    }

    fn keeping_for(resources: Vec<String>, keep_for: Duration) -> Self {
        Self {
            resources: resources
                .into_iter()
                .map(|p| (p, AtomicU64::new(0)))
                .collect(),
            lists: Mutex::default(),
            keep_for,
        }
    }

    fn resource_of(&self, key: &str) -> Option<usize> {
        self.resources
            .iter()
            .position(|(prefix, _)| key.starts_with(prefix.as_str()))
    }

    /// Counts a write (made or attempted) to `key`.
    fn wrote(&self, key: &str) {
        if let Some(i) = self.resource_of(key) {
            self.resources[i].1.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The list under `prefix` if one is remembered and still holds; otherwise what to pass to
    /// [`Remembered::keep`] once the caller has read the list (`None`: not a remembered kind).
    pub fn get(&self, prefix: &str) -> std::result::Result<Vec<Arc<Value>>, Option<Reading>> {
        let Some(resource) = self.resource_of(prefix) else {
            return Err(None);
        };
        // Taken before the caller reads, so a write racing the read invalidates what it keeps.
        let writes = self.resources[resource].1.load(Ordering::SeqCst);
        let lists = self.lists.lock().unwrap_or_else(|e| e.into_inner());
        match lists.get(prefix) {
            Some(e) if e.writes == writes && e.read_at.elapsed() < self.keep_for => {
                Ok(e.items.clone())
            }
            _ => Err(Some(Reading { writes })),
        }
    }

    /// Remembers the list under `prefix` read after [`Remembered::get`] returned `reading`.
    pub fn keep(&self, prefix: &str, reading: Reading, items: Vec<Arc<Value>>) {
        let mut lists = self.lists.lock().unwrap_or_else(|e| e.into_inner());
        // Namespaces come and go; the lists of a few thousand are plenty to keep.
        if lists.len() >= 4096 {
            lists.clear();
        }
        let entry = Entry {
            writes: reading.writes,
            read_at: Instant::now(),
            items,
        };
        lists.insert(prefix.to_owned(), entry);
    }

    /// Drops what is remembered under `prefix`'s resource (every namespace's list): a caller
    /// found it stale (a conflicting write). Counted as a write, so a read that began before
    /// cannot keep what it read either.
    pub fn forget(&self, prefix: &str) {
        if let Some(i) = self.resource_of(prefix) {
            self.resources[i].1.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A [`Store`] that counts the writes under remembered prefixes (see the module docs).
pub(crate) struct Noting {
    pub inner: Arc<dyn Store>,
    pub remembered: Arc<Remembered>,
}

#[async_trait::async_trait]
impl Store for Noting {
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        self.inner.list(req).await
    }

    async fn count(&self, prefix: &str) -> Result<(u64, Revision)> {
        self.inner.count(prefix).await
    }

    // Writes are counted after they return, whatever the outcome: a failed write may still
    // have been made (a lost answer), and counting one too many only costs a read.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let res = self.inner.create(key, value).await;
        self.remembered.wrote(key);
        res
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        let res = self.inner.update(key, value, expected).await;
        self.remembered.wrote(key);
        res
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let res = self.inner.delete(key, expected).await;
        self.remembered.wrote(key);
        res
    }

    fn watch(&self, prefix: &str, after: Revision, opts: WatchOptions) -> WatchStream {
        self.inner.watch(prefix, after, opts)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_store::redb::{RedbConfig, RedbStore};
    use serde_json::json;

    const LR: &str = "/registry/limitranges/";

    fn noting(dir: &tempfile::TempDir, keep_for: Duration) -> (Noting, Arc<Remembered>) {
        let inner: Arc<dyn Store> =
            Arc::new(RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap());
        let remembered = Arc::new(Remembered::keeping_for(vec![LR.to_owned()], keep_for));
        let store = Noting {
            inner,
            remembered: remembered.clone(),
        };
        (store, remembered)
    }

    /// Reads the list under `prefix` as `Rest::list_shared` does: remembered, or "read" (here
    /// `read` stands for the store) and kept. Returns the list and whether it was remembered.
    fn list(r: &Remembered, prefix: &str, read: &[Value]) -> (Vec<Value>, bool) {
        match r.get(prefix) {
            Ok(items) => (items.iter().map(|v| Value::clone(v)).collect(), true),
            Err(reading) => {
                let items: Vec<Arc<Value>> = read.iter().cloned().map(Arc::new).collect();
                if let Some(reading) = reading {
                    r.keep(prefix, reading, items);
                }
                (read.to_vec(), false)
            }
        }
    }

    #[tokio::test]
    async fn lists_hold_until_a_write_under_their_resource() {
        let dir = tempfile::tempdir().unwrap();
        let (store, r) = noting(&dir, Duration::from_secs(60));
        let ns_a = format!("{LR}a/");
        let one = [json!({"n": 1})];
        assert_eq!(list(&r, &ns_a, &one), (one.to_vec(), false));
        // Remembered: what the store holds now does not matter until a write.
        assert_eq!(list(&r, &ns_a, &[]), (one.to_vec(), true));
        // Writes elsewhere leave it alone.
        store
            .create("/registry/pods/a/p", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert!(list(&r, &ns_a, &[]).1);
        // Any write under the resource (any namespace, any outcome) ends it.
        store
            .create(&format!("{LR}b/x"), Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert_eq!(list(&r, &ns_a, &[]), (Vec::new(), false));
        assert!(list(&r, &ns_a, &[]).1);
        assert!(
            store
                .update(&format!("{LR}b/x"), Bytes::from_static(b"{}"), 999)
                .await
                .is_err()
        );
        assert!(!list(&r, &ns_a, &[]).1);
        store.delete(&format!("{LR}b/x"), None).await.unwrap();
        assert!(!list(&r, &ns_a, &[]).1);
        // A caller that found it stale drops it.
        assert!(list(&r, &ns_a, &[]).1);
        r.forget(&ns_a);
        assert!(!list(&r, &ns_a, &[]).1);
        // Other resources are not remembered at all.
        assert!(
            r.get("/registry/pods/a/")
                .is_err_and(|reading| reading.is_none())
        );
    }

    #[tokio::test]
    async fn a_read_racing_a_write_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (store, r) = noting(&dir, Duration::from_secs(60));
        let ns = format!("{LR}a/");
        let Err(Some(reading)) = r.get(&ns) else {
            panic!("nothing is remembered yet")
        };
        // The write lands after the read began: what the read returns may predate it.
        store
            .create(&format!("{ns}x"), Bytes::from_static(b"{}"))
            .await
            .unwrap();
        r.keep(&ns, reading, Vec::new());
        assert!(!list(&r, &ns, &[]).1);
    }

    #[test]
    fn lists_expire() {
        let r = Remembered::keeping_for(vec![LR.to_owned()], Duration::from_millis(20));
        let ns = format!("{LR}a/");
        assert!(!list(&r, &ns, &[]).1);
        assert!(list(&r, &ns, &[]).1);
        std::thread::sleep(Duration::from_millis(30));
        assert!(!list(&r, &ns, &[]).1);
    }
}

//! Stored objects decoded once: the watches, point reads and small lists of the API server
//! share one decoded object per stored revision.
//!
//! Every watch of a resource reads the same store event, and admission reads the same
//! namespace, ServiceAccount and PriorityClasses for every pod it admits. Decoding stored JSON
//! is the costliest step of serving either, so the last decoded revision of each recently seen
//! key is kept. A revision names one stored value for good (revisions are never reused), so an
//! entry is never stale: a read that finds a newer revision in the store simply misses.
//!
//! Decoding is exactly once per kept revision: the first reader decodes while readers of the
//! same revision on other threads wait for it (watches of one change run at the same moment on
//! different workers, so a look-then-decode cache mostly missed).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use k1s_store::Revision;
use serde_json::Value;

/// How many fills are remembered, so at most this many keys are kept (fewer while some keys
/// are filled again with newer revisions). Enough for every watch of a burst of writes, and for the reads
/// that follow a write within a second or so (the scheduler's binding of a new pod), to find
/// the decoded object; the objects held stay a few MB.
const KEPT: usize = 1024;

/// A decoded object, or the decode under way. `None` once its decode failed: the reader that
/// decoded reports the error, the others decode for themselves.
type Cell = Arc<OnceLock<Option<Arc<Value>>>>;

struct Slot {
    revision: Revision,
    /// The API group and version the object was decoded as (a conversion may differ).
    group_version: (String, String),
    cell: Cell,
}

impl Slot {
    fn holds(&self, revision: Revision, group: &str, version: &str) -> bool {
        self.revision == revision
            && self.group_version.0 == group
            && self.group_version.1 == version
    }
}

#[derive(Default)]
struct Slots {
    by_key: HashMap<Arc<str>, Slot>,
    /// Keys in the order their slots were filled, oldest first; an entry whose slot has been
    /// replaced since no longer removes it.
    order: VecDeque<(Arc<str>, Revision)>,
}

/// The last decoded revision of recently read keys.
#[derive(Default)]
pub(crate) struct Decoded {
    slots: Mutex<Slots>,
}

impl Decoded {
    /// The object stored under `key` at `revision` as `group`/`version`, decoded by `decode`
    /// unless a reader already did.
    pub(crate) fn get_or_decode<E>(
        &self,
        revision: Revision,
        key: &str,
        group: &str,
        version: &str,
        decode: impl FnOnce() -> Result<Value, E>,
    ) -> Result<Arc<Value>, E> {
        let Some(cell) = self.cell(revision, key, group, version) else {
            return decode().map(Arc::new);
        };
        let mut decode = Some(decode);
        let mut failed = None;
        let decoded = cell.get_or_init(|| match decode.take().map(|d| d()) {
            Some(Ok(v)) => Some(Arc::new(v)),
            Some(Err(e)) => {
                failed = Some(e);
                None
            }
            None => None,
        });
        match (decoded, failed, decode) {
            (Some(v), ..) => Ok(v.clone()),
            (None, Some(e), _) => Err(e),
            // Another reader's decode failed: this one decodes (and fails) for itself.
            (None, None, Some(d)) => d().map(Arc::new),
            (None, None, None) => {
                unreachable!("a decode that ran either failed or filled the cell")
            }
        }
    }

    /// The object stored under `key` at `revision` as `group`/`version` if a reader decoded it
    /// (and is not still decoding it).
    pub(crate) fn get(
        &self,
        revision: Revision,
        key: &str,
        group: &str,
        version: &str,
    ) -> Option<Arc<Value>> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.by_key.get(key)?;
        if !slot.holds(revision, group, version) {
            return None;
        }
        slot.cell.get().cloned().flatten()
    }

    /// The cell of `revision` under `key`, made if the key holds an older revision or none;
    /// `None` for a revision older than the one kept (a watch far behind decodes for itself).
    fn cell(&self, revision: Revision, key: &str, group: &str, version: &str) -> Option<Cell> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.by_key.get(key) {
            if slot.holds(revision, group, version) {
                return Some(slot.cell.clone());
            }
            // The kept revision is newer, or the same decoded as another version.
            if slot.revision >= revision {
                return None;
            }
        }
        let key: Arc<str> = Arc::from(key);
        let cell = Cell::default();
        // Slots let go of here may hold the last reference to a large decoded object: they are
        // dropped after the lock is released, so other readers never wait on freeing them.
        let mut gone = Vec::new();
        gone.extend(slots.by_key.insert(
            key.clone(),
            Slot {
                revision,
                group_version: (group.to_owned(), version.to_owned()),
                cell: cell.clone(),
            },
        ));
        slots.order.push_back((key, revision));
        while slots.order.len() > KEPT {
            if let Some((old, rev)) = slots.order.pop_front()
                && slots.by_key.get(&old).is_some_and(|s| s.revision == rev)
            {
                gone.extend(slots.by_key.remove(&old));
            }
        }
        drop(slots);
        drop(gone);
        Some(cell)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn read(
        cache: &Decoded,
        rev: Revision,
        key: &str,
        version: &str,
        n: &AtomicUsize,
    ) -> Arc<Value> {
        cache
            .get_or_decode::<()>(rev, key, "apps", version, || {
                n.fetch_add(1, Ordering::SeqCst);
                Ok(serde_json::json!({"rev": rev}))
            })
            .unwrap()
    }

    #[test]
    fn one_decode_per_revision_and_version() {
        let cache = Decoded::default();
        let n = AtomicUsize::new(0);
        let a = read(&cache, 5, "/k/a", "v1", &n);
        let b = read(&cache, 5, "/k/a", "v1", &n);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        // Another version of the kept revision is decoded, not kept.
        read(&cache, 5, "/k/a", "v1beta1", &n);
        read(&cache, 5, "/k/a", "v1", &n);
        assert_eq!(n.load(Ordering::SeqCst), 2);
        // A newer revision replaces the kept one; an older one is decoded, not kept.
        read(&cache, 6, "/k/a", "v1", &n);
        read(&cache, 5, "/k/a", "v1", &n);
        read(&cache, 6, "/k/a", "v1", &n);
        assert_eq!(n.load(Ordering::SeqCst), 4);
        read(&cache, 5, "/k/b", "v1", &n);
        assert_eq!(n.load(Ordering::SeqCst), 5);
        // Looking up neither decodes nor keeps.
        assert_eq!(
            cache.get(5, "/k/b", "apps", "v1"),
            Some(Arc::new(serde_json::json!({"rev": 5})))
        );
        assert_eq!(cache.get(5, "/k/b", "apps", "v2"), None);
        assert_eq!(cache.get(4, "/k/b", "apps", "v1"), None);
        assert_eq!(cache.get(1, "/k/c", "apps", "v1"), None);
    }

    #[test]
    fn the_oldest_keys_are_dropped() {
        let cache = Decoded::default();
        let n = AtomicUsize::new(0);
        for i in 0..KEPT + 10 {
            read(&cache, i as Revision, &format!("/k/{i}"), "v1", &n);
        }
        assert_eq!(cache.slots.lock().unwrap().by_key.len(), KEPT);
        read(
            &cache,
            (KEPT + 9) as Revision,
            &format!("/k/{}", KEPT + 9),
            "v1",
            &n,
        );
        assert_eq!(n.load(Ordering::SeqCst), KEPT + 10);
        read(&cache, 0, "/k/0", "v1", &n);
        assert_eq!(n.load(Ordering::SeqCst), KEPT + 11);
    }

    #[test]
    fn a_failed_decode_is_not_kept() {
        let cache = Decoded::default();
        assert_eq!(
            cache.get_or_decode(7, "/k", "", "v1", || Err("bad")),
            Err("bad")
        );
        // The next reader of the revision decodes for itself.
        assert_eq!(
            cache.get_or_decode(7, "/k", "", "v1", || Err("again")),
            Err("again")
        );
        let n = AtomicUsize::new(0);
        read(&cache, 8, "/k", "v1", &n);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn concurrent_readers_of_one_revision_decode_once() {
        let cache = Decoded::default();
        let n = AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    barrier.wait();
                    cache
                        .get_or_decode::<()>(3, "/k", "", "v1", || {
                            n.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok(Value::Null)
                        })
                        .unwrap();
                });
            }
        });
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}

//! Controller expectations, as upstream's `UIDTrackingControllerExpectations`: how many
//! creations and which deletions a controller has asked for and not yet seen in its cache.
//! While they are outstanding the controller does not act on the (stale) cache again, so it
//! never creates or deletes too many. Expectations older than five minutes count as met, so
//! a lost event cannot wedge a controller.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use serde_json::Value;

use k1s_runtime::key;
use k1s_runtime::{ObjectKey, Seen};

/// Upstream's `ExpectationsTimeout`.
pub const TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug)]
struct Entry {
    adds: i64,
    /// UIDs of objects whose deletion is expected.
    deletes: HashSet<String>,
    /// UIDs whose creation was already counted (an object is counted once).
    seen: HashSet<String>,
    set_at: Instant,
}

/// Expectations of every controlled object (by its key).
#[derive(Debug, Default)]
pub struct Expectations {
    inner: Mutex<HashMap<ObjectKey, Entry>>,
}

impl Expectations {
    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectKey, Entry>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Meets what a watch event of `pod`, controlled by `key`, means for the expectations:
    /// a deletion counts when it is marked and again (harmlessly) when it goes; a creation
    /// when the pod is new to the cache (a relisted pod was counted when first seen, a
    /// changed one when it was added).
    pub fn observe(&self, key: &ObjectKey, pod: &Value, seen: Seen) {
        let uid = key::uid(pod);
        match seen {
            Seen::Deleted => self.deletion_observed(key, uid),
            _ if key::is_deleting(pod) => self.deletion_observed(key, uid),
            Seen::Added => self.creation_observed(key, uid),
            // A change to a pod made earlier (the scheduler binding it) is no creation: counted,
            // it would let the controller act on a cache still missing its new pods.
            Seen::Updated | Seen::Listed => {}
        }
    }

    /// Expects `n` creations (replacing earlier expectations).
    pub fn expect_creations(&self, key: &ObjectKey, n: usize) {
        self.lock().insert(
            key.clone(),
            Entry {
                adds: i64::try_from(n).unwrap_or(i64::MAX),
                deletes: HashSet::new(),
                seen: HashSet::new(),
                set_at: Instant::now(),
            },
        );
    }

    /// Expects the deletion of these UIDs (replacing earlier expectations).
    pub fn expect_deletions(&self, key: &ObjectKey, uids: impl IntoIterator<Item = String>) {
        self.lock().insert(
            key.clone(),
            Entry {
                adds: 0,
                deletes: uids.into_iter().collect(),
                seen: HashSet::new(),
                set_at: Instant::now(),
            },
        );
    }

    /// An object of `uid` was seen created (counted once per UID).
    pub fn creation_observed(&self, key: &ObjectKey, uid: &str) {
        if let Some(e) = self.lock().get_mut(key)
            && e.adds > 0
            && e.seen.insert(uid.to_owned())
        {
            e.adds -= 1;
        }
    }

    /// `n` expected creations will not happen (the requests failed or were skipped).
    pub fn lower_creations(&self, key: &ObjectKey, n: usize) {
        if let Some(e) = self.lock().get_mut(key) {
            e.adds = (e.adds - i64::try_from(n).unwrap_or(i64::MAX)).max(0);
        }
    }

    /// An object of `uid` was seen deleted (or marked for deletion), or will not be.
    pub fn deletion_observed(&self, key: &ObjectKey, uid: &str) {
        if let Some(e) = self.lock().get_mut(key) {
            e.deletes.remove(uid);
        }
    }

    /// Whether the controller may act on its cache: nothing outstanding, or it timed out.
    pub fn satisfied(&self, key: &ObjectKey) -> bool {
        self.lock()
            .get(key)
            .is_none_or(|e| (e.adds <= 0 && e.deletes.is_empty()) || e.set_at.elapsed() > TIMEOUT)
    }

    pub fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn counts_uids_once_and_time_out() {
        let e = Expectations::default();
        let k = ObjectKey::new(Some("d"), "rs");
        assert!(e.satisfied(&k));
        e.expect_creations(&k, 2);
        e.creation_observed(&k, "a");
        e.creation_observed(&k, "a");
        assert!(!e.satisfied(&k));
        e.lower_creations(&k, 1);
        assert!(e.satisfied(&k));
        e.expect_deletions(&k, ["x".to_owned(), "y".to_owned()]);
        e.deletion_observed(&k, "x");
        e.deletion_observed(&k, "x");
        assert!(!e.satisfied(&k));
        tokio::time::advance(TIMEOUT + Duration::from_secs(1)).await;
        assert!(e.satisfied(&k));
        e.forget(&k);
        assert!(e.satisfied(&k));
    }

    #[test]
    fn only_a_pod_new_to_the_cache_is_a_creation() {
        let e = Expectations::default();
        let k = ObjectKey::new(Some("d"), "rs");
        let earlier = serde_json::json!({"metadata": {"uid": "old"}});
        let new = serde_json::json!({"metadata": {"uid": "new"}});
        e.expect_creations(&k, 1);
        // An earlier pod bound by the scheduler meanwhile, or listed again: no creation.
        e.observe(&k, &earlier, Seen::Updated);
        e.observe(&k, &earlier, Seen::Listed);
        assert!(!e.satisfied(&k));
        e.observe(&k, &new, Seen::Added);
        assert!(e.satisfied(&k));
    }
}

//! The objects of the most recent watch events, decoded once for every watch that delivers them.
//!
//! Every watch of a resource reads the same store event and would decode the same bytes into
//! its own object: with the scheduler, the controllers, the node authorizer's graph and clients
//! all watching pods, a pod's change was decoded once per watcher. Watches see a change within
//! microseconds of each other, so a short list of the last decoded events serves the later ones.
//! A watch that falls behind the list decodes for itself, as before.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use k1s_store::Revision;
use serde_json::Value;

/// How many decoded events are kept. Enough for the watches of one change to find it while
/// a burst of writes goes on; small enough that the objects held stay a few MB at most.
const KEPT: usize = 128;

struct Entry {
    revision: Revision,
    key: String,
    /// The API group and version the object was decoded as (a conversion may differ).
    group_version: (String, String),
    object: Arc<Value>,
}

/// Recently decoded events, newest last.
#[derive(Default)]
pub(crate) struct Recent {
    entries: Mutex<VecDeque<Entry>>,
}

impl Recent {
    /// The object of the event at `revision` on `key` as `group`/`version`, decoded by `decode`
    /// unless a watch already did.
    pub(crate) fn get_or_decode<E>(
        &self,
        revision: Revision,
        key: &str,
        group: &str,
        version: &str,
        decode: impl FnOnce() -> Result<Value, E>,
    ) -> Result<Arc<Value>, E> {
        if let Some(found) = self.find(revision, key, group, version) {
            return Ok(found);
        }
        let object = Arc::new(decode()?);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= KEPT {
            entries.pop_front();
        }
        entries.push_back(Entry {
            revision,
            key: key.to_owned(),
            group_version: (group.to_owned(), version.to_owned()),
            object: object.clone(),
        });
        Ok(object)
    }

    fn find(
        &self,
        revision: Revision,
        key: &str,
        group: &str,
        version: &str,
    ) -> Option<Arc<Value>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .rev()
            .find(|e| {
                e.revision == revision
                    && e.key == key
                    && e.group_version.0 == group
                    && e.group_version.1 == version
            })
            .map(|e| e.object.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_decode_per_event_and_version() {
        let recent = Recent::default();
        let mut decodes = 0;
        let mut get = |rev, key: &str, version: &str| {
            recent
                .get_or_decode::<()>(rev, key, "apps", version, || {
                    decodes += 1;
                    Ok(serde_json::json!({"rev": rev}))
                })
                .unwrap()
        };
        let a = get(5, "/k/a", "v1");
        let b = get(5, "/k/a", "v1");
        assert!(Arc::ptr_eq(&a, &b));
        get(5, "/k/a", "v1beta1");
        get(6, "/k/a", "v1");
        get(5, "/k/b", "v1");
        assert_eq!(decodes, 4);
    }

    #[test]
    fn old_events_are_dropped_and_errors_not_kept() {
        let recent = Recent::default();
        for rev in 0..(KEPT as i64 + 10) {
            recent
                .get_or_decode::<()>(rev, "/k", "", "v1", || Ok(Value::Null))
                .unwrap();
        }
        assert_eq!(recent.entries.lock().unwrap().len(), KEPT);
        assert!(recent.find(0, "/k", "", "v1").is_none());
        assert!(recent.find(KEPT as i64 + 9, "/k", "", "v1").is_some());
        assert!(
            recent
                .get_or_decode(1000, "/k", "", "v1", || Err("bad"))
                .is_err()
        );
        assert!(recent.find(1000, "/k", "", "v1").is_none());
    }
}

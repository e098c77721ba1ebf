//! Reads from redb snapshots: current revisions from `kv`, values and history from `log`.
//!
//! Every function here opens one read transaction, so what it returns is one consistent
//! snapshot. A list at an older revision R starts from the current state and undoes, key by
//! key, the changes logged after R (each log record names the revision it superseded), so any
//! revision from the compacted one up to the current one can be read.

use std::collections::BTreeMap;
use std::ops::Bound;

use redb::{ReadTransaction, ReadableDatabase};

use super::codec::{DecodeError, log_key};
use super::{KV, LOG, META, META_COMPACT, META_REVISION, RedbResultExt, Shared, map_redb, values};
use crate::{Event, KeyValue, ListRequest, ListResponse, Result, Revision, StoreError};

/// Runs a read on the blocking pool: redb reads may wait on the disk.
pub async fn blocking<T, F>(shared: &std::sync::Arc<Shared>, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&Shared) -> Result<T> + Send + 'static,
{
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || f(&shared))
        .await
        .map_err(|e| StoreError::Backend(format!("read task failed: {e}")))?
}

struct Snapshot<'a> {
    shared: &'a Shared,
    txn: ReadTransaction,
    head: Revision,
    compacted: Revision,
}

impl<'a> Snapshot<'a> {
    fn open(shared: &'a Shared) -> Result<Self> {
        let txn = shared.db.begin_read().at(&shared.path)?;
        let (head, compacted) = {
            let meta = txn.open_table(META).at(&shared.path)?;
            let get = |k| -> Result<Revision> {
                Ok(meta
                    .get(k)
                    .at(&shared.path)?
                    .map_or(0, |v| v.value() as Revision))
            };
            (get(META_REVISION)?, get(META_COMPACT)?)
        };
        Ok(Self {
            shared,
            txn,
            head,
            compacted,
        })
    }

    fn corrupt(&self, e: DecodeError) -> StoreError {
        StoreError::Corrupted {
            path: self.shared.path.clone(),
            detail: e.to_string(),
        }
    }

    /// Fails unless `revision` is readable: not compacted, not in the future.
    fn check_readable(&self, revision: Revision) -> Result<()> {
        if revision < self.compacted {
            return Err(StoreError::Compacted {
                requested: revision,
                compacted: self.compacted,
            });
        }
        if revision > self.head {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current: self.head,
            });
        }
        Ok(())
    }
}

pub fn head(shared: &Shared) -> Result<Revision> {
    Ok(Snapshot::open(shared)?.head)
}

pub fn compacted(shared: &Shared) -> Result<Revision> {
    Ok(Snapshot::open(shared)?.compacted)
}

pub fn get(shared: &Shared, key: &str) -> Result<Option<KeyValue>> {
    let snap = Snapshot::open(shared)?;
    let path = &snap.shared.path;
    let kv = snap.txn.open_table(KV).at(path)?;
    let Some(rec) = kv.get(key).at(path)? else {
        return Ok(None);
    };
    let log = snap.txn.open_table(LOG).at(path)?;
    values::current(&log, path, key, rec.value()).map(Some)
}

pub fn count(shared: &Shared, prefix: &str) -> Result<(u64, Revision)> {
    let snap = Snapshot::open(shared)?;
    let kv = snap.txn.open_table(KV).at(&snap.shared.path)?;
    let mut n = 0;
    for entry in kv.range::<&str>(prefix..).at(&snap.shared.path)? {
        let (k, _) = entry.at(&snap.shared.path)?;
        if !k.value().starts_with(prefix) {
            break;
        }
        n += 1;
    }
    Ok((n, snap.head))
}

pub fn list(shared: &Shared, req: &ListRequest) -> Result<ListResponse> {
    let snap = Snapshot::open(shared)?;
    let at = req.revision.filter(|&r| r > 0).unwrap_or(snap.head);
    snap.check_readable(at)?;
    let prefix = req.prefix.as_str();
    let lower = match &req.start_after {
        Some(after) if after.as_str() >= prefix => Bound::Excluded(after.as_str()),
        _ => Bound::Included(prefix),
    };
    let in_range = |key: &str| {
        key.starts_with(prefix)
            && match lower {
                Bound::Excluded(after) => key > after,
                _ => true,
            }
    };
    let limit = if req.limit == 0 {
        usize::MAX
    } else {
        req.limit
    };

    // The state at `at` of every key in range changed after `at`: the previous state named by
    // its first later change (`None`: it did not exist at `at`).
    let path = &snap.shared.path;
    let log = snap.txn.open_table(LOG).at(path)?;
    let mut overlay: BTreeMap<String, Option<KeyValue>> = BTreeMap::new();
    if at < snap.head {
        for entry in log.range((at + 1) as u64..=snap.head as u64).at(path)? {
            let (rev, rec) = entry.at(path)?;
            let key = log_key(rec.value()).map_err(|e| snap.corrupt(e))?;
            if !in_range(key) || overlay.contains_key(key) {
                continue;
            }
            let event = values::event(&log, path, rev.value() as Revision, rec.value())?;
            overlay.insert(event.kv.key, event.prev);
        }
    }

    let kv = snap.txn.open_table(KV).at(path)?;
    let mut range = kv.range::<&str>((lower, Bound::Unbounded)).at(path)?;
    let mut next_current = || -> Result<Option<KeyValue>> {
        match range.next() {
            None => Ok(None),
            Some(Err(e)) => Err(map_redb(path, e)),
            Some(Ok((k, _))) if !k.value().starts_with(prefix) => Ok(None),
            Some(Ok((k, v))) => values::current(&log, path, k.value(), v.value()).map(Some),
        }
    };
    let mut current = next_current()?;
    let mut past = overlay.into_iter().peekable();
    let mut kvs = Vec::new();
    // Merge the two key-ordered sources; for a key in both, the overlay holds its state at `at`.
    loop {
        let past_first = match (&current, past.peek()) {
            (None, None) => break,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(c), Some((p, _))) => p.as_str() <= c.key.as_str(),
        };
        let item = if past_first {
            let Some((key, state)) = past.next() else {
                break;
            };
            if current.as_ref().is_some_and(|c| c.key == key) {
                current = next_current()?;
            }
            state
        } else {
            std::mem::replace(&mut current, next_current()?)
        };
        if let Some(kv) = item {
            if kvs.len() == limit {
                return Ok(ListResponse {
                    kvs,
                    revision: at,
                    more: true,
                });
            }
            kvs.push(kv);
        }
    }
    Ok(ListResponse {
        kvs,
        revision: at,
        more: false,
    })
}

/// The events under `prefix` with revisions in `(after, upto]`, read from the log. Fails with
/// `Compacted` if part of that range has been compacted away.
pub fn log_range(
    shared: &Shared,
    prefix: &str,
    after: Revision,
    upto: Revision,
) -> Result<Vec<Event>> {
    let snap = Snapshot::open(shared)?;
    if after < snap.compacted {
        return Err(StoreError::Compacted {
            requested: after,
            compacted: snap.compacted,
        });
    }
    let log = snap.txn.open_table(LOG).at(&snap.shared.path)?;
    let mut events = Vec::new();
    let upto = upto.min(snap.head);
    if upto <= after {
        return Ok(events);
    }
    for entry in log
        .range((after + 1) as u64..=upto as u64)
        .at(&snap.shared.path)?
    {
        let (rev, rec) = entry.at(&snap.shared.path)?;
        let key = log_key(rec.value()).map_err(|e| snap.corrupt(e))?;
        if key.starts_with(prefix) {
            events.push(values::event(
                &log,
                &snap.shared.path,
                rev.value() as Revision,
                rec.value(),
            )?);
        }
    }
    Ok(events)
}

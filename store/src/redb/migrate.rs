//! Brings a format 1 store file to format 2, once, on open (before the write-ahead log is
//! replayed, which works the same on both).
//!
//! Format 1 kept each live value in its `kv` row and copied the previous value into every log
//! record; format 2 keeps each value once, in the `log` record of the revision that wrote it
//! (see `values`). So every live key's value must be a log record: the records of revisions
//! after the compacted one are already there (format 1 records keep their inline previous
//! values, which format 2 still reads), and for older ones a record without a previous state
//! is written. The `kv` rows are then cut to their revisions. It is one durable transaction: a
//! crash during it leaves the file in format 1, to be migrated again.

use std::path::Path;

use redb::{Database, ReadableTable};

use super::codec::{LogRecord, decode_kv_v1, encode_kv, encode_log};
use super::values::{corrupt, malformed};
use super::{FORMAT_VERSION, KV, LOG, META, META_COMPACT, META_FORMAT, META_PURGED, RedbResultExt};
use crate::{EventKind, Result, Revision};

/// Keys rewritten per pass over `kv` (their values are held in memory meanwhile).
const CHUNK: usize = 1024;

pub fn from_format_1(db: &Database, path: &Path) -> Result<()> {
    tracing::info!(path = %path.display(), "migrating the store from format 1 to format 2 (once; every key is rewritten)");
    let txn = db.begin_write().at(path)?;
    let mut keys = 0usize;
    {
        let mut meta = txn.open_table(META).at(path)?;
        let compacted = meta
            .get(META_COMPACT)
            .at(path)?
            .map_or(0, |v| v.value() as Revision);
        let mut log = txn.open_table(LOG).at(path)?;
        let mut kv = txn.open_table(KV).at(path)?;
        // Format 1 never read records at or below the compacted revision; a purge may have
        // been under way.
        for entry in log
            .extract_from_if(..=compacted as u64, |_, _| true)
            .at(path)?
        {
            entry.at(path)?;
        }
        let mut after: Option<String> = None;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            {
                let range = match &after {
                    Some(a) => kv.range::<&str>((
                        std::ops::Bound::Excluded(a.as_str()),
                        std::ops::Bound::Unbounded,
                    )),
                    None => kv.range::<&str>(..),
                }
                .at(path)?;
                for entry in range.take(CHUNK) {
                    let (k, v) = entry.at(path)?;
                    chunk.push(decode_kv_v1(k.value(), v.value()).map_err(|e| malformed(path, e))?);
                }
            }
            let Some(last) = chunk.last() else {
                break;
            };
            after = Some(last.key.clone());
            for cur in &chunk {
                let existing = log.get(cur.mod_revision as u64).at(path)?.map(|rec| {
                    LogRecord::parse(rec.value())
                        .map(|r| r.kind == EventKind::Put && r.key == cur.key)
                        .map_err(|e| malformed(path, e))
                });
                match existing.transpose()? {
                    Some(true) => {}
                    Some(false) => {
                        return Err(corrupt(
                            path,
                            format!(
                                "the log record at revision {} is not the value of {}",
                                cur.mod_revision, cur.key
                            ),
                        ));
                    }
                    None => {
                        let rec = encode_log(
                            EventKind::Put,
                            &cur.key,
                            cur.create_revision,
                            &cur.value,
                            None,
                        );
                        log.insert(cur.mod_revision as u64, rec.as_slice())
                            .at(path)?;
                    }
                }
                let row = encode_kv(cur.create_revision, cur.mod_revision);
                kv.insert(cur.key.as_str(), row.as_slice()).at(path)?;
            }
            keys += chunk.len();
        }
        meta.insert(META_PURGED, compacted as u64).at(path)?;
        meta.insert(META_FORMAT, FORMAT_VERSION).at(path)?;
    }
    txn.commit().at(path)?;
    tracing::info!(path = %path.display(), keys, "migrated the store from format 1 to format 2");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use futures::StreamExt;
    use redb::ReadableDatabase;

    use super::super::META_REVISION;
    use super::*;
    use crate::redb::{RedbConfig, RedbStore};
    use crate::{KeyValue, ListRequest, Store, WatchItem, WatchOptions};

    /// A `log` record as format 1 wrote it: the previous value inline.
    fn v1_log(
        kind: EventKind,
        key: &str,
        create: Revision,
        value: &[u8],
        prev: Option<(Revision, Revision, &[u8])>,
    ) -> Vec<u8> {
        let mut rec = encode_log(kind, key, create, value, None);
        if let Some((c, m, v)) = prev {
            rec.pop();
            rec.push(1);
            rec.extend_from_slice(&c.to_le_bytes());
            rec.extend_from_slice(&m.to_le_bytes());
            rec.extend_from_slice(v);
        }
        rec
    }

    fn v1_kv(create: Revision, modified: Revision, value: &[u8]) -> Vec<u8> {
        let mut row = encode_kv(create, modified).to_vec();
        row.extend_from_slice(value);
        row
    }

    /// Revisions 2–8 of a format 1 store compacted at 6 whose purge had removed 2 and 3 only:
    /// 2 put /a, 3 put /d, 4 put /b, 5 update /a, 6 delete /b, 7 put /c, 8 update /a. The
    /// value of /d (revision 3) is then in `kv` alone.
    fn write_format_1(path: &Path) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(META).unwrap();
            meta.insert(META_FORMAT, 1).unwrap();
            meta.insert(META_REVISION, 8).unwrap();
            meta.insert(META_COMPACT, 6).unwrap();
            let mut log = txn.open_table(LOG).unwrap();
            let put = EventKind::Put;
            let records = [
                (4, v1_log(put, "/b", 4, b"b1", None)),
                (5, v1_log(put, "/a", 2, b"a2", Some((2, 2, b"a1")))),
                (
                    6,
                    v1_log(EventKind::Delete, "/b", 0, b"", Some((4, 4, b"b1"))),
                ),
                (7, v1_log(put, "/c", 7, b"c1", None)),
                (8, v1_log(put, "/a", 2, b"a3", Some((2, 5, b"a2")))),
            ];
            for (rev, rec) in records {
                log.insert(rev, rec.as_slice()).unwrap();
            }
            let mut kv = txn.open_table(KV).unwrap();
            kv.insert("/a", v1_kv(2, 8, b"a3").as_slice()).unwrap();
            kv.insert("/c", v1_kv(7, 7, b"c1").as_slice()).unwrap();
            kv.insert("/d", v1_kv(3, 3, b"d1").as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }

    fn kv(key: &str, value: &str, create: Revision, modified: Revision) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Bytes::copy_from_slice(value.as_bytes()),
            create_revision: create,
            mod_revision: modified,
        }
    }

    async fn state_at(store: &RedbStore, revision: Option<Revision>) -> Vec<KeyValue> {
        let req = ListRequest {
            prefix: "/".into(),
            revision,
            ..Default::default()
        };
        store.list(req).await.unwrap().kvs
    }

    async fn events(store: &RedbStore, after: Revision, n: usize) -> Vec<crate::Event> {
        let opts = WatchOptions {
            progress_interval: None,
        };
        let mut w = store.watch("/", after, opts);
        let mut out = Vec::new();
        while out.len() < n {
            match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
                Ok(Some(Ok(WatchItem::Event(e)))) => out.push(e),
                Ok(Some(Ok(WatchItem::Progress(_)))) => {}
                other => panic!("watch after {after}: {other:?}"),
            }
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_format_1_store_reads_the_same_after_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        write_format_1(&path);
        let store = RedbStore::open(RedbConfig::new(&path)).unwrap();

        let (a3, c1, d1) = (
            kv("/a", "a3", 2, 8),
            kv("/c", "c1", 7, 7),
            kv("/d", "d1", 3, 3),
        );
        let now = vec![a3.clone(), c1.clone(), d1.clone()];
        assert_eq!(state_at(&store, None).await, now);
        assert_eq!(store.get("/a").await.unwrap(), Some(a3.clone()));
        assert_eq!(store.get("/d").await.unwrap(), Some(d1.clone()));
        assert_eq!(store.get("/b").await.unwrap(), None);
        let a2 = kv("/a", "a2", 2, 5);
        assert_eq!(state_at(&store, Some(6)).await, [a2.clone(), d1.clone()]);
        assert_eq!(
            state_at(&store, Some(7)).await,
            [a2.clone(), c1.clone(), d1.clone()]
        );
        let ev = events(&store, 6, 2).await;
        assert_eq!((ev[0].revision(), ev[0].prev.clone()), (7, None));
        assert_eq!(ev[1].prev, Some(a2));

        // Compacting past the format 1 records, then writing: format 2 records name theirs.
        store.compact(8).await.unwrap();
        let r9 = store
            .update("/a", Bytes::from_static(b"a4"), 8)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(events(&store, 8, 1).await[0].prev, Some(a3.clone()));
        assert_eq!(state_at(&store, Some(8)).await, now);
        store.close();

        // Reopened, it is format 2 and unchanged.
        let store = RedbStore::open(RedbConfig::new(&path)).unwrap();
        assert_eq!(
            state_at(&store, None).await,
            [kv("/a", "a4", 2, r9), c1, d1]
        );
        store.close();
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        let meta = txn.open_table(META).unwrap();
        assert_eq!(meta.get(META_FORMAT).unwrap().unwrap().value(), 2);
        let kv_rows = txn.open_table(KV).unwrap();
        for row in kv_rows.iter().unwrap() {
            assert_eq!(
                row.unwrap().1.value().len(),
                16,
                "kv rows hold revisions only"
            );
        }
    }
}

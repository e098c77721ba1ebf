//! The default backend: the [`Store`] contract on one redb file.
//!
//! - [`committer`] is the only writer (group commit, one fsync per batch).
//! - [`read`] serves get/list/count from redb snapshots, and history from the revision log.
//! - [`hub`] fans committed batches out to live watchers; [`watch`] is a watcher's stream,
//!   which catches up from the on-disk log before it goes live.
//! - [`codec`] encodes the records; [`values`] finds a key's value in the log record that wrote
//!   it; [`migrate`] brings a format 1 file to format 2.
//!
//! The tables and their invariants are described in `docs/store.md`.

mod codec;
mod committer;
mod hub;
mod migrate;
mod read;
mod values;
mod wal;
mod watch;

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use bytes::Bytes;
use redb::{Database, ReadableDatabase, TableDefinition};
use tokio::sync::oneshot;

use crate::{
    KeyValue, ListRequest, ListResponse, Result, Revision, Store, StoreError, WatchOptions,
    WatchStream,
};
use committer::{Committer, Done, Op, Request};
use hub::Hub;
use wal::{Wal, WalEntry, WalError};

/// Live key → `create_rev | mod_rev` (the value is the `log` record at `mod_rev`).
pub(crate) const KV: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("kv");
/// Revision → the change written at it, naming the revision it superseded (see `codec`).
pub(crate) const LOG: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("log");
/// `format`, `revision` (last written), `compact` (compacted revision), `purged` (the log is
/// purged up to it).
pub(crate) const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
pub(crate) const META_FORMAT: &str = "format";
pub(crate) const META_REVISION: &str = "revision";
pub(crate) const META_COMPACT: &str = "compact";
pub(crate) const META_PURGED: &str = "purged";

/// The on-disk format this code reads and writes. Format 1 (values in `kv` and every log
/// record carrying the previous value) is migrated on open.
pub const FORMAT_VERSION: u64 = 2;

/// Settings of a [`RedbStore`].
#[derive(Clone, Debug)]
pub struct RedbConfig {
    /// The database file; created, with its directory, if missing.
    pub path: PathBuf,
    /// Per-watcher buffer, in committed batches, before a watcher is ended as too slow.
    pub watch_buffer: usize,
    /// The most write requests one transaction takes.
    pub max_batch: usize,
    /// Called on the committer thread each time it is about to wait for writes with none
    /// queued, as tokio's `on_thread_park` is for runtime threads: the binary hands the
    /// thread's freed memory back to the system there (see `cmd/src/allocator.rs`).
    pub on_idle: Option<fn()>,
}

impl RedbConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            watch_buffer: 1024,
            max_batch: 1024,
            on_idle: None,
        }
    }
}

/// State shared by the store handle, its reads and its watch streams.
pub(crate) struct Shared {
    pub db: Arc<Database>,
    pub path: PathBuf,
    pub hub: Arc<Hub>,
}

/// The redb-backed [`Store`].
pub struct RedbStore {
    shared: Arc<Shared>,
    tx: Option<mpsc::Sender<Request>>,
    committer: Option<JoinHandle<()>>,
}

impl RedbStore {
    /// Opens (or creates) the store file. After a crash this runs redb's repair, which reads
    /// the whole file; progress is logged.
    pub fn open(config: RedbConfig) -> Result<Self> {
        let path = config.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| io_error(dir, source))?;
        }
        let db = open_database(&path)?;
        let meta = init_meta(&db, &path)?;
        let (
            wal,
            Meta {
                revision,
                compacted,
                purged,
            },
        ) = recover(&db, &path, meta)?;
        tracing::info!(path = %path.display(), revision, compacted, "store opened");
        let hub = Arc::new(Hub::new(revision, config.watch_buffer));
        let db = Arc::new(db);
        let (tx, rx) = mpsc::channel();
        let committer = Committer {
            db: db.clone(),
            path: path.clone(),
            hub: hub.clone(),
            rx,
            max_batch: config.max_batch.max(1),
            revision,
            compacted,
            purged,
            purge_pending: purged < compacted,
            failed: None,
            last_batch: 1,
            // A log that recovery left is checkpointed within the maximum age too.
            logged_since: (wal.len() > 0).then(std::time::Instant::now),
            logged_batches: 0,
            wal,
            on_idle: config.on_idle,
        };
        let handle = std::thread::Builder::new()
            .name("k1s-store-commit".into())
            .spawn(move || committer.run())
            .map_err(|source| io_error(&path, source))?;
        Ok(Self {
            shared: Arc::new(Shared { db, path, hub }),
            tx: Some(tx),
            committer: Some(handle),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The compacted revision: reads and watches before it fail with `Compacted`.
    pub async fn compacted_revision(&self) -> Result<Revision> {
        read::blocking(&self.shared, read::compacted).await
    }

    /// The number of live watchers.
    pub fn watchers(&self) -> usize {
        self.shared.hub.watchers()
    }

    /// Stops the writer thread after the queued writes and ends every watcher.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.tx.take();
        if let Some(handle) = self.committer.take() {
            let _ = handle.join();
        }
        self.shared.hub.close();
    }

    async fn submit(&self, op: Op) -> Result<Done> {
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(StoreError::Closed)?;
        tx.send(Request { op, reply })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[async_trait::async_trait]
impl Store for RedbStore {
    // One key, the head revision and small pages of the current state are read on the calling
    // task: such a read touches a handful of pages (nearly always in redb's cache), so it costs
    // less than the hand-off to the blocking pool and back, which dominated it. Reads whose work
    // grows with the data (unbounded lists, counts, lists of the past, which undo history) stay
    // on the blocking pool.
    async fn current_revision(&self) -> Result<Revision> {
        read::head(&self.shared)
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        crate::check_key(key)?;
        read::get(&self.shared, key)
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        if (1..=crate::SMALL_LIST_LIMIT).contains(&req.limit) && req.revision.is_none() {
            return read::list(&self.shared, &req);
        }
        read::blocking(&self.shared, move |s| read::list(s, &req)).await
    }

    async fn count(&self, prefix: &str) -> Result<(u64, Revision)> {
        let prefix = prefix.to_owned();
        read::blocking(&self.shared, move |s| read::count(s, &prefix)).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let op = Op::Create {
            key: key.to_owned(),
            value,
        };
        match self.submit(op).await? {
            Done::Written(rev) => Ok(rev),
            _ => Err(StoreError::Backend("unexpected reply to create".into())),
        }
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        let op = Op::Update {
            key: key.to_owned(),
            value,
            expected,
        };
        match self.submit(op).await? {
            Done::Written(rev) => Ok(rev),
            _ => Err(StoreError::Backend("unexpected reply to update".into())),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let op = Op::Delete {
            key: key.to_owned(),
            expected,
        };
        match self.submit(op).await? {
            Done::Deleted(rev, prev) => Ok((rev, prev)),
            _ => Err(StoreError::Backend("unexpected reply to delete".into())),
        }
    }

    fn watch(&self, prefix: &str, after: Revision, opts: WatchOptions) -> WatchStream {
        if after < 0 {
            return crate::error_stream(StoreError::InvalidArgument(format!(
                "watch revision {after} is negative"
            )));
        }
        watch::stream(self.shared.clone(), prefix.to_owned(), after, opts)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.submit(Op::Compact { revision }).await.map(|_| ())
    }
}

/// Writes the keys of `snapshot` into a new store file at `path`, which must not exist (nor
/// its write-ahead log). Keys keep their revisions (their objects' resourceVersions); the
/// store's revision is set `bump` above the snapshot's and everything below it is compacted,
/// as etcd's `snapshot restore --bump-revision --mark-compacted`: a client that read the old
/// store (a kubelet's informer, a controller) and resumes a watch from its resourceVersion
/// gets 410 Gone and relists, instead of waiting for revisions the restored store would only
/// reach later. Returns the restored store's revision.
pub fn restore(
    path: &Path,
    snapshot: &crate::snapshot::Snapshot,
    bump: Revision,
) -> Result<Revision> {
    let wal = wal_path(path);
    for p in [path, wal.as_path()] {
        if p.exists() {
            return Err(StoreError::InvalidArgument(format!(
                "{} exists: restore into a new data directory, or move it aside",
                p.display()
            )));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| io_error(dir, source))?;
    }
    let mut revision = snapshot.header.revision.max(1).saturating_add(bump.max(0));
    let db = Database::create(path).at(path)?;
    let mut txn = db.begin_write().at(path)?;
    txn.set_durability(redb::Durability::Immediate).at(path)?;
    {
        let mut kv = txn.open_table(KV).at(path)?;
        let mut log = txn.open_table(LOG).at(path)?;
        let mut taken = std::collections::HashSet::new();
        for e in &snapshot.entries {
            crate::check_key(&e.key)?;
            // A revision holds one write here; keys that share one (an etcd transaction
            // wrote them) get new revisions above the rest.
            let (create, modified) = if taken.insert(e.mod_revision) {
                (e.create_revision, e.mod_revision)
            } else {
                revision += 1;
                (revision, revision)
            };
            let rec = codec::encode_log(crate::EventKind::Put, &e.key, create, &e.value, None);
            log.insert(modified as u64, rec.as_slice()).at(path)?;
            kv.insert(
                e.key.as_str(),
                codec::encode_kv(create, modified).as_slice(),
            )
            .at(path)?;
        }
        let mut meta = txn.open_table(META).at(path)?;
        meta.insert(META_FORMAT, FORMAT_VERSION).at(path)?;
        meta.insert(META_REVISION, revision as u64).at(path)?;
        meta.insert(META_COMPACT, revision as u64).at(path)?;
        meta.insert(META_PURGED, revision as u64).at(path)?;
    }
    txn.commit().at(path)?;
    Ok(revision)
}

/// Whether a process (a running server) has the store file at `path` open: redb locks it.
pub fn in_use(path: &Path) -> bool {
    matches!(
        Database::builder().open_read_only(path),
        Err(redb::DatabaseError::DatabaseAlreadyOpen)
    )
}

/// The write-ahead log beside the database file: `<file>-wal`.
pub fn wal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// The store's position, as `meta` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub revision: Revision,
    pub compacted: Revision,
    pub purged: Revision,
}

/// Opens the write-ahead log and replays into redb what the last durable commit lacks, then
/// checkpoints and empties the log. Returns the log and the recovered position.
fn recover(db: &Database, path: &Path, meta: Meta) -> Result<(Wal, Meta)> {
    let Meta {
        mut revision,
        mut compacted,
        purged,
    } = meta;
    let wal_file = wal_path(path);
    let recovered = Wal::open(&wal_file).map_err(|e| match e {
        WalError::Io(source) => io_error(&wal_file, source),
        other => StoreError::Corrupted {
            path: wal_file.clone(),
            detail: other.to_string(),
        },
    })?;
    let mut wal = recovered.wal;
    if recovered.torn_bytes > 0 {
        tracing::warn!(path = %wal_file.display(), bytes = recovered.torn_bytes, "cut off a torn write-ahead log record (an unacknowledged write)");
    }
    let pending: Vec<_> = recovered
        .entries
        .into_iter()
        .filter(|e| match e {
            WalEntry::Change { revision: r, .. } => *r > revision,
            WalEntry::Compact { revision: c } => *c > compacted,
        })
        .collect();
    if !pending.is_empty() {
        let corrupt = |detail: String| StoreError::Corrupted {
            path: wal_file.clone(),
            detail,
        };
        let replayed = pending.len();
        let mut txn = db.begin_write().at(path)?;
        txn.set_durability(redb::Durability::Immediate).at(path)?;
        {
            let mut kv = txn.open_table(KV).at(path)?;
            let mut log = txn.open_table(LOG).at(path)?;
            for entry in pending {
                match entry {
                    WalEntry::Change {
                        revision: r,
                        record,
                    } => {
                        if r != revision + 1 {
                            return Err(corrupt(format!(
                                "revision {r} follows {revision} in the write-ahead log"
                            )));
                        }
                        let change =
                            codec::LogRecord::parse(&record).map_err(|e| corrupt(e.to_string()))?;
                        match change.kind {
                            crate::EventKind::Put => {
                                let rec = codec::encode_kv(change.create, r);
                                kv.insert(change.key, rec.as_slice()).at(path)?;
                            }
                            crate::EventKind::Delete => {
                                kv.remove(change.key).at(path)?;
                            }
                        }
                        log.insert(r as u64, record.as_slice()).at(path)?;
                        revision = r;
                    }
                    WalEntry::Compact { revision: c } => {
                        compacted = c;
                    }
                }
            }
            let mut meta = txn.open_table(META).at(path)?;
            meta.insert(META_REVISION, revision as u64).at(path)?;
            meta.insert(META_COMPACT, compacted as u64).at(path)?;
        }
        txn.commit().at(path)?;
        tracing::info!(entries = replayed, revision, "replayed the write-ahead log");
    }
    wal.reset().map_err(|e| io_error(&wal_file, e))?;
    Ok((
        wal,
        Meta {
            revision,
            compacted,
            purged,
        },
    ))
}

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> StoreError {
    if source.raw_os_error() == Some(libc::ENOSPC)
        || source.kind() == std::io::ErrorKind::StorageFull
    {
        return StoreError::DiskFull {
            path: path.to_owned(),
        };
    }
    if source.kind() == std::io::ErrorKind::InvalidData {
        return StoreError::Corrupted {
            path: path.to_owned(),
            detail: source.to_string(),
        };
    }
    StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `.at(path)`: maps any redb error onto the store's errors, naming the file.
pub(crate) trait RedbResultExt<T> {
    fn at(self, path: &Path) -> Result<T>;
}

impl<T, E: Into<redb::Error>> RedbResultExt<T> for std::result::Result<T, E> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|e| map_redb(path, e))
    }
}

/// Maps any redb error onto the store's errors, naming the file.
pub(crate) fn map_redb(path: &Path, err: impl Into<redb::Error>) -> StoreError {
    let err: redb::Error = err.into();
    let path_buf = path.to_owned();
    match err {
        redb::Error::Io(source) => io_error(path, source),
        redb::Error::Corrupted(detail) => StoreError::Corrupted {
            path: path_buf,
            detail,
        },
        redb::Error::DatabaseAlreadyOpen => StoreError::Locked { path: path_buf },
        redb::Error::UpgradeRequired(v) => StoreError::UnsupportedFormat {
            path: path_buf,
            found: format!("redb file format {v}"),
            supported: FORMAT_VERSION,
        },
        redb::Error::PreviousIo => StoreError::Io {
            path: path_buf,
            source: std::io::Error::other("an earlier write to the database failed; restart k1s"),
        },
        other => StoreError::Io {
            path: path_buf,
            source: std::io::Error::other(other.to_string()),
        },
    }
}

fn open_database(path: &Path) -> Result<Database> {
    let owned = path.to_owned();
    // redb reports damage as errors; the catch is a last line of defence so that a file we
    // cannot parse becomes a clear error, not a crash of the whole server.
    let opened = std::panic::catch_unwind(move || {
        let mut builder = Database::builder();
        builder.set_repair_callback(|session| {
            tracing::warn!(
                progress = format!("{:.0}%", session.progress() * 100.0),
                "repairing the store after an unclean shutdown"
            );
        });
        builder.create(&owned)
    });
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(e)) => Err(map_redb(path, e)),
        Err(panic) => Err(StoreError::Corrupted {
            path: path.to_owned(),
            detail: panic_message(panic.as_ref()),
        }),
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unreadable file".into())
}

/// Reads (or writes, for a new file) the metadata, migrating a format 1 file first.
fn init_meta(db: &Database, path: &Path) -> Result<Meta> {
    let format = {
        let txn = db.begin_read().at(path)?;
        match txn.open_table(META) {
            Ok(meta) => Some(
                meta.get(META_FORMAT)
                    .at(path)?
                    .map(|v| v.value())
                    .ok_or_else(|| StoreError::Corrupted {
                        path: path.to_owned(),
                        detail: "the metadata table has no format version".into(),
                    })?,
            ),
            Err(redb::TableError::TableDoesNotExist(_)) => {
                if txn.list_tables().at(path)?.next().is_some() {
                    return Err(StoreError::UnsupportedFormat {
                        path: path.to_owned(),
                        found: "a redb file that is not a k1s store".into(),
                        supported: FORMAT_VERSION,
                    });
                }
                None
            }
            Err(e) => return Err(map_redb(path, e)),
        }
    };
    match format {
        Some(FORMAT_VERSION) => read_meta(db, path),
        Some(1) => {
            migrate::from_format_1(db, path)?;
            read_meta(db, path)
        }
        Some(other) => Err(StoreError::UnsupportedFormat {
            path: path.to_owned(),
            found: other.to_string(),
            supported: FORMAT_VERSION,
        }),
        None => {
            let txn = db.begin_write().at(path)?;
            {
                let mut meta = txn.open_table(META).at(path)?;
                meta.insert(META_FORMAT, FORMAT_VERSION).at(path)?;
                meta.insert(META_REVISION, 1).at(path)?;
                meta.insert(META_COMPACT, 0).at(path)?;
                meta.insert(META_PURGED, 0).at(path)?;
                txn.open_table(KV).at(path)?;
                txn.open_table(LOG).at(path)?;
            }
            txn.commit().at(path)?;
            Ok(Meta {
                revision: 1,
                compacted: 0,
                purged: 0,
            })
        }
    }
}

/// The position a format 2 file's metadata records.
fn read_meta(db: &Database, path: &Path) -> Result<Meta> {
    let txn = db.begin_read().at(path)?;
    let meta = txn.open_table(META).at(path)?;
    let get = |k: &str| -> Result<Option<u64>> { Ok(meta.get(k).at(path)?.map(|v| v.value())) };
    let compacted = get(META_COMPACT)?.unwrap_or(0) as Revision;
    Ok(Meta {
        revision: get(META_REVISION)?.unwrap_or(1) as Revision,
        compacted,
        purged: get(META_PURGED)?.map_or(compacted, |p| p as Revision),
    })
}

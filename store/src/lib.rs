//! The k1s datastore: an MVCC key-value store with list and watch, the foundation under the API
//! server. Everything the cluster knows lives here, and every component learns of change through
//! [`Store::watch`].
//!
//! Two backends implement the one [`Store`] trait:
//! - [`redb::RedbStore`], the default: an embedded, crash-safe store on one redb file with group
//!   commit and in-process watch fan-out;
//! - [`etcd::EtcdStore`]: the same contract on a real etcd v3 cluster, for an HA control plane.
//!
//! [`compactor`] runs the background compaction policy over either backend, [`snapshot`] saves
//! either into one file (restored into a new redb store), and [`bench`] is the workload behind
//! `k1s bench store`.
//!
//! This crate owns the revision contract and the on-disk format. It knows nothing of Kubernetes
//! objects: keys are strings, values are opaque bytes.

pub mod bench;
pub mod compactor;
mod error;
pub mod etcd;
pub mod redb;
pub mod snapshot;

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

pub use error::{Result, StoreError};

/// A point in the store's history. See [`Store`] for the contract.
pub type Revision = i64;

/// One key's value as stored, with the revisions that describe its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// The revision of the write that created this key (it stays the same across updates and
    /// changes only when the key is deleted and created again).
    pub create_revision: Revision,
    /// The revision of the last write to this key; Kubernetes' `resourceVersion` of an object.
    pub mod_revision: Revision,
}

/// A "small" list: a [`ListRequest`] of the current state with a `limit` of at most this many
/// keys. Callers that expect few keys (admission reading a namespace's quotas) page by it;
/// backends may serve such reads without a thread hand-off (redb reads them on the caller's
/// task).
pub const SMALL_LIST_LIMIT: usize = 64;

/// A list request: one consistent snapshot of the keys under a prefix.
#[derive(Clone, Debug, Default)]
pub struct ListRequest {
    /// Every key that starts with this prefix is in range. The empty prefix means all keys.
    pub prefix: String,
    /// Start strictly after this key (a continue token); `None` starts at the prefix.
    pub start_after: Option<String>,
    /// At most this many keys; 0 means no limit.
    pub limit: usize,
    /// Read the snapshot at this revision; `None` reads at the current revision.
    pub revision: Option<Revision>,
}

/// The answer to a [`ListRequest`].
#[derive(Clone, Debug, Default)]
pub struct ListResponse {
    /// Keys in ascending byte order.
    pub kvs: Vec<KeyValue>,
    /// The revision of the snapshot: pass it back as `revision` to read the next page from the
    /// same snapshot, and use it as the `after` of a watch that follows this list.
    pub revision: Revision,
    /// True when keys beyond the last returned one exist in range (the limit cut the list).
    pub more: bool,
}

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change, as a watcher sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// For `Put`, the new value. For `Delete`, the key with an empty value, `mod_revision` set to
    /// the revision of the delete and `create_revision` 0.
    pub kv: KeyValue,
    /// The key's value before this change; `None` for the first `Put` of a key.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision this event was written at.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// An item of a watch stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchItem {
    Event(Event),
    /// Every event under the watched prefix up to and including this revision has been
    /// delivered. Sent while the watch is idle, at about [`WatchOptions::progress_interval`].
    Progress(Revision),
}

/// Options of a watch.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// How often an idle watch reports progress; `None` disables progress notifications.
    pub progress_interval: Option<Duration>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            progress_interval: Some(Duration::from_secs(5)),
        }
    }
}

/// A watch: events in revision order, then possibly one error, then the end.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchItem>> + Send>>;

/// The datastore contract shared by every backend.
///
/// # Revisions
/// - The store has **one revision counter** for all keys. Every successful write (create,
///   update, delete) increments it by exactly one and is stamped with the new value. A failed
///   write does not move it. It never goes backwards, not even across a crash and restart.
/// - An empty store is at revision 1 (as in etcd), so the first write gets revision 2. Revision
///   0 is never a real revision; callers may use it to mean "no revision".
/// - A write is durable when its call returns `Ok`: after a crash it is there.
/// - `KeyValue::mod_revision` is the revision of a key's last write (Kubernetes'
///   `resourceVersion`); `create_revision` is that of the write that created it.
///
/// # Reads
/// - [`get`](Store::get) and [`list`](Store::list) read one consistent snapshot: a list never
///   mixes states from two revisions, even across pages when each page passes the first page's
///   [`ListResponse::revision`].
/// - A read at a revision older than the compacted revision fails with
///   [`StoreError::Compacted`]; one newer than the current revision with
///   [`StoreError::FutureRevision`]. The compacted revision itself is still readable.
///
/// # Writes
/// - [`create`](Store::create) fails with [`StoreError::AlreadyExists`] if the key exists.
/// - [`update`](Store::update) and [`delete`](Store::delete) take the modify revision the caller
///   last saw. If the key's modify revision differs they fail with [`StoreError::Conflict`] and
///   change nothing; if the key does not exist, with [`StoreError::NotFound`].
///
/// # Watches
/// - [`watch`](Store::watch) streams every change to keys under a prefix with a revision
///   strictly greater than `after`, in revision order, with no gaps and no repeats, each with the
///   previous value. Listing at revision R and then watching after R misses nothing.
/// - `after` may be in the future; the watch then waits for that revision.
/// - If `after` is older than the compacted revision the stream's first item is
///   [`StoreError::Compacted`].
/// - A watcher that cannot keep up with the writers is **ended** with
///   [`StoreError::WatcherTooSlow`] after the last event it was sent; it never silently skips an
///   event and never slows the writers down. Either error means: list again, then watch from the
///   list's revision.
/// - While idle, a watch sends [`WatchItem::Progress`] with the revision it has caught up to.
/// - Dropping the stream cancels the watch.
///
/// # Compaction
/// - [`compact`](Store::compact) discards history up to a revision. It keeps the current value
///   of every key; it only forgets superseded values and deletions, so reads and watches at older
///   revisions fail with [`StoreError::Compacted`] afterwards. Compacting to a revision at or below
///   the current compacted revision fails with [`StoreError::Compacted`]; one above the current
///   revision with [`StoreError::FutureRevision`].
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The revision of the latest write.
    async fn current_revision(&self) -> Result<Revision>;

    /// The current value of `key`, if it exists.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// A page of keys under a prefix, from one snapshot. See [`ListRequest`].
    async fn list(&self, req: ListRequest) -> Result<ListResponse>;

    /// The number of keys under `prefix` now, and the revision the count was taken at.
    async fn count(&self, prefix: &str) -> Result<(u64, Revision)>;

    /// Creates `key`; fails with [`StoreError::AlreadyExists`] if it exists. Returns the
    /// revision of the write.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision>;

    /// Replaces the value of `key` if its modify revision is `expected`. Returns the revision of
    /// the write.
    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision>;

    /// Deletes `key`, if `expected` is `None` or equal to its modify revision. Returns the
    /// revision of the delete and the value it removed.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)>;

    /// Watches every key under `prefix` for changes after revision `after`. Errors arrive as the
    /// stream's last item.
    fn watch(&self, prefix: &str, after: Revision, opts: WatchOptions) -> WatchStream;

    /// Discards history up to and including `revision` (see the trait docs). Returns once the
    /// compaction is in effect for readers; space is reclaimed in the background.
    async fn compact(&self, revision: Revision) -> Result<()>;
}

/// Checks a key the caller passed: keys are non-empty and contain no NUL bytes.
pub(crate) fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(StoreError::InvalidArgument("empty key".into()));
    }
    if key.contains('\0') {
        return Err(StoreError::InvalidArgument(format!(
            "key {key:?} contains a NUL byte"
        )));
    }
    Ok(())
}

/// A watch stream that yields one error and ends.
pub(crate) fn error_stream(err: StoreError) -> WatchStream {
    Box::pin(futures::stream::once(async move { Err(err) }))
}

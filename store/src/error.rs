//! The one error type of the store crate. Every backend maps its own failures onto these
//! variants so callers (the API server) can turn them into Kubernetes `Status` objects without
//! knowing which backend is in use.

use std::path::PathBuf;

use crate::Revision;

/// Errors returned by a [`crate::Store`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// `create` found the key already present.
    #[error("key {key:?} already exists")]
    AlreadyExists { key: String },
    /// `update` or `delete` found no such key.
    #[error("key {key:?} not found")]
    NotFound { key: String },
    /// The key's modify revision is not the one the caller expected.
    #[error("key {key:?} was modified: expected revision {expected}, found {actual}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    /// The requested revision has been compacted away; list again at the current revision.
    #[error("revision {requested} has been compacted (oldest available is {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// The requested revision has not been written yet.
    #[error("revision {requested} is newer than the current revision {current}")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    /// The watcher fell too far behind the writers and was ended; list again and re-watch.
    #[error("watch ended: the watcher fell {buffered} batches behind; list again and re-watch")]
    WatcherTooSlow { buffered: usize },
    /// The caller passed something the store cannot accept (empty key, bad range, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The database file is damaged; the message names the file and what to do.
    #[error(
        "database file {path} is corrupt: {detail}; restore it from a backup (or move it away to start empty)"
    )]
    Corrupted { path: PathBuf, detail: String },
    /// The database file was written by an incompatible format version.
    #[error(
        "database file {path} has format version {found}, this k1s supports {supported}; use a matching k1s release"
    )]
    UnsupportedFormat {
        path: PathBuf,
        found: String,
        supported: u64,
    },
    /// The filesystem holding the database is full. Acknowledged writes are safe.
    #[error(
        "no space left for database file {path}; free disk space and restart k1s (no acknowledged write was lost)"
    )]
    DiskFull { path: PathBuf },
    /// Another process holds the database open.
    #[error("database file {path} is in use by another process (is another k1s running?)")]
    Locked { path: PathBuf },
    /// Any other I/O failure of the local database.
    #[error("i/o error on database file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The remote backend (etcd) failed or could not be reached.
    #[error("etcd backend: {0}")]
    Backend(String),
    /// The store has been shut down.
    #[error("the store is closed")]
    Closed,
}

impl StoreError {
    /// True for errors after which the caller should list again (HTTP 410 at the API).
    pub fn is_relist(&self) -> bool {
        matches!(self, Self::Compacted { .. } | Self::WatcherTooSlow { .. })
    }

    /// A copy of this error, for answering every caller of a failed batch. I/O sources are
    /// copied by kind and message.
    pub(crate) fn duplicate(&self) -> StoreError {
        use StoreError::*;
        match self {
            AlreadyExists { key } => AlreadyExists { key: key.clone() },
            NotFound { key } => NotFound { key: key.clone() },
            Conflict {
                key,
                expected,
                actual,
            } => Conflict {
                key: key.clone(),
                expected: *expected,
                actual: *actual,
            },
            Compacted {
                requested,
                compacted,
            } => Compacted {
                requested: *requested,
                compacted: *compacted,
            },
            FutureRevision { requested, current } => FutureRevision {
                requested: *requested,
                current: *current,
            },
            WatcherTooSlow { buffered } => WatcherTooSlow {
                buffered: *buffered,
            },
            InvalidArgument(s) => InvalidArgument(s.clone()),
            Corrupted { path, detail } => Corrupted {
                path: path.clone(),
                detail: detail.clone(),
            },
            UnsupportedFormat {
                path,
                found,
                supported,
            } => UnsupportedFormat {
                path: path.clone(),
                found: found.clone(),
                supported: *supported,
            },
            DiskFull { path } => DiskFull { path: path.clone() },
            Locked { path } => Locked { path: path.clone() },
            Io { path, source } => Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Backend(s) => Backend(s.clone()),
            Closed => Closed,
        }
    }
}

/// Result alias for store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

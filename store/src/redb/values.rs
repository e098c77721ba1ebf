//! Where values live (format 2): a key's `kv` row holds only its revisions, and every value is
//! stored once, in the `log` record of the revision that wrote it. A change names the key's
//! previous revision rather than copying its value. These functions resolve both references, in
//! the committer's write transaction and in read snapshots alike.

use std::path::Path;

use bytes::Bytes;
use redb::ReadableTable;

use super::RedbResultExt;
use super::codec::{DecodeError, LogRecord, Prev, kv_revisions};
use crate::{Event, EventKind, KeyValue, Result, Revision, StoreError};

/// The store file at `path` holds something it should not.
pub fn corrupt(path: &Path, detail: String) -> StoreError {
    StoreError::Corrupted {
        path: path.to_owned(),
        detail,
    }
}

/// A record of the store file at `path` does not parse.
pub fn malformed(path: &Path, e: DecodeError) -> StoreError {
    corrupt(path, e.to_string())
}

/// The value `key` was given at `revision`, from the `log` record of that revision.
pub fn value_at(
    log: &impl ReadableTable<u64, &'static [u8]>,
    path: &Path,
    key: &str,
    revision: Revision,
) -> Result<Bytes> {
    let Some(rec) = log.get(revision as u64).at(path)? else {
        return Err(corrupt(
            path,
            format!("the value of {key} at revision {revision} is missing from the log"),
        ));
    };
    let rec = LogRecord::parse(rec.value()).map_err(|e| malformed(path, e))?;
    if rec.key != key || rec.kind != EventKind::Put {
        return Err(corrupt(
            path,
            format!(
                "revision {revision} should hold a value of {key} but is a {:?} of {}",
                rec.kind, rec.key
            ),
        ));
    }
    Ok(Bytes::copy_from_slice(rec.value))
}

/// The revisions `(create, mod)` of a live key, from its `kv` row.
pub fn revisions(
    kv: &impl ReadableTable<&'static str, &'static [u8]>,
    path: &Path,
    key: &str,
) -> Result<Option<(Revision, Revision)>> {
    match kv.get(key).at(path)? {
        Some(rec) => kv_revisions(rec.value())
            .map(Some)
            .map_err(|e| malformed(path, e)),
        None => Ok(None),
    }
}

/// A live key's current state, given its `kv` row.
pub fn current(
    log: &impl ReadableTable<u64, &'static [u8]>,
    path: &Path,
    key: &str,
    kv_record: &[u8],
) -> Result<KeyValue> {
    let (create_revision, mod_revision) =
        kv_revisions(kv_record).map_err(|e| malformed(path, e))?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: value_at(log, path, key, mod_revision)?,
        create_revision,
        mod_revision,
    })
}

/// The event of the `log` record `rec` written at `revision`, with its previous value.
pub fn event(
    log: &impl ReadableTable<u64, &'static [u8]>,
    path: &Path,
    revision: Revision,
    rec: &[u8],
) -> Result<Event> {
    let rec = LogRecord::parse(rec).map_err(|e| malformed(path, e))?;
    let prev_value = match rec.prev {
        Prev::Ref { modified, .. } => Some(value_at(log, path, rec.key, modified)?),
        Prev::None | Prev::Inline { .. } => None,
    };
    rec.event(revision, prev_value)
        .map_err(|e| malformed(path, e))
}

//! Snapshots of a datastore: every live key and value at one revision, in one self-checking
//! file, taken from any [`Store`] (the embedded redb store or etcd) and restored into a new
//! embedded store ([`crate::redb::restore`]).
//!
//! The file (`.snap`, all integers little-endian):
//! ```text
//! "K1SSNAP1"                          magic, format 1
//! u32 len | JSON header               {"revision", "keys", "createdAt"}
//! (u32 len | key | i64 create_rev | i64 mod_rev | u32 len | value)*
//!                                     the keys in ascending order, `keys` of them
//! "K1SSEND1" | SHA-256                of every byte before the digest
//! ```
//! Values are the stored bytes: with encryption at rest they stay encrypted, and a restore
//! needs the same encryption configuration. The cluster identity (sealed with the join token)
//! is a key like any other, so a server restored on a new machine with the original token is
//! the same cluster.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{ListRequest, Revision, Store, StoreError};

const MAGIC: &[u8; 8] = b"K1SSNAP1";
const END: &[u8; 8] = b"K1SSEND1";
/// Keys read per page while saving.
const PAGE: usize = 500;
/// A key or value longer than this is a damaged file, not data (etcd's limit is 1.5 MiB per
/// request by default).
const MAX_ITEM: usize = 64 << 20;

/// What a snapshot file says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The datastore's revision the keys were read at.
    pub revision: Revision,
    /// How many keys follow.
    pub keys: u64,
    /// When it was taken (RFC 3339, UTC).
    pub created_at: String,
}

/// Why a snapshot could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a k1s snapshot: {0}")]
    Format(String),
    #[error("the snapshot is damaged: its checksum does not match its contents")]
    Checksum,
}

/// Writes a snapshot of `store` at its current revision to `out`; returns its header.
/// `created_at` is the time (RFC 3339).
pub async fn save(
    store: &dyn Store,
    created_at: &str,
    out: &mut impl Write,
) -> Result<Header, SnapshotError> {
    // The keys first (one snapshot revision for every page), then the file: the header
    // carries the count.
    let mut kvs = Vec::new();
    let mut req = ListRequest {
        limit: PAGE,
        ..Default::default()
    };
    let revision = loop {
        let page = store.list(req.clone()).await?;
        let more = page.more;
        let last = page.kvs.last().map(|kv| kv.key.clone());
        kvs.extend(page.kvs);
        if !more || last.is_none() {
            break page.revision;
        }
        req.start_after = last;
        req.revision = Some(page.revision);
    };
    let header = Header {
        revision,
        keys: kvs.len() as u64,
        created_at: created_at.to_owned(),
    };
    let mut w = Hashing::new(out);
    w.write_all(MAGIC)?;
    let json = serde_json::to_vec(&header).map_err(|e| SnapshotError::Format(e.to_string()))?;
    write_item(&mut w, &json)?;
    for kv in &kvs {
        write_item(&mut w, kv.key.as_bytes())?;
        w.write_all(&kv.create_revision.to_le_bytes())?;
        w.write_all(&kv.mod_revision.to_le_bytes())?;
        write_item(&mut w, &kv.value)?;
    }
    w.write_all(END)?;
    let digest = w.hasher.finalize();
    w.inner.write_all(&digest)?;
    w.inner.flush()?;
    Ok(header)
}

fn write_item(w: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "item over 4 GiB"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(bytes)
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One key of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub create_revision: Revision,
    /// The revision of its last write (its objects' `resourceVersion`).
    pub mod_revision: Revision,
    pub value: Vec<u8>,
}

/// A snapshot read back and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub header: Header,
    /// The keys in ascending order.
    pub entries: Vec<Entry>,
}

/// Reads the header only (for listings); the checksum is not verified.
pub fn read_header(input: &mut impl Read) -> Result<Header, SnapshotError> {
    let mut magic = [0u8; 8];
    input
        .read_exact(&mut magic)
        .map_err(|_| SnapshotError::Format("too short".into()))?;
    if &magic != MAGIC {
        return Err(SnapshotError::Format(
            "no K1SSNAP1 magic at the start".into(),
        ));
    }
    let json = read_item(input)?;
    serde_json::from_slice(&json).map_err(|e| SnapshotError::Format(format!("header: {e}")))
}

/// Reads a whole snapshot and checks its checksum and its structure.
pub fn read(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    if bytes.len() < MAGIC.len() + END.len() + 32 {
        return Err(SnapshotError::Format("too short".into()));
    }
    let (body, digest) = bytes.split_at(bytes.len() - 32);
    let mut input = body;
    let header = read_header(&mut input)?;
    if Sha256::digest(body).as_slice() != digest {
        return Err(SnapshotError::Checksum);
    }
    let mut entries = Vec::with_capacity(header.keys.min(1 << 20) as usize);
    for _ in 0..header.keys {
        let key = String::from_utf8(read_item(&mut input)?)
            .map_err(|_| SnapshotError::Format("a key is not UTF-8".into()))?;
        let create_revision = read_i64(&mut input)?;
        let mod_revision = read_i64(&mut input)?;
        let value = read_item(&mut input)?;
        if entries.last().is_some_and(|last: &Entry| last.key >= key) {
            return Err(SnapshotError::Format(format!("key {key:?} out of order")));
        }
        if create_revision <= 0 || mod_revision < create_revision || mod_revision > header.revision
        {
            return Err(SnapshotError::Format(format!(
                "key {key:?} has revisions {create_revision}/{mod_revision} outside the \
                 snapshot's {}",
                header.revision
            )));
        }
        entries.push(Entry {
            key,
            create_revision,
            mod_revision,
            value,
        });
    }
    if input != END {
        return Err(SnapshotError::Format(
            "the keys do not end where the header says".into(),
        ));
    }
    Ok(Snapshot { header, entries })
}

fn read_i64(input: &mut impl Read) -> Result<i64, SnapshotError> {
    let mut b = [0u8; 8];
    input
        .read_exact(&mut b)
        .map_err(|_| SnapshotError::Format("cut short".into()))?;
    Ok(i64::from_le_bytes(b))
}

fn read_item(input: &mut impl Read) -> Result<Vec<u8>, SnapshotError> {
    let mut len = [0u8; 4];
    input
        .read_exact(&mut len)
        .map_err(|_| SnapshotError::Format("cut short".into()))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_ITEM {
        return Err(SnapshotError::Format(format!("an item of {len} bytes")));
    }
    let mut buf = vec![0u8; len];
    input
        .read_exact(&mut buf)
        .map_err(|_| SnapshotError::Format("cut short".into()))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redb::{RedbConfig, RedbStore};
    use bytes::Bytes;

    async fn store_with(n: usize) -> (tempfile::TempDir, RedbStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap();
        for i in 0..n {
            store
                .create(
                    &format!("/registry/k/{i:04}"),
                    Bytes::from(vec![i as u8; i]),
                )
                .await
                .unwrap();
        }
        (dir, store)
    }

    #[tokio::test]
    async fn a_snapshot_holds_every_key_across_pages_and_reads_back() {
        let (_dir, store) = store_with(1203).await;
        store.delete("/registry/k/0007", None).await.unwrap();
        let mut file = Vec::new();
        let header = save(&store, "2026-11-28T00:00:00Z", &mut file)
            .await
            .unwrap();
        assert_eq!(header.keys, 1202);
        assert_eq!(header.revision, store.current_revision().await.unwrap());
        let snap = read(&file).unwrap();
        assert_eq!(snap.header, header);
        assert_eq!(snap.entries.len(), 1202);
        assert_eq!(snap.entries[0].key, "/registry/k/0000");
        assert!(snap.entries.iter().all(|e| e.key != "/registry/k/0007"));
        assert_eq!(snap.entries[1201].value, vec![(1202 % 256) as u8; 1202]);
        let kv = store.get("/registry/k/1202").await.unwrap().unwrap();
        assert_eq!(snap.entries[1201].mod_revision, kv.mod_revision);
        assert_eq!(snap.entries[1201].create_revision, kv.create_revision);
        assert_eq!(read_header(&mut file.as_slice()).unwrap(), header);
    }

    #[tokio::test]
    async fn a_restored_store_has_the_keys_above_the_old_revisions_and_compacted() {
        let (_dir, store) = store_with(5).await;
        let mut file = Vec::new();
        let header = save(&store, "t", &mut file).await.unwrap();
        let snap = read(&file).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db/state.redb");
        let rev = crate::redb::restore(&path, &snap, 1000).unwrap();
        assert_eq!(rev, header.revision + 1000);
        assert!(
            crate::redb::restore(&path, &snap, 1000).is_err(),
            "never over a store"
        );
        assert!(!crate::redb::in_use(&path));
        let restored = RedbStore::open(RedbConfig::new(&path)).unwrap();
        assert!(crate::redb::in_use(&path), "a running store is seen");
        assert_eq!(restored.current_revision().await.unwrap(), rev);
        let kv = restored.get("/registry/k/0003").await.unwrap().unwrap();
        assert_eq!(&kv.value[..], &[3u8; 3][..]);
        // The key keeps its revisions (its object's resourceVersion).
        let before = store.get("/registry/k/0003").await.unwrap().unwrap();
        assert_eq!(
            (kv.create_revision, kv.mod_revision),
            (before.create_revision, before.mod_revision)
        );
        // A watch from before the restore is told to relist.
        let mut w = restored.watch("/registry/", header.revision, Default::default());
        let first = futures::StreamExt::next(&mut w).await.unwrap();
        assert!(
            matches!(first, Err(StoreError::Compacted { .. })),
            "{first:?}"
        );
        // Writes go on above it.
        let next = restored
            .update(
                "/registry/k/0003",
                Bytes::from_static(b"x"),
                kv.mod_revision,
            )
            .await
            .unwrap();
        assert_eq!(next, rev + 1);
        restored.close();
    }

    #[tokio::test]
    async fn keys_written_at_one_revision_get_new_ones_above_the_rest() {
        let entry = |key: &str| Entry {
            key: key.into(),
            create_revision: 4,
            mod_revision: 4,
            value: key.as_bytes().to_vec(),
        };
        let snap = Snapshot {
            header: Header {
                revision: 9,
                keys: 2,
                created_at: "t".into(),
            },
            entries: vec![entry("/a"), entry("/b")],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        assert_eq!(crate::redb::restore(&path, &snap, 0).unwrap(), 10);
        let store = RedbStore::open(RedbConfig::new(&path)).unwrap();
        assert_eq!(store.get("/a").await.unwrap().unwrap().mod_revision, 4);
        let b = store.get("/b").await.unwrap().unwrap();
        assert_eq!((b.mod_revision, &b.value[..]), (10, &b"/b"[..]));
        store.close();
    }

    #[tokio::test]
    async fn damage_is_found() {
        let (_dir, store) = store_with(3).await;
        let mut file = Vec::new();
        save(&store, "t", &mut file).await.unwrap();
        let mut flipped = file.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 1;
        assert!(matches!(read(&flipped), Err(SnapshotError::Checksum)));
        assert!(matches!(
            read(&file[..file.len() - 1]),
            Err(SnapshotError::Checksum)
        ));
        assert!(matches!(
            read(b"not a snapshot at all, but long enough to have a digest"),
            Err(SnapshotError::Format(_))
        ));
    }
}

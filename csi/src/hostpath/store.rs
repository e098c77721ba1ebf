//! The on-disk volume and snapshot store under `DATA_DIR/storage/hostpath`:
//!
//! ```text
//! state.json              volumes and snapshots (metadata), replaced atomically
//! volumes/<id>.img        a volume: a sparse image file (ext4 once first staged, or raw)
//! snapshots/<id>.img      a snapshot: a sparse copy of a volume's image
//! */<id>.img.tmp          an image being written; never referenced by state.json
//! ```
//!
//! Invariants that make a crash at any point harmless: an image is written under a `.tmp`
//! name, synced and renamed before `state.json` names it; a record is removed from
//! `state.json` before its image is deleted. So on open, every `.tmp` file and every image
//! `state.json` does not name is a leftover and is removed, and every record has its image.
//!
//! This module owns files only; it knows nothing of CSI, loop devices or mounts.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is missing but {images} holds images; refusing to treat them as leftovers")]
    StateMissing { path: PathBuf, images: PathBuf },
    #[error("{path}: not a valid state file: {source}")]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Where a volume's content came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ContentSource {
    Snapshot(String),
    Volume(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRecord {
    pub id: String,
    pub name: String,
    /// Bytes; the image file's length.
    pub capacity: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ContentSource>,
    /// Whether it was created for raw block use (no file system is made on it).
    #[serde(default)]
    pub block: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRecord {
    pub id: String,
    pub name: String,
    pub source_volume_id: String,
    /// Bytes; the source volume's capacity when it was taken.
    pub size: i64,
    pub created_seconds: i64,
    pub created_nanos: i32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    #[serde(default)]
    volumes: BTreeMap<String, VolumeRecord>,
    #[serde(default)]
    snapshots: BTreeMap<String, SnapshotRecord>,
}

/// The store. Not thread-safe by itself: the driver serialises access.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    state: State,
}

const STATE: &str = "state.json";
const VOLUMES: &str = "volumes";
const SNAPSHOTS: &str = "snapshots";
const IMAGE_EXT: &str = "img";

impl Store {
    /// Opens (creating) the store at `root`, loads `state.json` and removes leftovers of
    /// interrupted operations.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        for dir in [root.to_owned(), root.join(VOLUMES), root.join(SNAPSHOTS)] {
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        }
        let path = root.join(STATE);
        let (state, fresh) = match fs::read(&path) {
            Ok(bytes) => (
                serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
                    path: path.clone(),
                    source,
                })?,
                false,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (State::default(), true),
            Err(e) => return Err(io_err(&path)(e)),
        };
        if fresh {
            // A new store. Images without a state file mean the state file was lost, not a
            // crash (the state file is written when the store is first opened): keep them.
            for dir in [VOLUMES, SNAPSHOTS] {
                let dir = root.join(dir);
                let has_images = fs::read_dir(&dir)
                    .map_err(io_err(&dir))?
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == IMAGE_EXT));
                if has_images {
                    return Err(StoreError::StateMissing { path, images: dir });
                }
            }
        }
        let store = Self {
            root: root.to_owned(),
            state,
        };
        if fresh {
            store.save()?;
        }
        store.sweep()?;
        Ok(store)
    }

    pub fn volume_image(&self, id: &str) -> PathBuf {
        self.root.join(VOLUMES).join(format!("{id}.{IMAGE_EXT}"))
    }

    pub fn snapshot_image(&self, id: &str) -> PathBuf {
        self.root.join(SNAPSHOTS).join(format!("{id}.{IMAGE_EXT}"))
    }

    pub fn volume(&self, id: &str) -> Option<&VolumeRecord> {
        self.state.volumes.get(id)
    }

    pub fn volume_by_name(&self, name: &str) -> Option<&VolumeRecord> {
        self.state.volumes.values().find(|v| v.name == name)
    }

    /// Volumes in id order (the order pagination relies on).
    pub fn volumes(&self) -> impl Iterator<Item = &VolumeRecord> {
        self.state.volumes.values()
    }

    pub fn snapshot(&self, id: &str) -> Option<&SnapshotRecord> {
        self.state.snapshots.get(id)
    }

    pub fn snapshot_by_name(&self, name: &str) -> Option<&SnapshotRecord> {
        self.state.snapshots.values().find(|s| s.name == name)
    }

    /// Snapshots in id order.
    pub fn snapshots(&self) -> impl Iterator<Item = &SnapshotRecord> {
        self.state.snapshots.values()
    }

    /// Bytes handed out to volumes.
    pub fn allocated(&self) -> i64 {
        self.state.volumes.values().map(|v| v.capacity).sum()
    }

    /// Creates the volume's image (empty, or a copy of `content`, grown to the volume's
    /// capacity) and then records it.
    pub fn create_volume(
        &mut self,
        record: VolumeRecord,
        content: Option<&Path>,
    ) -> Result<(), StoreError> {
        let image = self.volume_image(&record.id);
        write_image(&image, content, record.capacity)?;
        self.state.volumes.insert(record.id.clone(), record);
        self.save()
    }

    /// Forgets the volume, then deletes its image. Missing volumes are fine.
    pub fn delete_volume(&mut self, id: &str) -> Result<(), StoreError> {
        if self.state.volumes.remove(id).is_some() {
            self.save()?;
        }
        remove_if_exists(&self.volume_image(id))
    }

    /// Grows the volume's image to `capacity` bytes (never shrinks) and records the size.
    pub fn expand_volume(&mut self, id: &str, capacity: i64) -> Result<(), StoreError> {
        let image = self.volume_image(id);
        let Some(record) = self.state.volumes.get_mut(id) else {
            return Ok(());
        };
        if capacity <= record.capacity {
            return Ok(());
        }
        let file = OpenOptions::new()
            .write(true)
            .open(&image)
            .map_err(io_err(&image))?;
        file.set_len(capacity as u64).map_err(io_err(&image))?;
        file.sync_all().map_err(io_err(&image))?;
        record.capacity = capacity;
        self.save()
    }

    /// Copies the volume's image into a snapshot and records it.
    pub fn create_snapshot(&mut self, record: SnapshotRecord) -> Result<(), StoreError> {
        let source = self.volume_image(&record.source_volume_id);
        let image = self.snapshot_image(&record.id);
        write_image(&image, Some(&source), record.size)?;
        self.state.snapshots.insert(record.id.clone(), record);
        self.save()
    }

    /// Forgets the snapshot, then deletes its image. Missing snapshots are fine.
    pub fn delete_snapshot(&mut self, id: &str) -> Result<(), StoreError> {
        if self.state.snapshots.remove(id).is_some() {
            self.save()?;
        }
        remove_if_exists(&self.snapshot_image(id))
    }

    /// Writes `state.json` atomically: a temporary file, synced, renamed over the old one, and
    /// the directory synced so the rename survives a crash.
    fn save(&self) -> Result<(), StoreError> {
        let path = self.root.join(STATE);
        let tmp = self.root.join(format!("{STATE}.tmp"));
        let bytes = serde_json::to_vec_pretty(&self.state).expect("state serialises");
        let mut file = File::create(&tmp).map_err(io_err(&tmp))?;
        file.write_all(&bytes).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        sync_dir(&self.root)
    }

    /// Removes temporary files and images no record names.
    fn sweep(&self) -> Result<(), StoreError> {
        let tmp = self.root.join(format!("{STATE}.tmp"));
        remove_if_exists(&tmp)?;
        for (dir, known) in [
            (VOLUMES, self.state.volumes.keys().collect::<Vec<_>>()),
            (SNAPSHOTS, self.state.snapshots.keys().collect::<Vec<_>>()),
        ] {
            let dir = self.root.join(dir);
            for entry in fs::read_dir(&dir).map_err(io_err(&dir))? {
                let entry = entry.map_err(io_err(&dir))?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let referenced = name
                    .strip_suffix(&format!(".{IMAGE_EXT}"))
                    .is_some_and(|id| known.iter().any(|k| k.as_str() == id));
                if !referenced {
                    tracing::info!(file = %entry.path().display(), "removing leftover of an interrupted operation");
                    remove_if_exists(&entry.path())?;
                }
            }
        }
        Ok(())
    }
}

/// Writes an image at `path` of `size` bytes (at least the content's length): under a
/// temporary name, a sparse copy of `content` if given, synced, then renamed into place.
fn write_image(path: &Path, content: Option<&Path>, size: i64) -> Result<(), StoreError> {
    let tmp = path.with_extension(format!("{IMAGE_EXT}.tmp"));
    let dst = File::create(&tmp).map_err(io_err(&tmp))?;
    let mut len = size as u64;
    if let Some(src) = content {
        let copied = sparse_copy(src, &dst).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        len = len.max(copied);
    }
    dst.set_len(len).map_err(io_err(&tmp))?;
    dst.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))?;
    sync_dir(path.parent().expect("images live in a directory"))
}

/// Copies `src` into the (empty) `dst` without allocating what reads as zeros: holes are
/// skipped (SEEK_DATA/SEEK_HOLE), and zero blocks inside data are not written either.
/// Returns `src`'s length; the caller sets `dst`'s length.
pub fn sparse_copy(src: &Path, dst: &File) -> Result<u64, StoreError> {
    use nix::unistd::{Whence, lseek};
    const BLOCK: usize = 64 * 1024;
    let file = File::open(src).map_err(io_err(src))?;
    // Data the loop device wrote may still be delayed-allocation pages that hole reporting
    // does not see on every file system: put it on disk first.
    file.sync_data().map_err(io_err(src))?;
    let len = file.metadata().map_err(io_err(src))?.len();
    let mut buf = vec![0u8; BLOCK];
    let mut offset: u64 = 0;
    while offset < len {
        // The next data at or after `offset`, and where it ends; file systems without hole
        // reporting answer "all data", which the zero check below still keeps sparse.
        let data = match lseek(&file, offset as i64, Whence::SeekData) {
            Ok(d) => d as u64,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(e) => return Err(io_err(src)(e.into())),
        };
        let hole = match lseek(&file, data as i64, Whence::SeekHole) {
            Ok(h) => (h as u64).min(len),
            Err(e) => return Err(io_err(src)(e.into())),
        };
        let mut pos = data;
        while pos < hole {
            let n = ((hole - pos) as usize).min(BLOCK);
            file.read_exact_at(&mut buf[..n], pos)
                .map_err(io_err(src))?;
            if buf[..n].iter().any(|&b| b != 0) {
                dst.write_all_at(&buf[..n], pos).map_err(io_err(src))?;
            }
            pos += n as u64;
        }
        offset = hole;
    }
    Ok(len)
}

fn remove_if_exists(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(path)(e)),
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn volume(id: &str, name: &str, capacity: i64) -> VolumeRecord {
        VolumeRecord {
            id: id.into(),
            name: name.into(),
            capacity,
            source: None,
            block: false,
        }
    }

    #[test]
    fn records_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store
            .create_volume(volume("v1", "pvc-1", 1 << 20), None)
            .unwrap();
        store
            .create_snapshot(SnapshotRecord {
                id: "s1".into(),
                name: "snap-1".into(),
                source_volume_id: "v1".into(),
                size: 1 << 20,
                created_seconds: 1,
                created_nanos: 2,
            })
            .unwrap();
        store.expand_volume("v1", 2 << 20).unwrap();
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.volume("v1").unwrap().capacity, 2 << 20);
        assert_eq!(store.volume_by_name("pvc-1").unwrap().id, "v1");
        assert_eq!(
            store.snapshot_by_name("snap-1").unwrap().source_volume_id,
            "v1"
        );
        assert_eq!(
            fs::metadata(store.volume_image("v1")).unwrap().len(),
            2 << 20
        );
        assert_eq!(
            fs::metadata(store.snapshot_image("s1")).unwrap().len(),
            1 << 20
        );
        assert_eq!(store.allocated(), 2 << 20);
    }

    #[test]
    fn open_removes_what_a_crash_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store
            .create_volume(volume("kept", "a", 4096), None)
            .unwrap();
        // A crash after the image was renamed but before state.json named it, one during
        // the copy, and one while state.json was being replaced.
        fs::write(store.volume_image("orphan"), b"x").unwrap();
        let partial = store.snapshot_image("half").with_extension("img.tmp");
        fs::write(&partial, b"x").unwrap();
        fs::write(dir.path().join("state.json.tmp"), b"{").unwrap();
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        assert!(store.volume_image("kept").exists());
        assert!(!store.volume_image("orphan").exists());
        assert!(!partial.exists());
        assert!(!dir.path().join("state.json.tmp").exists());
    }

    #[test]
    fn delete_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store.create_volume(volume("v", "n", 4096), None).unwrap();
        store.delete_volume("v").unwrap();
        store.delete_volume("v").unwrap();
        store.delete_snapshot("never").unwrap();
        assert!(store.volume("v").is_none());
        assert!(!store.volume_image("v").exists());
    }

    #[test]
    fn a_lost_state_file_does_not_cost_the_images() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store.create_volume(volume("v", "n", 4096), None).unwrap();
        drop(store);
        fs::remove_file(dir.path().join("state.json")).unwrap();
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::StateMissing { .. })
        ));
        assert!(dir.path().join("volumes/v.img").exists());
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_not_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("state.json"), b"not json").unwrap();
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn copies_stay_sparse_and_equal() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let size: u64 = 64 << 20;
        {
            let f = File::create(&src).unwrap();
            f.set_len(size).unwrap();
            f.write_all_at(b"head", 0).unwrap();
            f.write_all_at(&[7u8; 100_000], 10 << 20).unwrap();
            f.write_all_at(b"tail", size - 4).unwrap();
        }
        let dst_path = dir.path().join("dst");
        write_image(&dst_path, Some(&src), 0).unwrap();
        assert_eq!(fs::read(&src).unwrap(), fs::read(&dst_path).unwrap());
        let blocks = fs::metadata(&dst_path).unwrap().blocks() * 512;
        assert!(blocks < 1 << 20, "copy allocated {blocks} bytes of {size}");
        // Grown beyond the source, the extra reads as zeros.
        let bigger = dir.path().join("bigger");
        write_image(&bigger, Some(&src), (size * 2) as i64).unwrap();
        assert_eq!(fs::metadata(&bigger).unwrap().len(), size * 2);
    }
}

//! The content store: everything an image needs on disk, under one root directory.
//!
//! ```text
//! <root>/index.json                 references → images (see [`super::index`])
//! <root>/blobs/sha256/<hex>         verified blobs (image configs; layer blobs while unpacking)
//! <root>/layers/sha256/<hex>/       one unpacked layer per diff_id, an overlayfs lower dir
//! <root>/{blobs,layers}/.tmp/       work in progress, emptied at open
//! <root>/tmp/                       staging for archive imports, emptied at open
//! ```
//!
//! Blobs are written to a temporary file while being hashed and renamed into place only if the
//! digest matches (else the caller gets a [`BlobMismatch`]). Layers are unpacked into a
//! temporary directory and renamed into place once
//! complete and verified against their `diff_id`, so a crash never leaves a half layer that
//! counts as present. Layer blobs are deleted once unpacked: the unpacked directory is what is
//! kept (it is keyed by `diff_id`, so the same layer from a registry or an archive is shared).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::digest::{Hasher, HashingReader, HashingWriter, sha256_hex};
use super::index::{ImageRecord, Index, LayerRecord, now_secs, unique_suffix};
use super::layer;
use super::reference::ImageRef;
use super::{Image, ImageError};

const INDEX_FILE: &str = "index.json";

/// A blob whose content does not match its digest; it was not kept. `actual` is the digest
/// of what was written (empty if the writer had already been finished).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("blob {expected} has digest {actual}")]
pub struct BlobMismatch {
    pub expected: String,
    pub actual: String,
}

/// Blobs, unpacked layers and the index under one root.
pub struct ContentStore {
    root: PathBuf,
    index: Mutex<Index>,
}

impl std::fmt::Debug for ContentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl ContentStore {
    /// Opens (creating if needed) the store under `root`, e.g.
    /// `<data dir>/agent/images-store`, and removes work left over by a crash.
    ///
    /// A corrupt index is moved aside (`index.json.corrupt-…`) and the store starts empty; the
    /// layers it named are removed by the next garbage collection.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, ImageError> {
        let root = root.into();
        for dir in ["blobs/sha256", "layers/sha256"] {
            let path = root.join(dir);
            fs::create_dir_all(&path).map_err(|e| ImageError::store(&path, e))?;
        }
        for dir in ["blobs/.tmp", "layers/.tmp", "tmp"] {
            let path = root.join(dir);
            match fs::remove_dir_all(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(ImageError::store(&path, e)),
            }
            fs::create_dir_all(&path).map_err(|e| ImageError::store(&path, e))?;
        }
        let index_path = root.join(INDEX_FILE);
        let index = match Index::load(&index_path) {
            Ok(index) => index,
            Err(ImageError::Store { source, .. })
                if source.kind() == io::ErrorKind::InvalidData =>
            {
                let aside = root.join(format!("{INDEX_FILE}.corrupt-{}", unique_suffix()));
                tracing::warn!(
                    index = %index_path.display(),
                    moved_to = %aside.display(),
                    error = %source,
                    "image store index is corrupt; starting with an empty store"
                );
                fs::rename(&index_path, &aside).map_err(|e| ImageError::store(&index_path, e))?;
                Index::default()
            }
            Err(e) => return Err(e),
        };
        Ok(Self {
            root,
            index: Mutex::new(index),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        // A panic while holding the lock leaves the in-memory index as consistent as the last
        // completed update; keep going with it.
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `f` to the index and saves it.
    pub(crate) fn update<T>(&self, f: impl FnOnce(&mut Index) -> T) -> Result<T, ImageError> {
        let mut index = self.index();
        let out = f(&mut index);
        index.save(&self.root.join(INDEX_FILE))?;
        Ok(out)
    }

    /// A copy of the index.
    pub fn snapshot(&self) -> Index {
        self.index().clone()
    }

    fn digest_hex(digest: &str) -> Result<&str, ImageError> {
        sha256_hex(digest).ok_or_else(|| {
            ImageError::store(
                digest,
                io::Error::new(io::ErrorKind::InvalidInput, "not a sha256 digest"),
            )
        })
    }

    /// `<root>/blobs/sha256/<hex>`.
    pub fn blob_path(&self, digest: &str) -> Result<PathBuf, ImageError> {
        Ok(self
            .root
            .join("blobs/sha256")
            .join(Self::digest_hex(digest)?))
    }

    /// `<root>/layers/sha256/<hex>`.
    pub fn layer_path(&self, diff_id: &str) -> Result<PathBuf, ImageError> {
        Ok(self
            .root
            .join("layers/sha256")
            .join(Self::digest_hex(diff_id)?))
    }

    pub fn has_blob(&self, digest: &str) -> bool {
        self.blob_path(digest).is_ok_and(|p| p.is_file())
    }

    /// Whether the layer is unpacked (and recorded: a directory alone may be an orphan).
    pub fn has_layer(&self, diff_id: &str) -> bool {
        self.index().layers.contains_key(diff_id)
            && self.layer_path(diff_id).is_ok_and(|p| p.is_dir())
    }

    /// Reads a (small) blob, checking it still matches its digest.
    pub fn read_blob(&self, digest: &str) -> Result<Vec<u8>, ImageError> {
        let path = self.blob_path(digest)?;
        let data = fs::read(&path).map_err(|e| ImageError::store(&path, e))?;
        let mut h = Hasher::default();
        h.update(&data);
        if h.finish() != digest {
            return Err(ImageError::store(
                &path,
                io::Error::new(io::ErrorKind::InvalidData, "blob does not match its digest"),
            ));
        }
        Ok(data)
    }

    /// Starts writing the blob `digest`; see [`BlobWriter`].
    pub fn blob_writer(&self, digest: &str) -> Result<BlobWriter, ImageError> {
        let dest = self.blob_path(digest)?;
        let tmp = self.root.join("blobs/.tmp").join(format!(
            "{}-{}",
            Self::digest_hex(digest)?,
            unique_suffix()
        ));
        let file = File::create(&tmp).map_err(|e| ImageError::store(&tmp, e))?;
        Ok(BlobWriter {
            file: Some(HashingWriter::new(file)),
            tmp,
            dest,
            expected: digest.to_string(),
        })
    }

    /// Stores `data` as the blob `digest`; `Ok(Err(_))` if it does not match.
    pub fn put_blob(
        &self,
        digest: &str,
        data: &[u8],
    ) -> Result<Result<(), BlobMismatch>, ImageError> {
        let mut w = self.blob_writer(digest)?;
        w.write(data)?;
        w.commit()
    }

    /// Unpacks a layer blob read from `blob` as the layer `diff_id`, unless already present.
    ///
    /// `blob_digest`, if given, is checked against the bytes read (for blobs that were not
    /// verified when stored, e.g. from an archive). The uncompressed stream is checked against
    /// `diff_id`. Either mismatch is [`ImageError::DigestMismatch`] for `reference`; nothing is
    /// kept. Returns the layer's size. Blocking: run in `spawn_blocking`.
    pub fn unpack_layer(
        &self,
        reference: &str,
        blob: impl Read,
        blob_digest: Option<&str>,
        diff_id: &str,
    ) -> Result<u64, ImageError> {
        let dest = self.layer_path(diff_id)?;
        if self.has_layer(diff_id) {
            return Ok(self.index().layers.get(diff_id).map_or(0, |l| l.size));
        }
        let tmp = self.root.join("layers/.tmp").join(format!(
            "{}-{}",
            Self::digest_hex(diff_id)?,
            unique_suffix()
        ));
        fs::create_dir(&tmp).map_err(|e| ImageError::store(&tmp, e))?;
        let guard = RemoveOnDrop(Some(tmp.clone()));
        let unpack_err = |message: String| ImageError::Unpack {
            reference: reference.to_string(),
            layer: blob_digest.unwrap_or(diff_id).to_string(),
            message,
        };
        let mut hashing = HashingReader::new(blob);
        let unpacked = layer::unpack_layer(&mut hashing, &tmp).map_err(|e| {
            unpack_err(
                e.to_string()
                    .replace(&format!("{}/", tmp.display()), "")
                    .replace(&tmp.display().to_string(), "/"),
            )
        })?;
        if let Some(expected) = blob_digest {
            let actual = hashing
                .drain_and_finish()
                .map_err(|e| unpack_err(e.to_string()))?;
            if actual != expected {
                return Err(ImageError::DigestMismatch {
                    reference: reference.to_string(),
                    digest: expected.to_string(),
                    actual,
                });
            }
        }
        if unpacked.diff_id != diff_id {
            return Err(ImageError::DigestMismatch {
                reference: reference.to_string(),
                digest: diff_id.to_string(),
                actual: unpacked.diff_id,
            });
        }
        File::open(&tmp)
            .and_then(|d| d.sync_all())
            .map_err(|e| ImageError::store(&tmp, e))?;
        match fs::rename(&tmp, &dest) {
            Ok(()) => {}
            // Another pull unpacked the same layer meanwhile: keep theirs.
            Err(_) if dest.is_dir() => {}
            Err(e) => return Err(ImageError::store(&dest, e)),
        }
        drop(guard);
        self.update(|index| {
            index.layers.insert(
                diff_id.to_string(),
                LayerRecord {
                    size: unpacked.size,
                },
            );
        })?;
        Ok(unpacked.size)
    }

    /// Records `reference` (normalised) as naming `record`, and returns the image.
    pub fn put_image(&self, reference: &str, record: ImageRecord) -> Result<Image, ImageError> {
        let key = ImageRef::parse(reference)?.to_string();
        self.update(|index| {
            let image = to_image(&self.root, index, &key, &record);
            index.images.insert(key.clone(), record);
            image
        })
    }

    /// The record for `reference`: by exact (normalised) reference, or for a digest reference,
    /// any image of the same repository resolved to that digest.
    fn find(index: &Index, r: &ImageRef) -> Option<(String, ImageRecord)> {
        let key = r.to_string();
        if let Some(rec) = index.images.get(&key) {
            return Some((key, rec.clone()));
        }
        let digest = r.digest.as_deref()?;
        let name = r.name();
        index
            .images
            .iter()
            .find(|(k, rec)| {
                (rec.manifest_digest == digest || rec.image_manifest_digest == digest)
                    && ImageRef::parse(k).is_ok_and(|kr| kr.name() == name)
            })
            .map(|(k, rec)| (k.clone(), rec.clone()))
    }

    /// The record for `reference`, if present (with all its layers).
    pub fn record(&self, reference: &str) -> Option<ImageRecord> {
        let r = ImageRef::parse(reference).ok()?;
        let index = self.index();
        let (_, rec) = Self::find(&index, &r)?;
        rec.layers
            .iter()
            .all(|l| index.layers.contains_key(l))
            .then_some(rec)
    }

    /// The image named `reference`, if present.
    pub fn get(&self, reference: &str) -> Option<Image> {
        let r = ImageRef::parse(reference).ok()?;
        let index = self.index();
        let (_, rec) = Self::find(&index, &r)?;
        if !rec.layers.iter().all(|l| index.layers.contains_key(l)) {
            return None;
        }
        Some(to_image(&self.root, &index, &r.to_string(), &rec))
    }

    /// Marks `reference` used now (for least-recently-used garbage collection). Within a
    /// minute of the last mark this is a no-op, so frequent `ensure`s do not rewrite the index.
    pub fn touch(&self, reference: &str) -> Result<(), ImageError> {
        let Ok(r) = ImageRef::parse(reference) else {
            return Ok(());
        };
        let now = now_secs();
        {
            let index = self.index();
            match Self::find(&index, &r) {
                Some((_, rec)) if now.saturating_sub(rec.last_used) >= 60 => {}
                _ => return Ok(()),
            }
        }
        self.update(|index| {
            if let Some((key, _)) = Self::find(index, &r)
                && let Some(rec) = index.images.get_mut(&key)
            {
                rec.last_used = now;
            }
        })
    }

    /// Every image, one per reference.
    pub fn list(&self) -> Vec<Image> {
        let index = self.index();
        index
            .images
            .iter()
            .filter(|(_, rec)| rec.layers.iter().all(|l| index.layers.contains_key(l)))
            .map(|(k, rec)| to_image(&self.root, &index, k, rec))
            .collect()
    }

    /// Forgets the references in `references` (normalised keys) and deletes what no remaining
    /// image uses; returns the bytes freed (by the index's accounting).
    pub fn remove_images(&self, references: &[String]) -> Result<u64, ImageError> {
        self.update(|index| {
            for r in references {
                index.images.remove(r);
            }
        })?;
        self.remove_unreferenced()
    }

    /// Deletes unpacked layers and blobs that no image references (including orphans left by
    /// an interrupted pull or a lost index); returns the bytes freed.
    pub fn remove_unreferenced(&self) -> Result<u64, ImageError> {
        let (layers_keep, blobs_keep, unreferenced): (BTreeSet<String>, BTreeSet<String>, Vec<_>) = {
            let index = self.index();
            let layers: BTreeSet<String> = index
                .referenced_layers()
                .into_iter()
                .map(str::to_string)
                .collect();
            let blobs = index
                .images
                .values()
                .map(|r| r.config_digest.clone())
                .collect();
            let unreferenced = index
                .layers
                .keys()
                .filter(|l| !layers.contains(*l))
                .cloned()
                .collect();
            (layers, blobs, unreferenced)
        };
        let mut freed = 0;
        // Forget before deleting: a layer that is not recorded is not present. Nothing to
        // forget, nothing written: under disk pressure this runs every eviction pass.
        if !unreferenced.is_empty() {
            freed += self.update(|index| {
                unreferenced
                    .iter()
                    .filter_map(|l| index.layers.remove(l))
                    .map(|l| l.size)
                    .sum::<u64>()
            })?;
        }
        let layer_dir = self.root.join("layers/sha256");
        for hex in list_names(&layer_dir)? {
            if !layers_keep.contains(&format!("sha256:{hex}")) {
                let path = layer_dir.join(&hex);
                remove_tree(&path).map_err(|e| ImageError::store(&path, e))?;
            }
        }
        let blob_dir = self.root.join("blobs/sha256");
        for hex in list_names(&blob_dir)? {
            if !blobs_keep.contains(&format!("sha256:{hex}")) {
                let path = blob_dir.join(&hex);
                freed += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(ImageError::store(&path, e)),
                }
            }
        }
        Ok(freed)
    }

    /// A fresh, empty staging directory under `<root>/tmp`, removed when the guard drops.
    pub(crate) fn staging_dir(&self, what: &str) -> Result<(PathBuf, RemoveOnDrop), ImageError> {
        let dir = self
            .root
            .join("tmp")
            .join(format!("{what}-{}", unique_suffix()));
        fs::create_dir_all(&dir).map_err(|e| ImageError::store(&dir, e))?;
        Ok((dir.clone(), RemoveOnDrop(Some(dir))))
    }
}

fn to_image(root: &Path, index: &Index, reference: &str, rec: &ImageRecord) -> Image {
    let layer_root = root.join("layers/sha256");
    Image {
        reference: reference.to_string(),
        id: rec.config_digest.clone(),
        repo_digest: rec.repo_digest.clone(),
        layers: rec
            .layers
            .iter()
            .map(|l| layer_root.join(sha256_hex(l).unwrap_or_default()))
            .collect(),
        config: rec.config.clone(),
        size: rec
            .layers
            .iter()
            .filter_map(|l| index.layers.get(l))
            .map(|l| l.size)
            .sum(),
    }
}

fn list_names(dir: &Path) -> Result<Vec<String>, ImageError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| ImageError::store(dir, e))? {
        let entry = entry.map_err(|e| ImageError::store(dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// `remove_dir_all`, tolerating a directory that is already gone.
fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Removes a file or directory tree when dropped, unless disarmed.
pub(crate) struct RemoveOnDrop(pub(crate) Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let result = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            if let Err(e) = result
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove temporary");
            }
        }
    }
}

/// A blob being written: hashed as it is written, renamed into place by [`BlobWriter::commit`]
/// only if it matches its digest, deleted otherwise (also when dropped uncommitted).
pub struct BlobWriter {
    file: Option<HashingWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
    expected: String,
}

impl BlobWriter {
    pub fn write(&mut self, data: &[u8]) -> Result<(), ImageError> {
        match self.file.as_mut() {
            Some(f) => f
                .write_all(data)
                .map_err(|e| ImageError::store(&self.tmp, e)),
            None => Ok(()),
        }
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, |f| f.hasher().bytes())
    }

    /// The digest of what was written so far.
    pub fn digest(&self) -> String {
        self.file
            .as_ref()
            .map(|f| f.hasher().finish())
            .unwrap_or_default()
    }

    /// Keeps the blob if it matches its digest; `Ok(Err(_))` (blob discarded) if not.
    pub fn commit(mut self) -> Result<Result<(), BlobMismatch>, ImageError> {
        let Some(file) = self.file.take() else {
            return Ok(Err(BlobMismatch {
                expected: std::mem::take(&mut self.expected),
                actual: String::new(),
            }));
        };
        let (file, hasher) = file.into_inner();
        let actual = hasher.finish();
        if actual != self.expected {
            drop(file);
            let _ = fs::remove_file(&self.tmp);
            return Ok(Err(BlobMismatch {
                expected: std::mem::take(&mut self.expected),
                actual,
            }));
        }
        file.sync_all()
            .map_err(|e| ImageError::store(&self.tmp, e))?;
        drop(file);
        fs::rename(&self.tmp, &self.dest).map_err(|e| ImageError::store(&self.dest, e))?;
        Ok(Ok(()))
    }

    /// Where the blob lands once committed.
    pub fn path(&self) -> &Path {
        &self.dest
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::ImageConfig;
    use crate::images::digest::sha256_of;
    use crate::images::layer::tests::{TarBuilder, gzip};

    #[test]
    fn blob_digest_mismatch_discards_the_blob() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let good = sha256_of(b"good");
        let mut w = store.blob_writer(&good).unwrap();
        w.write(b"evil").unwrap();
        let m = w.commit().unwrap().unwrap_err();
        assert_eq!(
            m,
            BlobMismatch {
                expected: good.clone(),
                actual: sha256_of(b"evil"),
            }
        );
        assert_eq!(
            m.to_string(),
            format!("blob {good} has digest {}", sha256_of(b"evil"))
        );
        assert!(!store.has_blob(&good));
        assert_eq!(
            fs::read_dir(dir.path().join("blobs/.tmp")).unwrap().count(),
            0
        );
        store.put_blob(&good, b"good").unwrap().unwrap();
        assert_eq!(store.read_blob(&good).unwrap(), b"good");
        // A blob corrupted on disk is refused when read.
        fs::write(store.blob_path(&good).unwrap(), b"rot").unwrap();
        assert!(store.read_blob(&good).is_err());
    }

    #[test]
    fn layers_are_verified_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let tar = TarBuilder::new().file("bin/true", b"x", 0o755).finish();
        let blob = gzip(&tar);
        let diff_id = sha256_of(&tar);
        let blob_digest = sha256_of(&blob);
        {
            let store = ContentStore::open(dir.path()).unwrap();
            // Wrong diff_id: nothing kept.
            let wrong = sha256_of(b"other");
            let err = store
                .unpack_layer("r", &blob[..], Some(&blob_digest), &wrong)
                .unwrap_err();
            assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
            assert!(!store.has_layer(&wrong));
            assert_eq!(
                fs::read_dir(dir.path().join("layers/.tmp"))
                    .unwrap()
                    .count(),
                0
            );
            // Wrong blob digest: nothing kept.
            let err = store
                .unpack_layer("r", &blob[..], Some(&wrong), &diff_id)
                .unwrap_err();
            assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
            assert!(!store.has_layer(&diff_id));

            store
                .unpack_layer("r", &blob[..], Some(&blob_digest), &diff_id)
                .unwrap();
            let image = store
                .put_image(
                    "busybox",
                    ImageRecord {
                        repo_digest: format!("docker.io/library/busybox@{blob_digest}"),
                        manifest_digest: blob_digest.clone(),
                        image_manifest_digest: blob_digest.clone(),
                        config_digest: sha256_of(b"config"),
                        layers: vec![diff_id.clone()],
                        config: ImageConfig {
                            cmd: vec!["/bin/true".into()],
                            ..ImageConfig::default()
                        },
                        last_used: 1,
                    },
                )
                .unwrap();
            assert_eq!(image.reference, "docker.io/library/busybox:latest");
            assert!(image.layers[0].join("bin/true").is_file());
        }
        // A half-unpacked layer from a "crash" is cleaned at open.
        fs::create_dir_all(dir.path().join("layers/.tmp/half/bin")).unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        assert_eq!(
            fs::read_dir(dir.path().join("layers/.tmp"))
                .unwrap()
                .count(),
            0
        );
        let image = store.get("docker.io/library/busybox:latest").unwrap();
        assert_eq!(image.config.cmd, vec!["/bin/true"]);
        assert_eq!(image.size, 1);
        // By digest too.
        assert!(store.get(&format!("busybox@{blob_digest}")).is_some());
        assert_eq!(store.list().len(), 1);

        // Removing the image removes its layer.
        store
            .remove_images(&["docker.io/library/busybox:latest".to_string()])
            .unwrap();
        assert!(store.list().is_empty());
        assert!(!store.layer_path(&diff_id).unwrap().exists());
    }

    #[test]
    fn orphan_layers_are_collected() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let orphan = dir.path().join("layers/sha256").join("ab".repeat(32));
        fs::create_dir_all(orphan.join("x")).unwrap();
        store.remove_unreferenced().unwrap();
        assert!(!orphan.exists());
        // With nothing to collect the index is not rewritten (an idle node under disk
        // pressure collects every few seconds).
        let index = dir.path().join("index.json");
        store.update(|_| ()).unwrap();
        let before = fs::metadata(&index).and_then(|m| m.modified()).ok();
        assert!(before.is_some());
        std::thread::sleep(std::time::Duration::from_millis(20));
        store.remove_unreferenced().unwrap();
        assert_eq!(fs::metadata(&index).and_then(|m| m.modified()).ok(), before);
    }

    #[test]
    fn corrupt_index_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("index.json"), b"garbage").unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        assert!(store.list().is_empty());
        assert!(fs::read_dir(dir.path()).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("index.json.corrupt-")
        }));
    }
}

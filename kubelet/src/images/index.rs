//! The content store's index: which references name which image (manifest, config, layers,
//! image config, last use), the size of each unpacked layer, and which airgap archives were
//! imported. One JSON file, replaced atomically (temp file, fsync, rename, fsync of the
//! directory) so a crash leaves either the old or the new index.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{ImageConfig, ImageError};

const VERSION: u32 = 1;

/// The whole index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Index {
    pub version: u32,
    /// Normalised reference → image.
    pub images: BTreeMap<String, ImageRecord>,
    /// Layer `diff_id` → what is known about its unpacked directory.
    pub layers: BTreeMap<String, LayerRecord>,
    /// Archive path → what importing it produced.
    pub imported: BTreeMap<String, ImportRecord>,
}

/// One reference's image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageRecord {
    /// `registry/repo@sha256:…` of what the reference resolved to.
    pub repo_digest: String,
    /// The digest the reference resolved to: an image index for multi-arch images.
    pub manifest_digest: String,
    /// The platform's image manifest (equal to `manifest_digest` for single-arch images).
    pub image_manifest_digest: String,
    /// The image ID.
    pub config_digest: String,
    /// Layer `diff_id`s, lowest first.
    pub layers: Vec<String>,
    pub config: ImageConfig,
    /// Seconds since the epoch of the last `ensure` (or pull, or import).
    pub last_used: u64,
}

/// One unpacked layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayerRecord {
    /// Bytes of file content.
    pub size: u64,
}

/// One imported archive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImportRecord {
    /// `<size>:<mtime ns>` of the archive when imported.
    pub fingerprint: String,
    pub references: Vec<String>,
}

impl Index {
    /// Reads the index at `path`; a missing file is an empty index.
    pub fn load(path: &Path) -> Result<Self, ImageError> {
        let data = match fs::read(path) {
            Ok(data) => data,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Self {
                    version: VERSION,
                    ..Self::default()
                });
            }
            Err(e) => return Err(ImageError::store(path, e)),
        };
        serde_json::from_slice(&data).map_err(|e| {
            ImageError::store(
                path,
                io::Error::new(io::ErrorKind::InvalidData, format!("corrupt index: {e}")),
            )
        })
    }

    /// Replaces the index at `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), ImageError> {
        let mut data = serde_json::to_vec_pretty(&Self {
            version: VERSION,
            ..self.clone()
        })
        .map_err(|e| ImageError::store(path, io::Error::other(e)))?;
        data.push(b'\n');
        write_atomic(path, &data)
    }

    /// The image IDs referenced by any image, and the layers they use.
    pub fn referenced_layers(&self) -> std::collections::BTreeSet<&str> {
        self.images
            .values()
            .flat_map(|r| r.layers.iter().map(String::as_str))
            .collect()
    }
}

/// Writes `data` to `path` so that readers see the old or the new content, even across a crash.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), ImageError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = temp_sibling(path);
    let result = (|| -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(|e| ImageError::store(path, e))
}

fn temp_sibling(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".tmp-{}", unique_suffix()));
    path.with_file_name(name)
}

/// A string unique within this host for temporary names: pid, time and a counter.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_atomic_and_complete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        assert_eq!(Index::load(&path).unwrap().images.len(), 0);

        let mut index = Index::default();
        index.images.insert(
            "docker.io/library/busybox:latest".into(),
            ImageRecord {
                repo_digest: "docker.io/library/busybox@sha256:aa".into(),
                manifest_digest: "sha256:aa".into(),
                image_manifest_digest: "sha256:bb".into(),
                config_digest: "sha256:cc".into(),
                layers: vec!["sha256:dd".into()],
                config: ImageConfig {
                    cmd: vec!["/bin/sh".into()],
                    env: vec!["PATH=/bin".into()],
                    working_dir: Some("/".into()),
                    ..ImageConfig::default()
                },
                last_used: 42,
            },
        );
        index
            .layers
            .insert("sha256:dd".into(), LayerRecord { size: 7 });
        index.imported.insert(
            "/a.tar".into(),
            ImportRecord {
                fingerprint: "1:2".into(),
                references: vec!["docker.io/library/busybox:latest".into()],
            },
        );
        index.save(&path).unwrap();
        let loaded = Index::load(&path).unwrap();
        assert_eq!(loaded.images, index.images);
        assert_eq!(loaded.layers, index.layers);
        assert_eq!(loaded.imported, index.imported);
        assert_eq!(loaded.version, VERSION);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("index.json")]);
    }

    #[test]
    fn corrupt_index_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        fs::write(&path, b"{not json").unwrap();
        let err = Index::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("index.json") && err.contains("corrupt"),
            "{err}"
        );
    }
}

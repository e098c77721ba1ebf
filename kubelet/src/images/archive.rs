//! Airgap import: image tarballs in a directory (as k3s's `agent/images/`) are imported into
//! the store at kubelet start.
//!
//! Two archive formats, optionally gzip- or zstd-compressed (`.tar`, `.tar.gz`, `.tgz`,
//! `.tar.zst`):
//! - an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`), named by the
//!   `io.containerd.image.name` annotation or a full `org.opencontainers.image.ref.name`
//!   (a bare tag there needs a Docker `RepoTags` entry for the same config to give it a name);
//! - `docker save` (`manifest.json` with `Config`, `RepoTags`, `Layers`). Such images have no
//!   registry manifest; the digest of an equivalent OCI manifest stands in for the repo digest.
//!
//! Every blob is verified (manifests and configs by digest, layers by digest and `diff_id`).
//! Importing is idempotent: an archive whose size and mtime are unchanged, and whose images are
//! all still present, is skipped; otherwise its images are (re)tagged. Layers already present
//! are not unpacked again.
//!
//! Why an archive is refused is an [`ArchiveError`], the source of [`ImageError::Import`].

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::config;
use super::digest::{sha256_hex, sha256_of};
use super::index::{ImageRecord, ImportRecord, now_secs};
use super::layer::{clean_relative, decompressed};
use super::pull::host_arch;
use super::reference::ImageRef;
use super::store::ContentStore;
use super::{ImageError, normalize};

/// Why an archive could not be imported (inside [`ImageError::Import`], which names it).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Reading or unpacking the tarball, or reading a blob.
    #[error("{0}")]
    Io(#[source] io::Error),
    /// An entry whose path leaves the archive.
    #[error("refusing {}: it escapes the archive", .0.display())]
    Escapes(PathBuf),
    #[error("extracting {}: {source}", path.display())]
    Extract {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("invalid path {0:?}")]
    InvalidPath(String),
    #[error("{0} is missing from the archive")]
    Missing(String),
    #[error("{0}: too many levels of links")]
    LinkLoop(String),
    #[error("unsupported digest {0:?}")]
    UnsupportedDigest(String),
    #[error("blob {digest} has digest {actual}")]
    BlobDigest { digest: String, actual: String },
    #[error("neither an OCI image layout (index.json) nor a docker save archive (manifest.json)")]
    NotAnArchive,
    /// `file`: `index.json`, `manifest.json`, or a docker config's path in the archive.
    #[error("{file}: {source}")]
    Read {
        file: String,
        #[source]
        source: io::Error,
    },
    /// `index.json` or `manifest.json` does not parse.
    #[error("{file}: {source}")]
    Json {
        file: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("manifest {digest}: {source}")]
    Manifest {
        digest: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("manifest {0} has no config")]
    NoConfig(String),
    #[error("image indexes nested too deep")]
    TooDeep,
    /// An OCI image's config, by digest.
    #[error("config {digest}: {source}")]
    Config {
        digest: String,
        #[source]
        source: config::ConfigError,
    },
    /// A docker save image's config, by its path in the archive.
    #[error("{file}: {source}")]
    DockerConfig {
        file: String,
        #[source]
        source: config::ConfigError,
    },
    #[error("config {digest} lists {config} layers, manifest {manifest}")]
    LayerCount {
        digest: String,
        config: usize,
        manifest: usize,
    },
    #[error("{file} lists {config} layers, manifest.json {manifest}")]
    DockerLayerCount {
        file: String,
        config: usize,
        manifest: usize,
    },
    /// Keeping a config blob in the store: what was written does not match its digest.
    #[error("config {digest} has digest {actual}")]
    ConfigDigest { digest: String, actual: String },
    /// The blocking import task did not finish.
    #[error("import task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

const NAME_ANNOTATION: &str = "io.containerd.image.name";
const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";
const ARCHIVE_SUFFIXES: &[&str] = &[".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd"];

/// What [`ContentStore::import_dir`] did.
#[derive(Debug, Default)]
pub struct ImportReport {
    /// References imported (or re-tagged).
    pub imported: Vec<String>,
    /// Archives skipped because they were imported before and are unchanged.
    pub unchanged: Vec<PathBuf>,
    /// Archives that could not be imported.
    pub failed: Vec<(PathBuf, ImageError)>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
    annotations: BTreeMap<String, String>,
    platform: Option<Platform>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(default)]
struct Platform {
    architecture: String,
    os: String,
}

/// An OCI index or image manifest (or Docker manifest list / manifest).
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Document {
    media_type: String,
    manifests: Option<Vec<Descriptor>>,
    config: Option<Descriptor>,
    layers: Vec<Descriptor>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
struct DockerEntry {
    config: String,
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// An archive unpacked into a staging directory.
struct Staged {
    root: PathBuf,
    /// Symlinks and hardlinks in the archive: path → target, both relative to the root.
    links: HashMap<PathBuf, PathBuf>,
}

impl Staged {
    fn extract(archive: &Path, root: &Path) -> Result<Self, ArchiveError> {
        let file = File::open(archive).map_err(ArchiveError::Io)?;
        let mut tar = tar::Archive::new(decompressed(file).map_err(ArchiveError::Io)?);
        let mut links = HashMap::new();
        for entry in tar.entries().map_err(ArchiveError::Io)? {
            let mut entry = entry.map_err(ArchiveError::Io)?;
            let raw = entry.path().map_err(ArchiveError::Io)?.into_owned();
            let Some(rel) = clean_relative(&raw) else {
                return Err(ArchiveError::Escapes(raw));
            };
            if rel.as_os_str().is_empty() {
                continue;
            }
            let kind = entry.header().entry_type();
            if kind.is_dir() {
                fs::create_dir_all(root.join(&rel)).map_err(ArchiveError::Io)?;
            } else if kind.is_symlink() || kind.is_hard_link() {
                let Some(target) = entry.link_name().map_err(ArchiveError::Io)? else {
                    continue;
                };
                let joined = if kind.is_symlink() && !target.is_absolute() {
                    rel.parent().unwrap_or(Path::new("")).join(&target)
                } else {
                    target.into_owned()
                };
                if let Some(target) = clean_relative(&joined) {
                    links.insert(rel, target);
                }
            } else if kind.is_file() || kind.is_contiguous() {
                let dest = root.join(&rel);
                if let Some(parent) = dest.parent() {
                    fs::create_dir_all(parent).map_err(ArchiveError::Io)?;
                }
                let mut out = File::create(&dest).map_err(ArchiveError::Io)?;
                if let Err(source) = io::copy(&mut entry, &mut out) {
                    return Err(ArchiveError::Extract { path: rel, source });
                }
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            links,
        })
    }

    /// The staged file for `rel`, following the archive's links.
    fn path(&self, rel: &str) -> Result<PathBuf, ArchiveError> {
        let mut current = clean_relative(Path::new(rel))
            .ok_or_else(|| ArchiveError::InvalidPath(rel.to_string()))?;
        for _ in 0..16 {
            match self.links.get(&current) {
                Some(target) => current = target.clone(),
                None => {
                    let path = self.root.join(&current);
                    return if path.is_file() {
                        Ok(path)
                    } else {
                        Err(ArchiveError::Missing(rel.to_string()))
                    };
                }
            }
        }
        Err(ArchiveError::LinkLoop(rel.to_string()))
    }

    fn blob_path(&self, digest: &str) -> Result<PathBuf, ArchiveError> {
        let hex = sha256_hex(digest)
            .ok_or_else(|| ArchiveError::UnsupportedDigest(digest.to_string()))?;
        self.path(&format!("blobs/sha256/{hex}"))
    }

    /// A small blob, verified against its digest.
    fn read_blob(&self, digest: &str) -> Result<Vec<u8>, ArchiveError> {
        let data = fs::read(self.blob_path(digest)?).map_err(ArchiveError::Io)?;
        let actual = sha256_of(&data);
        if actual != digest {
            return Err(ArchiveError::BlobDigest {
                digest: digest.to_string(),
                actual,
            });
        }
        Ok(data)
    }

    fn has(&self, rel: &str) -> bool {
        self.path(rel).is_ok()
    }
}

/// An image found in an archive, ready to be recorded under its names.
struct Found {
    names: Vec<String>,
    record: ImageRecord,
}

impl ContentStore {
    /// Imports every archive in `dir` (sorted by name); a missing directory imports nothing.
    /// Failures are reported per archive and do not stop the others. Blocking.
    pub fn import_dir(&self, dir: &Path) -> ImportReport {
        let mut report = ImportReport::default();
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return report,
            Err(e) => {
                report
                    .failed
                    .push((dir.to_path_buf(), ImageError::store(dir, e)));
                return report;
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().to_lowercase());
                name.is_some_and(|n| ARCHIVE_SUFFIXES.iter().any(|s| n.ends_with(s))) && p.is_file()
            })
            .collect();
        paths.sort();
        for path in paths {
            let fingerprint = match fs::metadata(&path) {
                Ok(m) => format!("{}:{}", m.len(), m.mtime_nsec() + m.mtime() * 1_000_000_000),
                Err(e) => {
                    report
                        .failed
                        .push((path.clone(), ImageError::store(&path, e)));
                    continue;
                }
            };
            let key = path.to_string_lossy().into_owned();
            let previous = self.snapshot().imported.get(&key).cloned();
            if let Some(prev) = previous
                && prev.fingerprint == fingerprint
                && prev.references.iter().all(|r| self.get(r).is_some())
            {
                report.unchanged.push(path);
                continue;
            }
            match self.import_archive(&path) {
                Ok(references) => {
                    tracing::info!(archive = %path.display(), images = ?references, "imported image archive");
                    let recorded = self.update(|index| {
                        index.imported.insert(
                            key,
                            ImportRecord {
                                fingerprint,
                                references: references.clone(),
                            },
                        );
                    });
                    if let Err(e) = recorded {
                        report.failed.push((path, e));
                        continue;
                    }
                    report.imported.extend(references);
                }
                Err(e) => {
                    tracing::warn!(archive = %path.display(), error = %e, "cannot import image archive");
                    report.failed.push((path, e));
                }
            }
        }
        report
    }

    /// Imports one archive; returns the references it now provides. Blocking.
    pub fn import_archive(&self, path: &Path) -> Result<Vec<String>, ImageError> {
        let fail = |source: ArchiveError| ImageError::Import {
            path: path.to_path_buf(),
            source,
        };
        let (staging, _cleanup) = self.staging_dir("import")?;
        let staged = Staged::extract(path, &staging).map_err(fail)?;
        let docker: Vec<DockerEntry> = if staged.has("manifest.json") {
            let data = fs::read(staged.path("manifest.json").map_err(fail)?).map_err(|source| {
                fail(ArchiveError::Read {
                    file: "manifest.json".to_string(),
                    source,
                })
            })?;
            serde_json::from_slice(&data).map_err(|source| {
                fail(ArchiveError::Json {
                    file: "manifest.json",
                    source,
                })
            })?
        } else {
            Vec::new()
        };
        let has_index = staged.has("index.json");
        if !has_index && docker.is_empty() {
            return Err(fail(ArchiveError::NotAnArchive));
        }
        let archive_name = path.display().to_string();
        let mut found = Vec::new();
        let mut done_configs = Vec::new();
        if has_index {
            found = self
                .import_oci(&staged, &docker, &archive_name)
                .map_err(|e| match e {
                    ImageError::Import { source, .. } => fail(source),
                    other => other,
                })?;
            done_configs = found
                .iter()
                .map(|f| f.record.config_digest.clone())
                .collect();
        }
        for entry in &docker {
            let f = self
                .import_docker(&staged, entry, &done_configs, &archive_name)
                .map_err(|e| match e {
                    ImageError::Import { source, .. } => fail(source),
                    other => other,
                })?;
            found.extend(f);
        }
        let mut references = Vec::new();
        for f in found {
            for name in f.names {
                let mut record = f.record.clone();
                let Ok(r) = ImageRef::parse(&name) else {
                    continue;
                };
                record.repo_digest = r.with_digest(&record.manifest_digest);
                self.put_image(&name, record)?;
                if !references.contains(&name) {
                    references.push(name);
                }
            }
        }
        Ok(references)
    }

    fn import_oci(
        &self,
        staged: &Staged,
        docker: &[DockerEntry],
        archive_name: &str,
    ) -> Result<Vec<Found>, ImageError> {
        let fail = |source: ArchiveError| ImageError::Import {
            path: PathBuf::from(archive_name),
            source,
        };
        let data = fs::read(staged.path("index.json").map_err(fail)?).map_err(|source| {
            fail(ArchiveError::Read {
                file: "index.json".to_string(),
                source,
            })
        })?;
        let index: Document = serde_json::from_slice(&data).map_err(|source| {
            fail(ArchiveError::Json {
                file: "index.json",
                source,
            })
        })?;
        let mut out = Vec::new();
        for desc in index.manifests.unwrap_or_default() {
            let top_digest = desc.digest.clone();
            let mut names: Vec<String> = Vec::new();
            let mut bare_tag = None;
            if let Some(name) = desc.annotations.get(NAME_ANNOTATION) {
                names.extend(normalize(name).ok());
            }
            if let Some(name) = desc.annotations.get(REF_NAME_ANNOTATION) {
                if name.contains(['/', ':', '@']) {
                    names.extend(normalize(name).ok());
                } else {
                    bare_tag = Some(name.clone());
                }
            }
            let Some((manifest_digest, manifest)) = self.resolve_manifest(staged, &desc, 0)? else {
                tracing::warn!(archive = %archive_name, digest = %top_digest, "no manifest for this platform, skipped");
                continue;
            };
            let config_desc = manifest
                .config
                .ok_or_else(|| fail(ArchiveError::NoConfig(manifest_digest.clone())))?;
            let config_digest = config_desc.digest.clone();
            for entry in docker {
                let digest = staged
                    .path(&entry.config)
                    .ok()
                    .and_then(|p| fs::read(p).ok())
                    .map(|d| sha256_of(&d));
                if digest.as_deref() == Some(config_digest.as_str()) {
                    names.extend(
                        entry
                            .repo_tags
                            .iter()
                            .flatten()
                            .filter_map(|t| normalize(t).ok()),
                    );
                }
            }
            names.dedup();
            if names.is_empty() {
                tracing::warn!(archive = %archive_name, digest = %top_digest, tag = ?bare_tag, "image has no name, skipped");
                continue;
            }
            let config_data = staged.read_blob(&config_digest).map_err(fail)?;
            let parsed = config::parse(&config_data).map_err(|source| {
                fail(ArchiveError::Config {
                    digest: config_digest.clone(),
                    source,
                })
            })?;
            if parsed.diff_ids.len() != manifest.layers.len() {
                return Err(fail(ArchiveError::LayerCount {
                    digest: config_digest,
                    config: parsed.diff_ids.len(),
                    manifest: manifest.layers.len(),
                }));
            }
            self.keep_config(&config_digest, &config_data)?;
            for (layer, diff_id) in manifest.layers.iter().zip(&parsed.diff_ids) {
                if self.has_layer(diff_id) {
                    continue;
                }
                let path = staged.blob_path(&layer.digest).map_err(fail)?;
                let file = File::open(&path).map_err(|e| ImageError::store(&path, e))?;
                self.unpack_layer(&names[0], file, Some(&layer.digest), diff_id)?;
            }
            out.push(Found {
                names,
                record: ImageRecord {
                    repo_digest: String::new(),
                    manifest_digest: top_digest,
                    image_manifest_digest: manifest_digest,
                    config_digest,
                    layers: parsed.diff_ids,
                    config: parsed.config,
                    last_used: now_secs(),
                },
            });
        }
        Ok(out)
    }

    /// Follows indexes down to this platform's image manifest.
    fn resolve_manifest(
        &self,
        staged: &Staged,
        desc: &Descriptor,
        depth: usize,
    ) -> Result<Option<(String, Document)>, ImageError> {
        let fail = |source: ArchiveError| ImageError::Import {
            path: staged.root.clone(),
            source,
        };
        if depth > 4 {
            return Err(fail(ArchiveError::TooDeep));
        }
        let data = staged.read_blob(&desc.digest).map_err(fail)?;
        let doc: Document = serde_json::from_slice(&data).map_err(|source| {
            fail(ArchiveError::Manifest {
                digest: desc.digest.clone(),
                source,
            })
        })?;
        let Some(manifests) = &doc.manifests else {
            return Ok(Some((desc.digest.clone(), doc)));
        };
        let arch = host_arch();
        let pick = manifests
            .iter()
            .find(|m| {
                m.platform
                    .as_ref()
                    .is_some_and(|p| p.os == "linux" && p.architecture == arch)
            })
            .or_else(|| {
                // An index without platforms (e.g. from `skopeo copy oci-archive:`): the
                // first image manifest, if it is the only one.
                (manifests.len() == 1 && manifests[0].platform.is_none()).then(|| &manifests[0])
            });
        match pick {
            Some(m) => self.resolve_manifest(staged, m, depth + 1),
            None => Ok(None),
        }
    }

    fn import_docker(
        &self,
        staged: &Staged,
        entry: &DockerEntry,
        done_configs: &[String],
        archive_name: &str,
    ) -> Result<Option<Found>, ImageError> {
        let fail = |source: ArchiveError| ImageError::Import {
            path: PathBuf::from(archive_name),
            source,
        };
        let config_data =
            fs::read(staged.path(&entry.config).map_err(fail)?).map_err(|source| {
                fail(ArchiveError::Read {
                    file: entry.config.clone(),
                    source,
                })
            })?;
        let config_digest = sha256_of(&config_data);
        if done_configs.contains(&config_digest) {
            return Ok(None);
        }
        let names: Vec<String> = entry
            .repo_tags
            .iter()
            .flatten()
            .filter_map(|t| match normalize(t) {
                Ok(n) => Some(n),
                Err(e) => {
                    tracing::warn!(archive = %archive_name, tag = %t, error = %e, "invalid RepoTag, skipped");
                    None
                }
            })
            .collect();
        if names.is_empty() {
            tracing::warn!(archive = %archive_name, config = %config_digest, "image has no RepoTags, skipped");
            return Ok(None);
        }
        let parsed = config::parse(&config_data).map_err(|source| {
            fail(ArchiveError::DockerConfig {
                file: entry.config.clone(),
                source,
            })
        })?;
        if parsed.diff_ids.len() != entry.layers.len() {
            return Err(fail(ArchiveError::DockerLayerCount {
                file: entry.config.clone(),
                config: parsed.diff_ids.len(),
                manifest: entry.layers.len(),
            }));
        }
        self.keep_config(&config_digest, &config_data)?;
        let mut layer_descs = Vec::new();
        for (layer, diff_id) in entry.layers.iter().zip(&parsed.diff_ids) {
            let path = staged.path(layer).map_err(fail)?;
            let size = fs::metadata(&path)
                .map_err(|e| ImageError::store(&path, e))?
                .len();
            layer_descs.push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": diff_id,
                "size": size,
            }));
            if !self.has_layer(diff_id) {
                let file = File::open(&path).map_err(|e| ImageError::store(&path, e))?;
                self.unpack_layer(&names[0], file, None, diff_id)?;
            }
        }
        // The OCI manifest this image would have, for a stable repo digest.
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config_data.len(),
            },
            "layers": layer_descs,
        });
        let manifest_digest = sha256_of(manifest.to_string().as_bytes());
        Ok(Some(Found {
            names,
            record: ImageRecord {
                repo_digest: String::new(),
                manifest_digest: manifest_digest.clone(),
                image_manifest_digest: manifest_digest,
                config_digest,
                layers: parsed.diff_ids,
                config: parsed.config,
                last_used: now_secs(),
            },
        }))
    }

    fn keep_config(&self, digest: &str, data: &[u8]) -> Result<(), ImageError> {
        if self.has_blob(digest) {
            return Ok(());
        }
        match self.put_blob(digest, data)? {
            Ok(()) => Ok(()),
            Err(m) => Err(ImageError::Import {
                path: self.root().to_path_buf(),
                source: ArchiveError::ConfigDigest {
                    digest: digest.to_string(),
                    actual: m.actual,
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::layer::tests::{TarBuilder, gzip};

    /// A tarball of `files` (path, content) and `symlinks` (path, target).
    fn archive(files: &[(&str, Vec<u8>)], symlinks: &[(&str, &str)]) -> Vec<u8> {
        let mut t = TarBuilder::new();
        for (p, d) in files {
            t = t.file(p, d, 0o644);
        }
        for (p, target) in symlinks {
            t = t.symlink(p, target);
        }
        t.finish()
    }

    fn config_json(diff_ids: &[String]) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "architecture": host_arch(), "os": "linux",
            "config": {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }))
        .unwrap()
    }

    fn blob_name(digest: &str) -> String {
        format!("blobs/sha256/{}", sha256_hex(digest).unwrap())
    }

    /// An OCI layout archive with one gzip layer, named by `annotations`.
    fn oci_layout(annotations: serde_json::Value, via_index: bool) -> (Vec<u8>, String) {
        let layer_tar = TarBuilder::new().file("bin/sh", b"shell", 0o755).finish();
        let layer = gzip(&layer_tar);
        let diff_id = sha256_of(&layer_tar);
        let config = config_json(std::slice::from_ref(&diff_id));
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": sha256_of(&config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": sha256_of(&layer), "size": layer.len()}],
        }))
        .unwrap();
        let mut files = vec![
            (blob_name(&sha256_of(&layer)), layer.clone()),
            (blob_name(&sha256_of(&config)), config.clone()),
            (blob_name(&sha256_of(&manifest)), manifest.clone()),
        ];
        let mut top = serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": sha256_of(&manifest), "size": manifest.len(),
        });
        if via_index {
            let nested = serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [
                    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                     "digest": sha256_of(b"other arch"), "size": 1,
                     "platform": {"architecture": "riscv-nope", "os": "linux"}},
                    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                     "digest": sha256_of(&manifest), "size": manifest.len(),
                     "platform": {"architecture": host_arch(), "os": "linux"}},
                ],
            }))
            .unwrap();
            top = serde_json::json!({
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "digest": sha256_of(&nested), "size": nested.len(),
            });
            files.push((blob_name(&sha256_of(&nested)), nested));
        }
        top["annotations"] = annotations;
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "manifests": [top],
        }))
        .unwrap();
        let top_digest = top["digest"].as_str().unwrap().to_string();
        files.push(("index.json".into(), index));
        files.push((
            "oci-layout".into(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ));
        let files: Vec<(&str, Vec<u8>)> =
            files.iter().map(|(p, d)| (p.as_str(), d.clone())).collect();
        (archive(&files, &[]), top_digest)
    }

    #[test]
    fn oci_layout_import_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let images = dir.path().join("images");
        fs::create_dir(&images).unwrap();
        let (tar, top) = oci_layout(
            serde_json::json!({"org.opencontainers.image.ref.name": "example.com/app:1.0"}),
            true,
        );
        fs::write(images.join("app.tar.gz"), gzip(&tar)).unwrap();
        fs::write(images.join("notes.txt"), b"ignored").unwrap();
        let store = ContentStore::open(dir.path().join("store")).unwrap();

        let report = store.import_dir(&images);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!(report.imported, vec!["example.com/app:1.0"]);
        let image = store.get("example.com/app:1.0").unwrap();
        assert_eq!(image.repo_digest, format!("example.com/app@{top}"));
        assert_eq!(image.config.cmd, vec!["/bin/sh"]);
        assert_eq!(fs::read(image.layers[0].join("bin/sh")).unwrap(), b"shell");
        assert_eq!(
            fs::read_dir(dir.path().join("store/tmp")).unwrap().count(),
            0
        );

        // Again: unchanged, nothing re-imported.
        let report = store.import_dir(&images);
        assert!(report.imported.is_empty());
        assert_eq!(report.unchanged.len(), 1);
        // After a restart too.
        drop(store);
        let store = ContentStore::open(dir.path().join("store")).unwrap();
        assert_eq!(store.import_dir(&images).unchanged.len(), 1);
        // A missing directory imports nothing.
        assert!(
            store
                .import_dir(&dir.path().join("absent"))
                .imported
                .is_empty()
        );
    }

    #[test]
    fn oci_layout_names_from_containerd_annotation_or_docker_repo_tags() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path().join("store")).unwrap();
        let (tar, _) = oci_layout(
            serde_json::json!({
                "io.containerd.image.name": "docker.io/library/busybox:1.36",
                "org.opencontainers.image.ref.name": "1.36",
            }),
            false,
        );
        let path = dir.path().join("bb.tar");
        fs::write(&path, tar).unwrap();
        assert_eq!(
            store.import_archive(&path).unwrap(),
            vec!["docker.io/library/busybox:1.36"]
        );

        // A bare tag and no other name: skipped.
        let (tar, _) = oci_layout(
            serde_json::json!({"org.opencontainers.image.ref.name": "latest"}),
            false,
        );
        fs::write(&path, tar).unwrap();
        assert!(store.import_archive(&path).unwrap().is_empty());
    }

    #[test]
    fn docker_save_import() {
        let layer1 = TarBuilder::new().file("bin/busybox", b"bb", 0o755).finish();
        let layer2 = TarBuilder::new()
            .file("etc/.wh.motd", b"", 0o644)
            .file("etc/hostname", b"h", 0o644)
            .finish();
        let diff_ids = vec![sha256_of(&layer1), sha256_of(&layer2)];
        let config = config_json(&diff_ids);
        let manifest = serde_json::to_vec(&serde_json::json!([{
            "Config": "cfg.json",
            "RepoTags": ["busybox:latest", "127.0.0.1:5000/busybox:v1"],
            "Layers": ["l1/layer.tar", "l2/layer.tar", ],
        }]))
        .unwrap();
        // The second layer is a symlink to a shared one, as docker save writes duplicates.
        let tar = archive(
            &[
                ("cfg.json", config.clone()),
                ("l1/layer.tar", layer1.clone()),
                ("shared/layer.tar", layer2.clone()),
                ("manifest.json", manifest),
            ],
            &[("l2/layer.tar", "../shared/layer.tar")],
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("save.tar");
        fs::write(&path, tar).unwrap();
        let store = ContentStore::open(dir.path().join("store")).unwrap();
        let refs = store.import_archive(&path).unwrap();
        assert_eq!(
            refs,
            vec![
                "docker.io/library/busybox:latest",
                "127.0.0.1:5000/busybox:v1"
            ]
        );
        let image = store.get("busybox").unwrap();
        assert_eq!(image.id, sha256_of(&config));
        assert_eq!(image.layers.len(), 2);
        assert!(image.layers[0].join("bin/busybox").is_file());
        assert!(image.layers[1].join("etc/hostname").is_file());
        assert!(
            image
                .repo_digest
                .starts_with("docker.io/library/busybox@sha256:")
        );
        let other = store.get("127.0.0.1:5000/busybox:v1").unwrap();
        assert_eq!(other.layers, image.layers, "layers are shared");
        // Idempotent: importing again keeps one copy of each layer.
        store.import_archive(&path).unwrap();
        assert_eq!(
            fs::read_dir(dir.path().join("store/layers/sha256"))
                .unwrap()
                .count(),
            2
        );
    }

    #[test]
    fn staged_lookups_fail_with_their_reason() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("present"), b"x").unwrap();
        let links = HashMap::from([
            (PathBuf::from("a"), PathBuf::from("b")),
            (PathBuf::from("b"), PathBuf::from("a")),
        ]);
        let staged = Staged {
            root: d.path().to_path_buf(),
            links,
        };
        assert!(staged.has("present"));
        let e = staged.path("../x").unwrap_err();
        assert!(matches!(e, ArchiveError::InvalidPath(_)), "{e:?}");
        assert_eq!(e.to_string(), r#"invalid path "../x""#);
        let e = staged.path("absent").unwrap_err();
        assert!(matches!(e, ArchiveError::Missing(_)), "{e:?}");
        assert_eq!(e.to_string(), "absent is missing from the archive");
        let e = staged.path("a").unwrap_err();
        assert!(matches!(e, ArchiveError::LinkLoop(_)), "{e:?}");
        assert_eq!(e.to_string(), "a: too many levels of links");
        let e = staged.blob_path("md5:00").unwrap_err();
        assert!(matches!(e, ArchiveError::UnsupportedDigest(_)), "{e:?}");
        assert_eq!(e.to_string(), r#"unsupported digest "md5:00""#);

        let digest = sha256_of(b"good");
        let blob = d.path().join(blob_name(&digest));
        fs::create_dir_all(blob.parent().unwrap()).unwrap();
        fs::write(&blob, b"evil").unwrap();
        let e = staged.read_blob(&digest).unwrap_err();
        assert!(matches!(e, ArchiveError::BlobDigest { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("blob {digest} has digest {}", sha256_of(b"evil"))
        );
    }

    #[test]
    fn bad_archives_fail_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path().join("store")).unwrap();
        let path = dir.path().join("junk.tar");
        fs::write(&path, archive(&[("hello", b"x".to_vec())], &[])).unwrap();
        let err = store.import_archive(&path).unwrap_err();
        assert!(
            matches!(&err, ImageError::Import { path: p, source: ArchiveError::NotAnArchive } if *p == path),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "failed to import image archive {}: neither an OCI image layout (index.json) \
                 nor a docker save archive (manifest.json)",
                path.display()
            )
        );

        // A corrupted layer blob in an OCI layout is a digest mismatch.
        let (tar, _) = oci_layout(
            serde_json::json!({"io.containerd.image.name": "example.com/x:1"}),
            false,
        );
        let mut entries = Vec::new();
        let mut a = tar::Archive::new(&tar[..]);
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let p = e.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            io::Read::read_to_end(&mut e, &mut data).unwrap();
            entries.push((p, data));
        }
        // The layer is the first blob written by `oci_layout`.
        let last = entries[0].1.len() - 1;
        entries[0].1[last] ^= 0xff;
        let files: Vec<(&str, Vec<u8>)> = entries
            .iter()
            .map(|(p, d)| (p.as_str(), d.clone()))
            .collect();
        fs::write(&path, archive(&files, &[])).unwrap();
        let err = store.import_archive(&path).unwrap_err();
        assert!(
            matches!(
                err,
                ImageError::DigestMismatch { .. } | ImageError::Unpack { .. }
            ),
            "{err}"
        );
        assert!(store.get("example.com/x:1").is_none());
    }
}

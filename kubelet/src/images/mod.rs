//! Images: pulled from OCI/Docker registries, verified by digest, unpacked once into a content
//! store under the data dir, and handed to the runtime as a list of layer directories that it
//! mounts with overlayfs.
//!
//! - [`reference`]: reference normalisation (`busybox` is `docker.io/library/busybox:latest`).
//! - [`digest`]: `sha256:` digests and hashing readers/writers.
//! - [`layer`]: unpacking one layer tarball, OCI whiteouts turned into overlayfs ones.
//! - [`config`]: parsing image config blobs.
//! - [`index`]: the store's JSON index of images, written atomically.
//! - [`store`]: [`ContentStore`], blobs and unpacked layers under one root directory.
//! - [`registries`]: k3s-style `registries.yaml` and `.dockerconfigjson` credentials.
//! - [`pull`]: [`RegistryImageService`], the real [`ImageService`] pulling with `oci-client`.
//! - [`archive`]: airgap import of `docker save` and OCI layout tarballs.
//! - [`gc`]: disk usage and which images to remove.
//! - [`gc_loop`]: the kubelet's periodic image garbage collection over [`gc`].
//! - [`fake`]: [`FakeImageService`] for pod-worker tests.
//!
//! The kubelet builds one [`RegistryImageService`] at start:
//!
//! ```no_run
//! # async fn start(data_dir: &std::path::Path) -> Result<(), k1s_kubelet::images::ImageError> {
//! use k1s_kubelet::images::{RegistriesConfig, RegistryImageService};
//! // k3s reads /etc/rancher/k3s/registries.yaml; a missing file is an empty config.
//! let registries = RegistriesConfig::load(&data_dir.join("registries.yaml"))?;
//! let images = RegistryImageService::open(data_dir.join("agent/images-store"), registries)?;
//! let report = images.import_dir(&data_dir.join("agent/images")).await;
//! # let _ = report; Ok(()) }
//! ```

pub mod archive;
pub mod config;
pub mod digest;
pub mod fake;
pub mod gc;
pub mod gc_loop;
pub mod index;
pub mod layer;
pub mod pull;
pub mod reference;
pub mod registries;
pub mod store;

use std::path::PathBuf;

pub use archive::ImportReport;
pub use fake::FakeImageService;
pub use pull::RegistryImageService;
pub use reference::{ImageRef, normalize};
pub use registries::{RegistriesConfig, auth_from_docker_config_json};
pub use store::ContentStore;

/// `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// Registry credentials from an imagePullSecret (`kubernetes.io/dockerconfigjson`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryAuth {
    /// Registry host (and port), as in `.dockerconfigjson`'s `auths` keys, normalised.
    pub registry: String,
    pub username: String,
    pub password: String,
}

/// The parts of an image config the runtime uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `KEY=VALUE` strings.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// `user`, `uid`, `user:group` or `uid:gid`.
    pub user: Option<String>,
}

/// An image present in the content store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The normalised reference it was asked for, e.g. `docker.io/library/busybox:latest`.
    pub reference: String,
    /// `sha256:…` of the image config: the image ID (`containerStatuses[].imageID` uses
    /// `repo_digest`).
    pub id: String,
    /// `registry/repo@sha256:…` of the manifest.
    pub repo_digest: String,
    /// Unpacked layer directories, lowest first, ready to be overlayfs lower dirs.
    pub layers: Vec<PathBuf>,
    pub config: ImageConfig,
    /// Bytes on disk (unpacked).
    pub size: u64,
}

/// Pull progress, for events and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullProgress {
    /// The pull starts.
    Pulling { reference: String },
    /// A layer was fetched and verified (`done` of `total` layers, `bytes` so far).
    Layer {
        done: usize,
        total: usize,
        bytes: u64,
    },
    /// The image is present.
    Pulled {
        reference: String,
        bytes: u64,
        millis: u64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The reference does not parse.
    #[error("invalid image reference {reference:?}: {message}")]
    InvalidReference { reference: String, message: String },
    /// `imagePullPolicy: Never` and the image is not present.
    #[error("image {0:?} is not present with pull policy of Never")]
    NotPresent(String),
    /// The registry refused, does not know the image, or cannot be reached.
    #[error("failed to pull image {reference:?}: {message}")]
    Pull { reference: String, message: String },
    /// A blob's content does not match its digest.
    #[error("failed to pull image {reference:?}: digest mismatch for {digest}: got {actual}")]
    DigestMismatch {
        reference: String,
        digest: String,
        actual: String,
    },
    /// A layer could not be unpacked (a refused path, a corrupt tarball, a full disk).
    #[error("failed to pull image {reference:?}: failed to unpack layer {layer}: {message}")]
    Unpack {
        reference: String,
        layer: String,
        message: String,
    },
    /// An airgap image archive could not be imported.
    #[error("failed to import image archive {}: {source}", path.display())]
    Import {
        path: PathBuf,
        #[source]
        source: archive::ArchiveError,
    },
    /// `registries.yaml` does not parse.
    #[error("invalid registries config {}: {source}", path.display())]
    Config {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    /// Reading or writing the store failed.
    #[error("image store: {}: {source}", path.display())]
    Store {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("image store: {0}")]
    Io(#[from] std::io::Error),
}

impl ImageError {
    /// A [`ImageError::Store`] for `path`.
    pub fn store(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Store {
            path: path.into(),
            source,
        }
    }
}

/// What the pod workers need from the image store.
#[async_trait::async_trait]
pub trait ImageService: Send + Sync {
    /// Makes `reference` present as `policy` says (pulling with `auth` if needed) and returns it.
    async fn ensure(
        &self,
        reference: &str,
        policy: PullPolicy,
        auth: &[RegistryAuth],
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<Image, ImageError>;
    /// The image if present, without pulling.
    fn get(&self, reference: &str) -> Option<Image>;
    /// Every image present (for `node.status.images` and GC).
    fn list(&self) -> Vec<Image>;
    /// Removes images not in `in_use` (image IDs), least recently used first, until disk usage
    /// of the store's filesystem is below `low_percent`, if it is at or above `high_percent`;
    /// returns the bytes freed. Images used in the last two minutes are kept (see [`gc`]).
    async fn garbage_collect(
        &self,
        in_use: &[String],
        high_percent: u8,
        low_percent: u8,
    ) -> Result<u64, ImageError>;
}

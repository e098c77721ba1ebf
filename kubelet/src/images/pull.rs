//! [`RegistryImageService`]: the real [`ImageService`]. Pulls from OCI/Docker registries with
//! `oci-client` (rustls with the ring provider), through the endpoints `registries.yaml` gives,
//! into a [`ContentStore`].
//!
//! - `imagePullPolicy`: `Never` only looks in the store; `IfNotPresent` does no network IO when
//!   the image is present; `Always` asks the registry for the manifest digest (a `HEAD`) and
//!   pulls only if it changed, fetching only the config and layers not already present.
//! - Multi-arch images: the host's platform (linux/amd64 on x86_64) is picked from the index;
//!   the image's `repo_digest` is the index's digest, as containerd reports it.
//! - Every blob is hashed while it is written; a mismatch is [`ImageError::DigestMismatch`] and
//!   the blob is discarded. Layers are also checked against the config's `diff_id`s.
//! - Concurrent `ensure`s of one reference pull once (a per-reference async mutex); pulls and
//!   imports hold a shared lock that garbage collection takes exclusively, so it never removes
//!   a layer that a pull is about to record.
//! - Errors are worded for `kubectl describe`: `failed to pull image "<ref>": <why>`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::{ImageIndexEntry, OciDescriptor};
use oci_client::secrets::RegistryAuth as OciAuth;
use oci_client::{Client, Reference};

use super::archive::{ArchiveError, ImportReport};
use super::index::{ImageRecord, now_secs};
use super::reference::ImageRef;
use super::registries::{Endpoint, RegistriesConfig, auth_matches};
use super::store::ContentStore;
use super::{Image, ImageError, ImageService, PullPolicy, PullProgress, RegistryAuth, config};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
const USER_AGENT: &str = concat!("k1s-kubelet/", env!("CARGO_PKG_VERSION"));

/// Layer media types that are tarballs (plain, gzip or zstd; the content decides).
const LAYER_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
];

/// The real image service.
pub struct RegistryImageService {
    store: Arc<ContentStore>,
    registries: RegistriesConfig,
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    gc_lock: tokio::sync::RwLock<()>,
}

impl std::fmt::Debug for RegistryImageService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryImageService")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Why one attempt (one endpoint, one credential) failed.
enum Failure {
    /// Stop: no other endpoint can help (a corrupt blob, a full disk, a bad image).
    Fatal(ImageError),
    /// The registry wants other credentials.
    Unauthorized(String),
    /// This endpoint failed; the next one may work.
    Endpoint(String),
}

impl From<ImageError> for Failure {
    fn from(e: ImageError) -> Self {
        Failure::Fatal(e)
    }
}

impl RegistryImageService {
    /// An image service over `store`, reaching registries as `registries` says.
    pub fn new(store: ContentStore, registries: RegistriesConfig) -> Self {
        install_crypto_provider();
        Self {
            store: Arc::new(store),
            registries,
            in_flight: Mutex::new(HashMap::new()),
            gc_lock: tokio::sync::RwLock::new(()),
        }
    }

    /// Opens the store under `root` (see [`ContentStore::open`]).
    pub fn open(
        root: impl Into<PathBuf>,
        registries: RegistriesConfig,
    ) -> Result<Self, ImageError> {
        Ok(Self::new(ContentStore::open(root)?, registries))
    }

    pub fn store(&self) -> &Arc<ContentStore> {
        &self.store
    }

    /// Imports every image archive in `dir` (see [`ContentStore::import_dir`]); for kubelet
    /// start. A missing directory imports nothing.
    pub async fn import_dir(&self, dir: &Path) -> ImportReport {
        let _gc = self.gc_lock.read().await;
        let store = self.store.clone();
        let dir = dir.to_path_buf();
        let dir2 = dir.clone();
        match tokio::task::spawn_blocking(move || store.import_dir(&dir2)).await {
            Ok(report) => report,
            Err(e) => ImportReport {
                failed: vec![(
                    dir.clone(),
                    ImageError::Import {
                        path: dir,
                        source: ArchiveError::Task(e),
                    },
                )],
                ..ImportReport::default()
            },
        }
    }

    fn reference_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key.to_string()).or_default().clone()
    }

    fn release_reference_lock(&self, key: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        // Clones are only made under this mutex: 2 means the map's and ours, nobody waiting.
        if Arc::strong_count(&lock) == 2 {
            map.remove(key);
        }
    }

    fn touch(&self, key: &str) {
        if let Err(e) = self.store.touch(key) {
            tracing::warn!(image = %key, error = %e, "cannot record image use");
        }
    }

    async fn pull(
        &self,
        r: &ImageRef,
        auth: &[RegistryAuth],
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<Image, ImageError> {
        let key = r.to_string();
        let started = Instant::now();
        progress(PullProgress::Pulling {
            reference: key.clone(),
        });
        let mut errors = Vec::new();
        for ep in self.registries.endpoints(&r.registry) {
            let creds = credentials_for(&ep, auth);
            for (i, cred) in creds.iter().enumerate() {
                match self.pull_from(r, &ep, cred, progress).await {
                    Ok((image, bytes)) => {
                        progress(PullProgress::Pulled {
                            reference: key,
                            bytes,
                            millis: u64::try_from(started.elapsed().as_millis())
                                .unwrap_or(u64::MAX),
                        });
                        return Ok(image);
                    }
                    Err(Failure::Fatal(e)) => return Err(e),
                    Err(Failure::Unauthorized(_)) if i + 1 < creds.len() => continue,
                    Err(Failure::Unauthorized(m) | Failure::Endpoint(m)) => {
                        tracing::debug!(image = %key, endpoint = %ep.host, error = %m, "pull attempt failed");
                        errors.push(m);
                        break;
                    }
                }
            }
        }
        Err(ImageError::Pull {
            reference: key,
            message: errors.join("; "),
        })
    }

    /// One attempt; returns the image and the bytes downloaded.
    async fn pull_from(
        &self,
        r: &ImageRef,
        ep: &Endpoint,
        cred: &OciAuth,
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<(Image, u64), Failure> {
        let key = r.to_string();
        let client = client_for(ep)?;
        let oci_ref = oci_reference(r, ep);

        if let Some(local) = self.store.record(&key) {
            match client.fetch_manifest_digest(&oci_ref, cred).await {
                Ok(digest) if digest == local.manifest_digest => {
                    self.touch(&key);
                    if let Some(image) = self.store.get(&key) {
                        return Ok((image, 0));
                    }
                }
                Ok(_) => {}
                // Unreachable: the full pull would fail the same way.
                Err(e @ OciDistributionError::RequestError(_)) => return Err(classify(&key, e)),
                // Anything else: let the manifest GET say what is wrong.
                Err(_) => {}
            }
        }

        let (manifest, image_digest, list_digest) = client
            .pull_image_manifest_and_list_digest(&oci_ref, cred)
            .await
            .map_err(|e| classify(&key, e))?;
        let top_digest = list_digest.unwrap_or_else(|| image_digest.clone());
        let mut bytes = 0;

        let config_digest = manifest.config.digest.clone();
        if !self.store.has_blob(&config_digest) {
            bytes += self
                .fetch_blob(&client, &oci_ref, &manifest.config, &key)
                .await?
                .1;
        }
        let parsed = config::parse(&self.store.read_blob(&config_digest)?).map_err(|m| {
            Failure::Fatal(ImageError::Pull {
                reference: key.clone(),
                message: format!("invalid image config {config_digest}: {m}"),
            })
        })?;
        if parsed.diff_ids.len() != manifest.layers.len() {
            return Err(Failure::Fatal(ImageError::Pull {
                reference: key,
                message: format!(
                    "the image config lists {} layers but the manifest {}",
                    parsed.diff_ids.len(),
                    manifest.layers.len()
                ),
            }));
        }

        let total = manifest.layers.len();
        for (i, (desc, diff_id)) in manifest.layers.iter().zip(&parsed.diff_ids).enumerate() {
            if !LAYER_MEDIA_TYPES.contains(&desc.media_type.as_str()) {
                return Err(Failure::Fatal(ImageError::Pull {
                    reference: key,
                    message: format!(
                        "layer {} has unsupported media type {:?}",
                        desc.digest, desc.media_type
                    ),
                }));
            }
            if !self.store.has_layer(diff_id) {
                let blob_path = if self.store.has_blob(&desc.digest) {
                    self.store.blob_path(&desc.digest)?
                } else {
                    let (path, n) = self.fetch_blob(&client, &oci_ref, desc, &key).await?;
                    bytes += n;
                    path
                };
                let store = self.store.clone();
                let (reference, diff_id, path) = (key.clone(), diff_id.clone(), blob_path.clone());
                tokio::task::spawn_blocking(move || -> Result<u64, ImageError> {
                    let file =
                        std::fs::File::open(&path).map_err(|e| ImageError::store(&path, e))?;
                    store.unpack_layer(&reference, file, None, &diff_id)
                })
                .await
                .map_err(|e| ImageError::Io(std::io::Error::other(e)))??;
                if let Err(e) = std::fs::remove_file(&blob_path) {
                    tracing::warn!(blob = %blob_path.display(), error = %e, "cannot remove unpacked layer blob");
                }
            }
            progress(PullProgress::Layer {
                done: i + 1,
                total,
                bytes,
            });
        }

        let image = self.store.put_image(
            &key,
            ImageRecord {
                repo_digest: r.with_digest(&top_digest),
                manifest_digest: top_digest,
                image_manifest_digest: image_digest,
                config_digest,
                layers: parsed.diff_ids,
                config: parsed.config,
                last_used: now_secs(),
            },
        )?;
        Ok((image, bytes))
    }

    /// Downloads a blob into the store, hashing it as it is written.
    async fn fetch_blob(
        &self,
        client: &Client,
        oci_ref: &Reference,
        desc: &OciDescriptor,
        key: &str,
    ) -> Result<(PathBuf, u64), Failure> {
        let mismatch = |actual: String| {
            Failure::Fatal(ImageError::DigestMismatch {
                reference: key.to_string(),
                digest: desc.digest.clone(),
                actual,
            })
        };
        let mut writer = self.store.blob_writer(&desc.digest).map_err(|_| {
            Failure::Fatal(ImageError::Pull {
                reference: key.to_string(),
                message: format!("unsupported digest {:?}", desc.digest),
            })
        })?;
        let mut stream = client
            .pull_blob_stream(oci_ref, desc)
            .await
            .map_err(|e| classify(key, e))?;
        let limit = u64::try_from(desc.size).ok().filter(|s| *s > 0);
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(data) => {
                    writer.write(&data)?;
                    if let Some(limit) = limit
                        && writer.bytes() > limit
                    {
                        return Err(Failure::Fatal(ImageError::Pull {
                            reference: key.to_string(),
                            message: format!(
                                "blob {} is larger than its declared size of {limit} bytes",
                                desc.digest
                            ),
                        }));
                    }
                }
                Err(e) => {
                    let verification = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<DigestError>())
                        .is_some_and(|d| matches!(d, DigestError::VerificationError { .. }));
                    if verification {
                        return Err(mismatch(writer.digest()));
                    }
                    return Err(Failure::Endpoint(format!(
                        "fetching blob {}: {}",
                        desc.digest,
                        error_chain(&e)
                    )));
                }
            }
        }
        let n = writer.bytes();
        let path = writer.path().to_path_buf();
        match writer.commit()? {
            Ok(()) => Ok((path, n)),
            Err(m) => Err(mismatch(m.actual)),
        }
    }
}

#[async_trait::async_trait]
impl ImageService for RegistryImageService {
    async fn ensure(
        &self,
        reference: &str,
        policy: PullPolicy,
        auth: &[RegistryAuth],
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<Image, ImageError> {
        let r = ImageRef::parse(reference)?;
        let key = r.to_string();
        let lock = self.reference_lock(&key);
        let result = {
            let _pulling = lock.lock().await;
            let _gc = self.gc_lock.read().await;
            let local = self.store.get(&key);
            match (policy, local) {
                (PullPolicy::Never, None) => Err(ImageError::NotPresent(key.clone())),
                (PullPolicy::Never | PullPolicy::IfNotPresent, Some(image)) => {
                    self.touch(&key);
                    Ok(image)
                }
                // A digest names immutable content: nothing to ask the registry.
                (PullPolicy::Always, Some(image)) if r.digest.is_some() => {
                    self.touch(&key);
                    Ok(image)
                }
                _ => self.pull(&r, auth, progress).await,
            }
        };
        self.release_reference_lock(&key, lock);
        result
    }

    fn get(&self, reference: &str) -> Option<Image> {
        self.store.get(reference)
    }

    fn list(&self) -> Vec<Image> {
        self.store.list()
    }

    async fn garbage_collect(
        &self,
        in_use: &[String],
        high_percent: u8,
        low_percent: u8,
    ) -> Result<u64, ImageError> {
        let _gc = self.gc_lock.write().await;
        let store = self.store.clone();
        let in_use = in_use.to_vec();
        tokio::task::spawn_blocking(move || {
            store.garbage_collect(&in_use, high_percent, low_percent)
        })
        .await
        .map_err(|e| ImageError::Io(std::io::Error::other(e)))?
    }
}

/// Installs ring as the process's rustls provider if none is (reqwest is built without one).
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn client_for(ep: &Endpoint) -> Result<Client, Failure> {
    let mut config = ClientConfig {
        protocol: if ep.plain_http {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        accept_invalid_certificates: ep.insecure_skip_verify,
        platform_resolver: Some(Box::new(host_platform_resolver)),
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        user_agent: USER_AGENT,
        ..ClientConfig::default()
    };
    if let Some(ca) = &ep.ca_file {
        let pem = std::fs::read(ca).map_err(|e| {
            Failure::Endpoint(format!(
                "reading ca_file {} for {}: {e}",
                ca.display(),
                ep.host
            ))
        })?;
        config.extra_root_certificates.push(Certificate {
            encoding: CertificateEncoding::Pem,
            data: pem,
        });
    }
    Client::try_from(config).map_err(|e| Failure::Endpoint(error_chain(&e)))
}

/// The `oci-client` reference for `r` at `ep`: a mirror is addressed as such (`?ns=` tells
/// it which registry the image is from, as containerd does).
fn oci_reference(r: &ImageRef, ep: &Endpoint) -> Reference {
    let mut oci = match (&r.tag, &r.digest) {
        (_, Some(digest)) => {
            Reference::with_digest(r.registry.clone(), r.repository.clone(), digest.clone())
        }
        (tag, None) => Reference::with_tag(
            r.registry.clone(),
            r.repository.clone(),
            tag.clone().unwrap_or_else(|| "latest".to_string()),
        ),
    };
    if !ep.is_default {
        let host = if ep.host == super::reference::DOCKER_HUB {
            "registry-1.docker.io".to_string()
        } else {
            ep.host.clone()
        };
        oci.set_mirror_registry(host);
    }
    oci
}

/// Credentials to try at `ep`, in order: imagePullSecrets for that host, then
/// `registries.yaml`'s; anonymous if none.
fn credentials_for(ep: &Endpoint, auth: &[RegistryAuth]) -> Vec<OciAuth> {
    let mut out: Vec<OciAuth> = Vec::new();
    let secrets = auth
        .iter()
        .filter(|a| {
            auth_matches(
                &super::reference::normalize_registry_host(&a.registry),
                &ep.host,
            )
        })
        .map(|a| OciAuth::Basic(a.username.clone(), a.password.clone()));
    for cred in secrets.chain(
        ep.auth
            .iter()
            .map(|(u, p)| OciAuth::Basic(u.clone(), p.clone())),
    ) {
        if !out.contains(&cred) {
            out.push(cred);
        }
    }
    if out.is_empty() {
        out.push(OciAuth::Anonymous);
    }
    out
}

/// The OCI architecture name of this host.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Picks the linux manifest for this host's architecture from an image index.
pub fn host_platform_resolver(manifests: &[ImageIndexEntry]) -> Option<String> {
    let arch = host_arch();
    let matching = |e: &&ImageIndexEntry| {
        e.platform
            .as_ref()
            .is_some_and(|p| p.os.to_string() == "linux" && p.architecture.to_string() == arch)
    };
    let preferred_variant = match arch {
        "arm64" => Some("v8"),
        "arm" => Some("v7"),
        _ => None,
    };
    manifests
        .iter()
        .filter(matching)
        .find(|e| {
            let variant = e.platform.as_ref().and_then(|p| p.variant.as_deref());
            variant.is_none() || variant == preferred_variant
        })
        .or_else(|| manifests.iter().find(matching))
        .map(|e| e.digest.clone())
}

/// What a user should read for a registry error.
fn classify(key: &str, e: OciDistributionError) -> Failure {
    match e {
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            Failure::Fatal(ImageError::DigestMismatch {
                reference: key.to_string(),
                digest: expected,
                actual,
            })
        }
        OciDistributionError::UnauthorizedError { url } => {
            Failure::Unauthorized(format!("{url}: unauthorized: authentication required"))
        }
        OciDistributionError::AuthenticationFailure(reason) => {
            Failure::Unauthorized(format!("authentication failed: {}", reason.trim()))
        }
        OciDistributionError::RegistryError { envelope, url } => {
            let unauthorized = envelope
                .errors
                .iter()
                .any(|e| matches!(e.code, OciErrorCode::Unauthorized | OciErrorCode::Denied));
            let messages: Vec<String> = envelope
                .errors
                .iter()
                .map(|e| {
                    if e.message.is_empty() {
                        format!("{:?}", e.code).to_lowercase()
                    } else {
                        e.message.clone()
                    }
                })
                .collect();
            let message = format!("{url}: {}", messages.join("; "));
            if unauthorized {
                Failure::Unauthorized(message)
            } else {
                Failure::Endpoint(message)
            }
        }
        OciDistributionError::ServerError { code, url, message } => {
            let status = http_status_text(code);
            let message = message.trim();
            let message = if message.is_empty() {
                format!("{url}: {code} {status}")
            } else {
                format!("{url}: {code} {status}: {message}")
            };
            if code == 401 || code == 403 {
                Failure::Unauthorized(message)
            } else {
                Failure::Endpoint(message)
            }
        }
        OciDistributionError::ImageManifestNotFoundError(m) if m.contains("platform") => {
            Failure::Fatal(ImageError::Pull {
                reference: key.to_string(),
                message: format!(
                    "no matching manifest for linux/{} in the manifest list entries",
                    host_arch()
                ),
            })
        }
        other => Failure::Endpoint(error_chain(&other)),
    }
}

fn http_status_text(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// An error and its sources, `: `-separated, skipping a source its parent already quotes.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::manifest::Platform;

    fn entry(arch: &str, variant: Option<&str>, digest: &str) -> ImageIndexEntry {
        ImageIndexEntry {
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            digest: digest.into(),
            size: 1,
            platform: Some(Platform {
                architecture: arch.into(),
                os: "linux".into(),
                os_version: None,
                os_features: None,
                variant: variant.map(str::to_string),
                features: None,
            }),
            annotations: None,
            artifact_type: None,
        }
    }

    #[test]
    fn picks_host_platform() {
        let index = vec![
            entry("arm", Some("v7"), "sha256:arm"),
            entry("s390x", None, "sha256:s390x"),
            entry("amd64", None, "sha256:amd64"),
            entry("arm64", Some("v8"), "sha256:arm64"),
        ];
        let want = format!("sha256:{}", host_arch());
        assert_eq!(host_platform_resolver(&index), Some(want));
        assert_eq!(host_platform_resolver(&index[1..2]), None);
    }

    #[test]
    fn credentials_order() {
        let ep = Endpoint {
            host: "127.0.0.1:5000".into(),
            plain_http: true,
            insecure_skip_verify: false,
            ca_file: None,
            auth: Some(("cfg".into(), "p".into())),
            is_default: true,
        };
        let auth = vec![
            RegistryAuth {
                registry: "docker.io".into(),
                username: "hub".into(),
                password: "x".into(),
            },
            RegistryAuth {
                registry: "http://127.0.0.1:5000".into(),
                username: "secret".into(),
                password: "s".into(),
            },
        ];
        assert_eq!(
            credentials_for(&ep, &auth),
            vec![
                OciAuth::Basic("secret".into(), "s".into()),
                OciAuth::Basic("cfg".into(), "p".into())
            ]
        );
        let anon = Endpoint { auth: None, ..ep };
        assert_eq!(credentials_for(&anon, &[]), vec![OciAuth::Anonymous]);
    }

    #[test]
    fn mirrors_are_addressed_with_their_host() {
        let r = ImageRef::parse("busybox").unwrap();
        let mirror = Endpoint {
            host: "mirror.example.com".into(),
            plain_http: false,
            insecure_skip_verify: false,
            ca_file: None,
            auth: None,
            is_default: false,
        };
        let oci = oci_reference(&r, &mirror);
        assert_eq!(oci.resolve_registry(), "mirror.example.com");
        assert_eq!(oci.repository(), "library/busybox");
        assert_eq!(oci.namespace(), Some("docker.io"));
        let default = Endpoint {
            host: "docker.io".into(),
            is_default: true,
            ..mirror
        };
        assert_eq!(oci_reference(&r, &default).namespace(), None);
    }
}

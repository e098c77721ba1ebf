//! [`FakeImageService`]: an in-memory [`ImageService`] for pod-worker tests. Images are
//! registered by reference with an [`ImageConfig`]; each gets one empty layer directory under
//! a root the test chooses. Images are either present already (`add_local`) or only in the
//! fake "registry" (`add_remote`, present after a pull). Pulls, failures and garbage
//! collection are recorded or scripted; no network, no disk beyond the empty directories.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use super::digest::sha256_of;
use super::reference::ImageRef;
use super::{Image, ImageConfig, ImageError, ImageService, PullPolicy, PullProgress, RegistryAuth};

#[derive(Default)]
struct State {
    local: BTreeMap<String, Image>,
    remote: BTreeMap<String, Image>,
    pull_errors: BTreeMap<String, String>,
    pulls: Vec<String>,
    ensures: Vec<(String, PullPolicy)>,
    auths: Vec<Vec<RegistryAuth>>,
    usage_percent: u8,
    collected: Vec<String>,
}

/// An in-memory image service.
pub struct FakeImageService {
    layer_root: PathBuf,
    state: Mutex<State>,
}

impl FakeImageService {
    /// A fake whose empty layer directories go under `layer_root` (e.g. a test's tempdir).
    pub fn new(layer_root: impl Into<PathBuf>) -> Self {
        Self {
            layer_root: layer_root.into(),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn image(&self, reference: &str, config: ImageConfig) -> Result<Image, ImageError> {
        let r = ImageRef::parse(reference)?;
        let key = r.to_string();
        let id = sha256_of(format!("{key} {config:?}").as_bytes());
        let layer = self.layer_root.join(
            id.trim_start_matches("sha256:")
                .get(..16)
                .unwrap_or("layer"),
        );
        std::fs::create_dir_all(&layer).map_err(|e| ImageError::store(&layer, e))?;
        Ok(Image {
            repo_digest: r.with_digest(&sha256_of(format!("manifest {key}").as_bytes())),
            reference: key,
            id,
            layers: vec![layer],
            config,
            size: 0,
        })
    }

    /// Registers an image as present (no pull needed).
    pub fn add_local(&self, reference: &str, config: ImageConfig) -> Result<Image, ImageError> {
        let image = self.image(reference, config)?;
        self.state()
            .local
            .insert(image.reference.clone(), image.clone());
        Ok(image)
    }

    /// Registers an image in the fake registry: present once pulled.
    pub fn add_remote(&self, reference: &str, config: ImageConfig) -> Result<Image, ImageError> {
        let image = self.image(reference, config)?;
        self.state()
            .remote
            .insert(image.reference.clone(), image.clone());
        Ok(image)
    }

    /// Makes pulls of `reference` fail with `message` (until [`Self::clear_pull_error`]).
    pub fn fail_pulls(&self, reference: &str, message: &str) {
        let key =
            ImageRef::parse(reference).map_or_else(|_| reference.to_string(), |r| r.to_string());
        self.state().pull_errors.insert(key, message.to_string());
    }

    pub fn clear_pull_error(&self, reference: &str) {
        let key =
            ImageRef::parse(reference).map_or_else(|_| reference.to_string(), |r| r.to_string());
        self.state().pull_errors.remove(&key);
    }

    /// Normalised references pulled (attempted), in order.
    pub fn pulls(&self) -> Vec<String> {
        self.state().pulls.clone()
    }

    /// Every `ensure` call: normalised reference and policy.
    pub fn ensures(&self) -> Vec<(String, PullPolicy)> {
        self.state().ensures.clone()
    }

    /// The credentials passed to each `ensure`.
    pub fn auths(&self) -> Vec<Vec<RegistryAuth>> {
        self.state().auths.clone()
    }

    /// Removes a present image.
    pub fn remove(&self, reference: &str) {
        if let Ok(r) = ImageRef::parse(reference) {
            self.state().local.remove(&r.to_string());
        }
    }

    /// The disk usage garbage collection sees (default 0%).
    pub fn set_usage_percent(&self, percent: u8) {
        self.state().usage_percent = percent;
    }

    /// References removed by garbage collection.
    pub fn collected(&self) -> Vec<String> {
        self.state().collected.clone()
    }
}

#[async_trait::async_trait]
impl ImageService for FakeImageService {
    async fn ensure(
        &self,
        reference: &str,
        policy: PullPolicy,
        auth: &[RegistryAuth],
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<Image, ImageError> {
        let key = ImageRef::parse(reference)?.to_string();
        let mut state = self.state();
        state.ensures.push((key.clone(), policy));
        state.auths.push(auth.to_vec());
        let local = state.local.get(&key).cloned();
        match (policy, local) {
            (PullPolicy::Never, None) => return Err(ImageError::NotPresent(key)),
            (PullPolicy::Never | PullPolicy::IfNotPresent, Some(image)) => return Ok(image),
            _ => {}
        }
        state.pulls.push(key.clone());
        drop(state);
        progress(PullProgress::Pulling {
            reference: key.clone(),
        });
        let mut state = self.state();
        if let Some(message) = state.pull_errors.get(&key) {
            return Err(ImageError::Pull {
                reference: key,
                message: message.clone(),
            });
        }
        let Some(image) = state
            .remote
            .get(&key)
            .or_else(|| state.local.get(&key))
            .cloned()
        else {
            return Err(ImageError::Pull {
                reference: key,
                message: "manifest unknown".to_string(),
            });
        };
        state.local.insert(key.clone(), image.clone());
        drop(state);
        progress(PullProgress::Layer {
            done: 1,
            total: 1,
            bytes: 0,
        });
        progress(PullProgress::Pulled {
            reference: key,
            bytes: 0,
            millis: 0,
        });
        Ok(image)
    }

    fn get(&self, reference: &str) -> Option<Image> {
        let key = ImageRef::parse(reference).ok()?.to_string();
        self.state().local.get(&key).cloned()
    }

    fn list(&self) -> Vec<Image> {
        self.state().local.values().cloned().collect()
    }

    async fn garbage_collect(
        &self,
        in_use: &[String],
        high_percent: u8,
        _low_percent: u8,
    ) -> Result<u64, ImageError> {
        let mut state = self.state();
        if state.usage_percent < high_percent {
            return Ok(0);
        }
        let victims: Vec<String> = state
            .local
            .iter()
            .filter(|(_, image)| !in_use.contains(&image.id))
            .map(|(k, _)| k.clone())
            .collect();
        let mut freed = 0;
        for key in victims {
            if let Some(image) = state.local.remove(&key) {
                freed += image.size;
            }
            state.collected.push(key);
        }
        Ok(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn policies_and_recording() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeImageService::new(dir.path());
        let cfg = ImageConfig {
            cmd: vec!["/pause".into()],
            ..ImageConfig::default()
        };
        let pause = fake
            .add_local("registry.k8s.io/pause:3.10", cfg.clone())
            .unwrap();
        assert!(pause.layers[0].is_dir());
        fake.add_remote("busybox", ImageConfig::default()).unwrap();
        let none = |_: PullProgress| {};

        // Present: IfNotPresent does not pull; Always does.
        fake.ensure(
            "registry.k8s.io/pause:3.10",
            PullPolicy::IfNotPresent,
            &[],
            &none,
        )
        .await
        .unwrap();
        assert!(fake.pulls().is_empty());
        fake.ensure("registry.k8s.io/pause:3.10", PullPolicy::Always, &[], &none)
            .await
            .unwrap();
        assert_eq!(fake.pulls(), vec!["registry.k8s.io/pause:3.10"]);

        // Remote only: Never fails, IfNotPresent pulls, then it is present.
        let err = fake
            .ensure("busybox", PullPolicy::Never, &[], &none)
            .await
            .unwrap_err();
        assert!(matches!(err, ImageError::NotPresent(_)));
        let events = Mutex::new(Vec::new());
        let record = |p: PullProgress| events.lock().unwrap().push(p);
        let image = fake
            .ensure("busybox", PullPolicy::IfNotPresent, &[], &record)
            .await
            .unwrap();
        assert_eq!(image.reference, "docker.io/library/busybox:latest");
        assert_eq!(events.lock().unwrap().len(), 3);
        assert!(fake.get("docker.io/library/busybox").is_some());

        // Scripted failure, and unknown images.
        fake.fail_pulls("busybox", "connection refused");
        let err = fake
            .ensure("busybox", PullPolicy::Always, &[], &none)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("connection refused"), "{err}");
        let err = fake
            .ensure("nope", PullPolicy::IfNotPresent, &[], &none)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("docker.io/library/nope:latest"),
            "{err}"
        );

        // GC removes what is not in use once usage is high.
        assert_eq!(fake.garbage_collect(&[], 85, 80).await.unwrap(), 0);
        fake.set_usage_percent(90);
        fake.garbage_collect(std::slice::from_ref(&pause.id), 85, 80)
            .await
            .unwrap();
        assert_eq!(fake.collected(), vec!["docker.io/library/busybox:latest"]);
        assert_eq!(fake.list().len(), 1);
    }
}

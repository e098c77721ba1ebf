//! Image references, normalised as Docker and containerd do: `busybox` is
//! `docker.io/library/busybox:latest`, a reference without a tag or digest gets `:latest`,
//! `name@sha256:…` keeps its digest, and registry host names as found in `.dockerconfigjson`
//! and `registries.yaml` (`https://index.docker.io/v1/`) are folded to the same form.

use std::fmt;

use super::ImageError;
use super::digest::sha256_hex;

/// Docker Hub, as written in normalised references.
pub const DOCKER_HUB: &str = "docker.io";

/// A parsed, normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    /// `docker.io`, `127.0.0.1:5000`, `registry.example.com`.
    pub registry: String,
    /// `library/busybox`.
    pub repository: String,
    /// `latest` when neither a tag nor a digest was given.
    pub tag: Option<String>,
    /// `sha256:<hex>`.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses and normalises `reference`.
    pub fn parse(reference: &str) -> Result<Self, ImageError> {
        let invalid = |message: &str| ImageError::InvalidReference {
            reference: reference.to_string(),
            message: message.to_string(),
        };
        if reference.is_empty() {
            return Err(invalid("empty reference"));
        }
        if reference
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid("contains whitespace"));
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => {
                if sha256_hex(digest).is_none() {
                    return Err(invalid(
                        "the digest must be sha256: followed by 64 lowercase hex digits",
                    ));
                }
                (rest, Some(digest.to_string()))
            }
            None => (reference, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let i = last_slash + i;
                (&rest[..i], Some(&rest[i + 1..]))
            }
            None => (rest, None),
        };
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(invalid("invalid tag"));
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, path))
                if first.contains(['.', ':'])
                    || first == "localhost"
                    || first.chars().any(|c| c.is_ascii_uppercase()) =>
            {
                (first.to_string(), path.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        if !valid_host(&registry) {
            return Err(invalid("invalid registry host"));
        }
        let registry = normalize_registry_host(&registry);
        let repository = if registry == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        if repository.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(invalid("repository name must be lowercase"));
        }
        if !repository.split('/').all(valid_path_component) {
            return Err(invalid("invalid repository name"));
        }
        if registry.len() + 1 + repository.len() > 255 {
            return Err(invalid(
                "repository name must not be longer than 255 characters",
            ));
        }
        let tag = match (tag, &digest) {
            (Some(tag), _) => Some(tag.to_string()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".to_string()),
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// `registry/repository`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `registry/repository@digest`.
    pub fn with_digest(&self, digest: &str) -> String {
        format!("{}@{digest}", self.name())
    }

    /// What to ask the registry's manifest endpoint for: the digest if there is one, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// The normalised form of `reference`, e.g. `docker.io/library/busybox:latest`.
pub fn normalize(reference: &str) -> Result<String, ImageError> {
    ImageRef::parse(reference).map(|r| r.to_string())
}

/// Folds a registry as written in `.dockerconfigjson` keys, `registries.yaml` or a reference to
/// `host[:port]`: drops a scheme and path, lowercases, and maps Docker Hub's aliases
/// (`index.docker.io`, `registry-1.docker.io`, `https://index.docker.io/v1/`) to `docker.io`.
pub fn normalize_registry_host(registry: &str) -> String {
    let s = registry.trim();
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = s.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_string()
        }
        _ => host,
    }
}

fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && tag.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_path_component(component: &str) -> bool {
    let b = component.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: `.`, `_`, `__` or `-+`, always followed by an alphanumeric.
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &component[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn normalisation_table() {
        let table: &[(&str, &str)] = &[
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("library/busybox", "docker.io/library/busybox:latest"),
            ("docker.io/busybox", "docker.io/library/busybox:latest"),
            (
                "index.docker.io/library/busybox:1",
                "docker.io/library/busybox:1",
            ),
            ("bitnami/nginx:1.25", "docker.io/bitnami/nginx:1.25"),
            ("127.0.0.1:5000/busybox", "127.0.0.1:5000/busybox:latest"),
            ("127.0.0.1:5000/busybox:v1", "127.0.0.1:5000/busybox:v1"),
            ("localhost/app", "localhost/app:latest"),
            ("localhost:5000/a/b/c:t", "localhost:5000/a/b/c:t"),
            ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
            (
                "ghcr.io/org/my_app__x-y.z:1.0-rc_1",
                "ghcr.io/org/my_app__x-y.z:1.0-rc_1",
            ),
            ("quay.io/a/b-c", "quay.io/a/b-c:latest"),
        ];
        for (input, want) in table {
            assert_eq!(normalize(input).unwrap(), *want, "{input}");
        }
        assert_eq!(
            normalize(&format!("busybox@{D}")).unwrap(),
            format!("docker.io/library/busybox@{D}")
        );
        assert_eq!(
            normalize(&format!("127.0.0.1:5000/busybox:1@{D}")).unwrap(),
            format!("127.0.0.1:5000/busybox:1@{D}")
        );
    }

    #[test]
    fn invalid_references() {
        for bad in [
            "",
            "Busybox",
            "busybox:",
            "busybox@sha256:abc",
            "busybox@md5:0123",
            "a//b",
            "-a",
            "a b",
            "busybox:-x",
            "docker.io/Library/busybox",
            "a..b",
        ] {
            assert!(
                matches!(
                    ImageRef::parse(bad),
                    Err(ImageError::InvalidReference { .. })
                ),
                "{bad:?} should be invalid"
            );
        }
    }

    #[test]
    fn parts() {
        let r = ImageRef::parse("127.0.0.1:5000/team/app").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/app");
        assert_eq!(r.manifest_reference(), "latest");
        assert_eq!(r.name(), "127.0.0.1:5000/team/app");
        assert_eq!(r.with_digest(D), format!("127.0.0.1:5000/team/app@{D}"));
        let r = ImageRef::parse(&format!("busybox:1@{D}")).unwrap();
        assert_eq!(r.manifest_reference(), D);
    }

    #[test]
    fn registry_hosts() {
        for (input, want) in [
            ("https://index.docker.io/v1/", "docker.io"),
            ("index.docker.io", "docker.io"),
            ("registry-1.docker.io", "docker.io"),
            ("docker.io", "docker.io"),
            ("http://127.0.0.1:5000", "127.0.0.1:5000"),
            ("Registry.Example.com:443/v2/", "registry.example.com:443"),
        ] {
            assert_eq!(normalize_registry_host(input), want, "{input}");
        }
    }
}

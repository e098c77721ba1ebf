//! The projected volume plugin (`kubernetes.io~projected`): serviceAccountToken, configMap,
//! secret and downwardAPI sources merged into one atomic-writer payload (on a tmpfs, as
//! upstream, since it holds tokens and secrets). This is what the ServiceAccount admission's
//! `kube-api-access-*` volumes use.
//!
//! Tokens come from the TokenRequest API, bound to the pod, and are cached per pod: one is
//! requested again once 80 % of its life has passed or it is 24 hours old, as upstream's token
//! manager does (without its jitter of up to 10 s).
//!
//! Gaps: clusterTrustBundle sources are refused; the token file is not chowned to the
//! containers' common runAsUser (upstream's `FsUser`), only to the fsGroup.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k1s_api::client::{Client, ClientError, ResourceRef};
use k8s_openapi::api::core::v1::{Pod, ProjectedVolumeSource, ServiceAccountTokenProjection};
use serde_json::json;

use super::atomic_writer::{FileProjection, Payload};
use super::configmap_secret::{self, DEFAULT_MODE, Kind, file_mode};
use super::downward_api::{self, DownwardApiError};

/// Why a projected volume has no payload.
#[derive(Debug, thiserror::Error)]
pub enum ProjectedError {
    #[error(transparent)]
    Object(#[from] configmap_secret::ConfigMapSecretError),
    #[error(transparent)]
    DownwardApi(#[from] DownwardApiError),
    #[error("failed to fetch token: {0}")]
    TokenRequest(#[source] ClientError),
    #[error("failed to fetch token: the TokenRequest answer has no status.token")]
    NoToken,
    #[error("projected clusterTrustBundle sources are not supported by k1s")]
    ClusterTrustBundle,
    /// Several sources failed (upstream's aggregate: `[a, b]`).
    #[error("[{}]", super::join(.0))]
    Many(Vec<ProjectedError>),
}

/// Upstream's default `expirationSeconds` of a token projection.
pub(crate) const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// A token is requested again at the latest after this (upstream's `maxTTL`).
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

struct CachedToken {
    token: String,
    refresh_at: Instant,
}

// Never print a token.
impl std::fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedToken")
            .field("refresh_at", &self.refresh_at)
            .finish_non_exhaustive()
    }
}

/// Tokens per pod UID, per (service account, audience, expiration).
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    pods: Mutex<HashMap<String, HashMap<String, CachedToken>>>,
}

impl TokenCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, CachedToken>>> {
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fresh(&self, uid: &str, key: &str, now: Instant) -> Option<String> {
        self.lock()
            .get(uid)?
            .get(key)
            .filter(|t| now < t.refresh_at)
            .map(|t| t.token.clone())
    }

    fn put(&self, uid: &str, key: String, token: CachedToken) {
        self.lock()
            .entry(uid.to_string())
            .or_default()
            .insert(key, token);
    }

    /// When the earliest token of the pod should be requested again.
    pub(crate) fn next_refresh(&self, uid: &str) -> Option<Instant> {
        self.lock().get(uid)?.values().map(|t| t.refresh_at).min()
    }

    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// Everything about the pod a projection needs.
pub(crate) struct PodCtx<'a> {
    pub pod: &'a Pod,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub fs_group: Option<u32>,
    /// The node's allocatable, for downwardAPI limits a container does not set; read only
    /// when an item needs it (else empty).
    pub node_allocatable: k1s_api::quantity::ResourceList,
}

/// How long before expiry a token of `lifetime` is replaced, given `remaining` of it, as
/// upstream's `requiresRefresh`: at 80 % of its life, or 24 hours after it was issued.
pub(crate) fn refresh_after(lifetime: Duration, remaining: Duration) -> Duration {
    let at_80 = remaining.saturating_sub(lifetime / 5);
    let age = lifetime.saturating_sub(remaining);
    at_80.min(MAX_TTL.saturating_sub(age))
}

/// A token for the pod's service account, from the cache or the TokenRequest API.
pub(crate) async fn token(
    client: &dyn Client,
    cache: &TokenCache,
    ctx: &PodCtx<'_>,
    src: &ServiceAccountTokenProjection,
    now: Instant,
) -> Result<String, ProjectedError> {
    let sa = ctx
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    let audience = src.audience.as_deref().filter(|a| !a.is_empty());
    let expiration = src.expiration_seconds.unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let key = format!("{sa}\n{}\n{expiration}", audience.unwrap_or_default());
    if let Some(t) = cache.fresh(ctx.uid, &key, now) {
        return Ok(t);
    }
    let audiences: Vec<&str> = audience.into_iter().collect();
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": audiences,
            "expirationSeconds": expiration,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": ctx.pod.metadata.name.as_deref().unwrap_or_default(),
                "uid": ctx.uid,
            },
        },
    });
    let r = ResourceRef::new("", "v1", "serviceaccounts", Some(ctx.namespace));
    let answer = client
        .create_subresource(&r, sa, "token", body)
        .await
        .map_err(ProjectedError::TokenRequest)?;
    let token = answer["status"]["token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or(ProjectedError::NoToken)?
        .to_string();
    // The server may have changed the lifetime; its expirationTimestamp is the truth.
    let lifetime = Duration::from_secs(
        answer["spec"]["expirationSeconds"]
            .as_i64()
            .unwrap_or(expiration)
            .max(1) as u64,
    );
    let remaining = answer["status"]["expirationTimestamp"]
        .as_str()
        .and_then(k1s_api::time::parse)
        .map(|exp| {
            let left = exp.duration_since(jiff::Timestamp::now());
            Duration::try_from(left).unwrap_or(Duration::ZERO)
        })
        .unwrap_or(lifetime)
        .min(lifetime);
    cache.put(
        ctx.uid,
        key,
        CachedToken {
            token: token.clone(),
            refresh_at: now + refresh_after(lifetime, remaining),
        },
    );
    Ok(token)
}

fn aggregate(mut errors: Vec<ProjectedError>) -> Result<(), ProjectedError> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(ProjectedError::Many(errors)),
    }
}

/// The files of a projected volume, as upstream's `collectData`.
pub(crate) async fn make_payload(
    client: &dyn Client,
    cache: &TokenCache,
    ctx: &PodCtx<'_>,
    src: &ProjectedVolumeSource,
    now: Instant,
) -> Result<Payload, ProjectedError> {
    let default_mode = src.default_mode.unwrap_or(DEFAULT_MODE);
    let mut payload = Payload::new();
    let mut errors = Vec::new();
    for source in src.sources.iter().flatten() {
        if let Some(cm) = &source.config_map {
            let optional = cm.optional.unwrap_or(false);
            match configmap_secret::fetch(
                client,
                Kind::ConfigMap,
                ctx.namespace,
                &cm.name,
                optional,
            )
            .await
            {
                Ok(data) => match configmap_secret::make_payload(
                    Kind::ConfigMap,
                    &data.unwrap_or_default(),
                    cm.items.as_deref().unwrap_or_default(),
                    file_mode(None, default_mode),
                    optional,
                ) {
                    Ok(p) => payload.extend(p),
                    Err(e) => errors.push(e.into()),
                },
                Err(e) => errors.push(e.into()),
            }
        } else if let Some(s) = &source.secret {
            let optional = s.optional.unwrap_or(false);
            match configmap_secret::fetch(client, Kind::Secret, ctx.namespace, &s.name, optional)
                .await
            {
                Ok(data) => match configmap_secret::make_payload(
                    Kind::Secret,
                    &data.unwrap_or_default(),
                    s.items.as_deref().unwrap_or_default(),
                    file_mode(None, default_mode),
                    optional,
                ) {
                    Ok(p) => payload.extend(p),
                    Err(e) => errors.push(e.into()),
                },
                Err(e) => errors.push(e.into()),
            }
        } else if let Some(d) = &source.downward_api {
            match downward_api::make_payload(
                ctx.pod,
                d.items.as_deref().unwrap_or_default(),
                default_mode,
                &ctx.node_allocatable,
            ) {
                Ok(p) => payload.extend(p),
                Err(e) => errors.push(e.into()),
            }
        } else if let Some(t) = &source.service_account_token {
            // With an fsGroup the file is 0600 and the ownership change makes it 0640.
            let mode = if ctx.fs_group.is_some() {
                0o600
            } else {
                file_mode(None, default_mode)
            };
            match token(client, cache, ctx, t, now).await {
                Ok(tok) => {
                    payload.insert(
                        t.path.clone(),
                        FileProjection {
                            data: tok.into_bytes(),
                            mode,
                        },
                    );
                }
                Err(e) => errors.push(e),
            }
        } else if source.cluster_trust_bundle.is_some() {
            errors.push(ProjectedError::ClusterTrustBundle);
        }
    }
    aggregate(errors)?;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_failures_aggregate() {
        assert!(aggregate(Vec::new()).is_ok());
        let one = aggregate(vec![ProjectedError::NoToken]).unwrap_err();
        assert!(matches!(one, ProjectedError::NoToken), "{one:?}");
        let two = aggregate(vec![
            ProjectedError::ClusterTrustBundle,
            DownwardApiError::ContainerNotFound("c".into()).into(),
        ])
        .unwrap_err();
        assert_eq!(
            two.to_string(),
            "[projected clusterTrustBundle sources are not supported by k1s, container c not found]"
        );
    }

    #[test]
    fn refresh_at_80_percent_or_a_day() {
        let h = Duration::from_secs(3600);
        // A fresh one-hour token: after 48 minutes.
        assert_eq!(refresh_after(h, h), Duration::from_secs(2880));
        // Half of it left: after another 18 minutes.
        assert_eq!(refresh_after(h, h / 2), Duration::from_secs(1080));
        // Already past 80 %: now.
        assert_eq!(refresh_after(h, h / 10), Duration::ZERO);
        // A year-long token: after a day.
        let year = Duration::from_secs(365 * 86400);
        assert_eq!(refresh_after(year, year), MAX_TTL);
    }
}

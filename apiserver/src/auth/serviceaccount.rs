//! ServiceAccount tokens: the TokenRequest API (`serviceaccounts/<name>/token`) that issues
//! them, and the authenticator that accepts them.
//!
//! Tokens are JWTs signed by the server's key ([`super::jwt`]) with upstream's claims: `iss`,
//! `sub` (`system:serviceaccount:<ns>:<name>`), `aud`, `exp`/`iat`/`nbf`, `jti`, and the
//! `kubernetes.io` claim naming the namespace, the ServiceAccount and the object the token is
//! bound to (a Pod, Secret or Node, with UIDs). A token is accepted only while its
//! ServiceAccount and bound object still exist with the same UIDs, so deleting the pod revokes
//! its token, as upstream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::UserInfo;
use super::jwt::Signer;
use crate::reader::Reader;
use crate::status::ApiError;

/// The issuer (`iss`) of k1s's tokens and the default audience (k3s's default).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Default lifetime of requested tokens.
const DEFAULT_EXPIRATION: i64 = 3600;
/// Shortest lifetime a TokenRequest may ask for.
const MIN_EXPIRATION: i64 = 600;
/// Longest lifetime a TokenRequest may ask for (upstream's limit).
const MAX_EXPIRATION: i64 = 1 << 32;
/// Clock skew tolerated for `nbf`/`iat`.
const LEEWAY: i64 = 60;
/// How long a verified token's identity is reused before the objects are checked again.
const CACHE_TTL: Duration = Duration::from_secs(10);
const CACHE_MAX: usize = 4096;

/// Why a token was rejected (logged, never returned to the client).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Jwt(#[from] super::jwt::JwtError),
    #[error("token has an unknown issuer")]
    Issuer,
    #[error("token audiences do not include the API server's")]
    Audience,
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet")]
    NotYetValid,
    #[error("token lacks the kubernetes.io claims")]
    Claims,
    #[error("{0}")]
    Revoked(String),
}

/// Issues and verifies ServiceAccount tokens.
pub struct TokenAuthenticator {
    signer: Signer,
    issuer: String,
    audiences: Vec<String>,
    rest: Arc<dyn Reader>,
    cache: Mutex<HashMap<[u8; 32], (UserInfo, Instant, i64)>>,
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

use k1s_api::time::format_unix as rfc3339;

impl TokenAuthenticator {
    pub fn new(signer: Signer, rest: Arc<dyn Reader>) -> Self {
        Self {
            signer,
            issuer: DEFAULT_ISSUER.into(),
            audiences: vec![DEFAULT_ISSUER.into()],
            rest,
            cache: Mutex::default(),
        }
    }

    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    async fn get(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let res = self
            .rest
            .served("", resource)
            .ok_or_else(ApiError::no_route)?;
        self.rest.get(&res, ns, name).await
    }

    /// Answers a TokenRequest for ServiceAccount `ns/name`: the request with defaults filled
    /// in and `status.token`/`status.expirationTimestamp` set. A kubelet (`node`) may only
    /// request tokens bound to pods on itself (NodeRestriction).
    pub async fn token_request(
        &self,
        ns: &str,
        name: &str,
        mut req: Value,
        node: Option<&str>,
    ) -> Result<Value, ApiError> {
        let sa = self.get("serviceaccounts", Some(ns), name).await?;
        if !req.is_object() {
            return Err(ApiError::bad_request(
                "the body must be a TokenRequest object",
            ));
        }
        let spec = &mut req["spec"];
        if !spec.is_object() {
            *spec = json!({});
        }
        let invalid = |field: &str, msg: String| {
            ApiError::invalid("TokenRequest", name, vec![(field.into(), msg)])
        };
        let audiences: Vec<String> = match spec.get("audiences") {
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("spec.audiences", "must be strings".into()))?,
            _ => self.audiences.clone(),
        };
        spec["audiences"] = json!(audiences);
        let exp = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_EXPIRATION,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| invalid("spec.expirationSeconds", "must be an integer".into()))?,
        };
        if exp < MIN_EXPIRATION {
            return Err(invalid(
                "spec.expirationSeconds",
                format!("Invalid value: {exp}: may not specify a duration less than 10 minutes"),
            ));
        }
        if exp > MAX_EXPIRATION {
            return Err(invalid(
                "spec.expirationSeconds",
                format!(
                    "Invalid value: {exp}: may not specify a duration larger than 2^32 seconds"
                ),
            ));
        }
        spec["expirationSeconds"] = json!(exp);
        let mut k8s = json!({
            "namespace": ns,
            "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]},
        });
        let bound = spec.get("boundObjectRef").filter(|b| !b.is_null()).cloned();
        if let Some(node) = node
            && bound.is_none()
        {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "serviceaccounts {name:?} is forbidden: node {node:?} can only get tokens bound to pods scheduled on it"
                ),
            ));
        }
        if let Some(bound) = bound {
            let kind = bound["kind"].as_str().unwrap_or("");
            let bname = bound["name"].as_str().unwrap_or("");
            if bname.is_empty() {
                return Err(invalid("spec.boundObjectRef.name", "Required value".into()));
            }
            let (resource, key, namespaced) = match kind {
                "Pod" => ("pods", "pod", true),
                "Secret" => ("secrets", "secret", true),
                "Node" => ("nodes", "node", false),
                other => {
                    return Err(invalid(
                        "spec.boundObjectRef.kind",
                        format!(
                            "Unsupported value: {other:?}: supported values: \"Pod\", \"Node\", \"Secret\""
                        ),
                    ));
                }
            };
            let obj = self.get(resource, namespaced.then_some(ns), bname).await?;
            let uid = obj["metadata"]["uid"].as_str().unwrap_or("");
            if let Some(want) = bound["uid"].as_str().filter(|u| !u.is_empty())
                && want != uid
            {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
            if let Some(node) = node
                && (kind != "Pod" || obj["spec"]["nodeName"] != node)
            {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "serviceaccounts {name:?} is forbidden: node {node:?} can only get tokens bound to pods scheduled on it"
                    ),
                ));
            }
            if kind == "Pod" {
                let pod_sa = obj["spec"]["serviceAccountName"]
                    .as_str()
                    .unwrap_or("default");
                if pod_sa != name {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                    )));
                }
                if let Some(node) = obj["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())
                    && let Ok(n) = self.get("nodes", None, node).await
                {
                    k8s["node"] = json!({"name": node, "uid": n["metadata"]["uid"]});
                }
            }
            k8s[key] = json!({"name": bname, "uid": uid});
        }
        let iat = now();
        let claims = json!({
            "iss": self.issuer,
            "sub": format!("{}{ns}:{name}", super::SA_USER_PREFIX),
            "aud": audiences,
            "exp": iat + exp,
            "iat": iat,
            "nbf": iat,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": k8s,
        });
        let token = self.signer.sign(&claims);
        req["apiVersion"] = json!("authentication.k8s.io/v1");
        req["kind"] = json!("TokenRequest");
        req["metadata"] = json!({
            "name": name, "namespace": ns, "creationTimestamp": rfc3339(iat),
        });
        req["status"] = json!({"token": token, "expirationTimestamp": rfc3339(iat + exp)});
        Ok(req)
    }

    /// The identity of a token, if it is one of ours, current, and its objects still exist.
    pub async fn authenticate(&self, token: &str) -> Result<UserInfo, TokenError> {
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        if let Some((user, at, exp)) = self.cache.lock().unwrap().get(&key).cloned()
            && at.elapsed() < CACHE_TTL
            && now() < exp
        {
            return Ok(user);
        }
        let (user, exp) = self.verify(token).await?;
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= CACHE_MAX {
            cache.retain(|_, (_, at, _)| at.elapsed() < CACHE_TTL);
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
        }
        cache.insert(key, (user.clone(), Instant::now(), exp));
        Ok(user)
    }

    async fn verify(&self, token: &str) -> Result<(UserInfo, i64), TokenError> {
        let claims = self.signer.verify(token)?;
        if claims["iss"] != self.issuer.as_str() {
            return Err(TokenError::Issuer);
        }
        let auds: Vec<&str> = match &claims["aud"] {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !auds.iter().any(|a| self.audiences.iter().any(|b| b == a)) {
            return Err(TokenError::Audience);
        }
        let t = now();
        let exp = claims["exp"].as_i64().ok_or(TokenError::Claims)?;
        if t >= exp {
            return Err(TokenError::Expired);
        }
        if claims["nbf"].as_i64().is_some_and(|nbf| nbf > t + LEEWAY)
            || claims["iat"].as_i64().is_some_and(|iat| iat > t + LEEWAY)
        {
            return Err(TokenError::NotYetValid);
        }
        let k = &claims["kubernetes.io"];
        let ns = k["namespace"].as_str().ok_or(TokenError::Claims)?;
        let sa_name = k["serviceaccount"]["name"]
            .as_str()
            .ok_or(TokenError::Claims)?;
        let sa_uid = k["serviceaccount"]["uid"].as_str().unwrap_or("");
        let sub = format!("{}{ns}:{sa_name}", super::SA_USER_PREFIX);
        if claims["sub"] != sub.as_str() {
            return Err(TokenError::Claims);
        }
        self.check_alive("serviceaccounts", Some(ns), sa_name, sa_uid, None)
            .await?;
        let mut user = UserInfo::new(
            sub,
            [
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{ns}"),
            ],
        );
        user.uid = sa_uid.to_owned();
        for (key, resource, namespaced) in [
            ("pod", "pods", true),
            ("secret", "secrets", true),
            ("node", "nodes", false),
        ] {
            let Some(name) = k[key]["name"].as_str() else {
                continue;
            };
            let uid = k[key]["uid"].as_str().unwrap_or("");
            let deadline = (key == "pod").then_some(t);
            self.check_alive(resource, namespaced.then_some(ns), name, uid, deadline)
                .await?;
            if key != "secret" {
                user.extra.insert(
                    format!("authentication.kubernetes.io/{key}-name"),
                    vec![name.into()],
                );
                user.extra.insert(
                    format!("authentication.kubernetes.io/{key}-uid"),
                    vec![uid.into()],
                );
            }
        }
        if let Some(jti) = claims["jti"].as_str() {
            user.extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={jti}")],
            );
        }
        Ok((user, exp))
    }

    /// Errs unless `resource` `name` exists with `uid`; with `deletion_deadline`, also unless
    /// it is not being deleted, or its grace period (plus leeway) has not passed yet.
    async fn check_alive(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        uid: &str,
        deletion_deadline: Option<i64>,
    ) -> Result<(), TokenError> {
        let what = format!("{resource} {name:?}");
        let obj = match self.get(resource, ns, name).await {
            Ok(o) => o,
            Err(e) if e.code == 404 => {
                return Err(TokenError::Revoked(format!(
                    "{what} (bound to the token) not found"
                )));
            }
            Err(e) => {
                return Err(TokenError::Revoked(format!(
                    "cannot check {what}: {}",
                    e.message
                )));
            }
        };
        if obj["metadata"]["uid"] != uid {
            return Err(TokenError::Revoked(format!(
                "{what} was recreated since the token was issued"
            )));
        }
        if let (Some(t), Some(del)) = (
            deletion_deadline,
            obj["metadata"]["deletionTimestamp"].as_str(),
        ) && k1s_api::time::parse(del).is_some_and(|d| d.as_second() + LEEWAY < t)
        {
            return Err(TokenError::Revoked(format!("{what} has been deleted")));
        }
        Ok(())
    }

    /// `/.well-known/openid-configuration`, as upstream serves it.
    pub fn openid_configuration(&self) -> Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/openid/v1/jwks", self.issuer),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }
}

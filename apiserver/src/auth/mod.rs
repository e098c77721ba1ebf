//! Authentication: who a request comes from.
//!
//! Owns the identity of a request ([`UserInfo`]) and the authenticators that establish it, in
//! kube-apiserver's order: the client certificate of the connection ([`k1s_streaming::peer`]), then the bearer
//! token — the static token file ([`token_file`]), the join token ([`join_token`]) and
//! ServiceAccount JWTs ([`serviceaccount`]). A request with no credentials is anonymous
//! (`system:anonymous` in `system:unauthenticated`), left to the authorizer like upstream's
//! default; a request with credentials that do not check out gets 401. Impersonation
//! ([`impersonation`]) runs after authentication and authorization of the real user.
//!
//! Tokens and certificates are never logged; only the user names derived from them are.

pub mod impersonation;
pub mod join;
pub mod join_token;
pub mod jwt;
pub mod serviceaccount;
pub mod token_file;

pub use k1s_streaming::peer::{ClientCertCheck, PeerCert};
use std::sync::Arc;

use http::HeaderMap;

use crate::status::ApiError;

pub use crate::user::{
    ANONYMOUS, AUTHENTICATED, MASTERS, NETWORK_USER_PREFIX, NETWORKS, NODE_USER_PREFIX, NODES,
    SA_USER_PREFIX, UNAUTHENTICATED, UserInfo,
};

/// Establishes the user of each request.
pub struct Authenticator {
    tokens: Option<Arc<token_file::TokenFile>>,
    join: Option<join_token::JoinToken>,
    service_accounts: Option<Arc<serviceaccount::TokenAuthenticator>>,
}

impl Authenticator {
    pub fn new(
        tokens: Option<Arc<token_file::TokenFile>>,
        join: Option<join_token::JoinToken>,
        service_accounts: Option<Arc<serviceaccount::TokenAuthenticator>>,
    ) -> Self {
        Self {
            tokens,
            join,
            service_accounts,
        }
    }

    /// The user of a request with `headers` on a connection with `cert`. Errors are 401s.
    pub async fn authenticate(
        &self,
        cert: &PeerCert,
        headers: &HeaderMap,
    ) -> Result<UserInfo, ApiError> {
        match cert {
            PeerCert::Valid {
                name,
                groups,
                not_after,
            } => {
                if jiff::Timestamp::now().as_second() > *not_after {
                    tracing::info!(user = %name, "client certificate expired");
                    return Err(unauthorized());
                }
                return Ok(UserInfo::new(name.clone(), groups.iter().cloned()));
            }
            PeerCert::Invalid(why) => {
                tracing::info!(reason = %why, "client certificate rejected");
                return Err(unauthorized());
            }
            PeerCert::None => {}
        }
        let Some(token) = bearer(headers)? else {
            return Ok(UserInfo::anonymous());
        };
        if let Some(user) = self.tokens.as_ref().and_then(|t| t.lookup(token)) {
            return Ok(user);
        }
        if let Some(user) = self.join.as_ref().and_then(|j| j.authenticate(token)) {
            return Ok(user);
        }
        if let Some(sa) = &self.service_accounts
            && jwt::looks_like_jwt(token)
        {
            return match sa.authenticate(token).await {
                Ok(user) => Ok(user),
                Err(e) => {
                    tracing::info!(reason = %e, "service account token rejected");
                    Err(unauthorized())
                }
            };
        }
        tracing::info!("unknown bearer token");
        Err(unauthorized())
    }
}

/// The bearer token of a request, if any. A malformed Authorization header is a 401.
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| unauthorized())?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            let token = token.trim();
            if token.is_empty() {
                Err(unauthorized())
            } else {
                Ok(Some(token))
            }
        }
        // Basic and other schemes are not supported (upstream removed basic auth in 1.19).
        _ => Err(unauthorized()),
    }
}

/// Upstream's 401 Status.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities() {
        let node = UserInfo::new("system:node:n1", [NODES.to_owned()]);
        assert_eq!(node.node_name(), Some("n1"));
        assert!(node.in_group(AUTHENTICATED));
        let fake = UserInfo::new("system:node:n1", []);
        assert_eq!(fake.node_name(), None, "not in system:nodes");
        let sa = UserInfo::new("system:serviceaccount:ns:app", []);
        assert_eq!(sa.service_account(), Some(("ns", "app")));
        assert_eq!(UserInfo::anonymous().groups, vec![UNAUTHENTICATED]);
    }

    #[test]
    fn bearer_header_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h).unwrap(), None);
        h.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h).unwrap(), Some("abc"));
        h.insert("authorization", "Basic YTpi".parse().unwrap());
        assert_eq!(bearer(&h).unwrap_err().code, 401);
        h.insert("authorization", "Bearer ".parse().unwrap());
        assert_eq!(bearer(&h).unwrap_err().code, 401);
    }
}

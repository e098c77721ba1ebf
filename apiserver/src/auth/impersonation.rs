//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): the `Impersonate-*` headers turn
//! a request into one from another user, if the real user may `impersonate` each part —
//! `users`, `groups`, `serviceaccounts` (core) and `uids`, `userextras/<key>`
//! (authentication.k8s.io) — as upstream checks.

use http::HeaderMap;

use super::{ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, UserInfo};
use crate::authz::{Attributes, Authorizer};
use crate::status::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// Whether the request asks to impersonate.
pub fn requested(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-"))
}

fn values<'a>(headers: &'a HeaderMap, name: &str) -> Result<Vec<&'a str>, ApiError> {
    headers
        .get_all(name)
        .iter()
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::bad_request(format!("invalid {name} header")))
        })
        .collect()
}

/// The user `real` impersonates, after checking each part is allowed.
pub async fn impersonate(
    authz: &Authorizer,
    real: &UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let users = values(headers, USER)?;
    let groups = values(headers, GROUP)?;
    let uids = values(headers, UID)?;
    let mut extra: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix(EXTRA) {
            // Keys are percent-encoded by clients.
            let key: String = form_urlencoded::parse(format!("k={key}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_else(|| key.to_owned());
            let v = v
                .to_str()
                .map_err(|_| ApiError::bad_request(format!("invalid {k} header")))?;
            extra.entry(key).or_default().push(v.to_owned());
        }
    }
    let Some(name) = users.first().copied().filter(|u| !u.is_empty()) else {
        return Err(ApiError::bad_request(
            "impersonating groups, a uid or extra fields requires impersonating a user (Impersonate-User)",
        ));
    };
    if users.len() > 1 || uids.len() > 1 {
        return Err(ApiError::bad_request(
            "only one user and one uid can be impersonated",
        ));
    }
    let check = |group: &str, resource: &str, ns: &str, target: &str| Attributes {
        user: real.clone(),
        verb: "impersonate".into(),
        resource_request: true,
        api_group: group.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        namespace: ns.into(),
        name: target.into(),
        ..Default::default()
    };
    let mut checks = Vec::new();
    let mut user = UserInfo {
        name: name.to_owned(),
        ..Default::default()
    };
    if let Some((ns, sa)) = name
        .strip_prefix(super::SA_USER_PREFIX)
        .and_then(|r| r.split_once(':'))
    {
        checks.push(check("", "serviceaccounts", ns, sa));
        user.groups.push("system:serviceaccounts".into());
        user.groups.push(format!("system:serviceaccounts:{ns}"));
    } else {
        checks.push(check("", "users", "", name));
    }
    for g in &groups {
        checks.push(check("", "groups", "", g));
        if !user.groups.iter().any(|x| x == g) {
            user.groups.push((*g).to_owned());
        }
    }
    if let Some(uid) = uids.first() {
        checks.push(check("authentication.k8s.io", "uids", "", uid));
        user.uid = (*uid).to_owned();
    }
    for (k, vs) in &extra {
        for v in vs {
            let mut a = check("authentication.k8s.io", "userextras", "", v);
            a.subresource = k.clone();
            checks.push(a);
        }
    }
    user.extra = extra;
    for a in &checks {
        authz.check(a).await?;
    }
    if name == ANONYMOUS {
        if !user.in_group(UNAUTHENTICATED) {
            user.groups.push(UNAUTHENTICATED.into());
        }
    } else if !user.in_group(AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    tracing::debug!(real = %real.name, as_user = %user.name, "impersonating");
    Ok(user)
}

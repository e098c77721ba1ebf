//! The review APIs: SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectAccessReview
//! (`kubectl auth can-i`), SelfSubjectRulesReview (`kubectl auth can-i --list`),
//! SelfSubjectReview (`kubectl auth whoami`) and TokenReview. Nothing is stored; each request
//! is answered with its `status` filled in.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::rbac::strings;
use super::{Attributes, Authorizer, Decision};
use crate::auth::{Authenticator, PeerCert, UserInfo};
use crate::status::ApiError;

/// The attributes a review's spec asks about, for `user`.
fn spec_attributes(kind: &str, spec: &Value, user: UserInfo) -> Result<Attributes, ApiError> {
    let invalid =
        |field: &str, msg: &str| ApiError::invalid(kind, "", vec![(field.into(), msg.into())]);
    let ra = &spec["resourceAttributes"];
    let nra = &spec["nonResourceAttributes"];
    match (ra.is_object(), nra.is_object()) {
        (true, true) => Err(invalid(
            "spec.nonResourceAttributes",
            "Invalid value: \"\": cannot be specified in combination with resourceAttributes",
        )),
        (false, false) => Err(invalid(
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (true, false) => {
            let s = |k: &str| ra[k].as_str().unwrap_or("").to_owned();
            Ok(Attributes {
                user,
                verb: s("verb"),
                resource_request: true,
                api_group: s("group"),
                api_version: s("version"),
                resource: s("resource"),
                subresource: s("subresource"),
                namespace: s("namespace"),
                name: s("name"),
                field_selector: ra["fieldSelector"]["rawSelector"]
                    .as_str()
                    .map(str::to_owned),
                ..Default::default()
            })
        }
        (false, true) => Ok(Attributes {
            user,
            verb: nra["verb"].as_str().unwrap_or("").to_owned(),
            path: nra["path"].as_str().unwrap_or("").to_owned(),
            ..Default::default()
        }),
    }
}

fn access_status(d: Decision) -> Value {
    match d {
        Decision::Allow => json!({"allowed": true}),
        Decision::Deny(r) => json!({"allowed": false, "denied": true, "reason": r}),
        Decision::NoOpinion(r) if r.is_empty() => json!({"allowed": false}),
        Decision::NoOpinion(r) => json!({"allowed": false, "reason": r}),
    }
}

/// Answers a review of kind `kind` (the request body `obj`) made by `requester`.
pub async fn answer(
    authz: &Authorizer,
    authn: &Authenticator,
    requester: &UserInfo,
    kind: &str,
    namespace: Option<&str>,
    mut obj: Value,
) -> Result<Value, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "the body must be a {kind} object"
        )));
    }
    let spec = obj["spec"].clone();
    let status = match kind {
        "SelfSubjectAccessReview" => {
            let a = spec_attributes(kind, &spec, requester.clone())?;
            access_status(authz.authorize(&a).await)
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let user_name = spec["user"].as_str().unwrap_or("");
            let groups = strings(&spec["groups"]);
            if user_name.is_empty() && groups.is_empty() {
                return Err(ApiError::invalid(
                    kind,
                    "",
                    vec![(
                        "spec.user".into(),
                        "Invalid value: \"\": at least one of user or group must be specified"
                            .into(),
                    )],
                ));
            }
            let mut extra = BTreeMap::new();
            if let Some(e) = spec["extra"].as_object() {
                for (k, v) in e {
                    extra.insert(k.clone(), strings(v));
                }
            }
            let user = UserInfo {
                name: user_name.to_owned(),
                uid: spec["uid"].as_str().unwrap_or("").to_owned(),
                groups,
                extra,
            };
            let mut a = spec_attributes(kind, &spec, user)?;
            if let Some(ns) = namespace {
                if a.resource_request && !a.namespace.is_empty() && a.namespace != ns {
                    return Err(ApiError::invalid(
                        kind,
                        "",
                        vec![(
                            "spec.resourceAttributes.namespace".into(),
                            format!(
                                "Invalid value: {:?}: must match metadata.namespace",
                                a.namespace
                            ),
                        )],
                    ));
                }
                if !a.resource_request {
                    return Err(ApiError::invalid(
                        kind,
                        "",
                        vec![(
                            "spec.nonResourceAttributes".into(),
                            "Invalid value: \"\": disallowed on this kind of request".into(),
                        )],
                    ));
                }
                a.namespace = ns.to_owned();
            }
            access_status(authz.authorize(&a).await)
        }
        "SelfSubjectRulesReview" => {
            let ns = spec["namespace"].as_str().unwrap_or("");
            let mut resource_rules = Vec::new();
            let mut non_resource_rules = Vec::new();
            for r in authz.rbac.rules_for(requester, ns) {
                if !r.non_resource_urls.is_empty() {
                    non_resource_rules
                        .push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
                }
                if !r.resources.is_empty() {
                    let mut rr = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
                    if !r.resource_names.is_empty() {
                        rr["resourceNames"] = json!(r.resource_names);
                    }
                    resource_rules.push(rr);
                }
            }
            // The Node authorizer's grants are not rules; upstream flags the answer.
            let incomplete = requester.node_name().is_some();
            let mut s = json!({
                "resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules,
                "incomplete": incomplete,
            });
            if incomplete {
                s["evaluationError"] =
                    json!("node authorizer does not support user rule resolution");
            }
            s
        }
        "SelfSubjectReview" => json!({"userInfo": requester.to_json()}),
        "TokenReview" => {
            let token = spec["token"].as_str().unwrap_or("");
            if token.is_empty() {
                return Err(ApiError::invalid(
                    kind,
                    "",
                    vec![("spec.token".into(), "Required value".into())],
                ));
            }
            let mut headers = http::HeaderMap::new();
            match http::HeaderValue::from_str(&format!("Bearer {token}")) {
                Ok(v) => {
                    headers.insert(http::header::AUTHORIZATION, v);
                }
                Err(_) => {
                    return Ok(with_status(
                        obj,
                        json!({"authenticated": false, "error": "invalid bearer token"}),
                    ));
                }
            }
            match authn.authenticate(&PeerCert::None, &headers).await {
                Ok(u) if u.name != crate::auth::ANONYMOUS => {
                    let mut s = json!({"authenticated": true, "user": u.to_json()});
                    if let Some(a) = spec["audiences"].as_array().filter(|a| !a.is_empty()) {
                        s["audiences"] = json!(a);
                    }
                    s
                }
                _ => json!({"authenticated": false, "error": "invalid bearer token"}),
            }
        }
        other => {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                format!("{other} cannot be reviewed"),
            ));
        }
    };
    obj["metadata"]["creationTimestamp"] = Value::Null;
    Ok(with_status(obj, status))
}

fn with_status(mut obj: Value, status: Value) -> Value {
    obj["status"] = status;
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_attributes_forms() {
        let u = UserInfo::new("u", []);
        let a = spec_attributes(
            "SelfSubjectAccessReview",
            &json!({"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "d", "subresource": "log"}}),
            u.clone(),
        )
        .unwrap();
        assert_eq!(
            (
                a.verb.as_str(),
                a.full_resource().as_str(),
                a.namespace.as_str()
            ),
            ("get", "pods/log", "d")
        );
        let a = spec_attributes(
            "X",
            &json!({"nonResourceAttributes": {"verb": "get", "path": "/healthz"}}),
            u.clone(),
        )
        .unwrap();
        assert!(!a.resource_request);
        assert_eq!(spec_attributes("X", &json!({}), u).unwrap_err().code, 422);
    }
}

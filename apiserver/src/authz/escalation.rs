//! RBAC's privilege escalation prevention: a user may only write a Role or ClusterRole whose
//! permissions they hold themselves (or with the `escalate` verb), and only bind a role they
//! hold or may `bind`.

use serde_json::Value;

use super::rbac::{PolicyRule, url_matches};
use super::{Attributes, Authorizer, Decision};
use crate::status::ApiError;
use crate::user::UserInfo;

const GROUP: &str = "rbac.authorization.k8s.io";

/// One permission: a single verb on a single group/resource/name, or on a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Atom {
    Resource {
        verb: String,
        group: String,
        resource: String,
        name: Option<String>,
    },
    Url {
        verb: String,
        url: String,
    },
}

fn atoms(rule: &PolicyRule) -> Vec<Atom> {
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for url in &rule.non_resource_urls {
            out.push(Atom::Url {
                verb: verb.clone(),
                url: url.clone(),
            });
        }
        for group in &rule.api_groups {
            for resource in &rule.resources {
                let names: Vec<Option<String>> = if rule.resource_names.is_empty() {
                    vec![None]
                } else {
                    rule.resource_names.iter().cloned().map(Some).collect()
                };
                for name in names {
                    out.push(Atom::Resource {
                        verb: verb.clone(),
                        group: group.clone(),
                        resource: resource.clone(),
                        name,
                    });
                }
            }
        }
    }
    out
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == "*" || x == v)
}

/// Whether `owner` grants `atom` (wildcards in `atom` are covered only by wildcards).
fn covers_atom(owner: &PolicyRule, atom: &Atom) -> bool {
    match atom {
        Atom::Url { verb, url } => {
            has(&owner.verbs, verb)
                && owner.non_resource_urls.iter().any(|o| {
                    o == url || (url_matches(o, url) && (o.ends_with('*') || !url.ends_with('*')))
                })
        }
        Atom::Resource {
            verb,
            group,
            resource,
            name,
        } => {
            has(&owner.verbs, verb)
                && has(&owner.api_groups, group)
                && (has(&owner.resources, resource)
                    || resource.split_once('/').is_some_and(|(_, sub)| {
                        owner
                            .resources
                            .iter()
                            .any(|r| r.strip_prefix("*/") == Some(sub))
                    }))
                && (owner.resource_names.is_empty()
                    || name
                        .as_ref()
                        .is_some_and(|n| owner.resource_names.contains(n)))
        }
    }
}

/// The requested rules not covered by `owner` (as single-permission rules).
pub fn uncovered(owner: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing = Vec::new();
    for rule in requested {
        for atom in atoms(rule) {
            if owner.iter().any(|o| covers_atom(o, &atom)) {
                continue;
            }
            missing.push(match atom {
                Atom::Url { verb, url } => PolicyRule {
                    verbs: vec![verb],
                    non_resource_urls: vec![url],
                    ..Default::default()
                },
                Atom::Resource {
                    verb,
                    group,
                    resource,
                    name,
                } => PolicyRule {
                    verbs: vec![verb],
                    api_groups: vec![group],
                    resources: vec![resource],
                    resource_names: name.into_iter().collect(),
                    ..Default::default()
                },
            });
        }
    }
    missing
}

/// Upstream's compact form of a rule: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["create"]}`.
fn compact(r: &PolicyRule) -> String {
    let list = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    if !r.api_groups.is_empty() {
        parts.push(format!("APIGroups:[{}]", list(&r.api_groups)));
    }
    if !r.resources.is_empty() {
        parts.push(format!("Resources:[{}]", list(&r.resources)));
    }
    if !r.resource_names.is_empty() {
        parts.push(format!("ResourceNames:[{}]", list(&r.resource_names)));
    }
    if !r.non_resource_urls.is_empty() {
        parts.push(format!("NonResourceURLs:[{}]", list(&r.non_resource_urls)));
    }
    parts.push(format!("Verbs:[{}]", list(&r.verbs)));
    format!("{{{}}}", parts.join(", "))
}

fn rules_of(obj: &Value) -> Vec<PolicyRule> {
    obj["rules"]
        .as_array()
        .map(|r| r.iter().map(PolicyRule::from_json).collect())
        .unwrap_or_default()
}

/// Whether `user` may `verb` the RBAC `resource` named `name` in `namespace`.
fn may(
    authz: &Authorizer,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    ns: &str,
    name: &str,
) -> bool {
    let a = Attributes {
        user: user.clone(),
        verb: verb.into(),
        resource_request: true,
        api_group: GROUP.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    };
    authz.decide(&a) == Decision::Allow
}

fn forbidden(resource: &str, name: &str, message: String) -> ApiError {
    ApiError::new(
        403,
        "Forbidden",
        format!("{resource}.{GROUP} {name:?} is forbidden: {message}"),
    )
}

fn user_text(user: &UserInfo) -> String {
    format!("user {:?} (groups={:?})", user.name, user.groups)
}

/// Ok if `user` holds every rule of `granted` in `ns`; else the refusal naming what is missing.
fn held(
    authz: &Authorizer,
    user: &UserInfo,
    ns: &str,
    granted: &[PolicyRule],
    resource: &str,
    name: &str,
) -> Result<(), ApiError> {
    let missing = uncovered(&authz.rbac.rules_for(user, ns), granted);
    if missing.is_empty() {
        return Ok(());
    }
    Err(forbidden(
        resource,
        name,
        format!(
            "{} is attempting to grant RBAC permissions not currently held:\n{}",
            user_text(user),
            missing.iter().map(compact).collect::<Vec<_>>().join("\n")
        ),
    ))
}

/// Checks a write of a Role, ClusterRole, RoleBinding or ClusterRoleBinding `obj` by `user`.
pub fn check(
    authz: &Authorizer,
    user: &UserInfo,
    resource: &str,
    ns: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    match resource {
        "roles" | "clusterroles" => {
            if may(authz, user, "escalate", resource, ns, name) {
                return Ok(());
            }
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                return Err(forbidden(
                    resource,
                    name,
                    format!(
                        "{} must have cluster-admin privileges to use an aggregationRule",
                        user_text(user)
                    ),
                ));
            }
            held(authz, user, ns, &rules_of(obj), resource, name)
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = obj["roleRef"]["kind"].as_str().unwrap_or("");
            let role = obj["roleRef"]["name"].as_str().unwrap_or("");
            let role_resource = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            let role_ns = if kind == "Role" { ns } else { "" };
            // `bind` on the role: granted in the binding's namespace or cluster-wide.
            if may(authz, user, "bind", role_resource, ns, role) {
                return Ok(());
            }
            let Some(rules) = authz.rbac.role_rules(kind, role_ns, role) else {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    format!("{role_resource}.{GROUP} {role:?} not found"),
                ));
            };
            held(authz, user, ns, &rules, resource, name)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(v: Value) -> PolicyRule {
        PolicyRule::from_json(&v)
    }

    #[test]
    fn covering() {
        let owner = vec![
            r(
                json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/status"]}),
            ),
            r(
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
            ),
            r(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]})),
        ];
        let ok = vec![r(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "deployments/status"]}),
        )];
        assert!(uncovered(&owner, &ok).is_empty());
        let named = vec![r(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
        )];
        assert!(uncovered(&owner, &named).is_empty());
        let all_secrets = vec![r(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}),
        )];
        assert_eq!(uncovered(&owner, &all_secrets).len(), 1);
        let wild = vec![r(
            json!({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}),
        )];
        let missing = uncovered(&owner, &wild);
        assert_eq!(
            compact(&missing[0]),
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["*"]}"#
        );
        let url = vec![r(
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/etcd"]}),
        )];
        assert!(uncovered(&owner, &url).is_empty());
        let url_wild = vec![r(json!({"verbs": ["get"], "nonResourceURLs": ["/*"]}))];
        assert_eq!(uncovered(&owner, &url_wild).len(), 1);
    }
}

//! RBAC with upstream semantics: Roles and ClusterRoles grant rules; RoleBindings (in their
//! namespace) and ClusterRoleBindings (everywhere) give them to users, groups and
//! ServiceAccounts. Evaluated against an in-memory [`Mirror`] of the rbac.authorization.k8s.io
//! objects.

use std::sync::Arc;
use std::time::Duration;

use k1s_store::Store;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Attributes, Decision};
use crate::mirror::{self, Mirror};
use crate::user::UserInfo;

/// Where RBAC objects live in the store.
pub const PREFIX: &str = "/registry/rbac.authorization.k8s.io/";

/// One rule of a role.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// The strings of a JSON array (others skipped).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    pub fn from_json(v: &Value) -> Self {
        Self {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// Whether this rule allows `a` (upstream's RuleAllows).
    pub fn allows(&self, a: &Attributes) -> bool {
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self
                .non_resource_urls
                .iter()
                .any(|u| url_matches(u, &a.path));
        }
        has(&self.api_groups, &a.api_group)
            && resource_matches(&self.resources, &a.resource, &a.subresource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }
}

/// `*` or an exact member.
fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == "*" || x == v)
}

fn resource_matches(rules: &[String], resource: &str, sub: &str) -> bool {
    rules.iter().any(|r| {
        r == "*"
            || (sub.is_empty() && r == resource)
            || (!sub.is_empty()
                && (r.strip_prefix(resource).and_then(|s| s.strip_prefix('/')) == Some(sub)
                    || r.strip_prefix("*/") == Some(sub)))
    })
}

/// A rule URL: `*`, exact, or a prefix ending in `*`.
pub fn url_matches(rule: &str, path: &str) -> bool {
    rule == "*"
        || rule == path
        || rule
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

/// A subject of a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

impl Subject {
    fn from_json(v: &Value, binding_ns: &str) -> Option<Self> {
        let name = v["name"].as_str()?.to_owned();
        Some(match v["kind"].as_str()? {
            "User" => Self::User(name),
            "Group" => Self::Group(name),
            "ServiceAccount" => Self::ServiceAccount {
                namespace: v["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(binding_ns)
                    .to_owned(),
                name,
            },
            _ => return None,
        })
    }

    pub fn matches(&self, user: &UserInfo) -> bool {
        match self {
            Self::User(n) => *n == user.name,
            Self::Group(g) => user.in_group(g),
            Self::ServiceAccount { namespace, name } => user
                .service_account()
                .is_some_and(|(ns, n)| ns == namespace && n == name),
        }
    }
}

/// What the mirror keeps of each RBAC object.
#[derive(Debug, Clone)]
pub enum RbacObject {
    Role {
        rules: Vec<PolicyRule>,
    },
    ClusterRole {
        rules: Vec<PolicyRule>,
    },
    Binding {
        /// Empty for a ClusterRoleBinding.
        namespace: String,
        /// `Role` or `ClusterRole`.
        role_kind: String,
        role_name: String,
        subjects: Vec<Subject>,
    },
}

fn project(v: &Value) -> Option<RbacObject> {
    let rules = || {
        v["rules"]
            .as_array()
            .map(|r| r.iter().map(PolicyRule::from_json).collect())
            .unwrap_or_default()
    };
    Some(match v["kind"].as_str()? {
        "Role" => RbacObject::Role { rules: rules() },
        "ClusterRole" => RbacObject::ClusterRole { rules: rules() },
        "RoleBinding" | "ClusterRoleBinding" => {
            let ns = v["metadata"]["namespace"].as_str().unwrap_or("").to_owned();
            RbacObject::Binding {
                role_kind: v["roleRef"]["kind"].as_str()?.to_owned(),
                role_name: v["roleRef"]["name"].as_str()?.to_owned(),
                subjects: v["subjects"]
                    .as_array()
                    .map(|s| {
                        s.iter()
                            .filter_map(|s| Subject::from_json(s, &ns))
                            .collect()
                    })
                    .unwrap_or_default(),
                namespace: ns,
            }
        }
        _ => return None,
    })
}

/// The RBAC authorizer.
pub struct Rbac {
    mirror: Arc<Mirror<RbacObject>>,
}

impl Rbac {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            mirror: Mirror::new(),
        })
    }

    pub(super) fn spawn(
        &self,
        tasks: &tokio_util::task::TaskTracker,
        store: Arc<dyn Store>,
        encryption: Arc<crate::encryption::Transformer>,
        cancel: &CancellationToken,
    ) {
        tasks.spawn(mirror::run(
            self.mirror.clone(),
            store,
            mirror::Read::Skim(encryption),
            PREFIX.into(),
            project,
            cancel.clone(),
        ));
    }

    /// Waits until the mirror reflects the store as of now.
    pub async fn sync(&self, store: &dyn Store, timeout: Duration) -> bool {
        self.mirror.sync(store, timeout).await
    }

    pub fn authorize(&self, a: &Attributes) -> Decision {
        let mut allowed = false;
        self.visit_rules(&a.user, &a.namespace, |rule| {
            allowed = rule.allows(a);
            allowed
        });
        if allowed {
            Decision::Allow
        } else {
            Decision::NoOpinion(String::new())
        }
    }

    /// The rules `user` has in `namespace` (cluster-wide ones included; `""` for the cluster
    /// scope only).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        let mut rules = Vec::new();
        self.visit_rules(user, namespace, |r| {
            rules.push(r.clone());
            false
        });
        rules
    }

    /// Calls `f` on each rule granted to `user` in `namespace` until it returns true.
    fn visit_rules(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut f: impl FnMut(&PolicyRule) -> bool,
    ) {
        self.mirror.read(|objects| {
            for obj in objects.values() {
                let RbacObject::Binding {
                    namespace: bns,
                    role_kind,
                    role_name,
                    subjects,
                } = obj
                else {
                    continue;
                };
                if !(bns.is_empty() || bns == namespace)
                    || !subjects.iter().any(|s| s.matches(user))
                {
                    continue;
                }
                let key = match role_kind.as_str() {
                    "ClusterRole" => format!("{PREFIX}clusterroles/{role_name}"),
                    "Role" if !bns.is_empty() => format!("{PREFIX}roles/{bns}/{role_name}"),
                    _ => continue,
                };
                let rules = match objects.get(&key) {
                    Some(RbacObject::Role { rules } | RbacObject::ClusterRole { rules }) => rules,
                    _ => continue,
                };
                for r in rules {
                    if f(r) {
                        return;
                    }
                }
            }
        });
    }

    /// The rules of a role (`Role` in `namespace`, or `ClusterRole`), if it exists.
    pub fn role_rules(&self, kind: &str, namespace: &str, name: &str) -> Option<Vec<PolicyRule>> {
        let key = match kind {
            "ClusterRole" => format!("{PREFIX}clusterroles/{name}"),
            "Role" => format!("{PREFIX}roles/{namespace}/{name}"),
            _ => return None,
        };
        self.mirror.read(|o| match o.get(&key) {
            Some(RbacObject::Role { rules } | RbacObject::ClusterRole { rules }) => {
                Some(rules.clone())
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> PolicyRule {
        PolicyRule::from_json(&v)
    }

    fn req(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn rule_matching() {
        let r = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}),
        );
        assert!(r.allows(&req("get", "", "pods", "", "x")));
        assert!(r.allows(&req("get", "", "pods", "log", "x")));
        assert!(!r.allows(&req("get", "", "pods", "exec", "x")));
        assert!(!r.allows(&req("delete", "", "pods", "", "x")));
        assert!(!r.allows(&req("get", "apps", "pods", "", "x")));
        let r = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/scale"]}));
        assert!(r.allows(&req("update", "apps", "deployments", "scale", "x")));
        assert!(!r.allows(&req("update", "apps", "deployments", "", "x")));
        let r = rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
        );
        assert!(r.allows(&req("get", "", "secrets", "", "a")));
        assert!(!r.allows(&req("get", "", "secrets", "", "b")));
        assert!(!r.allows(&req("list", "", "secrets", "", "")));
        let r = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/healthz/*"]}));
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Default::default()
        };
        assert!(r.allows(&path("/healthz")));
        assert!(r.allows(&path("/healthz/etcd")));
        assert!(!r.allows(&path("/metrics")));
    }

    #[test]
    fn subjects() {
        let sa =
            Subject::from_json(&json!({"kind": "ServiceAccount", "name": "app"}), "ns").unwrap();
        assert!(sa.matches(&UserInfo::new("system:serviceaccount:ns:app", [])));
        assert!(!sa.matches(&UserInfo::new("system:serviceaccount:other:app", [])));
        let g = Subject::from_json(
            &json!({"kind": "Group", "name": "dev", "apiGroup": "rbac.authorization.k8s.io"}),
            "",
        )
        .unwrap();
        assert!(g.matches(&UserInfo::new("x", ["dev".to_owned()])));
    }
}

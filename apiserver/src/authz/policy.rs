//! The bootstrap RBAC policy: the ClusterRoles and ClusterRoleBindings kube-apiserver creates
//! (cluster-admin; admin/edit/view with aggregation; system:discovery, system:basic-user,
//! system:public-info-viewer, system:monitoring, system:node, system:kube-scheduler,
//! system:kube-controller-manager, ...), plus k1s's agent bootstrap role.
//!
//! [`reconcile`] runs at every start, as upstream's auto-reconciliation: missing objects are
//! created; existing ones marked `rbac.authorization.kubernetes.io/autoupdate: "true"` get
//! missing rules and subjects added back. Users' additions are kept.

use serde_json::{Value, json};

use crate::rest::Rest;
use crate::status::ApiError;

const R: &str = "";
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const ALL_RW: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// A resource rule.
fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

/// A resource rule limited to names.
fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})
}

/// A non-resource rule.
fn urls(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn meta(name: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    for (k, v) in extra_labels {
        labels[*k] = json!(v);
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": meta(name, labels), "rules": rules,
    })
}

fn aggregated(name: &str, labels: &[(&str, &str)], selector_label: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": meta(name, labels),
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector_label: "true"}}]},
        "rules": [],
    })
}

/// A subject: `User:name`, `Group:name` or `ServiceAccount:ns:name`.
fn subject(s: &str) -> Value {
    match s.split_once(':') {
        Some(("ServiceAccount", rest)) => {
            let (ns, name) = rest.split_once(':').unwrap_or(("default", rest));
            json!({"kind": "ServiceAccount", "namespace": ns, "name": name})
        }
        Some((kind, name)) => {
            json!({"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": name})
        }
        None => json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": s}),
    }
}

fn binding(name: &str, role: &str, subjects: &[&str]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": meta(name, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects.iter().map(|s| subject(s)).collect::<Vec<_>>(),
    })
}

const TO_ADMIN: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-admin", "true");
const TO_EDIT: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-edit", "true");
const TO_VIEW: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-view", "true");

/// Every bootstrap ClusterRole.
pub fn cluster_roles() -> Vec<Value> {
    // `/cacerts` is k1s's: a joining agent fetches the CA before it can trust the server.
    let health = [
        "/cacerts",
        "/healthz",
        "/livez",
        "/readyz",
        "/version",
        "/version/",
    ];
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![urls(&["get"], &health)],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        aggregated("admin", &[], TO_ADMIN.0),
        aggregated("edit", &[TO_ADMIN], TO_EDIT.0),
        aggregated("view", &[TO_EDIT], TO_VIEW.0),
        cluster_role(
            "system:aggregate-to-admin",
            &[TO_ADMIN],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                ),
                rule(
                    ALL_RW,
                    &["rbac.authorization.k8s.io"],
                    &["rolebindings", "roles"],
                ),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[TO_EDIT],
            vec![
                rule(
                    READ,
                    &[R],
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], &[R], &["serviceaccounts"]),
                rule(
                    WRITE,
                    &[R],
                    &[
                        "pods",
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                    ],
                ),
                rule(&["create"], &[R], &["pods/eviction"]),
                rule(
                    WRITE,
                    &[R],
                    &[
                        "configmaps",
                        "events",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                ),
                rule(&["create"], &[R], &["serviceaccounts/token"]),
                rule(
                    WRITE,
                    &["apps"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                ),
                rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
                rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
                rule(
                    WRITE,
                    &["networking.k8s.io"],
                    &["ingresses", "networkpolicies"],
                ),
                rule(ALL_RW, &["coordination.k8s.io"], &["leases"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[TO_VIEW],
            vec![
                rule(
                    READ,
                    &[R],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                rule(
                    READ,
                    &[R],
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                ),
                rule(READ, &[R], &["namespaces"]),
                rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                rule(
                    READ,
                    &["autoscaling"],
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    READ,
                    &["batch"],
                    &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                ),
                rule(
                    READ,
                    &["policy"],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                rule(
                    READ,
                    &["networking.k8s.io"],
                    &["ingresses", "ingresses/status", "networkpolicies"],
                ),
                rule(READ, &["events.k8s.io"], &["events"]),
            ],
        ),
        // What a kubelet may do by RBAC alone; unbound by default (the Node authorizer
        // grants nodes their own objects), as upstream.
        cluster_role(
            "system:node",
            &[],
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews", "subjectaccessreviews"],
                ),
                rule(READ, &[R], &["services"]),
                rule(&["create", "get", "list", "watch"], &[R], &["nodes"]),
                rule(&["patch", "update"], &[R], &["nodes/status"]),
                rule(&["patch", "update"], &[R], &["nodes"]),
                rule(
                    &["create", "patch", "update"],
                    &[R, "events.k8s.io"],
                    &["events"],
                ),
                rule(READ, &[R], &["pods"]),
                rule(&["create", "delete"], &[R], &["pods"]),
                rule(&["patch", "update"], &[R], &["pods/status"]),
                rule(&["create"], &[R], &["pods/eviction"]),
                rule(&["get"], &[R], &["configmaps", "secrets"]),
                rule(
                    &["get"],
                    &[R],
                    &["persistentvolumeclaims", "persistentvolumes"],
                ),
                rule(&["get"], &[R], &["endpoints"]),
                rule(
                    &["get", "patch", "update"],
                    &[R],
                    &["persistentvolumeclaims/status"],
                ),
                rule(&["get"], &["storage.k8s.io"], &["volumeattachments"]),
                rule(&["create"], &[R], &["serviceaccounts/token"]),
                rule(ALL_RW, &["coordination.k8s.io"], &["leases"]),
                rule(READ, &["storage.k8s.io"], &["csidrivers"]),
                rule(ALL_RW, &["storage.k8s.io"], &["csinodes"]),
                rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
                rule(
                    &["create", "get", "list", "watch"],
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                ),
            ],
        ),
        // What the service proxy in each node's process reads (k1s's own; narrower than
        // system:node-proxier, which would also let a node read every Node).
        cluster_role(
            "k1s:service-proxy",
            &[],
            vec![
                rule(&["list", "watch"], &[R], &["services"]),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        // What the pod network in each node's process reads: every Node's pod CIDR, address
        // and VTEP announcement, to route or tunnel to it (flannel's ClusterRole grants the
        // same; upstream's system:node role lets a kubelet read every Node too).
        cluster_role(
            "k1s:pod-network",
            &[],
            vec![rule(&["list", "watch"], &[R], &["nodes"])],
        ),
        // What NetworkPolicy enforcement on each node reads: every pod's address and labels
        // (peers live on any node), namespace labels and the policies (k3s's embedded
        // kube-router reads the same). Bound to the agents' cluster-network identities, not
        // to nodes: a kubelet identity still reaches only its own pods.
        cluster_role(
            "k1s:network-policy",
            &[],
            vec![
                rule(&["list", "watch"], &[R], &["pods", "namespaces"]),
                rule(
                    &["list", "watch"],
                    &["networking.k8s.io"],
                    &["networkpolicies"],
                ),
            ],
        ),
        cluster_role(
            "system:node-proxier",
            &[],
            vec![
                rule(&["list", "watch"], &[R], &["endpoints", "services"]),
                rule(READ, &[R], &["nodes"]),
                rule(
                    &["create", "patch", "update"],
                    &[R, "events.k8s.io"],
                    &["events"],
                ),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        cluster_role(
            "system:kube-dns",
            &[],
            vec![
                rule(&["list", "watch"], &[R], &["endpoints", "services"]),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        cluster_role(
            "system:volume-scheduler",
            &[],
            vec![
                rule(
                    &["get", "list", "patch", "update", "watch"],
                    &[R],
                    &["persistentvolumes"],
                ),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(
                    &["get", "list", "patch", "update", "watch"],
                    &[R],
                    &["persistentvolumeclaims"],
                ),
            ],
        ),
        cluster_role(
            "system:kube-scheduler",
            &[],
            vec![
                rule(
                    &["create", "patch", "update"],
                    &[R, "events.k8s.io"],
                    &["events"],
                ),
                rule(&["create"], &["coordination.k8s.io"], &["leases"]),
                named(
                    &["get", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["kube-scheduler"],
                ),
                rule(&["create"], &[R], &["endpoints"]),
                named(
                    &["get", "update"],
                    &[R],
                    &["endpoints"],
                    &["kube-scheduler"],
                ),
                rule(READ, &[R], &["nodes"]),
                rule(&["delete", "get", "list", "watch"], &[R], &["pods"]),
                rule(&["create"], &[R], &["bindings", "pods/binding"]),
                rule(&["patch", "update"], &[R], &["pods/status"]),
                rule(
                    &["list", "watch"],
                    &[R],
                    &["replicationcontrollers", "services"],
                ),
                rule(
                    &["list", "watch"],
                    &["apps"],
                    &["replicasets", "statefulsets"],
                ),
                rule(&["list", "watch"], &["policy"], &["poddisruptionbudgets"]),
                rule(
                    &["list", "watch"],
                    &[R],
                    &["persistentvolumeclaims", "persistentvolumes", "namespaces"],
                ),
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
                rule(
                    &["list", "watch"],
                    &["storage.k8s.io"],
                    &[
                        "csidrivers",
                        "csinodes",
                        "csistoragecapacities",
                        "storageclasses",
                    ],
                ),
            ],
        ),
        cluster_role(
            "system:kube-controller-manager",
            &[],
            vec![
                rule(
                    &["create", "patch", "update"],
                    &[R, "events.k8s.io"],
                    &["events"],
                ),
                rule(&["create"], &["coordination.k8s.io"], &["leases"]),
                named(
                    &["get", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["kube-controller-manager"],
                ),
                rule(&["create"], &[R], &["secrets", "serviceaccounts"]),
                rule(&["delete"], &[R], &["secrets"]),
                rule(
                    &["get"],
                    &[R],
                    &["configmaps", "namespaces", "secrets", "serviceaccounts"],
                ),
                rule(&["update"], &[R], &["secrets", "serviceaccounts"]),
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["create"], &[R], &["serviceaccounts/token"]),
            ],
        ),
        // k1s: what the join token may do — obtain a node client certificate, or, for a
        // joining server, the shared datastore.
        cluster_role(
            "system:k1s:agent-bootstrapper",
            &[],
            vec![
                urls(&["post", "create"], &["/k1s/v1/node-certificate"]),
                urls(&["get"], &["/k1s/v1/server-join"]),
            ],
        ),
    ]
}

/// Every bootstrap ClusterRoleBinding.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", &["Group:system:masters"]),
        binding(
            "system:basic-user",
            "system:basic-user",
            &["Group:system:authenticated"],
        ),
        binding(
            "system:discovery",
            "system:discovery",
            &["Group:system:authenticated"],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["Group:system:authenticated", "Group:system:unauthenticated"],
        ),
        binding(
            "system:monitoring",
            "system:monitoring",
            &["Group:system:monitoring"],
        ),
        binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            &["Group:system:serviceaccounts"],
        ),
        binding("system:node", "system:node", &[]),
        binding(
            "system:node-proxier",
            "system:node-proxier",
            &["User:system:kube-proxy"],
        ),
        // k1s's own: every node runs the service proxy in its kubelet's process, with the
        // node's credentials (k3s issues its embedded kube-proxy a certificate of its own).
        binding(
            "k1s:service-proxy",
            "k1s:service-proxy",
            &["Group:system:nodes"],
        ),
        binding(
            "k1s:pod-network",
            "k1s:pod-network",
            &["Group:system:nodes"],
        ),
        binding(
            "k1s:network-policy",
            "k1s:network-policy",
            &["Group:system:k1s:networks"],
        ),
        binding(
            "system:kube-dns",
            "system:kube-dns",
            &["ServiceAccount:kube-system:kube-dns"],
        ),
        binding(
            "system:kube-scheduler",
            "system:kube-scheduler",
            &["User:system:kube-scheduler"],
        ),
        binding(
            "system:volume-scheduler",
            "system:volume-scheduler",
            &["User:system:kube-scheduler"],
        ),
        binding(
            "system:kube-controller-manager",
            "system:kube-controller-manager",
            &["User:system:kube-controller-manager"],
        ),
        binding(
            "system:k1s:agent-bootstrapper",
            "system:k1s:agent-bootstrapper",
            &["Group:system:bootstrappers:k1s"],
        ),
    ]
}

/// Creates missing bootstrap objects and restores what auto-updated ones lost.
pub async fn reconcile(rest: &Rest) -> Result<(), ApiError> {
    let group = "rbac.authorization.k8s.io";
    for (kind, objects, list_key) in [
        ("ClusterRole", cluster_roles(), "rules"),
        ("ClusterRoleBinding", cluster_role_bindings(), "subjects"),
    ] {
        let res = rest
            .registry
            .builtin_kind(group, kind)
            .ok_or_else(ApiError::no_route)?;
        let opts = crate::rest::WriteOptions {
            field_manager: Some("k1s-rbac-bootstrap".into()),
            ..Default::default()
        };
        for obj in objects {
            let name = obj["metadata"]["name"].as_str().unwrap_or("").to_owned();
            match rest.create(&res, None, obj.clone(), &opts).await {
                Ok(_) => continue,
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
            // Exists: add back what it lacks, unless its owner opted out.
            let missing = |cur: &Value| -> Vec<Value> {
                if cur["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"]
                    == "false"
                    || cur.get("aggregationRule").is_some_and(|a| !a.is_null())
                {
                    return Vec::new();
                }
                let have = cur[list_key].as_array().cloned().unwrap_or_default();
                obj[list_key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|item| !have.contains(item))
                    .cloned()
                    .collect()
            };
            if missing(&rest.get(&res, None, &name).await?).is_empty() {
                continue;
            }
            tracing::info!(kind, %name, "restoring bootstrap RBAC {list_key}");
            rest.read_modify_write(&res, None, &name, None, &opts, |cur| {
                let mut next = cur.clone();
                let add = missing(cur);
                match next[list_key].as_array_mut() {
                    Some(list) => list.extend(add),
                    None => next[list_key] = Value::Array(add),
                }
                Ok(next)
            })
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_names_a_bootstrap_role() {
        let roles: Vec<Value> = cluster_roles();
        let names: Vec<&str> = roles
            .iter()
            .filter_map(|r| r["metadata"]["name"].as_str())
            .collect();
        for b in cluster_role_bindings() {
            let role = b["roleRef"]["name"].as_str().unwrap();
            assert!(names.contains(&role), "{role}");
        }
        assert_eq!(subject("Group:system:masters")["kind"], "Group");
        assert_eq!(
            subject("ServiceAccount:kube-system:x")["namespace"],
            "kube-system"
        );
    }
}

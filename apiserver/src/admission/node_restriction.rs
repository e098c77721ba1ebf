//! NodeRestriction: what a kubelet identity may write beyond what the Node authorizer lets it
//! reach. It may create only mirror pods bound to itself that reference no secrets,
//! configmaps, PVCs or ServiceAccounts; it may not set labels in the restricted
//! `kubernetes.io`/`k8s.io` namespaces (other than the kubelet's own ones) nor change its
//! taints after registration; and it may write only its own Node, node Lease and CSINode.

use serde_json::Value;

use super::{Operation, Request, forbidden};
use crate::status::ApiError;
use crate::user::UserInfo;

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Labels a kubelet may set on its Node although they are in a restricted namespace.
fn label_allowed(key: &str) -> bool {
    const ALLOWED: &[&str] = &[
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    ];
    let (prefix, _) = key.split_once('/').unwrap_or(("", key));
    let restricted = prefix == "kubernetes.io"
        || prefix.ends_with(".kubernetes.io")
        || prefix == "k8s.io"
        || prefix.ends_with(".k8s.io");
    if !restricted {
        return true;
    }
    if prefix == "node-restriction.kubernetes.io"
        || prefix.ends_with(".node-restriction.kubernetes.io")
    {
        return false;
    }
    ALLOWED.contains(&key)
        || prefix == "kubelet.kubernetes.io"
        || prefix.ends_with(".kubelet.kubernetes.io")
        || prefix == "node.kubernetes.io"
        || prefix.ends_with(".node.kubernetes.io")
}

fn labels(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

pub fn admit(
    req: &Request<'_>,
    user: &UserInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(node) = user.node_name() else {
        return Ok(());
    };
    let deny = |why: String| Err(forbidden(req.res, obj, why));
    if req.is("", "Pod") && req.creating() {
        if !obj["metadata"]["annotations"][MIRROR_ANNOTATION].is_string() {
            return deny(format!(
                "pod does not have {MIRROR_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
            ));
        }
        if obj["spec"]["nodeName"] != node {
            return deny(format!(
                "node {node:?} can only create pods with spec.nodeName set to itself"
            ));
        }
        let links = crate::authz::node::project_pod(obj);
        let sa = obj["spec"]["serviceAccountName"].as_str().unwrap_or("");
        if !sa.is_empty() {
            return deny("pod with spec.serviceAccountName is not allowed".into());
        }
        if let Some(l) = links {
            if !l.secrets.is_empty() {
                return deny(format!(
                    "node {node:?} can not create pods that reference secrets"
                ));
            }
            if !l.configmaps.is_empty() {
                return deny(format!(
                    "node {node:?} can not create pods that reference configmaps"
                ));
            }
            if !l.claims.is_empty() {
                return deny(format!(
                    "node {node:?} can not create pods that reference persistentvolumeclaims"
                ));
            }
        }
        for o in obj["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if o["kind"] != "Node" || o["name"] != node {
                return deny(format!(
                    "node {node:?} can only create pods with an owner reference set to itself"
                ));
            }
        }
    }
    // The authorizer lets a node create any Lease or CSINode: only its own gets through.
    for (group, kind, what) in [
        ("coordination.k8s.io", "Lease", "node lease"),
        ("storage.k8s.io", "CSINode", "CSINode"),
    ] {
        if req.is(group, kind) && obj["metadata"]["name"] != node {
            return deny(format!(
                "can only access {what} with the same name as the requesting node"
            ));
        }
    }
    if req.is("", "Node") && req.subresource.is_none() {
        if obj["metadata"]["name"] != node {
            return deny(format!(
                "node {node:?} is not allowed to modify node {:?}",
                obj["metadata"]["name"].as_str().unwrap_or("")
            ));
        }
        let before = old.map(labels).unwrap_or_default();
        for (k, v) in labels(obj) {
            let unchanged = before.iter().any(|(bk, bv)| *bk == k && *bv == v);
            if !unchanged && !label_allowed(&k) {
                return deny(format!("is not allowed to modify labels: {k}"));
            }
        }
        for (k, _) in &before {
            if !label_allowed(k) && !labels(obj).iter().any(|(nk, _)| nk == k) {
                return deny(format!("is not allowed to modify labels: {k}"));
            }
        }
        if req.operation == Operation::Update
            && let Some(old) = old
            && old["spec"]["taints"] != obj["spec"]["taints"]
        {
            return deny("node is not allowed to modify taints".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_labels() {
        assert!(label_allowed("example.com/x"));
        assert!(label_allowed("kubernetes.io/hostname"));
        assert!(label_allowed(
            "node.kubernetes.io/exclude-from-external-load-balancers"
        ));
        assert!(!label_allowed("node-role.kubernetes.io/control-plane"));
        assert!(!label_allowed("node-restriction.kubernetes.io/x"));
        assert!(!label_allowed("k8s.io/x"));
    }
}

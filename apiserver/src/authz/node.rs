//! The Node authorizer: what a kubelet identity (`system:node:NAME` in `system:nodes`) may
//! reach. Its own Node and Lease and CSINode; pods bound to it (read, status, delete) and,
//! through them, the Secrets, ConfigMaps, PVCs, PVs and ServiceAccount tokens those pods use
//! (and the CSI secrets of those PVs: nodeStage/nodePublish/nodeExpand/controller* refs);
//! VolumeAttachments for it; events; and read access to the cluster information a kubelet
//! needs (services, endpoints, CSIDrivers, RuntimeClasses).
//!
//! Lists and watches of pods and nodes must be scoped to the node by field selector
//! (`spec.nodeName=NAME`, `metadata.name=NAME`), as with upstream's AuthorizeNodeWithSelectors.
//! Anything else gets no opinion (RBAC decides, and binds nothing to nodes by default), with
//! upstream's reason.

use std::sync::Arc;
use std::time::Duration;

use k1s_store::Store;

use crate::encryption::Transformer;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Attributes, Decision, single_name};
use crate::mirror::{self, Mirror, Read};
use crate::rest::Rest;

/// What the graph keeps of a pod bound to a node.
#[derive(Debug, Clone)]
pub struct PodLinks {
    pub node: String,
    pub namespace: String,
    pub name: String,
    pub service_account: String,
    pub secrets: Vec<String>,
    pub configmaps: Vec<String>,
    pub claims: Vec<String>,
}

fn push_unique(v: &mut Vec<String>, s: Option<&str>) {
    if let Some(s) = s.filter(|s| !s.is_empty())
        && !v.iter().any(|x| x == s)
    {
        v.push(s.to_owned());
    }
}

/// The objects a pod references (volumes, env, envFrom, imagePullSecrets).
pub fn project_pod(pod: &Value) -> Option<PodLinks> {
    let spec = &pod["spec"];
    let node = spec["nodeName"].as_str().filter(|n| !n.is_empty())?;
    let mut l = PodLinks {
        node: node.to_owned(),
        namespace: pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        name: pod["metadata"]["name"].as_str().unwrap_or("").to_owned(),
        service_account: spec["serviceAccountName"]
            .as_str()
            .unwrap_or("default")
            .to_owned(),
        secrets: Vec::new(),
        configmaps: Vec::new(),
        claims: Vec::new(),
    };
    for s in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        push_unique(&mut l.secrets, s["name"].as_str());
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        push_unique(&mut l.secrets, v["secret"]["secretName"].as_str());
        push_unique(&mut l.configmaps, v["configMap"]["name"].as_str());
        push_unique(
            &mut l.claims,
            v["persistentVolumeClaim"]["claimName"].as_str(),
        );
        for src in v["projected"]["sources"].as_array().into_iter().flatten() {
            push_unique(&mut l.secrets, src["secret"]["name"].as_str());
            push_unique(&mut l.configmaps, src["configMap"]["name"].as_str());
        }
        for key in [
            "csi",
            "cephfs",
            "rbd",
            "iscsi",
            "flexVolume",
            "azureFile",
            "scaleIO",
            "storageos",
        ] {
            push_unique(
                &mut l.secrets,
                v[key]["nodePublishSecretRef"]["name"].as_str(),
            );
            push_unique(&mut l.secrets, v[key]["secretRef"]["name"].as_str());
        }
        if v["ephemeral"].is_object() {
            // Generic ephemeral volumes: the claim is named <pod>-<volume>.
            let claim = format!("{}-{}", l.name, v["name"].as_str().unwrap_or(""));
            push_unique(&mut l.claims, Some(&claim));
        }
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["env"].as_array().into_iter().flatten() {
                push_unique(
                    &mut l.secrets,
                    e["valueFrom"]["secretKeyRef"]["name"].as_str(),
                );
                push_unique(
                    &mut l.configmaps,
                    e["valueFrom"]["configMapKeyRef"]["name"].as_str(),
                );
            }
            for e in c["envFrom"].as_array().into_iter().flatten() {
                push_unique(&mut l.secrets, e["secretRef"]["name"].as_str());
                push_unique(&mut l.configmaps, e["configMapRef"]["name"].as_str());
            }
        }
    }
    Some(l)
}

/// A PVC's bound volume: (namespace, name, volumeName).
fn project_claim(pvc: &Value) -> Option<(String, String, String)> {
    Some((
        pvc["metadata"]["namespace"].as_str()?.to_owned(),
        pvc["metadata"]["name"].as_str()?.to_owned(),
        pvc["spec"]["volumeName"]
            .as_str()
            .filter(|v| !v.is_empty())?
            .to_owned(),
    ))
}

/// A PV's name and the CSI secrets (namespace, name) it references.
type VolumeSecrets = (String, Vec<(String, String)>);

/// A PV's name and the CSI secrets it references.
fn project_volume(pv: &Value) -> Option<VolumeSecrets> {
    let name = pv["metadata"]["name"].as_str()?.to_owned();
    let csi = &pv["spec"]["csi"];
    let secrets = [
        "nodeStageSecretRef",
        "nodePublishSecretRef",
        "nodeExpandSecretRef",
        "controllerPublishSecretRef",
        "controllerExpandSecretRef",
    ]
    .iter()
    .filter_map(|k| {
        let r = &csi[*k];
        Some((
            r["namespace"].as_str()?.to_owned(),
            r["name"].as_str().filter(|n| !n.is_empty())?.to_owned(),
        ))
    })
    .collect();
    Some((name, secrets))
}

/// A VolumeAttachment's (name, node).
fn project_attachment(va: &Value) -> Option<(String, String)> {
    Some((
        va["metadata"]["name"].as_str()?.to_owned(),
        va["spec"]["nodeName"].as_str()?.to_owned(),
    ))
}

/// The node authorizer and its graph.
pub struct NodeAuthorizer {
    pods: Arc<Mirror<PodLinks>>,
    claims: Arc<Mirror<(String, String, String)>>,
    attachments: Arc<Mirror<(String, String)>>,
    volumes: Arc<Mirror<VolumeSecrets>>,
}

fn no_relationship(node: &str) -> Decision {
    Decision::NoOpinion(format!(
        "no relationship found between node '{node}' and this object"
    ))
}

impl NodeAuthorizer {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            pods: Mirror::new(),
            claims: Mirror::new(),
            attachments: Mirror::new(),
            volumes: Mirror::new(),
        })
    }

    /// Runs the mirrors. The pods' mirror reads the REST layer's decode of each revision
    /// (which its watches of pods make anyway); the others parse what they need through
    /// `encryption`.
    pub(super) fn spawn(
        &self,
        tasks: &tokio_util::task::TaskTracker,
        store: Arc<dyn Store>,
        encryption: Arc<Transformer>,
        rest: &Arc<Rest>,
        cancel: &CancellationToken,
    ) {
        let pods = match rest.registry.builtin_kind("", "Pod") {
            Some(res) => Read::Shared(rest.clone(), res),
            None => Read::Skim(encryption.clone()),
        };
        tasks.spawn(mirror::run(
            self.pods.clone(),
            store.clone(),
            pods,
            "/registry/core/pods/".into(),
            project_pod,
            cancel.clone(),
        ));
        tasks.spawn(mirror::run(
            self.claims.clone(),
            store.clone(),
            Read::Skim(encryption.clone()),
            "/registry/core/persistentvolumeclaims/".into(),
            project_claim,
            cancel.clone(),
        ));
        tasks.spawn(mirror::run(
            self.volumes.clone(),
            store.clone(),
            Read::Skim(encryption.clone()),
            "/registry/core/persistentvolumes/".into(),
            project_volume,
            cancel.clone(),
        ));
        tasks.spawn(mirror::run(
            self.attachments.clone(),
            store,
            Read::Skim(encryption),
            "/registry/storage.k8s.io/volumeattachments/".into(),
            project_attachment,
            cancel.clone(),
        ));
    }

    /// Waits until the graph reflects the store as of now.
    pub async fn sync(&self, store: &dyn Store, timeout: Duration) -> bool {
        let (a, b, c, d) = tokio::join!(
            self.pods.sync(store, timeout),
            self.claims.sync(store, timeout),
            self.attachments.sync(store, timeout),
            self.volumes.sync(store, timeout),
        );
        a && b && c && d
    }

    /// Whether a PV referencing secret `ns/name` is bound to a claim a pod on `node` uses.
    fn volume_secret(&self, node: &str, ns: &str, name: &str) -> bool {
        let pvs: Vec<String> = self.volumes.read(|v| {
            v.values()
                .filter(|(_, secrets)| secrets.iter().any(|(sns, sn)| sns == ns && sn == name))
                .map(|(pv, _)| pv.clone())
                .collect()
        });
        pvs.iter().any(|pv| self.pv_used_by(node, pv))
    }

    /// Whether PV `pv` is bound to a claim a pod on `node` uses.
    fn pv_used_by(&self, node: &str, pv: &str) -> bool {
        let claims: Vec<(String, String)> = self.claims.read(|c| {
            c.values()
                .filter(|(_, _, vol)| vol == pv)
                .map(|(ns, n, _)| (ns.clone(), n.clone()))
                .collect()
        });
        claims.iter().any(|(cns, cname)| {
            self.any_pod(node, |p| {
                p.namespace == *cns && p.claims.iter().any(|c| c == cname)
            })
        })
    }

    /// Whether a pod bound to `node` satisfies `f`.
    fn any_pod(&self, node: &str, f: impl Fn(&PodLinks) -> bool) -> bool {
        self.pods
            .read(|pods| pods.values().any(|p| p.node == node && f(p)))
    }

    pub fn authorize(&self, a: &Attributes) -> Decision {
        let Some(node) = a.user.node_name() else {
            return Decision::NoOpinion(String::new());
        };
        if !a.resource_request {
            return Decision::NoOpinion(String::new());
        }
        let verb = a.verb.as_str();
        let read = matches!(verb, "get" | "list" | "watch");
        let ns = a.namespace.as_str();
        let name = a.name.as_str();
        let allow = |ok: bool| {
            if ok {
                Decision::Allow
            } else {
                no_relationship(node)
            }
        };
        match (
            a.api_group.as_str(),
            a.resource.as_str(),
            a.subresource.as_str(),
        ) {
            ("", "nodes", "") => match verb {
                "list" | "watch" => allow(name == node),
                // NodeRestriction checks the name of a created Node.
                "create" => Decision::Allow,
                "get" | "update" | "patch" | "delete" => allow(name == node),
                _ => no_relationship(node),
            },
            ("", "nodes", "status") => {
                allow(name == node && matches!(verb, "get" | "update" | "patch"))
            }
            ("", "pods", "") => match verb {
                "list" | "watch" => allow(
                    a.field_selector
                        .as_deref()
                        .and_then(|fs| single_name(fs, "spec.nodeName"))
                        == Some(node),
                ),
                "get" | "delete" => {
                    allow(self.any_pod(node, |p| p.namespace == ns && p.name == name))
                }
                // Mirror pods of static pods; NodeRestriction checks what is created.
                "create" => Decision::Allow,
                _ => no_relationship(node),
            },
            ("", "pods", "status") => allow(
                matches!(verb, "get" | "update" | "patch")
                    && self.any_pod(node, |p| p.namespace == ns && p.name == name),
            ),
            ("", "pods", "eviction") => allow(
                verb == "create" && self.any_pod(node, |p| p.namespace == ns && p.name == name),
            ),
            ("", "secrets", "") => allow(
                matches!(verb, "get" | "list" | "watch")
                    && !name.is_empty()
                    && (self.any_pod(node, |p| {
                        p.namespace == ns && p.secrets.iter().any(|s| s == name)
                    }) || self.volume_secret(node, ns, name)),
            ),
            ("", "configmaps", "") => allow(
                matches!(verb, "get" | "list" | "watch")
                    && !name.is_empty()
                    && self.any_pod(node, |p| {
                        p.namespace == ns && p.configmaps.iter().any(|s| s == name)
                    }),
            ),
            ("", "persistentvolumeclaims", sub @ ("" | "status")) => allow(
                (verb == "get" || (sub == "status" && matches!(verb, "update" | "patch")))
                    && self.any_pod(node, |p| {
                        p.namespace == ns && p.claims.iter().any(|c| c == name)
                    }),
            ),
            ("", "persistentvolumes", "") => allow(verb == "get" && self.pv_used_by(node, name)),
            ("", "serviceaccounts", "") => allow(
                verb == "get"
                    && self.any_pod(node, |p| p.namespace == ns && p.service_account == name),
            ),
            ("", "serviceaccounts", "token") => allow(
                verb == "create"
                    && self.any_pod(node, |p| p.namespace == ns && p.service_account == name),
            ),
            // A create names no object here: NodeRestriction admission checks its name.
            ("coordination.k8s.io", "leases", "") => allow(
                ns == "kube-node-lease"
                    && (name == node || verb == "create")
                    && matches!(verb, "get" | "create" | "update" | "patch" | "delete"),
            ),
            ("storage.k8s.io", "csinodes", "") => allow(
                (name == node || verb == "create")
                    && matches!(
                        verb,
                        "get" | "create" | "update" | "patch" | "delete" | "list" | "watch"
                    ),
            ),
            ("storage.k8s.io", "volumeattachments", "") => allow(
                verb == "get"
                    && self
                        .attachments
                        .read(|v| v.values().any(|(n, nd)| n == name && nd == node)),
            ),
            ("" | "events.k8s.io", "events", "") => {
                allow(matches!(verb, "create" | "update" | "patch"))
            }
            ("", "services" | "endpoints", "") | ("discovery.k8s.io", "endpointslices", "") => {
                allow(read)
            }
            ("storage.k8s.io", "csidrivers" | "storageclasses", "")
            | ("node.k8s.io", "runtimeclasses", "") => allow(read),
            ("authentication.k8s.io", "tokenreviews", "")
            | ("authorization.k8s.io", "subjectaccessreviews" | "localsubjectaccessreviews", "") => {
                allow(verb == "create")
            }
            _ => Decision::NoOpinion(String::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{NODES, UserInfo};
    use serde_json::json;

    fn node_user(n: &str) -> UserInfo {
        UserInfo::new(format!("system:node:{n}"), [NODES.to_owned()])
    }

    fn req(user: &UserInfo, verb: &str, resource: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            user: user.clone(),
            verb: verb.into(),
            resource_request: true,
            resource: resource.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn pods_link_their_objects() {
        let pod = json!({"metadata": {"namespace": "d", "name": "p"}, "spec": {
            "nodeName": "n1", "serviceAccountName": "app",
            "volumes": [{"name": "v", "secret": {"secretName": "s1"}},
                        {"name": "c", "configMap": {"name": "cm1"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "pvc1"}}],
            "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}],
                            "envFrom": [{"configMapRef": {"name": "cm2"}}]}],
        }});
        let l = project_pod(&pod).unwrap();
        assert_eq!(l.secrets, ["s1", "s2"]);
        assert_eq!(l.configmaps, ["cm1", "cm2"]);
        assert_eq!(l.claims, ["pvc1"]);
        assert!(
            project_pod(&json!({"spec": {}})).is_none(),
            "unbound pods are not in the graph"
        );
        let authz = NodeAuthorizer::new();
        authz.pods.write_for_test("k", l);
        let n1 = node_user("n1");
        let n2 = node_user("n2");
        assert_eq!(
            authz.authorize(&req(&n1, "get", "secrets", "d", "s1")),
            Decision::Allow
        );
        assert_eq!(
            authz.authorize(&req(&n1, "get", "pods", "d", "p")),
            Decision::Allow
        );
        assert!(
            matches!(authz.authorize(&req(&n2, "get", "secrets", "d", "s1")), Decision::NoOpinion(r) if r.contains("n2"))
        );
        assert!(matches!(
            authz.authorize(&req(&n2, "get", "pods", "d", "p")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            authz.authorize(&req(&n1, "get", "secrets", "d", "other")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            authz.authorize(&req(&n1, "list", "secrets", "d", "")),
            Decision::NoOpinion(_)
        ));
        let mut list = req(&n1, "list", "pods", "", "");
        assert!(
            matches!(authz.authorize(&list), Decision::NoOpinion(_)),
            "unscoped pod list"
        );
        list.field_selector = Some("spec.nodeName=n1".into());
        assert_eq!(authz.authorize(&list), Decision::Allow);
        list.field_selector = Some("spec.nodeName=n2".into());
        assert!(matches!(authz.authorize(&list), Decision::NoOpinion(_)));
        assert_eq!(
            authz.authorize(&req(&n1, "get", "nodes", "", "n1")),
            Decision::Allow
        );
        assert!(matches!(
            authz.authorize(&req(&n1, "update", "nodes", "", "n2")),
            Decision::NoOpinion(_)
        ));
    }

    #[test]
    fn csi_secrets_of_a_pv_in_use_on_the_node_are_readable() {
        let pv = json!({"metadata": {"name": "pv1"}, "spec": {"csi": {
            "driver": "d", "volumeHandle": "h",
            "nodeStageSecretRef": {"namespace": "sec", "name": "stage"},
            "nodePublishSecretRef": {"namespace": "sec", "name": "publish"}}}});
        let (name, secrets) = project_volume(&pv).unwrap();
        assert_eq!(name, "pv1");
        assert_eq!(
            secrets,
            [
                ("sec".into(), "stage".into()),
                ("sec".into(), "publish".into())
            ]
        );
        let authz = NodeAuthorizer::new();
        authz.volumes.write_for_test("pv1", (name, secrets));
        authz
            .claims
            .write_for_test("c", ("d".into(), "pvc1".into(), "pv1".into()));
        let pod = json!({"metadata": {"namespace": "d", "name": "p"}, "spec": {
            "nodeName": "n1",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc1"}}]}});
        authz.pods.write_for_test("p", project_pod(&pod).unwrap());
        let (n1, n2) = (node_user("n1"), node_user("n2"));
        for s in ["stage", "publish"] {
            assert_eq!(
                authz.authorize(&req(&n1, "get", "secrets", "sec", s)),
                Decision::Allow
            );
            assert!(matches!(
                authz.authorize(&req(&n2, "get", "secrets", "sec", s)),
                Decision::NoOpinion(_)
            ));
        }
        assert!(matches!(
            authz.authorize(&req(&n1, "get", "secrets", "d", "stage")),
            Decision::NoOpinion(_)
        ));
        assert_eq!(
            authz.authorize(&req(&n1, "get", "persistentvolumes", "", "pv1")),
            Decision::Allow
        );
    }
}

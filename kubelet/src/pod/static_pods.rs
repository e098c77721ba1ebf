//! Static pods (issue #7 §2): pods the kubelet runs from manifest files in a directory
//! (`--pod-manifest-path`, `DATA_DIR/agent/pod-manifests` by default), without the API
//! server, and their mirror pods, which show them in the API.
//!
//! As upstream's file source and mirror client:
//! - every file in the directory not starting with `.` is one Pod (YAML or JSON); a file that
//!   is not a valid Pod is logged and skipped; the directory is read again every
//!   `--file-check-frequency` (20 s);
//! - a static pod is named `NAME-NODE`, in its namespace (`default` when empty), bound to
//!   this node; its UID is a hash of the node, the file and its content (so an edited file is
//!   a new pod), also in the `kubernetes.io/config.hash` annotation; it tolerates every
//!   NoExecute taint;
//! - its mirror pod is a copy in the API with the `kubernetes.io/config.mirror` annotation
//!   (the hash) and the Node as owner. The kubelet creates it, deletes it when its static pod
//!   is gone or changed, and creates it again when someone deletes it (the containers keep
//!   running: only the file controls the pod). Pod status goes to the mirror pod.
//!
//! [`crate::pod::feed`] feeds static pods to pod workers beside the API's pods, and never runs a
//! mirror pod itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use k1s_api::client::{Client, DeleteParams, ResourceRef, WriteParams};
use k8s_openapi::api::core::v1::{Pod, Toleration};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
pub const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
pub const SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";

/// The static pods of `dir`, by UID. Files that are not valid pods are logged and skipped.
pub fn scan(dir: &Path, node: &str) -> BTreeMap<String, Arc<Pod>> {
    let mut pods = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return pods;
    };
    let mut files: Vec<_> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    files.sort();
    for path in files {
        let content = match std::fs::read(&path) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "reading a static pod manifest");
                continue;
            }
        };
        match static_pod(&path, &content, node) {
            Ok(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if pods.insert(uid, Arc::new(pod)).is_some() {
                    tracing::warn!(file = %path.display(), "a static pod manifest repeats another file");
                }
            }
            Err(why) => {
                tracing::warn!(file = %path.display(), %why, "skipping a static pod manifest")
            }
        }
    }
    pods
}

/// Why a manifest file is not a static pod (logged, and the file skipped).
#[derive(Debug, thiserror::Error)]
pub enum StaticPodError {
    #[error("not YAML: {0}")]
    Yaml(#[source] serde_yaml::Error),
    /// The manifest's `kind` and `apiVersion`, as JSON (`null` when missing).
    #[error("kind {kind} apiVersion {api_version}: a static pod manifest is a v1 Pod")]
    NotAPod { kind: Value, api_version: Value },
    #[error("not a Pod: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("metadata.name is required")]
    NoName,
    #[error("spec is required")]
    NoSpec,
    #[error("spec.containers: at least one container is required")]
    NoContainers,
}

/// The static pod of manifest `path` with `content`, on node `node`.
pub fn static_pod(path: &Path, content: &[u8], node: &str) -> Result<Pod, StaticPodError> {
    let value: Value = serde_yaml::from_slice(content).map_err(StaticPodError::Yaml)?;
    if value["kind"] != "Pod" || value["apiVersion"] != "v1" {
        return Err(StaticPodError::NotAPod {
            kind: value["kind"].clone(),
            api_version: value["apiVersion"].clone(),
        });
    }
    let mut pod: Pod = serde_json::from_value(value).map_err(StaticPodError::Decode)?;
    let name = pod
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(StaticPodError::NoName)?;
    let spec = pod.spec.as_mut().ok_or(StaticPodError::NoSpec)?;
    if spec.containers.is_empty() {
        return Err(StaticPodError::NoContainers);
    }
    let mut h = Sha256::new();
    h.update(format!("host:{node}\nfile:{}\n", path.display()));
    h.update(content);
    let hash: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    spec.node_name = Some(node.to_string());
    spec.tolerations
        .get_or_insert_with(Vec::new)
        .push(Toleration {
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        });
    let m = &mut pod.metadata;
    m.name = Some(format!("{name}-{}", node.to_lowercase()));
    if m.namespace.as_deref().unwrap_or("").is_empty() {
        m.namespace = Some("default".into());
    }
    m.uid = Some(hash.clone());
    let annotations = m.annotations.get_or_insert_with(Default::default);
    annotations.insert(HASH_ANNOTATION.into(), hash);
    annotations.insert(SOURCE_ANNOTATION.into(), "file".into());
    annotations.insert(SEEN_ANNOTATION.into(), k1s_api::events::now_rfc3339());
    pod.status = None;
    Ok(pod)
}

/// Whether an API pod is a mirror pod (the kubelet runs its static pod, not it).
pub fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_string()
}

/// The UID under which the kubelet keeps an API pod's containers, logs and sandbox: its own,
/// or for a mirror pod its static pod's (the mirror annotation).
pub fn runtime_uid(pod: &Value) -> &str {
    pod["metadata"]["annotations"][MIRROR_ANNOTATION]
        .as_str()
        .or_else(|| pod["metadata"]["uid"].as_str())
        .unwrap_or_default()
}

/// A mirror pod as the API shows it: what the reconciliation needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    pub uid: String,
    /// Its `kubernetes.io/config.mirror` annotation: the hash of the static pod it shows.
    pub hash: String,
    pub deleting: bool,
}

impl Mirror {
    pub fn of(pod: &Value) -> Option<(String, Mirror)> {
        let m = &pod["metadata"];
        let key = format!(
            "{}/{}",
            m["namespace"].as_str().unwrap_or(""),
            m["name"].as_str()?
        );
        Some((
            key,
            Mirror {
                uid: m["uid"].as_str().unwrap_or("").into(),
                hash: m["annotations"][MIRROR_ANNOTATION]
                    .as_str()
                    .unwrap_or("")
                    .into(),
                deleting: !m["deletionTimestamp"].is_null(),
            },
        ))
    }
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// What to do to the API's mirror pods so they show `statics` and nothing else.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// (namespace/name, UID precondition) of mirror pods to delete.
    pub delete: Vec<(String, String)>,
    /// UIDs of static pods whose mirror pod is to be created.
    pub create: Vec<String>,
}

/// Compares the static pods with the mirror pods the API has (by namespace/name).
pub fn plan(statics: &BTreeMap<String, Arc<Pod>>, mirrors: &BTreeMap<String, Mirror>) -> Plan {
    let mut plan = Plan::default();
    for (uid, pod) in statics {
        match mirrors.get(&key_of(pod)) {
            None => plan.create.push(uid.clone()),
            Some(m) if m.hash != *uid || m.deleting => {
                // Outdated, or deleted by someone: replace it (created once the old is gone).
                plan.delete.push((key_of(pod), m.uid.clone()));
            }
            Some(_) => {}
        }
    }
    for (key, m) in mirrors {
        if !statics.values().any(|p| key_of(p) == *key) {
            plan.delete.push((key.clone(), m.uid.clone()));
        }
    }
    plan
}

/// The mirror pod of static pod `pod`: a copy without the UID, with the mirror annotation and
/// the Node (`node_uid`) as owner.
pub fn mirror_object(pod: &Pod, node: &str, node_uid: &str) -> Value {
    let mut v = serde_json::to_value(pod).unwrap_or(Value::Null);
    let m = &mut v["metadata"];
    if let Some(obj) = m.as_object_mut() {
        obj.remove("uid");
        obj.remove("resourceVersion");
    }
    let hash = pod.metadata.uid.clone().unwrap_or_default();
    m["annotations"][MIRROR_ANNOTATION] = json!(hash);
    m["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": true,
    }]);
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Pod");
    if let Some(spec) = v["spec"].as_object_mut() {
        spec.remove("serviceAccountName");
        spec.remove("serviceAccount");
    }
    v
}

/// Carries out `plan` through the API; failures are logged (the next round tries again).
pub async fn apply(
    client: &dyn Client,
    node: &str,
    statics: &BTreeMap<String, Arc<Pod>>,
    plan: &Plan,
) {
    for (key, uid) in &plan.delete {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let r = ResourceRef::new("", "v1", "pods", Some(ns));
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            precondition_uid: Some(uid.clone()),
            ..Default::default()
        };
        match client.delete(&r, name, &params).await {
            Ok(_) => tracing::info!(pod = %key, "deleted a mirror pod"),
            Err(e) if e.is_not_found() || e.is_conflict() => {}
            Err(e) => tracing::warn!(pod = %key, error = %e, "deleting a mirror pod"),
        }
    }
    if plan.create.is_empty() {
        return;
    }
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let node_uid = match client.get(&nodes, node).await {
        Ok(n) => n["metadata"]["uid"].as_str().unwrap_or("").to_owned(),
        Err(e) => {
            tracing::debug!(error = %e, "no Node yet for mirror pods");
            return;
        }
    };
    for uid in &plan.create {
        let Some(pod) = statics.get(uid) else {
            continue;
        };
        let r = ResourceRef::new("", "v1", "pods", pod.metadata.namespace.as_deref());
        match client
            .create(
                &r,
                mirror_object(pod, node, &node_uid),
                &WriteParams::default(),
            )
            .await
        {
            Ok(_) => tracing::info!(pod = %key_of(pod), "created a mirror pod"),
            // A pod of that name that is not our mirror: the plan deletes it next round.
            Err(e) if e.is_already_exists() => {}
            Err(e) => tracing::warn!(pod = %key_of(pod), error = %e, "creating a mirror pod"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n";

    #[test]
    fn a_manifest_becomes_a_static_pod_of_this_node() {
        let pod = static_pod(Path::new("/m/web.yaml"), MANIFEST.as_bytes(), "Node-1").unwrap();
        let m = &pod.metadata;
        assert_eq!(m.name.as_deref(), Some("web-node-1"));
        assert_eq!(m.namespace.as_deref(), Some("default"));
        let uid = m.uid.clone().unwrap();
        assert_eq!(uid.len(), 32);
        let a = m.annotations.as_ref().unwrap();
        assert_eq!(a[HASH_ANNOTATION], uid);
        assert_eq!(a[SOURCE_ANNOTATION], "file");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("Node-1"));
        assert!(spec.tolerations.as_ref().unwrap().iter().any(|t| {
            t.operator.as_deref() == Some("Exists") && t.effect.as_deref() == Some("NoExecute")
        }));
        // Same file and content: same UID; another content, file or node: another.
        let again = static_pod(Path::new("/m/web.yaml"), MANIFEST.as_bytes(), "Node-1").unwrap();
        assert_eq!(again.metadata.uid, Some(uid.clone()));
        let edited = MANIFEST.replace("busybox", "busybox:1");
        for other in [
            static_pod(Path::new("/m/web.yaml"), edited.as_bytes(), "Node-1"),
            static_pod(Path::new("/m/web2.yaml"), MANIFEST.as_bytes(), "Node-1"),
            static_pod(Path::new("/m/web.yaml"), MANIFEST.as_bytes(), "node-2"),
        ] {
            assert_ne!(other.unwrap().metadata.uid, Some(uid.clone()));
        }
    }

    #[test]
    fn bad_manifests_say_why() {
        for (content, want) in [
            ("{", "not YAML"),
            (
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
                "v1 Pod",
            ),
            (
                "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n",
                "metadata.name",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
                "containers",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n",
                "not a Pod",
            ),
        ] {
            let e = static_pod(Path::new("/m/x"), content.as_bytes(), "n")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{content}: {e}");
        }
    }

    #[test]
    fn scan_reads_every_visible_file_and_skips_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("web.yaml"), MANIFEST).unwrap();
        std::fs::write(
            dir.path().join("db.json"),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"db","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), MANIFEST).unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "nope: [").unwrap();
        let pods = scan(dir.path(), "n1");
        let mut keys: Vec<String> = pods.values().map(|p| key_of(p)).collect();
        keys.sort();
        assert_eq!(keys, ["default/web-n1", "kube-system/db-n1"]);
        assert!(scan(&dir.path().join("missing"), "n1").is_empty());
    }

    #[test]
    fn plan_creates_missing_replaces_outdated_and_deleted_and_drops_orphans() {
        let pod =
            Arc::new(static_pod(Path::new("/m/web.yaml"), MANIFEST.as_bytes(), "n1").unwrap());
        let uid = pod.metadata.uid.clone().unwrap();
        let statics: BTreeMap<_, _> = [(uid.clone(), pod)].into();
        let mirror = |hash: &str, deleting| Mirror {
            uid: "api-uid".into(),
            hash: hash.into(),
            deleting,
        };
        assert_eq!(
            plan(&statics, &BTreeMap::new()),
            Plan {
                delete: vec![],
                create: vec![uid.clone()]
            }
        );
        let current: BTreeMap<_, _> = [("default/web-n1".to_string(), mirror(&uid, false))].into();
        assert_eq!(plan(&statics, &current), Plan::default());
        for m in [mirror("old", false), mirror(&uid, true)] {
            let mirrors: BTreeMap<_, _> = [("default/web-n1".to_string(), m)].into();
            assert_eq!(
                plan(&statics, &mirrors).delete,
                [("default/web-n1".to_string(), "api-uid".to_string())]
            );
        }
        let orphan: BTreeMap<_, _> = [("default/gone-n1".to_string(), mirror("x", false))].into();
        let p = plan(&BTreeMap::new(), &orphan);
        assert_eq!(
            p.delete,
            [("default/gone-n1".to_string(), "api-uid".to_string())]
        );
    }

    #[test]
    fn the_mirror_is_a_copy_owned_by_the_node() {
        let pod = static_pod(Path::new("/m/web.yaml"), MANIFEST.as_bytes(), "n1").unwrap();
        let v = mirror_object(&pod, "n1", "node-uid");
        assert!(v["metadata"]["uid"].is_null());
        assert_eq!(
            v["metadata"]["annotations"][MIRROR_ANNOTATION],
            json!(pod.metadata.uid)
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Node");
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "node-uid");
        assert_eq!(v["spec"]["nodeName"], "n1");
        assert!(is_mirror(&v));
        // The kubelet finds the mirror pod's containers under the static pod's UID.
        let mut api = v.clone();
        api["metadata"]["uid"] = json!("api-uid");
        assert_eq!(runtime_uid(&api), pod.metadata.uid.as_deref().unwrap());
        assert_eq!(runtime_uid(&json!({"metadata": {"uid": "u"}})), "u");
    }
}

//! What installing a CSI driver on this node changes in the API, as upstream's node info
//! manager: the Node's `csi.volume.kubernetes.io/nodeid` annotation (a JSON map driver → node
//! id), the topology labels from NodeGetInfo's accessible topology, capacity and allocatable
//! `attachable-volumes-csi-<driver>` when the plugin gives `max_volumes_per_node`, and the
//! driver's entry in the `CSINode` named like the node (owned by the Node). Uninstalling
//! removes the driver's entry, annotation key, topology labels and attach limit.
//!
//! The Node's status is merge-patched here and by the kubelet's status loop (`node.rs`); a
//! merge patch of `status.capacity` keeps keys it does not mention, so the heartbeat leaves
//! the attach limit alone.

use std::collections::BTreeMap;

use k1s_api::client::{Client, ClientError, Patch, ResourceRef, WriteParams};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The Node annotation with the driver → node id map.
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";
/// Prefix of the attach-limit resource.
pub const ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";
/// Longest resource name (a label value's limit).
const RESOURCE_NAME_MAX: usize = 63;

/// What a driver reported in NodeGetInfo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverInfo {
    pub name: String,
    pub node_id: String,
    pub max_volumes: i64,
    pub topology: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeInfoError {
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error(
        "topology label {key}={new} of driver {driver} collides with the node's {key}={existing}"
    )]
    LabelCollision {
        driver: String,
        key: String,
        existing: String,
        new: String,
    },
    #[error("node {0} has no uid")]
    NoUid(String),
}

/// `attachable-volumes-csi-<driver>`, shortened with a hash when the driver name is long
/// (upstream hashes with SHA-1; k1s with SHA-256, same shape).
pub fn attach_limit_key(driver: &str) -> String {
    if ATTACH_LIMIT_PREFIX.len() + driver.len() < RESOURCE_NAME_MAX {
        return format!("{ATTACH_LIMIT_PREFIX}{driver}");
    }
    let head: String = driver.chars().take(23).collect();
    let hash = hex(&Sha256::digest(driver.as_bytes()));
    format!("{ATTACH_LIMIT_PREFIX}{head}{}", &hash[..16])
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn nodes() -> ResourceRef {
    ResourceRef::new("", "v1", "nodes", None)
}

fn csinodes() -> ResourceRef {
    ResourceRef::new("storage.k8s.io", "v1", "csinodes", None)
}

/// The node id map in the Node's annotation (empty when missing or unparsable).
pub fn node_ids(node: &Value) -> Map<String, Value> {
    node["metadata"]["annotations"][NODE_ID_ANNOTATION]
        .as_str()
        .and_then(|s| serde_json::from_str::<Map<String, Value>>(s).ok())
        .unwrap_or_default()
}

/// The metadata merge patch that installs `info` on `node`.
fn install_patch(node: &Value, info: &DriverInfo) -> Result<Value, NodeInfoError> {
    let mut ids = node_ids(node);
    ids.insert(info.name.clone(), json!(info.node_id));
    let mut labels = Map::new();
    for (k, v) in &info.topology {
        if let Some(existing) = node["metadata"]["labels"][k].as_str()
            && existing != v
        {
            return Err(NodeInfoError::LabelCollision {
                driver: info.name.clone(),
                key: k.clone(),
                existing: existing.to_string(),
                new: v.clone(),
            });
        }
        labels.insert(k.clone(), json!(v));
    }
    let ids = Value::Object(ids).to_string();
    let mut meta = json!({"annotations": {NODE_ID_ANNOTATION: ids}});
    if !labels.is_empty() {
        meta["labels"] = Value::Object(labels);
    }
    Ok(json!({"metadata": meta}))
}

/// The metadata merge patch that removes `driver` (and its topology labels) from `node`.
fn uninstall_patch(node: &Value, driver: &str, topology_keys: &[String]) -> Value {
    let mut ids = node_ids(node);
    ids.remove(driver);
    let ids = if ids.is_empty() {
        Value::Null
    } else {
        json!(Value::Object(ids).to_string())
    };
    let labels: Map<String, Value> = topology_keys
        .iter()
        .map(|k| (k.clone(), Value::Null))
        .collect();
    json!({"metadata": {"annotations": {NODE_ID_ANNOTATION: ids}, "labels": labels}})
}

/// The driver's entry in `CSINode.spec.drivers`.
fn csinode_entry(info: &DriverInfo) -> Value {
    let mut e = json!({
        "name": info.name,
        "nodeID": info.node_id,
        "topologyKeys": info.topology.keys().collect::<Vec<_>>(),
    });
    if info.max_volumes > 0 {
        e["allocatable"] = json!({"count": info.max_volumes});
    }
    e
}

/// Installs `info` on Node `node_name` and its CSINode.
pub async fn install(
    client: &dyn Client,
    node_name: &str,
    info: &DriverInfo,
) -> Result<(), NodeInfoError> {
    let node = client.get(&nodes(), node_name).await?;
    let patch = install_patch(&node, info)?;
    client
        .patch(
            &nodes(),
            node_name,
            &Patch::Merge(patch),
            None,
            &WriteParams::default(),
        )
        .await?;
    if info.max_volumes > 0 {
        let key = attach_limit_key(&info.name);
        let n = info.max_volumes.to_string();
        let status = json!({"status": {"capacity": {&key: n}, "allocatable": {&key: n}}});
        client
            .patch(
                &nodes(),
                node_name,
                &Patch::Merge(status),
                Some("status"),
                &WriteParams::default(),
            )
            .await?;
    }
    let entry = csinode_entry(info);
    update_csinode(client, &node, node_name, |drivers| {
        drivers.retain(|d| d["name"] != json!(info.name));
        drivers.push(entry.clone());
    })
    .await
}

/// Removes `driver` from Node `node_name` and its CSINode.
pub async fn uninstall(
    client: &dyn Client,
    node_name: &str,
    driver: &str,
    topology_keys: &[String],
) -> Result<(), NodeInfoError> {
    let node = client.get(&nodes(), node_name).await?;
    update_csinode(client, &node, node_name, |drivers| {
        drivers.retain(|d| d["name"] != json!(driver));
    })
    .await?;
    client
        .patch(
            &nodes(),
            node_name,
            &Patch::Merge(uninstall_patch(&node, driver, topology_keys)),
            None,
            &WriteParams::default(),
        )
        .await?;
    let key = attach_limit_key(driver);
    let status = json!({"status": {"capacity": {&key: null}, "allocatable": {&key: null}}});
    client
        .patch(
            &nodes(),
            node_name,
            &Patch::Merge(status),
            Some("status"),
            &WriteParams::default(),
        )
        .await?;
    Ok(())
}

/// Creates the CSINode (owned by `node`) if missing, with `edit` applied to its drivers.
/// Read-modify-write with the resourceVersion, retried on conflict.
async fn update_csinode(
    client: &dyn Client,
    node: &Value,
    node_name: &str,
    edit: impl Fn(&mut Vec<Value>),
) -> Result<(), NodeInfoError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = match client.get(&csinodes(), node_name).await {
            Ok(mut obj) => {
                let mut drivers: Vec<Value> = obj["spec"]["drivers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let before = drivers.clone();
                edit(&mut drivers);
                if drivers == before {
                    return Ok(());
                }
                obj["spec"]["drivers"] = json!(drivers);
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string);
                client
                    .update(&csinodes(), obj, rv.as_deref(), &WriteParams::default())
                    .await
                    .map(drop)
            }
            Err(e) if e.is_not_found() => {
                let uid = node["metadata"]["uid"]
                    .as_str()
                    .ok_or_else(|| NodeInfoError::NoUid(node_name.to_string()))?;
                let mut drivers = Vec::new();
                edit(&mut drivers);
                let obj = json!({
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "CSINode",
                    "metadata": {
                        "name": node_name,
                        "ownerReferences": [{
                            "apiVersion": "v1", "kind": "Node", "name": node_name, "uid": uid,
                        }],
                    },
                    "spec": {"drivers": drivers},
                });
                client
                    .create(&csinodes(), obj, &WriteParams::default())
                    .await
                    .map(drop)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => return Ok(()),
            Err(e) if (e.is_conflict() || e.is_already_exists()) && attempt < 5 => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> DriverInfo {
        DriverInfo {
            name: "hostpath.csi.k1s.io".into(),
            node_id: "n1".into(),
            max_volumes: 7,
            topology: [("topology.hostpath.csi.k1s.io/node".into(), "n1".into())].into(),
        }
    }

    #[test]
    fn install_merges_the_node_id_map_and_adds_topology_labels() {
        let node = json!({"metadata": {"name": "n1",
            "annotations": {NODE_ID_ANNOTATION: "{\"other.csi\":\"x\"}"},
            "labels": {"kubernetes.io/hostname": "n1"}}});
        let p = install_patch(&node, &info()).unwrap();
        let ids: Value = serde_json::from_str(
            p["metadata"]["annotations"][NODE_ID_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(ids, json!({"other.csi": "x", "hostpath.csi.k1s.io": "n1"}));
        assert_eq!(
            p["metadata"]["labels"]["topology.hostpath.csi.k1s.io/node"],
            "n1"
        );
    }

    #[test]
    fn a_topology_label_with_another_value_is_refused() {
        let node = json!({"metadata": {"labels": {"topology.hostpath.csi.k1s.io/node": "n2"}}});
        let err = install_patch(&node, &info()).unwrap_err();
        assert!(matches!(err, NodeInfoError::LabelCollision { .. }), "{err}");
    }

    #[test]
    fn uninstall_drops_only_this_driver() {
        let node = json!({"metadata": {"annotations":
            {NODE_ID_ANNOTATION: "{\"other.csi\":\"x\",\"hostpath.csi.k1s.io\":\"n1\"}"}}});
        let p = uninstall_patch(&node, "hostpath.csi.k1s.io", &["k".into()]);
        assert_eq!(
            p["metadata"]["annotations"][NODE_ID_ANNOTATION],
            "{\"other.csi\":\"x\"}"
        );
        assert_eq!(p["metadata"]["labels"]["k"], Value::Null);
        let only = json!({"metadata": {"annotations": {NODE_ID_ANNOTATION: "{\"d\":\"n1\"}"}}});
        assert_eq!(
            uninstall_patch(&only, "d", &[])["metadata"]["annotations"][NODE_ID_ANNOTATION],
            Value::Null
        );
    }

    #[test]
    fn csinode_entry_has_topology_keys_and_count() {
        let e = csinode_entry(&info());
        assert_eq!(
            e,
            json!({"name": "hostpath.csi.k1s.io", "nodeID": "n1",
                   "topologyKeys": ["topology.hostpath.csi.k1s.io/node"],
                   "allocatable": {"count": 7}})
        );
        let no_limit = DriverInfo {
            max_volumes: 0,
            ..info()
        };
        assert!(csinode_entry(&no_limit).get("allocatable").is_none());
    }

    #[test]
    fn long_driver_names_get_a_hashed_attach_limit_key() {
        assert_eq!(
            attach_limit_key("hostpath.csi.k1s.io"),
            "attachable-volumes-csi-hostpath.csi.k1s.io"
        );
        let long = attach_limit_key(&"d".repeat(80));
        assert_eq!(long.len(), ATTACH_LIMIT_PREFIX.len() + 23 + 16);
        assert!(long.len() <= RESOURCE_NAME_MAX);
    }
}

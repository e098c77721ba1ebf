//! The volume snapshot API (`snapshot.storage.k8s.io/v1`: VolumeSnapshotClass,
//! VolumeSnapshotContent, VolumeSnapshot), which upstream ships as CRDs with the
//! external-snapshotter. k1s creates them at start, unless CRDs of those names exist already
//! (an admin's own install wins), so `kubectl get volumesnapshot` works out of the box. The
//! schemas are k1s's own, covering the API's fields and its one-of and immutability rules
//! that matter to clients.

use serde_json::{Value, json};

use crate::rest::{Rest, WriteOptions};
use crate::status::ApiError;

pub const GROUP: &str = "snapshot.storage.k8s.io";

fn string() -> Value {
    json!({"type": "string"})
}

fn error_schema() -> Value {
    json!({"type": "object", "properties": {
        "message": string(), "time": {"type": "string", "format": "date-time"}}})
}

fn crd(
    kind: &str,
    plural: &str,
    short: &[&str],
    namespaced: bool,
    schema: Value,
    columns: Value,
) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}"),
            "labels": {"app.kubernetes.io/managed-by": "k1s"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                "singular": kind.to_lowercase(), "shortNames": short},
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": if kind == "VolumeSnapshotClass" { json!({}) } else { json!({"status": {}}) },
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    })
}

fn object(spec: Value, status: Option<Value>, required: &[&str]) -> Value {
    let mut props = json!({
        "apiVersion": string(), "kind": string(), "metadata": {"type": "object"}, "spec": spec,
    });
    if let Some(status) = status {
        props["status"] = status;
    }
    json!({"type": "object", "required": required, "properties": props})
}

fn column(name: &str, type_: &str, path: &str) -> Value {
    json!({"name": name, "type": type_, "jsonPath": path})
}

/// The three CRDs.
pub fn definitions() -> Vec<Value> {
    let deletion_policy = json!({"type": "string", "enum": ["Delete", "Retain"]});
    let class = json!({
        "type": "object",
        "required": ["driver", "deletionPolicy"],
        "properties": {
            "apiVersion": string(), "kind": string(), "metadata": {"type": "object"},
            "driver": string(),
            "deletionPolicy": deletion_policy,
            "parameters": {"type": "object", "additionalProperties": string()},
        },
    });
    let content = object(
        json!({"type": "object",
        "required": ["deletionPolicy", "driver", "source", "volumeSnapshotRef"],
        "properties": {
            "deletionPolicy": deletion_policy,
            "driver": string(),
            "source": {"type": "object",
                "properties": {"volumeHandle": string(), "snapshotHandle": string()},
                "oneOf": [{"required": ["volumeHandle"]}, {"required": ["snapshotHandle"]}],
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "source is immutable"}]},
            "sourceVolumeMode": {"type": "string", "enum": ["Block", "Filesystem"]},
            "volumeSnapshotClassName": string(),
            "volumeSnapshotRef": {"type": "object", "x-kubernetes-map-type": "atomic",
                "properties": {"apiVersion": string(), "fieldPath": string(), "kind": string(),
                    "name": string(), "namespace": string(), "resourceVersion": string(),
                    "uid": string()}},
        }}),
        Some(json!({"type": "object", "properties": {
            "creationTime": {"type": "integer", "format": "int64"},
            "error": error_schema(),
            "readyToUse": {"type": "boolean"},
            "restoreSize": {"type": "integer", "format": "int64", "minimum": 0},
            "snapshotHandle": string(),
            "volumeGroupSnapshotHandle": string(),
        }})),
        &["spec"],
    );
    let snapshot = object(
        json!({"type": "object", "required": ["source"], "properties": {
            "source": {"type": "object",
                "properties": {"persistentVolumeClaimName": string(),
                    "volumeSnapshotContentName": string()},
                "oneOf": [{"required": ["persistentVolumeClaimName"]},
                    {"required": ["volumeSnapshotContentName"]}],
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "source is immutable"}]},
            "volumeSnapshotClassName": string(),
        }}),
        Some(json!({"type": "object", "properties": {
            "boundVolumeSnapshotContentName": string(),
            "creationTime": {"type": "string", "format": "date-time"},
            "error": error_schema(),
            "readyToUse": {"type": "boolean"},
            "restoreSize": {"x-kubernetes-int-or-string": true,
                "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
                "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "volumeGroupSnapshotName": string(),
        }})),
        &["spec"],
    );
    vec![
        crd(
            "VolumeSnapshotClass",
            "volumesnapshotclasses",
            &["vsclass", "vsclasses"],
            false,
            class,
            json!([
                column("Driver", "string", ".driver"),
                column("DeletionPolicy", "string", ".deletionPolicy"),
                column("Age", "date", ".metadata.creationTimestamp")
            ]),
        ),
        crd(
            "VolumeSnapshotContent",
            "volumesnapshotcontents",
            &["vsc", "vscs"],
            false,
            content,
            json!([
                column("ReadyToUse", "boolean", ".status.readyToUse"),
                column("RestoreSize", "integer", ".status.restoreSize"),
                column("DeletionPolicy", "string", ".spec.deletionPolicy"),
                column("Driver", "string", ".spec.driver"),
                column(
                    "VolumeSnapshotClass",
                    "string",
                    ".spec.volumeSnapshotClassName"
                ),
                column("VolumeSnapshot", "string", ".spec.volumeSnapshotRef.name"),
                column(
                    "VolumeSnapshotNamespace",
                    "string",
                    ".spec.volumeSnapshotRef.namespace"
                ),
                column("Age", "date", ".metadata.creationTimestamp")
            ]),
        ),
        crd(
            "VolumeSnapshot",
            "volumesnapshots",
            &["vs"],
            true,
            snapshot,
            json!([
                column("ReadyToUse", "boolean", ".status.readyToUse"),
                column(
                    "SourcePVC",
                    "string",
                    ".spec.source.persistentVolumeClaimName"
                ),
                column(
                    "SourceSnapshotContent",
                    "string",
                    ".spec.source.volumeSnapshotContentName"
                ),
                column("RestoreSize", "string", ".status.restoreSize"),
                column("SnapshotClass", "string", ".spec.volumeSnapshotClassName"),
                column(
                    "SnapshotContent",
                    "string",
                    ".status.boundVolumeSnapshotContentName"
                ),
                column("CreationTime", "date", ".status.creationTime"),
                column("Age", "date", ".metadata.creationTimestamp")
            ]),
        ),
    ]
}

/// Creates the snapshot CRDs that do not exist yet.
pub async fn ensure(rest: &Rest) -> Result<(), ApiError> {
    let res = rest
        .registry
        .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
        .ok_or_else(|| ApiError::new(500, "InternalError", "no CustomResourceDefinition kind"))?;
    let opts = WriteOptions {
        field_manager: Some("k1s-apiserver".into()),
        ..Default::default()
    };
    for def in definitions() {
        match rest.create(&res, None, def, &opts).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

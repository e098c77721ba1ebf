//! The `CreateVolume` request for a claim, as external-provisioner builds it: capacity from
//! the claim, one capability per access mode, the class's parameters without the reserved
//! `csi.storage.k8s.io/` keys, secrets named by those keys (with `${pvc.name}`-style
//! templates), and the data source (a VolumeSnapshot or another claim).
//!
//! Pure functions, except the lookups of secrets and data sources through the client.
//! Their failures are [`RequestError`]s, worded as external-provisioner words them.

use std::collections::BTreeMap;

use base64::Engine;
use k1s_api::client::{Client, ClientError, ResourceRef};
use serde_json::Value;

use super::{AccessMode, AccessType, ContentSource, VolumeCapability};
use k1s_runtime::key;

/// A `${token}` template that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("unterminated token in {template:?}")]
    Unterminated { template: String },
    #[error("invalid tokens: {0:?}")]
    InvalidTokens(Vec<String>),
}

/// Why the `CreateVolume` request (or a secret for another call) cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("found unknown parameter key \"{0}\" with reserved namespace {PREFIX}", PREFIX = PREFIX)]
    UnknownReservedKey(String),
    /// Only one of a secret's name and namespace parameters is set.
    #[error("either name and namespace for {kind} secret must be specified, or neither")]
    PartialSecret { kind: &'static str },
    #[error("error resolving value {template:?}: {source}")]
    Template {
        template: String,
        #[source]
        source: TemplateError,
    },
    /// `key` is the namespace parameter.
    #[error("{key:?} resolved to {value:?} which is not a valid namespace name")]
    InvalidSecretNamespace { key: String, value: String },
    /// `key` is the name parameter.
    #[error("{key:?} resolved to {value:?} which is not a valid secret name")]
    InvalidSecretName { key: String, value: String },
    #[error("failed to get secret {namespace}/{name}: {}", .source.message)]
    GetSecret {
        namespace: String,
        name: String,
        #[source]
        source: Box<ClientError>,
    },
    #[error("secret {namespace}/{name} key {key}: {source}")]
    SecretData {
        namespace: String,
        name: String,
        key: String,
        #[source]
        source: base64::DecodeError,
    },
    #[error("unknown access mode {0:?}")]
    UnknownAccessMode(String),
    #[error("the claim has no access modes")]
    NoAccessModes,
    #[error("error getting snapshot {name} from api server: {}", .source.message)]
    GetSnapshot {
        name: String,
        #[source]
        source: Box<ClientError>,
    },
    #[error("snapshot {name} is not Ready")]
    SnapshotNotReady { name: String },
    #[error("snapshot {name} not bound")]
    SnapshotNotBound { name: String },
    #[error(
        "error getting snapshotcontent {content} for snapshot {namespace}/{name} from api server: {}",
        .source.message
    )]
    GetSnapshotContent {
        content: String,
        namespace: String,
        name: String,
        #[source]
        source: Box<ClientError>,
    },
    #[error("VolumeSnapshotContent {content} belongs to driver {actual}, not {driver}")]
    ContentDriver {
        content: String,
        actual: String,
        driver: String,
    },
    #[error(
        "requested volume size {required} is less than the size {restore} for the source snapshot {name}"
    )]
    SnapshotTooLarge {
        required: i64,
        restore: i64,
        name: String,
    },
    #[error("snapshot handle of {content} is not set yet")]
    NoSnapshotHandle { content: String },
    #[error("error getting PVC {namespace}/{name} from api server: {}", .source.message)]
    GetSourceClaim {
        namespace: String,
        name: String,
        #[source]
        source: Box<ClientError>,
    },
    #[error("the PVC {name} not yet bound to a PV")]
    SourceClaimNotBound { name: String },
    #[error("the source PVC and destination PVCs must be in the same storage class for cloning")]
    SourceClass,
    #[error(
        "error, new PVC request must be greater than or equal in size to the specified PVC data source, requested {required} but source is {size}"
    )]
    SourceClaimTooLarge { required: i64, size: i64 },
    #[error("error getting PV {pv} from api server: {}", .source.message)]
    GetSourceVolume {
        pv: String,
        #[source]
        source: Box<ClientError>,
    },
    #[error("the source PVC {name} is not provisioned by the driver {driver}")]
    SourceDriver { name: String, driver: String },
    #[error("the data source {group}/{kind} {name} is not supported by this provisioner")]
    UnsupportedSource {
        group: String,
        kind: String,
        name: String,
    },
}

/// The reserved prefix of class parameters the provisioner consumes itself.
pub const PREFIX: &str = "csi.storage.k8s.io/";
/// The file system of `Filesystem` volumes.
pub const FSTYPE: &str = "csi.storage.k8s.io/fstype";
/// The file system when the class names none.
pub const DEFAULT_FSTYPE: &str = "ext4";

/// Which secret a pair of class parameters names, and where the PV records it.
#[derive(Debug, Clone, Copy)]
pub struct SecretParams {
    /// `provisioner`, `node-publish`, ...
    pub kind: &'static str,
    /// The PV's `spec.csi` field for the reference (none for the provisioner secret).
    pub pv_field: Option<&'static str>,
    /// Whether `${pvc.annotations['KEY']}` may be used in the name.
    pub pvc_annotations: bool,
}

impl SecretParams {
    pub fn name_key(&self) -> String {
        format!("{PREFIX}{}-secret-name", self.kind)
    }
    pub fn namespace_key(&self) -> String {
        format!("{PREFIX}{}-secret-namespace", self.kind)
    }
}

pub const PROVISIONER_SECRET: SecretParams = SecretParams {
    kind: "provisioner",
    pv_field: None,
    pvc_annotations: false,
};

/// The secrets the PV references for the other CSI calls.
pub const PV_SECRETS: [SecretParams; 5] = [
    SecretParams {
        kind: "controller-publish",
        pv_field: Some("controllerPublishSecretRef"),
        pvc_annotations: true,
    },
    SecretParams {
        kind: "node-stage",
        pv_field: Some("nodeStageSecretRef"),
        pvc_annotations: true,
    },
    SecretParams {
        kind: "node-publish",
        pv_field: Some("nodePublishSecretRef"),
        pvc_annotations: true,
    },
    SecretParams {
        kind: "controller-expand",
        pv_field: Some("controllerExpandSecretRef"),
        pvc_annotations: true,
    },
    SecretParams {
        kind: "node-expand",
        pv_field: Some("nodeExpandSecretRef"),
        pvc_annotations: true,
    },
];

/// The class's parameters for the driver: the reserved keys removed; an unknown reserved
/// key is an error, as upstream.
pub fn driver_parameters(
    params: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, RequestError> {
    let mut known: Vec<String> = vec![FSTYPE.to_owned()];
    for s in std::iter::once(&PROVISIONER_SECRET).chain(PV_SECRETS.iter()) {
        known.push(s.name_key());
        known.push(s.namespace_key());
    }
    let mut out = BTreeMap::new();
    for (k, v) in params {
        if let Some(_rest) = k.strip_prefix(PREFIX) {
            if !known.contains(k) {
                return Err(RequestError::UnknownReservedKey(k.clone()));
            }
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

/// Replaces `${token}`s in `template` from `vars`; an unknown token is an error.
fn resolve(template: &str, vars: &BTreeMap<String, String>) -> Result<String, TemplateError> {
    let mut out = String::new();
    let mut rest = template;
    let mut bad = Vec::new();
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(TemplateError::Unterminated {
                template: template.to_owned(),
            });
        };
        let token = &after[..end];
        match vars.get(token) {
            Some(v) => out.push_str(v),
            None => bad.push(token.to_owned()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(TemplateError::InvalidTokens(bad))
    }
}

/// The secret (`namespace`, `name`) the class names for `sp`, with its templates resolved
/// for the claim `pvc` and the volume `pv_name`; `None` when the class names none.
pub fn secret_ref(
    params: &BTreeMap<String, String>,
    sp: &SecretParams,
    pv_name: &str,
    pvc: &Value,
) -> Result<Option<(String, String)>, RequestError> {
    let (name_t, ns_t) = (params.get(&sp.name_key()), params.get(&sp.namespace_key()));
    let (name_t, ns_t) = match (name_t, ns_t) {
        (None, None) => return Ok(None),
        (Some(n), Some(ns)) => (n, ns),
        _ => {
            return Err(RequestError::PartialSecret { kind: sp.kind });
        }
    };
    let pvc_ns = key::namespace(pvc).unwrap_or("").to_owned();
    let mut ns_vars = BTreeMap::from([
        ("pv.name".to_owned(), pv_name.to_owned()),
        ("pvc.namespace".to_owned(), pvc_ns),
    ]);
    let namespace = resolve(ns_t, &ns_vars).map_err(|source| RequestError::Template {
        template: ns_t.clone(),
        source,
    })?;
    if !k1s_api::selector::is_dns_label(&namespace) {
        return Err(RequestError::InvalidSecretNamespace {
            key: sp.namespace_key(),
            value: namespace,
        });
    }
    ns_vars.insert("pvc.name".into(), key::name(pvc).to_owned());
    if sp.pvc_annotations
        && let Some(a) = pvc["metadata"]["annotations"].as_object()
    {
        for (k, v) in a {
            ns_vars.insert(
                format!("pvc.annotations['{k}']"),
                v.as_str().unwrap_or("").to_owned(),
            );
        }
    }
    let name = resolve(name_t, &ns_vars).map_err(|source| RequestError::Template {
        template: name_t.clone(),
        source,
    })?;
    if !k1s_api::selector::is_dns_subdomain(&name) {
        return Err(RequestError::InvalidSecretName {
            key: sp.name_key(),
            value: name,
        });
    }
    Ok(Some((namespace, name)))
}

/// The data of a Secret, decoded (values that are not UTF-8 are taken lossily).
pub async fn secret_data(
    client: &dyn Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, String>, RequestError> {
    let r = ResourceRef::new("", "v1", "secrets", Some(namespace));
    let secret = client
        .get(&r, name)
        .await
        .map_err(|source| RequestError::GetSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source: Box::new(source),
        })?;
    let mut out = BTreeMap::new();
    for (k, v) in secret["data"].as_object().into_iter().flatten() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or(""))
            .map_err(|source| RequestError::SecretData {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                key: k.clone(),
                source,
            })?;
        out.insert(k.clone(), String::from_utf8_lossy(&bytes).into_owned());
    }
    Ok(out)
}

/// One capability per access mode of the claim (`Block` or `Mount` with `fs_type` and the
/// class's mount options).
pub fn capabilities(
    pvc: &Value,
    fs_type: &str,
    mount_options: &[String],
) -> Result<Vec<VolumeCapability>, RequestError> {
    let block = pvc["spec"]["volumeMode"] == "Block";
    let access_type = if block {
        AccessType::Block
    } else {
        AccessType::Mount {
            fs_type: fs_type.to_owned(),
            mount_flags: mount_options.to_vec(),
        }
    };
    let mut out: Vec<VolumeCapability> = Vec::new();
    for m in pvc["spec"]["accessModes"].as_array().into_iter().flatten() {
        let m = m.as_str().unwrap_or("");
        let access_mode =
            AccessMode::from_k8s(m).ok_or_else(|| RequestError::UnknownAccessMode(m.to_owned()))?;
        if out.iter().all(|c| c.access_mode != access_mode) {
            out.push(VolumeCapability {
                access_type: access_type.clone(),
                access_mode,
            });
        }
    }
    if out.is_empty() {
        return Err(RequestError::NoAccessModes);
    }
    Ok(out)
}

fn quantity_bytes(v: &Value) -> i64 {
    v.as_str()
        .and_then(|s| k1s_api::quantity::Quantity::parse(s.trim()).ok())
        .map(|q| q.value())
        .unwrap_or(0)
}

/// The data source of a claim (`dataSourceRef`, else `dataSource`) as a content source: a
/// ready VolumeSnapshot's snapshot handle, or the volume handle of a bound claim of the same
/// class and driver. `required` is the new volume's size, which must hold the source.
pub async fn content_source(
    client: &dyn Client,
    pvc: &Value,
    driver: &str,
    required: i64,
) -> Result<Option<ContentSource>, RequestError> {
    let spec = &pvc["spec"];
    let src = if spec["dataSourceRef"].is_object() {
        &spec["dataSourceRef"]
    } else {
        &spec["dataSource"]
    };
    if !src.is_object() {
        return Ok(None);
    }
    let ns = key::namespace(pvc).unwrap_or("");
    let name = src["name"].as_str().unwrap_or("");
    let group = src["apiGroup"].as_str().unwrap_or("");
    match (group, src["kind"].as_str().unwrap_or("")) {
        ("snapshot.storage.k8s.io", "VolumeSnapshot") => {
            let snaps =
                ResourceRef::new("snapshot.storage.k8s.io", "v1", "volumesnapshots", Some(ns));
            let snap =
                client
                    .get(&snaps, name)
                    .await
                    .map_err(|source| RequestError::GetSnapshot {
                        name: name.to_owned(),
                        source: Box::new(source),
                    })?;
            if snap["status"]["readyToUse"] != true {
                return Err(RequestError::SnapshotNotReady {
                    name: name.to_owned(),
                });
            }
            let content_name = snap["status"]["boundVolumeSnapshotContentName"]
                .as_str()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| RequestError::SnapshotNotBound {
                    name: name.to_owned(),
                })?;
            let contents = ResourceRef::new(
                "snapshot.storage.k8s.io",
                "v1",
                "volumesnapshotcontents",
                None,
            );
            let content = client
                .get(&contents, content_name)
                .await
                .map_err(|source| RequestError::GetSnapshotContent {
                    content: content_name.to_owned(),
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                    source: Box::new(source),
                })?;
            if content["spec"]["driver"]
                .as_str()
                .is_some_and(|d| d != driver)
            {
                return Err(RequestError::ContentDriver {
                    content: content_name.to_owned(),
                    actual: content["spec"]["driver"].as_str().unwrap_or("").to_owned(),
                    driver: driver.to_owned(),
                });
            }
            let restore = quantity_bytes(&snap["status"]["restoreSize"])
                .max(content["status"]["restoreSize"].as_i64().unwrap_or(0));
            if restore > required {
                return Err(RequestError::SnapshotTooLarge {
                    required,
                    restore,
                    name: name.to_owned(),
                });
            }
            let handle = content["status"]["snapshotHandle"]
                .as_str()
                .filter(|h| !h.is_empty())
                .ok_or_else(|| RequestError::NoSnapshotHandle {
                    content: content_name.to_owned(),
                })?;
            Ok(Some(ContentSource::Snapshot {
                snapshot_id: handle.to_owned(),
            }))
        }
        ("", "PersistentVolumeClaim") => {
            let claims = ResourceRef::new("", "v1", "persistentvolumeclaims", Some(ns));
            let source =
                client
                    .get(&claims, name)
                    .await
                    .map_err(|source| RequestError::GetSourceClaim {
                        namespace: ns.to_owned(),
                        name: name.to_owned(),
                        source: Box::new(source),
                    })?;
            if source["status"]["phase"] != "Bound" {
                return Err(RequestError::SourceClaimNotBound {
                    name: name.to_owned(),
                });
            }
            if source["spec"]["storageClassName"] != spec["storageClassName"] {
                return Err(RequestError::SourceClass);
            }
            let size = quantity_bytes(&source["status"]["capacity"]["storage"]).max(
                quantity_bytes(&source["spec"]["resources"]["requests"]["storage"]),
            );
            if size > required {
                return Err(RequestError::SourceClaimTooLarge { required, size });
            }
            let pv_name = source["spec"]["volumeName"].as_str().unwrap_or("");
            let pvs = ResourceRef::new("", "v1", "persistentvolumes", None);
            let pv = client.get(&pvs, pv_name).await.map_err(|source| {
                RequestError::GetSourceVolume {
                    pv: pv_name.to_owned(),
                    source: Box::new(source),
                }
            })?;
            if pv["spec"]["csi"]["driver"] != driver {
                return Err(RequestError::SourceDriver {
                    name: name.to_owned(),
                    driver: driver.to_owned(),
                });
            }
            let handle = pv["spec"]["csi"]["volumeHandle"].as_str().unwrap_or("");
            Ok(Some(ContentSource::Volume {
                volume_id: handle.to_owned(),
            }))
        }
        (g, k) => Err(RequestError::UnsupportedSource {
            group: g.to_owned(),
            kind: k.to_owned(),
            name: name.to_owned(),
        }),
    }
}

/// The capability of an existing PV: `Block` or `Mount` (its `csi.fsType` and mount
/// options) with its first access mode; `None` without a known access mode.
pub fn capability_of_pv(pv: &Value) -> Option<VolumeCapability> {
    let spec = &pv["spec"];
    let access_mode = spec["accessModes"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|m| AccessMode::from_k8s(m.as_str()?))?;
    let access_type = if spec["volumeMode"] == "Block" {
        AccessType::Block
    } else {
        AccessType::Mount {
            fs_type: spec["csi"]["fsType"].as_str().unwrap_or("").to_owned(),
            mount_flags: spec["mountOptions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o.as_str().map(str::to_owned))
                .collect(),
        }
    };
    Some(VolumeCapability {
        access_type,
        access_mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(p: &[(&str, &str)]) -> BTreeMap<String, String> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn claim() -> Value {
        json!({"metadata": {"name": "data", "namespace": "team-a", "uid": "u1",
            "annotations": {"example.com/secret": "s-from-ann"}},
            "spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}})
    }

    #[test]
    fn reserved_parameters_are_removed() {
        let p = params(&[
            ("type", "fast"),
            (FSTYPE, "xfs"),
            ("csi.storage.k8s.io/provisioner-secret-name", "s"),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
            ("csi.storage.k8s.io/node-publish-secret-name", "s"),
        ]);
        assert_eq!(driver_parameters(&p).unwrap(), params(&[("type", "fast")]));
        let bad = params(&[("csi.storage.k8s.io/bogus", "x")]);
        assert!(
            driver_parameters(&bad)
                .unwrap_err()
                .to_string()
                .contains("unknown parameter key")
        );
    }

    #[test]
    fn secret_templates() {
        let p = params(&[
            (
                "csi.storage.k8s.io/provisioner-secret-name",
                "${pvc.name}-creds",
            ),
            (
                "csi.storage.k8s.io/provisioner-secret-namespace",
                "${pvc.namespace}",
            ),
            (
                "csi.storage.k8s.io/node-publish-secret-name",
                "${pvc.annotations['example.com/secret']}",
            ),
            ("csi.storage.k8s.io/node-publish-secret-namespace", "fixed"),
            ("csi.storage.k8s.io/node-stage-secret-name", "${pv.name}"),
            (
                "csi.storage.k8s.io/node-stage-secret-namespace",
                "${pvc.name}",
            ),
        ]);
        let pvc = claim();
        assert_eq!(
            secret_ref(&p, &PROVISIONER_SECRET, "pvc-u1", &pvc).unwrap(),
            Some(("team-a".into(), "data-creds".into()))
        );
        assert_eq!(
            secret_ref(&p, &PV_SECRETS[2], "pvc-u1", &pvc).unwrap(),
            Some(("fixed".into(), "s-from-ann".into()))
        );
        // The namespace may not depend on the claim's name.
        assert!(
            secret_ref(&p, &PV_SECRETS[1], "pvc-u1", &pvc)
                .unwrap_err()
                .to_string()
                .contains("invalid tokens")
        );
        // No secret named: none.
        assert_eq!(
            secret_ref(&p, &PV_SECRETS[0], "pvc-u1", &pvc).unwrap(),
            None
        );
        // The provisioner secret may not use the claim's annotations.
        let ann = params(&[
            (
                "csi.storage.k8s.io/provisioner-secret-name",
                "${pvc.annotations['example.com/secret']}",
            ),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "x"),
        ]);
        assert!(secret_ref(&ann, &PROVISIONER_SECRET, "pvc-u1", &pvc).is_err());
        // Both or neither.
        let half = params(&[("csi.storage.k8s.io/provisioner-secret-name", "s")]);
        assert!(
            secret_ref(&half, &PROVISIONER_SECRET, "pvc-u1", &pvc)
                .unwrap_err()
                .to_string()
                .contains("must be specified")
        );
    }

    #[test]
    fn capabilities_per_access_mode() {
        let caps = capabilities(&claim(), "ext4", &["noatime".into()]).unwrap();
        assert_eq!(caps.len(), 2);
        assert_eq!(caps[0].access_mode, AccessMode::SingleNodeWriter);
        assert_eq!(caps[1].access_mode, AccessMode::MultiNodeReaderOnly);
        assert_eq!(
            caps[0].access_type,
            AccessType::Mount {
                fs_type: "ext4".into(),
                mount_flags: vec!["noatime".into()]
            }
        );
        let mut block = claim();
        block["spec"]["volumeMode"] = json!("Block");
        let caps = capabilities(&block, "", &[]).unwrap();
        assert_eq!(caps[0].access_type, AccessType::Block);
    }

    #[test]
    fn error_text() {
        let e = driver_parameters(&params(&[("csi.storage.k8s.io/bogus", "x")])).unwrap_err();
        assert!(matches!(e, RequestError::UnknownReservedKey(_)));
        assert_eq!(
            e.to_string(),
            r#"found unknown parameter key "csi.storage.k8s.io/bogus" with reserved namespace csi.storage.k8s.io/"#
        );
        let vars = params(&[("pv.name", "p")]);
        let e = resolve("a-${pv.name", &vars).unwrap_err();
        assert!(matches!(e, TemplateError::Unterminated { .. }));
        assert_eq!(e.to_string(), r#"unterminated token in "a-${pv.name""#);
        let e = resolve("${x}-${y}", &vars).unwrap_err();
        assert!(matches!(e, TemplateError::InvalidTokens(_)));
        assert_eq!(e.to_string(), r#"invalid tokens: ["x", "y"]"#);

        let pvc = claim();
        let ns_key = "csi.storage.k8s.io/provisioner-secret-namespace";
        let name_key = "csi.storage.k8s.io/provisioner-secret-name";
        let e =
            secret_ref(&params(&[(name_key, "s")]), &PROVISIONER_SECRET, "pv", &pvc).unwrap_err();
        assert!(matches!(
            e,
            RequestError::PartialSecret {
                kind: "provisioner"
            }
        ));
        assert_eq!(
            e.to_string(),
            "either name and namespace for provisioner secret must be specified, or neither"
        );
        let p = params(&[(name_key, "s"), (ns_key, "${bad}")]);
        let e = secret_ref(&p, &PROVISIONER_SECRET, "pv", &pvc).unwrap_err();
        assert!(matches!(e, RequestError::Template { .. }));
        assert_eq!(
            e.to_string(),
            r#"error resolving value "${bad}": invalid tokens: ["bad"]"#
        );
        let p = params(&[(name_key, "s"), (ns_key, "Not_Valid")]);
        let e = secret_ref(&p, &PROVISIONER_SECRET, "pv", &pvc).unwrap_err();
        assert!(matches!(e, RequestError::InvalidSecretNamespace { .. }));
        assert_eq!(
            e.to_string(),
            r#""csi.storage.k8s.io/provisioner-secret-namespace" resolved to "Not_Valid" which is not a valid namespace name"#
        );
        let p = params(&[(name_key, "Not_Valid"), (ns_key, "ns")]);
        let e = secret_ref(&p, &PROVISIONER_SECRET, "pv", &pvc).unwrap_err();
        assert!(matches!(e, RequestError::InvalidSecretName { .. }));
        assert_eq!(
            e.to_string(),
            r#""csi.storage.k8s.io/provisioner-secret-name" resolved to "Not_Valid" which is not a valid secret name"#
        );

        let mut bad = claim();
        bad["spec"]["accessModes"] = json!(["Sometimes"]);
        let e = capabilities(&bad, "", &[]).unwrap_err();
        assert!(matches!(e, RequestError::UnknownAccessMode(_)));
        assert_eq!(e.to_string(), r#"unknown access mode "Sometimes""#);
        bad["spec"]["accessModes"] = json!([]);
        let e = capabilities(&bad, "", &[]).unwrap_err();
        assert!(matches!(e, RequestError::NoAccessModes));
        assert_eq!(e.to_string(), "the claim has no access modes");

        let e = RequestError::GetSecret {
            namespace: "ns".into(),
            name: "s".into(),
            source: ClientError {
                code: 404,
                reason: "NotFound".into(),
                message: r#"secrets "s" not found"#.into(),
            }
            .into(),
        };
        assert_eq!(
            e.to_string(),
            r#"failed to get secret ns/s: secrets "s" not found"#
        );
        let e = RequestError::UnsupportedSource {
            group: "example.com".into(),
            kind: "Thing".into(),
            name: "t".into(),
        };
        assert_eq!(
            e.to_string(),
            "the data source example.com/Thing t is not supported by this provisioner"
        );
    }
}

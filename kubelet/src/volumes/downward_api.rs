//! The downwardAPI volume plugin (`kubernetes.io~downward-api`), also used by projected
//! volumes: pod fields (`metadata.name`, `namespace`, `uid`, `labels`, `annotations`, and
//! `metadata.labels['k']` / `metadata.annotations['k']`) and container resources
//! (`limits.*` / `requests.*` with a divisor) as files.
//!
//! A `limits.cpu`, `limits.memory` or `limits.ephemeral-storage` the container does not set
//! (or sets to zero) reads the node's allocatable instead, as upstream's kubelet
//! (`MergeContainerResourceLimits`); the caller fetches that only when
//! [`needs_node_allocatable`] says so. The same resolution serves `resourceFieldRef` env
//! vars ([`container_resource_value`]).

use std::collections::BTreeMap;

use k1s_api::quantity::{Quantity, ResourceList};
use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, Pod, ResourceFieldSelector};

use super::atomic_writer::{FileProjection, Payload};
use super::configmap_secret::file_mode;

/// Why a pod field or container resource cannot be read (upstream's messages).
#[derive(Debug, thiserror::Error)]
pub enum DownwardApiError {
    #[error("downwardAPI item {0:?} has neither fieldRef nor resourceFieldRef")]
    NoSource(String),
    #[error("unsupported fieldPath: {0}")]
    UnsupportedFieldPath(String),
    #[error("container {0} not found")]
    ContainerNotFound(String),
    /// A divisor or a container's quantity (`what`: `divisor`, `cpu`, ...) does not parse.
    #[error("invalid {what} {quantity:?}: {source}")]
    Quantity {
        what: String,
        quantity: String,
        source: k1s_api::quantity::QuantityError,
    },
    #[error("unsupported container resource : {0}")]
    UnsupportedResource(String),
    #[error("invalid divisor for {0}: must be positive")]
    NonPositiveDivisor(String),
    /// Several items failed (upstream's aggregate: `[a, b]`).
    #[error("[{}]", super::join(.0))]
    Many(Vec<DownwardApiError>),
}

/// The files of a downwardAPI volume or projection; `allocatable` is the node's, for the
/// limits a container does not set.
pub(crate) fn make_payload(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: i32,
    allocatable: &ResourceList,
) -> Result<Payload, DownwardApiError> {
    let mut payload = Payload::new();
    let mut errors = Vec::new();
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            field_value(pod, &f.field_path)
        } else if let Some(r) = &item.resource_field_ref {
            resource_value(pod, r, allocatable)
        } else {
            Err(DownwardApiError::NoSource(item.path.clone()))
        };
        match value {
            Ok(v) => {
                payload.insert(
                    item.path.clone(),
                    FileProjection {
                        data: v.into_bytes(),
                        mode: file_mode(item.mode, default_mode),
                    },
                );
            }
            Err(e) => errors.push(e),
        }
    }
    match errors.len() {
        0 => Ok(payload),
        1 => Err(errors.remove(0)),
        _ => Err(DownwardApiError::Many(errors)),
    }
}

/// A pod field, as upstream's `fieldpath.ExtractFieldPathAsString`.
pub(crate) fn field_value(pod: &Pod, path: &str) -> Result<String, DownwardApiError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((map, key)) = subscript(path) {
        let m = match map {
            "metadata.labels" => labels,
            "metadata.annotations" => annotations,
            _ => return Err(DownwardApiError::UnsupportedFieldPath(path.to_string())),
        };
        return Ok(m.get(key).cloned().unwrap_or_default());
    }
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(labels),
        "metadata.annotations" => format_map(annotations),
        _ => return Err(DownwardApiError::UnsupportedFieldPath(path.to_string())),
    })
}

/// `metadata.labels['key']` → (`metadata.labels`, `key`).
fn subscript(path: &str) -> Option<(&str, &str)> {
    let (map, rest) = path.split_once("['")?;
    let key = rest.strip_suffix("']")?;
    Some((map, key))
}

/// Labels and annotations as upstream's `fieldpath.FormatMap`: `key="value"` lines in key
/// order, the value quoted as Go's `%q`, no trailing newline.
pub(crate) fn format_map(m: &BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote`.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn find_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

fn parse(q: &str, what: &str) -> Result<Quantity, DownwardApiError> {
    Quantity::parse(q).map_err(|source| DownwardApiError::Quantity {
        what: what.to_string(),
        quantity: q.to_string(),
        source,
    })
}

/// The limits that default to the node's allocatable when a container leaves them unset or
/// zero (hugepages never do: they are never overcommitted).
const DEFAULTED_LIMITS: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// Whether reading `resource` (`limits.cpu`, ...) of `c` needs the node's allocatable: a
/// defaulted limit the container does not set, or sets to zero.
pub(crate) fn needs_node_allocatable(c: &Container, resource: &str) -> bool {
    let Some(name) = resource.strip_prefix("limits.") else {
        return false;
    };
    DEFAULTED_LIMITS.contains(&name)
        && c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get(name))
            .and_then(|q| Quantity::parse(&q.0).ok())
            .is_none_or(|q| q.is_zero())
}

/// Whether any item of a downwardAPI volume or projection needs the node's allocatable.
pub(crate) fn items_need_node_allocatable(pod: &Pod, items: &[DownwardAPIVolumeFile]) -> bool {
    items
        .iter()
        .filter_map(|i| i.resource_field_ref.as_ref())
        .any(|r| {
            find_container(pod, r.container_name.as_deref().unwrap_or_default())
                .is_some_and(|c| needs_node_allocatable(c, &r.resource))
        })
}

/// A container resource of the pod, as upstream's
/// `ExtractResourceValueByContainerNameAndNodeAllocatable`.
pub(crate) fn resource_value(
    pod: &Pod,
    r: &ResourceFieldSelector,
    allocatable: &ResourceList,
) -> Result<String, DownwardApiError> {
    let name = r.container_name.as_deref().unwrap_or_default();
    let container = find_container(pod, name)
        .ok_or_else(|| DownwardApiError::ContainerNotFound(name.to_string()))?;
    container_resource_value(
        container,
        &r.resource,
        r.divisor.as_ref().map(|d| d.0.as_str()),
        allocatable,
    )
}

/// A resource of `container`, as upstream's `ExtractContainerResourceValue`: CPU rounded up
/// to whole divisors of its milli value, everything else of its value; a defaulted limit the
/// container does not set is the node's `allocatable` one.
pub(crate) fn container_resource_value(
    container: &Container,
    resource: &str,
    divisor: Option<&str>,
    allocatable: &ResourceList,
) -> Result<String, DownwardApiError> {
    // No divisor, or a zero one (client-go sends its zero Quantity, "0", when none is
    // set), means 1, as upstream's kubelet reads it.
    let divisor = match divisor {
        Some(d) if !d.is_empty() => Some(parse(d, "divisor")?),
        _ => None,
    }
    .filter(|d| !d.is_zero())
    .unwrap_or_else(|| Quantity::from_value(1, k1s_api::quantity::Format::DecimalSI));
    let (list, name) = if let Some(n) = resource.strip_prefix("limits.") {
        (
            container.resources.as_ref().and_then(|r| r.limits.as_ref()),
            n,
        )
    } else if let Some(n) = resource.strip_prefix("requests.") {
        (
            container
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref()),
            n,
        )
    } else {
        return Err(DownwardApiError::UnsupportedResource(resource.to_string()));
    };
    if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !name.starts_with("hugepages-") {
        return Err(DownwardApiError::UnsupportedResource(resource.to_string()));
    }
    let mut value = match list.and_then(|l| l.get(name)) {
        Some(q) => parse(&q.0, name)?,
        None => Quantity::default(),
    };
    if needs_node_allocatable(container, resource)
        && let Some(a) = allocatable.get(name)
    {
        value = *a;
    }
    let (v, d) = if name == "cpu" {
        (value.milli_value(), divisor.milli_value())
    } else {
        (value.value(), divisor.value())
    };
    if d <= 0 {
        return Err(DownwardApiError::NonPositiveDivisor(resource.to_string()));
    }
    let (v, d) = (i128::from(v), i128::from(d));
    // Ceiling division, as upstream's math.Ceil on the quotient.
    let q = if v >= 0 { (v + d - 1) / d } else { v / d };
    Ok(q.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ObjectFieldSelector, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.uid = Some("u-1".into());
        p.metadata.labels = Some(
            [("zone", "a"), ("app", "web"), ("q", "say \"hi\"\n")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let mut c = Container {
            name: "main".into(),
            ..Default::default()
        };
        c.resources = Some(ResourceRequirements {
            limits: Some(
                [("cpu", "500m"), ("memory", "128Mi")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Q(v.into())))
                    .collect(),
            ),
            requests: Some(
                [("cpu".to_string(), Q("250m".into()))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        });
        p.spec = Some(PodSpec {
            containers: vec![c],
            ..Default::default()
        });
        p
    }

    fn field(path: &str, field: &str) -> DownwardAPIVolumeFile {
        DownwardAPIVolumeFile {
            path: path.into(),
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                field_path: field.into(),
            }),
            ..Default::default()
        }
    }

    fn res(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            container_name: Some("main".into()),
            resource: resource.into(),
            divisor: divisor.map(|d| Q(d.into())),
        }
    }

    #[test]
    fn labels_are_sorted_quoted_lines() {
        let p = pod();
        assert_eq!(
            field_value(&p, "metadata.labels").unwrap(),
            "app=\"web\"\nq=\"say \\\"hi\\\"\\n\"\nzone=\"a\""
        );
        assert_eq!(field_value(&p, "metadata.annotations").unwrap(), "");
        assert_eq!(field_value(&p, "metadata.labels['zone']").unwrap(), "a");
        assert_eq!(field_value(&p, "metadata.uid").unwrap(), "u-1");
        let e = field_value(&p, "spec.nodeName").unwrap_err();
        assert!(
            matches!(e, DownwardApiError::UnsupportedFieldPath(_)),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "unsupported fieldPath: spec.nodeName");
        assert_eq!(
            field_value(&p, "metadata.owner['x']")
                .unwrap_err()
                .to_string(),
            "unsupported fieldPath: metadata.owner['x']"
        );
    }

    fn value_of(p: &Pod, r: &ResourceFieldSelector) -> Result<String, String> {
        resource_value(p, r, &ResourceList::new()).map_err(|e| e.to_string())
    }

    #[test]
    fn resources_with_divisors() {
        let p = pod();
        assert_eq!(value_of(&p, &res("limits.cpu", None)).unwrap(), "1");
        assert_eq!(value_of(&p, &res("limits.cpu", Some("1m"))).unwrap(), "500");
        assert_eq!(
            value_of(&p, &res("requests.cpu", Some("1m"))).unwrap(),
            "250"
        );
        assert_eq!(
            value_of(&p, &res("limits.memory", Some("1Mi"))).unwrap(),
            "128"
        );
        assert_eq!(
            value_of(&p, &res("limits.memory", None)).unwrap(),
            "134217728"
        );
        assert_eq!(value_of(&p, &res("requests.memory", None)).unwrap(), "0");
        // client-go's zero Quantity: read as 1 (issue #29: every downward API volume case of
        // the conformance suite sent it).
        assert_eq!(value_of(&p, &res("limits.cpu", Some("0"))).unwrap(), "1");
        assert_eq!(
            value_of(&p, &res("limits.memory", Some("0"))).unwrap(),
            "134217728"
        );
        let mut other = res("limits.cpu", None);
        other.container_name = Some("nope".into());
        assert_eq!(
            value_of(&p, &other).unwrap_err(),
            "container nope not found"
        );
    }

    #[test]
    fn payload_with_modes() {
        let p = pod();
        let mut f = field("name", "metadata.name");
        f.mode = Some(0o600);
        let payload = make_payload(
            &p,
            &[f, field("ns", "metadata.namespace")],
            0o644,
            &ResourceList::new(),
        )
        .unwrap();
        assert_eq!(payload["name"].data, b"web");
        assert_eq!(payload["name"].mode, 0o600);
        assert_eq!(payload["ns"].mode, 0o644);
    }

    #[test]
    fn bad_items_and_resources() {
        let p = pod();
        let mut none = field("x", "metadata.name");
        none.field_ref = None;
        let e = make_payload(&p, &[none.clone()], 0o644, &ResourceList::new()).unwrap_err();
        assert!(matches!(e, DownwardApiError::NoSource(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "downwardAPI item \"x\" has neither fieldRef nor resourceFieldRef"
        );
        // Several failures: one aggregate, in item order.
        let e = make_payload(
            &p,
            &[none, field("y", "spec.nodeName")],
            0o644,
            &ResourceList::new(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, DownwardApiError::Many(v) if v.len() == 2),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "[downwardAPI item \"x\" has neither fieldRef nor resourceFieldRef, unsupported fieldPath: spec.nodeName]"
        );
        assert_eq!(
            value_of(&p, &res("limits.pods", None)).unwrap_err(),
            "unsupported container resource : limits.pods"
        );
        assert_eq!(
            value_of(&p, &res("status.cpu", None)).unwrap_err(),
            "unsupported container resource : status.cpu"
        );
        assert_eq!(
            value_of(&p, &res("limits.cpu", Some("-1"))).unwrap_err(),
            "invalid divisor for limits.cpu: must be positive"
        );
        let e =
            resource_value(&p, &res("limits.cpu", Some("lots")), &ResourceList::new()).unwrap_err();
        assert!(matches!(e, DownwardApiError::Quantity { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with("invalid divisor \"lots\": "),
            "{e}"
        );
    }

    /// Issue #29: limits a container does not set read the node's allocatable, CPU in the
    /// divisor's units rounded up, memory in bytes over the divisor; set limits and requests
    /// do not.
    #[test]
    fn unset_limits_default_to_node_allocatable() {
        let mut p = pod();
        p.spec.as_mut().unwrap().containers.push(Container {
            name: "bare".into(),
            ..Default::default()
        });
        let alloc = ResourceList::from_json(&serde_json::json!({
            "cpu": "2", "memory": "4012345Ki", "ephemeral-storage": "10Gi", "pods": "110"
        }))
        .unwrap();
        let bare = |resource: &str, divisor: Option<&str>| {
            let mut r = res(resource, divisor);
            r.container_name = Some("bare".into());
            resource_value(&p, &r, &alloc).unwrap()
        };
        assert_eq!(bare("limits.cpu", None), "2");
        assert_eq!(bare("limits.cpu", Some("1m")), "2000");
        assert_eq!(bare("limits.memory", None), (4012345i64 * 1024).to_string());
        assert_eq!(bare("limits.memory", Some("1Mi")), "3919");
        assert_eq!(bare("limits.ephemeral-storage", Some("1Gi")), "10");
        assert_eq!(bare("requests.cpu", None), "0");
        // The container's own limits win.
        assert_eq!(
            resource_value(&p, &res("limits.cpu", Some("1m")), &alloc).unwrap(),
            "500"
        );
        let bare_c = &p.spec.as_ref().unwrap().containers[1];
        assert!(needs_node_allocatable(bare_c, "limits.memory"));
        assert!(!needs_node_allocatable(bare_c, "requests.memory"));
        assert!(!needs_node_allocatable(bare_c, "limits.hugepages-2Mi"));
        let main = &p.spec.as_ref().unwrap().containers[0];
        assert!(!needs_node_allocatable(main, "limits.cpu"));
        assert!(needs_node_allocatable(main, "limits.ephemeral-storage"));
        let mut item = field("cpu", "metadata.name");
        item.field_ref = None;
        item.resource_field_ref = Some(res("limits.cpu", None));
        assert!(!items_need_node_allocatable(
            &p,
            std::slice::from_ref(&item)
        ));
        item.resource_field_ref.as_mut().unwrap().container_name = Some("bare".into());
        assert!(items_need_node_allocatable(&p, std::slice::from_ref(&item)));
        let payload = make_payload(&p, &[item], 0o644, &alloc).unwrap();
        assert_eq!(payload["cpu"].data, b"2");
    }
}

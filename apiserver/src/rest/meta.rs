//! Object metadata rules shared by every resource: names, generateName, uid, timestamps,
//! resourceVersion and generation, as apimachinery's `ObjectMeta` validation and the generic
//! registry apply them.

use k1s_api::selector::{is_dns_label, is_dns_subdomain};
use k1s_store::Revision;
use rand::Rng;
use serde_json::{Map, Value, json};

use crate::status::ApiError;

/// The characters upstream uses for generated name suffixes (no vowels, no look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of a generated suffix.
const SUFFIX_LEN: usize = 5;
/// Longest prefix of `generateName` kept (so the name stays within 63 characters).
const MAX_GENERATE_PREFIX: usize = 58;

/// `now()`: now as Kubernetes writes timestamps (RFC 3339, whole seconds, UTC);
/// `timestamp(t)`: `t` so written ([`k1s_api::time`]).
pub use k1s_api::time::{format as timestamp, now_text as now};

/// The `metadata` object of `obj`, created if absent.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn namespace(obj: &Value) -> Option<&str> {
    obj["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
}

pub fn set_resource_version(obj: &mut Value, rev: Revision) {
    metadata_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
}

/// Parses a `resourceVersion` string; empty means none.
pub fn parse_resource_version(rv: &str) -> Result<Option<Revision>, ApiError> {
    if rv.is_empty() {
        return Ok(None);
    }
    rv.parse::<Revision>()
        .ok()
        .filter(|r| *r >= 0)
        .map(Some)
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version {rv:?}")))
}

/// A name made from `generateName`.
pub fn generate_name(prefix: &str) -> String {
    let mut rng = rand::rng();
    let cut = prefix
        .char_indices()
        .nth(MAX_GENERATE_PREFIX)
        .map_or(prefix.len(), |(i, _)| i);
    let mut name = prefix[..cut].to_owned();
    for _ in 0..SUFFIX_LEN {
        name.push(SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char);
    }
    name
}

/// Checks a name as upstream validates names of the resource `group`/`plural`; returns the
/// error text.
pub fn validate_name(group: &str, plural: &str, name: &str) -> Option<String> {
    if group == "rbac.authorization.k8s.io"
        || (group == "certificates.k8s.io" && plural == "certificatesigningrequests")
    {
        // Path-segment names: RBAC names such as `system:node` contain colons, and upstream
        // does not care what certificate requests are called.
        return if name == "." || name == ".." {
            Some(format!("may not be '{name}'"))
        } else if name.contains('/') || name.contains('%') {
            Some(format!(
                "may not contain '{}'",
                if name.contains('/') { "/" } else { "%" }
            ))
        } else {
            None
        };
    }
    let label = |n: &str| is_dns_label(n);
    match (group, plural) {
        ("", "namespaces") if !label(name) => Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into()
        ),
        ("", "services") if !label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) => {
            Some(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".into(),
            )
        }
        _ if !is_dns_subdomain(name) => Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into(),
        ),
        _ => None,
    }
}

/// The parts of an object outside `metadata` and `status`: what `generation` tracks.
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

/// The finalizers of an object.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    obj["metadata"]["deletionTimestamp"].is_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_keep_the_prefix() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9, "{n}");
        let long = "a".repeat(80);
        assert_eq!(generate_name(&long).len(), MAX_GENERATE_PREFIX + SUFFIX_LEN);
    }

    #[test]
    fn names_are_validated_per_resource() {
        let ns = ("", "namespaces");
        assert!(validate_name(ns.0, ns.1, "a.b").is_some());
        assert!(validate_name(ns.0, ns.1, "ab").is_none());
        let cm = ("", "configmaps");
        assert!(validate_name(cm.0, cm.1, "a.b").is_none());
        assert!(validate_name(cm.0, cm.1, "A").is_some());
        let svc = ("", "services");
        assert!(validate_name(svc.0, svc.1, "1abc").is_some());
        let role = ("rbac.authorization.k8s.io", "clusterroles");
        assert!(validate_name(role.0, role.1, "system:node").is_none());
        assert!(validate_name(role.0, role.1, "a/b").is_some());
    }

    #[test]
    fn timestamps_are_whole_seconds_utc() {
        let t = now();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
    }

    #[test]
    fn generation_ignores_metadata_and_status() {
        let a = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {}});
        let b = json!({"metadata": {}, "spec": {"x": 1}, "status": {"y": 2}});
        assert!(!spec_changed(&a, &b));
        let c = json!({"spec": {"x": 2}});
        assert!(spec_changed(&a, &c));
    }
}

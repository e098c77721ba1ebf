//! [`ObjectKey`]: the namespace/name identity objects are cached and queued under, and the
//! small JSON accessors on object metadata the runtime and controllers share.

use std::fmt;

use serde_json::Value;

/// The namespace/name of an object (no namespace for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    /// A cluster-scoped key.
    pub fn cluster(name: &str) -> Self {
        Self::new(None, name)
    }

    /// The key of an object; `None` when it has no name.
    pub fn of(obj: &Value) -> Option<Self> {
        let name = obj["metadata"]["name"].as_str().filter(|n| !n.is_empty())?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty());
        Some(Self::new(ns, name))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `metadata.uid`, or "".
pub fn uid(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or("")
}

/// `metadata.name`, or "".
pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

/// `metadata.namespace`, or `None` when absent or empty.
pub fn namespace(obj: &Value) -> Option<&str> {
    obj["metadata"]["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
}

/// `metadata.resourceVersion`, if any.
pub fn resource_version(obj: &Value) -> Option<&str> {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .filter(|v| !v.is_empty())
}

/// Whether the object carries a deletionTimestamp.
pub fn is_deleting(obj: &Value) -> bool {
    obj["metadata"]["deletionTimestamp"].is_string()
}

/// `metadata.finalizers`.
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

/// Whether `metadata.finalizers` holds `f`.
pub fn has_finalizer(obj: &Value, f: &str) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(f)))
}

/// A JSON patch that removes finalizer `f` from `obj`, testing the uid and the finalizer's
/// position first so that a concurrent change to the list fails the patch instead of removing
/// another entry; `None` when `obj` does not carry `f`.
pub fn remove_finalizer_patch(obj: &Value, f: &str) -> Option<k1s_api::client::Patch> {
    let i = finalizers(obj).iter().position(|x| x == f)?;
    Some(k1s_api::client::Patch::Json(serde_json::json!([
        {"op": "test", "path": "/metadata/uid", "value": uid(obj)},
        {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": f},
        {"op": "remove", "path": format!("/metadata/finalizers/{i}")},
    ])))
}

/// A JSON patch that appends finalizer `f` to `obj`'s list (creating it), testing the uid and
/// the list as read.
pub fn add_finalizer_patch(obj: &Value, f: &str) -> k1s_api::client::Patch {
    let current = &obj["metadata"]["finalizers"];
    let ops = if current.is_array() {
        serde_json::json!([
            {"op": "test", "path": "/metadata/uid", "value": uid(obj)},
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": f},
        ])
    } else {
        serde_json::json!([
            {"op": "test", "path": "/metadata/uid", "value": uid(obj)},
            {"op": "add", "path": "/metadata/finalizers", "value": [f]},
        ])
    };
    k1s_api::client::Patch::Json(ops)
}

/// The controlling owner reference (`controller: true`), if any.
pub fn controller_ref(obj: &Value) -> Option<&Value> {
    obj["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"].as_bool() == Some(true))
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → "").
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_and_accessors() {
        let o = json!({"metadata": {"name": "a", "namespace": "d", "finalizers": ["x"],
            "ownerReferences": [{"name": "o", "controller": false}, {"name": "c", "controller": true}]}});
        assert_eq!(ObjectKey::of(&o).unwrap().to_string(), "d/a");
        assert_eq!(
            ObjectKey::of(&json!({"metadata": {"name": "n"}}))
                .unwrap()
                .to_string(),
            "n"
        );
        assert!(ObjectKey::of(&json!({"metadata": {}})).is_none());
        assert!(has_finalizer(&o, "x") && !has_finalizer(&o, "y"));
        assert_eq!(controller_ref(&o).unwrap()["name"], "c");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
    }
}

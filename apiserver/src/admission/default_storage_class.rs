//! DefaultStorageClass: a PVC that names no class (the field absent, not `""`) gets the
//! default StorageClass (`storageclass.kubernetes.io/is-default-class: "true"`; the newest if
//! several are marked).

use serde_json::{Value, json};

use crate::reader::Reader;
use crate::status::ApiError;

const DEFAULT_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The name of the default class among `classes`, if any.
pub fn default_class(classes: &[Value]) -> Option<&str> {
    classes
        .iter()
        .filter(|c| c["metadata"]["annotations"][DEFAULT_ANNOTATION] == "true")
        .max_by(|a, b| {
            let ts = |c: &Value| {
                c["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            };
            ts(a).cmp(&ts(b)).then_with(|| {
                let n = |c: &Value| c["metadata"]["name"].as_str().unwrap_or("").to_owned();
                n(b).cmp(&n(a))
            })
        })
        .and_then(|c| c["metadata"]["name"].as_str())
}

pub async fn admit(rest: &dyn Reader, pvc: &mut Value) -> Result<(), ApiError> {
    if pvc["spec"]
        .get("storageClassName")
        .is_some_and(|v| !v.is_null())
    {
        return Ok(());
    }
    let Some(res) = rest.builtin_kind("storage.k8s.io", "StorageClass") else {
        return Ok(());
    };
    let classes = rest.list(&res, None).await?;
    if let Some(name) = default_class(&classes) {
        pvc["spec"]["storageClassName"] = json!(name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_default_wins() {
        let c = |n: &str, ts: &str, d: bool| {
            json!({"metadata": {"name": n, "creationTimestamp": ts,
                "annotations": {DEFAULT_ANNOTATION: if d { "true" } else { "false" }}}})
        };
        assert_eq!(
            default_class(&[
                c("a", "2024-01-01T00:00:00Z", true),
                c("b", "2025-01-01T00:00:00Z", true),
                c("c", "2026-01-01T00:00:00Z", false)
            ]),
            Some("b")
        );
        assert_eq!(
            default_class(&[c("a", "2024-01-01T00:00:00Z", false)]),
            None
        );
    }
}

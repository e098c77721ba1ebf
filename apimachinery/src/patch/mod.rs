//! The PATCH algorithms the API server applies to stored objects.
//!
//! Everything here is a pure function over [`serde_json::Value`]; nothing
//! touches storage, admission or defaulting. The split is one file per job:
//!
//! * `mod.rs` (this file): the public entry point [`apply`], the
//!   [`PatchType`] / [`PatchKey`] selectors and small value helpers shared by
//!   the algorithms (depth guard, numeric-aware equality).
//! * `error.rs`: [`PatchError`] and its mapping to Kubernetes HTTP statuses.
//! * [`json_patch`]: RFC 6902 JSON patch (`application/json-patch+json`).
//! * [`merge_patch`]: RFC 7386 JSON merge patch (`application/merge-patch+json`).
//! * [`strategic`]: Kubernetes strategic merge patch
//!   (`application/strategic-merge-patch+json`) with its `$patch`,
//!   `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…`
//!   directives.
//! * [`merge_keys`]: the per-type table (merge keys, patch strategies) that
//!   strategic merge patch needs for the built-in kinds.
//!
//! Upstream behaviour (kube-apiserver v1.33, `k8s.io/apiserver` handlers and
//! `k8s.io/apimachinery/pkg/util/strategicpatch`) is the specification; the
//! places where this module deliberately differs are documented where they
//! happen.

mod error;
pub mod json_patch;
pub mod merge_keys;
pub mod merge_patch;
pub mod strategic;

pub use error::{PatchError, SmpDirective};
pub use merge_keys::{Field, TypeInfo};

use serde_json::Value;

/// Deepest nesting accepted in a patch document (and, for JSON patch, in a
/// value placed into the document). Bounds every recursion in this module so
/// that no input can overflow the stack.
pub const MAX_DEPTH: usize = 100;

/// The three PATCH content types kube-apiserver accepts besides server-side
/// apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
}

impl PatchType {
    /// Maps a `Content-Type` header value to a patch type. Parameters such as
    /// `; charset=utf-8` are ignored, as is surrounding whitespace and ASCII
    /// case (media types are case-insensitive).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let essence = ct.split(';').next().unwrap_or_default().trim();
        [Self::Json, Self::Merge, Self::StrategicMerge]
            .into_iter()
            .find(|t| t.content_type().eq_ignore_ascii_case(essence))
    }

    /// The canonical media type of this patch type.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Json => "application/json-patch+json",
            Self::Merge => "application/merge-patch+json",
            Self::StrategicMerge => "application/strategic-merge-patch+json",
        }
    }
}

/// Identifies the type of the patched object, so strategic merge patch can
/// find its merge keys. `group` is `""` for the core group; the version is
/// not needed because patch metadata of the served versions agree. For a
/// subresource, name the kind of the object it serves (`Scale` for `*/scale`,
/// `Pod` for `pods/status` or `pods/ephemeralcontainers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PatchKey<'a> {
    pub group: &'a str,
    pub kind: &'a str,
}

/// Applies `patch` (the raw request body) of type `patch_type` to `original`
/// and returns the patched object.
///
/// The result is always a JSON object: a patch that would turn the object
/// into anything else fails with [`PatchError::NotAnObject`], as upstream
/// fails to decode such a result. Strategic merge patch on a kind without
/// patch metadata (custom resources, unknown kinds) fails with
/// [`PatchError::StrategicMergeUnsupported`] before the body is looked at.
pub fn apply(
    kind: PatchKey<'_>,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
) -> Result<Value, PatchError> {
    let result = match patch_type {
        PatchType::Json => {
            let patch = parse(patch, |e| format!("error decoding patch: {e}"))?;
            json_patch::apply(original, &patch)?
        }
        PatchType::Merge => {
            // Upstream's merge-patch library rejects a body that is not JSON,
            // `null` or a scalar as "Invalid JSON Patch" (400); an array body
            // replaces the document and then fails to decode (422 below).
            let patch = parse(patch, |_| "Invalid JSON Patch".to_owned())?;
            if !(patch.is_object() || patch.is_array()) {
                return Err(PatchError::Malformed("Invalid JSON Patch".to_owned()));
            }
            merge_patch::apply(original, &patch)?
        }
        PatchType::StrategicMerge => {
            let schema = merge_keys::lookup(kind).ok_or(PatchError::StrategicMergeUnsupported)?;
            let patch = parse(patch, |e| e.to_string())?;
            strategic::apply(schema, original, &patch)?
        }
    };
    if !result.is_object() {
        return Err(PatchError::NotAnObject);
    }
    Ok(result)
}

/// Parses a patch body. serde_json refuses nesting deeper than 128 levels
/// while parsing, so parsing itself cannot overflow the stack.
fn parse(body: &[u8], msg: impl FnOnce(serde_json::Error) -> String) -> Result<Value, PatchError> {
    serde_json::from_slice(body).map_err(|e| PatchError::Malformed(msg(e)))
}

/// Fails with [`PatchError::TooDeep`] when `v` nests deeper than
/// [`MAX_DEPTH`]. A scalar has depth 0, `{}` and `[]` depth 1.
pub(crate) fn check_depth(v: &Value) -> Result<(), PatchError> {
    if depth_up_to(v, MAX_DEPTH + 1) > MAX_DEPTH {
        return Err(PatchError::TooDeep { max: MAX_DEPTH });
    }
    Ok(())
}

/// Nesting depth of `v`, but never looks further than `limit` levels down
/// (returns `limit` as soon as that is reached), so the recursion is bounded.
pub(crate) fn depth_up_to(v: &Value, limit: usize) -> usize {
    if limit == 0 {
        return 0;
    }
    match v {
        Value::Array(a) => 1 + max_child_depth(a.iter(), limit - 1),
        Value::Object(m) => 1 + max_child_depth(m.values(), limit - 1),
        _ => 0,
    }
}

fn max_child_depth<'a>(children: impl Iterator<Item = &'a Value>, limit: usize) -> usize {
    let mut deepest = 0;
    for child in children {
        deepest = deepest.max(depth_up_to(child, limit));
        if deepest >= limit {
            break;
        }
    }
    deepest
}

/// Structural JSON equality where numbers compare by value (`1 == 1.0`), as
/// upstream's decode-to-`interface{}` comparison does. Object key order never
/// matters.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Short JSON type name used in error messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DEPLOYMENT: PatchKey<'static> = PatchKey {
        group: "apps",
        kind: "Deployment",
    };

    #[test]
    fn content_types() {
        let cases = [
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::StrategicMerge),
            ),
            (
                "Application/Strategic-Merge-Patch+JSON ;charset=UTF-8",
                Some(PatchType::StrategicMerge),
            ),
            ("application/apply-patch+yaml", None),
            ("application/json", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
        }
        for t in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
    }

    #[test]
    fn dispatch_and_status_codes() {
        let orig = json!({"metadata": {"name": "d", "labels": {"a": "1"}}});
        let cases: &[(PatchType, &str, Result<Value, u16>)] = &[
            (
                PatchType::Json,
                r#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#,
                Ok(json!({"metadata": {"name": "d", "labels": {"a": "1", "b": "2"}}})),
            ),
            (PatchType::Json, r#"{"op":"add"}"#, Err(400)),
            (
                PatchType::Json,
                r#"[{"op":"remove","path":"/nope"}]"#,
                Err(422),
            ),
            (
                PatchType::Json,
                r#"[{"op":"test","path":"/metadata/name","value":"x"}]"#,
                Err(422),
            ),
            (
                PatchType::Json,
                r#"[{"op":"replace","path":"","value":[1]}]"#,
                Err(422),
            ),
            (PatchType::Json, "not json", Err(400)),
            (
                PatchType::Merge,
                r#"{"metadata":{"labels":{"a":null}}}"#,
                Ok(json!({"metadata": {"name": "d", "labels": {}}})),
            ),
            (PatchType::Merge, "null", Err(400)),
            (PatchType::Merge, "\"x\"", Err(400)),
            (PatchType::Merge, "[1]", Err(422)),
            (PatchType::Merge, "{", Err(400)),
            (
                PatchType::StrategicMerge,
                r#"{"metadata":{"labels":{"b":"2"}}}"#,
                Ok(json!({"metadata": {"name": "d", "labels": {"a": "1", "b": "2"}}})),
            ),
            (PatchType::StrategicMerge, "[]", Err(400)),
            (
                PatchType::StrategicMerge,
                r#"{"metadata":{"$retainKeys":"x"}}"#,
                Err(400),
            ),
        ];
        for (pt, body, want) in cases {
            let got = apply(DEPLOYMENT, *pt, &orig, body.as_bytes()).map_err(|e| e.http_status());
            assert_eq!(&got, want, "{pt:?} {body}");
        }
    }

    #[test]
    fn strategic_merge_on_custom_resource_is_415() {
        let key = PatchKey {
            group: "example.com",
            kind: "Widget",
        };
        let err = apply(key, PatchType::StrategicMerge, &json!({}), b"{}").unwrap_err();
        assert_eq!(err.http_status(), 415);
        assert_eq!(err.reason(), "UnsupportedMediaType");
        assert!(err.to_string().contains("application/merge-patch+json"));
        // The other two patch types work on custom resources.
        let got = apply(
            key,
            PatchType::Merge,
            &json!({"spec": {}}),
            br#"{"spec":{"a":1}}"#,
        )
        .unwrap();
        assert_eq!(got, json!({"spec": {"a": 1}}));
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowed() {
        // 150 levels: beyond serde_json's parse limit (128).
        let deep = format!(
            "{}{}",
            "{\"a\":".repeat(150),
            "1".to_owned() + &"}".repeat(150)
        );
        // 110 levels: parses, but beyond MAX_DEPTH.
        let mid = format!("{}1{}", "{\"a\":".repeat(110), "}".repeat(110));
        let mid_list = format!(
            "[{{\"op\":\"add\",\"path\":\"/x\",\"value\":{}1{}}}]",
            "[".repeat(110),
            "]".repeat(110)
        );
        for (pt, body) in [
            (PatchType::Merge, &deep),
            (PatchType::StrategicMerge, &deep),
            (PatchType::Merge, &mid),
            (PatchType::StrategicMerge, &mid),
            (PatchType::Json, &mid_list),
        ] {
            let err = apply(DEPLOYMENT, pt, &json!({}), body.as_bytes()).unwrap_err();
            assert_eq!(err.http_status(), 400, "{pt:?}: {err}");
        }
        // 90 levels is fine.
        let ok = format!("{}1{}", "{\"a\":".repeat(90), "}".repeat(90));
        assert!(
            apply(
                DEPLOYMENT,
                PatchType::StrategicMerge,
                &json!({}),
                ok.as_bytes()
            )
            .is_ok()
        );
        assert!(apply(DEPLOYMENT, PatchType::Merge, &json!({}), ok.as_bytes()).is_ok());
    }

    #[test]
    fn depth_and_equality_helpers() {
        assert_eq!(depth_up_to(&json!(1), 10), 0);
        assert_eq!(depth_up_to(&json!({}), 10), 1);
        assert_eq!(depth_up_to(&json!({"a": [1, {"b": []}]}), 10), 4);
        assert_eq!(depth_up_to(&json!([[[[[]]]]]), 3), 3);
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
        assert!(!json_eq(&json!("1"), &json!(1)));
        assert!(!json_eq(&json!(-1), &json!(u64::MAX)));
    }
}

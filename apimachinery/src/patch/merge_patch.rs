//! RFC 7386 JSON merge patch (`application/merge-patch+json`).
//!
//! An object patch merges member by member, `null` deletes a member, and any
//! other patch value (including arrays) replaces the target wholesale.
//!
//! Upstream (`evanphx/json-patch` v4 `MergePatch`) additionally strips `null`
//! members inside objects nested in a newly added array; this module copies
//! arrays verbatim as the RFC says. Whether the whole patch may be a non-object
//! is decided by the caller ([`super::apply`] rejects `null` and scalars).

use serde_json::{Map, Value};

use super::{PatchError, check_depth};

/// Applies the merge patch `patch` to `original`. Fails only when the patch
/// nests deeper than [`super::MAX_DEPTH`].
pub fn apply(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    check_depth(patch)?;
    let mut target = original.clone();
    merge(&mut target, patch);
    Ok(target)
}

/// RFC 7386 `MergePatch(Target, Patch)` in place. Recursion follows the
/// patch, whose depth the caller has bounded.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.as_str()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386 appendix A, plus Kubernetes-flavoured cases.
    #[test]
    fn table() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
            // Arrays are copied verbatim, nulls inside included.
            (
                json!({}),
                json!({"a": [{"b": null}, null]}),
                json!({"a": [{"b": null}, null]}),
            ),
            // kubectl label / annotate style.
            (
                json!({"metadata": {"name": "x", "labels": {"app": "a", "tier": "t"}}}),
                json!({"metadata": {"labels": {"tier": null, "env": "prod"}}}),
                json!({"metadata": {"name": "x", "labels": {"app": "a", "env": "prod"}}}),
            ),
            // Lists are replaced, never merged (unlike strategic merge patch).
            (
                json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "3"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "3"}]}}),
            ),
        ];
        for (original, patch, want) in cases {
            assert_eq!(
                apply(&original, &patch).unwrap(),
                want,
                "{original} + {patch}"
            );
        }
    }
}

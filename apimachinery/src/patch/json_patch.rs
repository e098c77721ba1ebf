//! RFC 6902 JSON patch (`application/json-patch+json`) with JSON pointers
//! (RFC 6901), as kube-apiserver applies it.
//!
//! Upstream uses `gopkg.in/evanphx/json-patch.v4`. Behaviour kept from it:
//! negative array indices count from the end (`/a/-1` is the last element;
//! for `add`, `-1` appends), at most [`MAX_OPERATIONS`] operations (413), and
//! `copy` may add at most [`MAX_COPY_BYTES`] of serialized JSON in total
//! (kube-apiserver's default `--json-patch-max-copy-bytes`).
//!
//! Where that library is merely lax this module follows the RFC: `add` at the
//! root path replaces the document, pointers must start with `/` and use only
//! `~0`/`~1` escapes, `value` is required for `add`/`replace`/`test`, a value
//! cannot be moved into its own child, and `test` on a missing path fails.

use serde_json::Value;

use super::{MAX_DEPTH, PatchError, check_depth, depth_up_to, json_eq, type_name};

/// Upstream's `maxJSONPatchOperations`.
pub const MAX_OPERATIONS: usize = 10_000;

/// Upstream's default `--json-patch-max-copy-bytes` (3 MiB): the total size
/// of the values `copy` operations may duplicate.
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Applies the JSON patch `patch` (an array of operations) to `original`.
///
/// Operations apply in order; the first failing one aborts the whole patch
/// (the original is never modified).
pub fn apply(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            type_name(patch)
        )));
    };
    if let Some(op) = ops.iter().find(|op| !op.is_object()) {
        return Err(PatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            type_name(op)
        )));
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_OPERATIONS,
            got: ops.len(),
        });
    }
    check_depth(patch)?;

    let mut doc = original.clone();
    let mut copied = 0;
    for op in ops {
        apply_op(&mut doc, op, &mut copied)?;
    }
    Ok(doc)
}

fn failed(msg: String) -> PatchError {
    PatchError::JsonPatchFailed(msg)
}

/// Applies one operation. `copied` accumulates the bytes added by `copy`.
fn apply_op(doc: &mut Value, op: &Value, copied: &mut usize) -> Result<(), PatchError> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
    let path = || -> Result<(&str, Vec<String>), PatchError> {
        let raw = op.get("path").and_then(Value::as_str).ok_or_else(|| {
            failed(format!(
                "{kind} operation failed to decode path: missing path field"
            ))
        })?;
        Ok((raw, parse_pointer(raw)?))
    };
    let from = || -> Result<(&str, Vec<String>), PatchError> {
        let raw = op.get("from").and_then(Value::as_str).ok_or_else(|| {
            failed(format!(
                "{kind} operation failed to decode from: missing from field"
            ))
        })?;
        Ok((raw, parse_pointer(raw)?))
    };
    let value = || -> Result<&Value, PatchError> {
        op.get("value").ok_or_else(|| {
            failed(format!(
                "{kind} operation, missing value field: missing value"
            ))
        })
    };

    match kind {
        "add" => {
            let (raw, tokens) = path()?;
            add(doc, raw, &tokens, value()?.clone())
        }
        "remove" => {
            let (raw, tokens) = path()?;
            remove(doc, raw, &tokens).map(drop)
        }
        "replace" => {
            let (raw, tokens) = path()?;
            let value = value()?.clone();
            check_placement(&tokens, &value)?;
            let target = resolve_mut(doc, &tokens).ok_or_else(|| {
                failed(format!(
                    "replace operation does not apply: doc is missing key: {raw}: missing value"
                ))
            })?;
            *target = value;
            Ok(())
        }
        "move" => {
            let (raw_from, from_tokens) = from()?;
            let (raw, tokens) = path()?;
            if resolve(doc, &from_tokens).is_none() {
                return Err(failed(format!(
                    "move operation does not apply: doc is missing from path: {raw_from}: missing value"
                )));
            }
            if tokens.len() > from_tokens.len() && tokens.starts_with(&from_tokens) {
                return Err(failed(format!(
                    "move operation does not apply: cannot move {raw_from} into its own child {raw}"
                )));
            }
            if tokens == from_tokens {
                return Ok(());
            }
            let moved = remove(doc, raw_from, &from_tokens)?;
            add(doc, raw, &tokens, moved)
        }
        "copy" => {
            let (raw_from, from_tokens) = from()?;
            let (raw, tokens) = path()?;
            let copy = resolve(doc, &from_tokens)
                .ok_or_else(|| {
                    failed(format!("copy operation does not apply: doc is missing from path: {raw_from}: missing value"))
                })?
                .clone();
            *copied = copied.saturating_add(serialized_len(&copy));
            if *copied > MAX_COPY_BYTES {
                return Err(failed(format!(
                    "Unable to complete the copy, the accumulated size increase of copy is {copied}, \
                     exceeding the limit {MAX_COPY_BYTES}"
                )));
            }
            add(doc, raw, &tokens, copy)
        }
        "test" => {
            let (raw, tokens) = path()?;
            let expected = value()?;
            let actual = resolve(doc, &tokens).ok_or_else(|| {
                failed(format!(
                    "test operation does not apply: is missing path: {raw}: missing value"
                ))
            })?;
            if json_eq(actual, expected) {
                Ok(())
            } else {
                Err(PatchError::TestFailed {
                    path: raw.to_owned(),
                })
            }
        }
        other => Err(failed(format!("Unexpected kind: {other}"))),
    }
}

/// Splits an RFC 6901 pointer into unescaped reference tokens. `""` is the
/// whole document (no tokens).
fn parse_pointer(pointer: &str) -> Result<Vec<String>, PatchError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(failed(format!(
            "invalid JSON pointer {pointer:?}: must be empty or start with '/'"
        )));
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => {
                        return Err(failed(format!(
                            "invalid JSON pointer {pointer:?}: bad escape in {token:?}"
                        )));
                    }
                }
            }
            Ok(out)
        })
        .collect()
}

/// Resolves an array reference token to an index. Accepts `0..len`, plus
/// (like upstream) negative indices counting from the end; `len` is one more
/// than the array length when the token names an insertion point (`add`).
fn array_index(token: &str, len: usize) -> Option<usize> {
    let idx: i64 = token.parse().ok()?;
    let len = i64::try_from(len).ok()?;
    let idx = if idx < 0 { idx.checked_add(len)? } else { idx };
    if (0..len).contains(&idx) {
        usize::try_from(idx).ok()
    } else {
        None
    }
}

fn resolve<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(m) => m.get(token),
        Value::Array(a) => array_index(token, a.len()).and_then(|i| a.get(i)),
        _ => None,
    })
}

fn resolve_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(m) => m.get_mut(token),
        Value::Array(a) => array_index(token, a.len()).and_then(|i| a.get_mut(i)),
        _ => None,
    })
}

/// Rejects placing `value` at `tokens` when the result would nest deeper
/// than [`MAX_DEPTH`]; without this, repeated `copy`/`move` could grow the
/// document's depth without bound.
fn check_placement(tokens: &[String], value: &Value) -> Result<(), PatchError> {
    let room = MAX_DEPTH.saturating_sub(tokens.len());
    if tokens.len() > MAX_DEPTH || depth_up_to(value, room + 1) > room {
        return Err(PatchError::TooDeep { max: MAX_DEPTH });
    }
    Ok(())
}

/// RFC 6902 `add`: the root is replaced, an object member is set (replacing
/// any existing one), an array element is inserted (`-` appends).
fn add(doc: &mut Value, raw: &str, tokens: &[String], value: Value) -> Result<(), PatchError> {
    check_placement(tokens, &value)?;
    let Some((last, parent_tokens)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    let missing = || {
        failed(format!(
            "add operation does not apply: doc is missing path: {raw:?}: missing value"
        ))
    };
    match resolve_mut(doc, parent_tokens).ok_or_else(missing)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) if last == "-" => {
            a.push(value);
            Ok(())
        }
        Value::Array(a) => {
            let idx = array_index(last, a.len() + 1).ok_or_else(|| {
                failed(format!(
                    "error in add for path: '{raw}': Unable to access invalid index: {last}: invalid index referenced"
                ))
            })?;
            a.insert(idx, value);
            Ok(())
        }
        _ => Err(missing()),
    }
}

/// RFC 6902 `remove`; returns the removed value (used by `move`).
fn remove(doc: &mut Value, raw: &str, tokens: &[String]) -> Result<Value, PatchError> {
    let missing = || {
        failed(format!(
            "remove operation does not apply: doc is missing path: {raw:?}: missing value"
        ))
    };
    let (last, parent_tokens) = tokens.split_last().ok_or_else(missing)?;
    match resolve_mut(doc, parent_tokens).ok_or_else(missing)? {
        Value::Object(m) => m.remove(last.as_str()).ok_or_else(|| {
            failed(format!(
                "error in remove for path: '{raw}': Unable to remove nonexistent key: {last}: missing value"
            ))
        }),
        Value::Array(a) => {
            let idx = array_index(last, a.len()).ok_or_else(|| {
                failed(format!(
                    "error in remove for path: '{raw}': Unable to access invalid index: {last}: invalid index referenced"
                ))
            })?;
            Ok(a.remove(idx))
        }
        _ => Err(missing()),
    }
}

/// Length of `v` serialized as compact JSON, without allocating it.
fn serialized_len(v: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a Value to an infallible writer cannot fail; if it somehow
    // did, the partial count is still a lower bound.
    let _ = serde_json::to_writer(&mut counter, v);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 6902 appendix A examples (A.1–A.16) plus upstream-compatible edge
    /// cases. `Err(code)` is the expected HTTP status.
    #[test]
    fn table() {
        let cases: Vec<(&str, Value, Value, Result<Value, u16>)> = vec![
            // A.1 Adding an Object Member
            (
                "A.1",
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux"}]),
                Ok(json!({"baz": "qux", "foo": "bar"})),
            ),
            // A.2 Adding an Array Element
            (
                "A.2",
                json!({"foo": ["bar", "baz"]}),
                json!([{"op": "add", "path": "/foo/1", "value": "qux"}]),
                Ok(json!({"foo": ["bar", "qux", "baz"]})),
            ),
            // A.3 Removing an Object Member
            (
                "A.3",
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "remove", "path": "/baz"}]),
                Ok(json!({"foo": "bar"})),
            ),
            // A.4 Removing an Array Element
            (
                "A.4",
                json!({"foo": ["bar", "qux", "baz"]}),
                json!([{"op": "remove", "path": "/foo/1"}]),
                Ok(json!({"foo": ["bar", "baz"]})),
            ),
            // A.5 Replacing a Value
            (
                "A.5",
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "replace", "path": "/baz", "value": "boo"}]),
                Ok(json!({"baz": "boo", "foo": "bar"})),
            ),
            // A.6 Moving a Value
            (
                "A.6",
                json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
                json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}]),
                Ok(json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}})),
            ),
            // A.7 Moving an Array Element
            (
                "A.7",
                json!({"foo": ["all", "grass", "cows", "eat"]}),
                json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}]),
                Ok(json!({"foo": ["all", "cows", "eat", "grass"]})),
            ),
            // A.8 Testing a Value: Success
            (
                "A.8",
                json!({"baz": "qux", "foo": ["a", 2, "c"]}),
                json!([{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}]),
                Ok(json!({"baz": "qux", "foo": ["a", 2, "c"]})),
            ),
            // A.9 Testing a Value: Error
            (
                "A.9",
                json!({"baz": "qux"}),
                json!([{"op": "test", "path": "/baz", "value": "bar"}]),
                Err(422),
            ),
            // A.10 Adding a Nested Member Object
            (
                "A.10",
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}]),
                Ok(json!({"foo": "bar", "child": {"grandchild": {}}})),
            ),
            // A.11 Ignoring Unrecognized Elements
            (
                "A.11",
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}]),
                Ok(json!({"foo": "bar", "baz": "qux"})),
            ),
            // A.12 Adding to a Nonexistent Target
            (
                "A.12",
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz/bat", "value": "qux"}]),
                Err(422),
            ),
            // A.14 ~ Escape Ordering
            (
                "A.14",
                json!({"/": 9, "~1": 10}),
                json!([{"op": "test", "path": "/~01", "value": 10}]),
                Ok(json!({"/": 9, "~1": 10})),
            ),
            // A.15 Comparing Strings and Numbers
            (
                "A.15",
                json!({"/": 9, "~1": 10}),
                json!([{"op": "test", "path": "/~01", "value": "10"}]),
                Err(422),
            ),
            // A.16 Adding an Array Value
            (
                "A.16",
                json!({"foo": ["bar"]}),
                json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]),
                Ok(json!({"foo": ["bar", ["abc", "def"]]})),
            ),
            // Pointer escapes on add/remove.
            (
                "escape ~1",
                json!({"metadata": {"annotations": {}}}),
                json!([{"op": "add", "path": "/metadata/annotations/example.com~1x", "value": "1"}]),
                Ok(json!({"metadata": {"annotations": {"example.com/x": "1"}}})),
            ),
            (
                "bad escape",
                json!({"a": 1}),
                json!([{"op": "remove", "path": "/a~2"}]),
                Err(422),
            ),
            (
                "pointer without slash",
                json!({"a": 1}),
                json!([{"op": "remove", "path": "a"}]),
                Err(422),
            ),
            // Array bounds.
            (
                "add at len",
                json!({"a": [1]}),
                json!([{"op": "add", "path": "/a/1", "value": 2}]),
                Ok(json!({"a": [1, 2]})),
            ),
            (
                "add past len",
                json!({"a": [1]}),
                json!([{"op": "add", "path": "/a/2", "value": 2}]),
                Err(422),
            ),
            (
                "remove past end",
                json!({"a": [1]}),
                json!([{"op": "remove", "path": "/a/1"}]),
                Err(422),
            ),
            (
                "replace dash",
                json!({"a": [1]}),
                json!([{"op": "replace", "path": "/a/-", "value": 2}]),
                Err(422),
            ),
            (
                "huge index",
                json!({"a": [1]}),
                json!([{"op": "replace", "path": "/a/99999999999999999999999", "value": 2}]),
                Err(422),
            ),
            (
                "non-numeric index",
                json!({"a": [1]}),
                json!([{"op": "remove", "path": "/a/x"}]),
                Err(422),
            ),
            (
                "negative index (upstream)",
                json!({"a": [1, 2, 3]}),
                json!([{"op": "remove", "path": "/a/-1"}]),
                Ok(json!({"a": [1, 2]})),
            ),
            (
                "negative add appends (upstream)",
                json!({"a": [1]}),
                json!([{"op": "add", "path": "/a/-1", "value": 2}]),
                Ok(json!({"a": [1, 2]})),
            ),
            (
                "negative out of range",
                json!({"a": [1]}),
                json!([{"op": "remove", "path": "/a/-2"}]),
                Err(422),
            ),
            // Missing targets.
            (
                "remove missing",
                json!({"a": 1}),
                json!([{"op": "remove", "path": "/b"}]),
                Err(422),
            ),
            (
                "replace missing",
                json!({"a": 1}),
                json!([{"op": "replace", "path": "/b", "value": 1}]),
                Err(422),
            ),
            (
                "remove root",
                json!({"a": 1}),
                json!([{"op": "remove", "path": ""}]),
                Err(422),
            ),
            (
                "test missing",
                json!({}),
                json!([{"op": "test", "path": "/a", "value": null}]),
                Err(422),
            ),
            (
                "path through scalar",
                json!({"a": 1}),
                json!([{"op": "add", "path": "/a/b", "value": 1}]),
                Err(422),
            ),
            // Whole-document operations.
            (
                "replace root",
                json!({"a": 1}),
                json!([{"op": "replace", "path": "", "value": {"b": 2}}]),
                Ok(json!({"b": 2})),
            ),
            (
                "add root",
                json!({"a": 1}),
                json!([{"op": "add", "path": "", "value": {"b": 2}}]),
                Ok(json!({"b": 2})),
            ),
            (
                "test root",
                json!({"a": 1}),
                json!([{"op": "test", "path": "", "value": {"a": 1.0}}]),
                Ok(json!({"a": 1})),
            ),
            // Move / copy.
            (
                "move into child",
                json!({"a": {"b": 1}}),
                json!([{"op": "move", "from": "/a", "path": "/a/c"}]),
                Err(422),
            ),
            (
                "move to self",
                json!({"a": 1}),
                json!([{"op": "move", "from": "/a", "path": "/a"}]),
                Ok(json!({"a": 1})),
            ),
            (
                "move missing",
                json!({"a": 1}),
                json!([{"op": "move", "from": "/b", "path": "/c"}]),
                Err(422),
            ),
            (
                "copy",
                json!({"a": {"b": [1]}}),
                json!([{"op": "copy", "from": "/a/b", "path": "/c"}]),
                Ok(json!({"a": {"b": [1]}, "c": [1]})),
            ),
            (
                "copy missing from field",
                json!({"a": 1}),
                json!([{"op": "copy", "path": "/c"}]),
                Err(422),
            ),
            // Operation shape.
            (
                "unknown op",
                json!({}),
                json!([{"op": "frobnicate", "path": "/a"}]),
                Err(422),
            ),
            ("missing op", json!({}), json!([{"path": "/a"}]), Err(422)),
            (
                "missing path",
                json!({}),
                json!([{"op": "add", "value": 1}]),
                Err(422),
            ),
            (
                "missing value",
                json!({}),
                json!([{"op": "add", "path": "/a"}]),
                Err(422),
            ),
            (
                "add null value",
                json!({}),
                json!([{"op": "add", "path": "/a", "value": null}]),
                Ok(json!({"a": null})),
            ),
            ("not an array", json!({}), json!({"op": "add"}), Err(400)),
            ("element not an object", json!({}), json!([1]), Err(400)),
            (
                "empty patch",
                json!({"a": 1}),
                json!([]),
                Ok(json!({"a": 1})),
            ),
            // A failing op leaves nothing applied.
            (
                "atomic",
                json!({"a": 1}),
                json!([{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zz"}]),
                Err(422),
            ),
            // Kubernetes-style: set an image, append a toleration.
            (
                "k8s image",
                json!({"spec": {"containers": [{"name": "c", "image": "a"}]}}),
                json!([{"op": "test", "path": "/spec/containers/0/name", "value": "c"},
                    {"op": "replace", "path": "/spec/containers/0/image", "value": "b"},
                    {"op": "add", "path": "/spec/tolerations", "value": []},
                    {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "k", "operator": "Exists"}}]),
                Ok(
                    json!({"spec": {"containers": [{"name": "c", "image": "b"}], "tolerations": [{"key": "k", "operator": "Exists"}]}}),
                ),
            ),
        ];
        for (name, doc, patch, want) in cases {
            let got = apply(&doc, &patch).map_err(|e| e.http_status());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn error_messages_match_upstream_shape() {
        let err = apply(
            &json!({"a": 1}),
            &json!([{"op": "test", "path": "/a", "value": 2}]),
        )
        .unwrap_err();
        assert_eq!(err, PatchError::TestFailed { path: "/a".into() });
        assert_eq!(err.to_string(), "testing value /a failed: test failed");
        let err = apply(&json!({}), &json!([{"op": "x", "path": "/a"}])).unwrap_err();
        assert_eq!(err.to_string(), "Unexpected kind: x");
        let err = apply(&json!({"a": 1}), &json!([{"op": "remove", "path": "/b"}])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "error in remove for path: '/b': Unable to remove nonexistent key: b: missing value"
        );
    }

    #[test]
    fn too_many_operations_is_413() {
        let ops: Vec<Value> = (0..=MAX_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "", "value": {}}))
            .collect();
        let err = apply(&json!({}), &Value::Array(ops)).unwrap_err();
        assert_eq!(err.http_status(), 413);
        let ops: Vec<Value> = (0..MAX_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "", "value": {}}))
            .collect();
        assert!(apply(&json!({}), &Value::Array(ops)).is_ok());
    }

    #[test]
    fn copy_amplification_is_bounded() {
        // Each copy doubles the document; the accumulated copy size limit
        // stops it long before memory is exhausted.
        let mut ops =
            vec![json!({"op": "add", "path": "/a", "value": vec!["0123456789abcdef"; 64]})];
        for i in 0..40 {
            ops.push(json!({"op": "copy", "from": "/a", "path": format!("/a/{}", i % 2)}));
            ops.push(json!({"op": "copy", "from": "", "path": format!("/b{i}")}));
        }
        let err = apply(&json!({}), &Value::Array(ops)).unwrap_err();
        assert_eq!(err.http_status(), 422, "{err}");
        assert!(
            err.to_string().contains("accumulated size increase"),
            "{err}"
        );
    }

    #[test]
    fn depth_growth_is_bounded() {
        // Repeatedly copying a value into its own child would nest without
        // bound; placement beyond MAX_DEPTH is refused.
        let mut ops = vec![json!({"op": "add", "path": "/a", "value": {}})];
        for _ in 0..200 {
            ops.push(json!({"op": "copy", "from": "/a", "path": "/a/a"}));
        }
        let err = apply(&json!({}), &Value::Array(ops)).unwrap_err();
        assert_eq!(err, PatchError::TooDeep { max: MAX_DEPTH });
        let long_path = format!("/{}", vec!["a"; 150].join("/"));
        let err = apply(
            &json!({}),
            &json!([{"op": "add", "path": long_path, "value": 1}]),
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 400);
    }

    #[test]
    fn pointer_parsing() {
        assert_eq!(parse_pointer("").unwrap(), Vec::<String>::new());
        assert_eq!(parse_pointer("/").unwrap(), vec![""]);
        assert_eq!(
            parse_pointer("/a~1b/~0c/~01").unwrap(),
            vec!["a/b", "~c", "~1"]
        );
        assert!(parse_pointer("/a~").is_err());
        assert!(parse_pointer("x").is_err());
        assert_eq!(array_index("0", 1), Some(0));
        assert_eq!(array_index("1", 1), None);
        assert_eq!(array_index("-1", 3), Some(2));
        assert_eq!(array_index("-4", 3), None);
        assert_eq!(array_index(&i64::MIN.to_string(), 3), None);
        assert_eq!(array_index("", 3), None);
    }
}

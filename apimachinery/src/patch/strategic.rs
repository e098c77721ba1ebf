//! Strategic merge patch (`application/strategic-merge-patch+json`), with the
//! semantics of `k8s.io/apimachinery/pkg/util/strategicpatch` as
//! kube-apiserver v1.33 applies it (merging parallel deletion lists,
//! ignoring `null`s that match nothing).
//!
//! Rules, per object level (with the field metadata from [`super::merge_keys`]):
//!
//! * `"$patch": "replace"` in a patch object replaces the original object by
//!   the rest of the patch object; `"$patch": "delete"` empties it; any other
//!   value is an error (500 upstream, see [`PatchError::StrategicMerge`]).
//! * `"$retainKeys": [..]` drops every original key not listed; every
//!   non-null patch key must be listed (400 otherwise). It is honoured
//!   wherever it appears, as upstream does, not only on tagged fields.
//! * `"$setElementOrder/<f>": [..]` is processed first: list `f` is merged as
//!   usual and then ordered — listed elements in the given order, elements
//!   only on the server kept near their original neighbours.
//! * `"$deleteFromPrimitiveList/<f>": [..]` removes those values from the
//!   primitive list `f`.
//! * `null` deletes the key; a key absent from the original takes the patch
//!   value (with directives and `null` members removed); values of different
//!   JSON types are replaced; two objects merge recursively (unless tagged
//!   `replace`); two lists merge if tagged `merge` and are replaced
//!   otherwise; scalars are replaced.
//!
//! Merge lists: primitive elements are merged as a set (union, no
//! duplicates); object elements are matched by the merge key and merged
//! recursively, unmatched patch elements are appended; an element
//! `{"$patch": "delete", <key>: v}` removes the matching elements, a
//! `{"$patch": "replace"}` element makes the rest of the patch list replace
//! the original list. The merged list keeps patch elements in patch order,
//! interleaved with server-only elements at their original relative
//! positions.
//!
//! Differences from upstream, all on inputs upstream mishandles: values taken
//! over from the patch are stripped of every directive key (upstream strips
//! only `$patch` objects and relies on typed decoding to drop the others,
//! which an untyped store would keep); `$setElementOrder` on a list without
//! merge key orders by whole-element equality (upstream panics on object
//! elements); `null` list elements are an ordinary element type (upstream
//! panics); numbers compare by value regardless of integer/float encoding.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::merge_keys::{Field, TypeInfo};
use super::{PatchError, SmpDirective, check_depth, type_name};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Applies the strategic merge patch `patch` to `original`, an object of the
/// type described by `schema`. A non-object `original` counts as `{}` (as
/// upstream treats a nil original); a non-object `patch` is malformed (400).
pub fn apply(
    schema: &'static TypeInfo,
    original: &Value,
    patch_value: &Value,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch_value else {
        return Err(PatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            type_name(patch_value)
        )));
    };
    check_depth(patch_value)?;
    let original = match original {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    merge_map(original, patch.clone(), Some(schema)).map(Value::Object)
}

fn smp_error(msg: String) -> PatchError {
    PatchError::StrategicMerge(msg)
}

/// Patch metadata of a list field.
#[derive(Clone, Copy, Default)]
struct ListMeta {
    /// Tagged `patchStrategy:"merge"`; otherwise the patch list replaces.
    merge: bool,
    /// The merge key, for lists of objects.
    key: Option<&'static str>,
    /// Metadata of the elements.
    item: Option<&'static TypeInfo>,
}

fn field_meta(schema: Option<&'static TypeInfo>, name: &str) -> Option<&'static Field> {
    schema.and_then(|s| s.field(name))
}

fn list_meta(schema: Option<&'static TypeInfo>, name: &str) -> ListMeta {
    match field_meta(schema, name) {
        Some(Field::MergeList { key, item, .. }) => ListMeta {
            merge: true,
            key: Some(key),
            item: *item,
        },
        Some(Field::Set) => ListMeta {
            merge: true,
            ..ListMeta::default()
        },
        _ => ListMeta::default(),
    }
}

fn child_schema(schema: Option<&'static TypeInfo>, name: &str) -> Option<&'static TypeInfo> {
    match field_meta(schema, name) {
        Some(Field::Object(t) | Field::RetainKeysObject(t)) => Some(t),
        _ => None,
    }
}

/// `"$prefix/field"` -> `"field"`; anything else with the prefix is a
/// malformed directive.
fn directive_field<'k>(
    key: &'k str,
    prefix: &str,
    which: SmpDirective,
) -> Result<&'k str, PatchError> {
    key.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('/'))
        .ok_or(PatchError::BadDirective(which))
}

fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// The value a patch value becomes when it is taken over as is (the key is
/// new, the types differ, the field is replaced): objects carrying `$patch`
/// disappear (`None`), other directive keys and `null` members are dropped,
/// recursively. `null` list elements stay.
fn take_patch_value(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(clean_map(m)))
        }
        Value::Array(a) => Some(Value::Array(take_patch_list(a))),
        other => Some(other),
    }
}

fn clean_map(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .filter_map(|(k, v)| take_patch_value(v).map(|v| (k, v)))
        .collect()
}

fn take_patch_list(a: Vec<Value>) -> Vec<Value> {
    a.into_iter().filter_map(take_patch_value).collect()
}

/// Merges patch object `patch` into `original` (see the module docs for the
/// rules). Recursion follows the patch, whose depth is bounded.
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Option<&'static TypeInfo>,
) -> Result<Map<String, Value>, PatchError> {
    if patch.contains_key(DIRECTIVE) {
        return map_directive(patch);
    }

    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_orders(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        let (field, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            let field = directive_field(
                &key,
                DELETE_FROM_PRIMITIVE_LIST,
                SmpDirective::DeleteFromPrimitiveList,
            )?;
            (field.to_owned(), true)
        } else {
            (key, false)
        };

        if patch_value.is_null() {
            original.remove(&field);
            continue;
        }
        let Some(original_value) = original.remove(&field) else {
            if !is_delete_list && let Some(v) = take_patch_value(patch_value) {
                original.insert(field, v);
            }
            continue;
        };

        let merged = match (original_value, patch_value) {
            (Value::Object(o), Value::Object(p)) => match field_meta(schema, &field) {
                Some(Field::ReplaceObject) => take_patch_value(Value::Object(p)),
                _ => Some(Value::Object(merge_map(
                    o,
                    p,
                    child_schema(schema, &field),
                )?)),
            },
            (Value::Array(o), Value::Array(p)) => {
                let meta = list_meta(schema, &field);
                if meta.merge || is_delete_list {
                    Some(Value::Array(
                        merge_list(o, p, meta, is_delete_list, &field)?.items,
                    ))
                } else {
                    Some(Value::Array(take_patch_list(p)))
                }
            }
            (o, p) if is_delete_list && !same_json_type(&o, &p) => Some(o),
            (_, p) => take_patch_value(p),
        };
        if let Some(v) = merged {
            original.insert(field, v);
        }
    }
    Ok(original)
}

/// A patch object carrying `$patch`: `replace` yields the rest of the patch
/// object, `delete` an empty object.
fn map_directive(mut patch: Map<String, Value>) -> Result<Map<String, Value>, PatchError> {
    let directive = patch.get(DIRECTIVE).cloned().unwrap_or_default();
    match directive.as_str() {
        Some("replace") => {
            patch.remove(DIRECTIVE);
            Ok(clean_map(patch))
        }
        Some("delete") => Ok(Map::new()),
        _ => Err(smp_error(format!(
            "unknown patch type: {} in map: {}",
            display_directive(&directive),
            Value::Object(patch)
        ))),
    }
}

fn display_directive(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

fn same_json_type(a: &Value, b: &Value) -> bool {
    type_name(a) == type_name(b)
}

/// `$retainKeys`: drop original keys not listed; every non-null, non-directive
/// patch key must be listed.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadDirective(SmpDirective::RetainKeys));
    };
    let retained: HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    let uncovered = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !k.starts_with(SET_ELEMENT_ORDER)
            && !retained.contains(k.as_str())
    });
    if uncovered {
        return Err(PatchError::BadDirective(SmpDirective::RetainKeys));
    }
    original.retain(|k, _| retained.contains(k.as_str()));
    Ok(())
}

/// Processes every `$setElementOrder/<f>` in `patch`: merges list `f` of the
/// patch into the original (removing it from `patch`) and orders the result.
fn apply_set_element_orders(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Option<&'static TypeInfo>,
) -> Result<(), PatchError> {
    let order_keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for order_key in order_keys {
        let field = directive_field(&order_key, SET_ELEMENT_ORDER, SmpDirective::SetElementOrder)?;
        let Some(Value::Array(order)) = patch.remove(&order_key) else {
            return Err(PatchError::BadDirective(SmpDirective::SetElementOrder));
        };
        let original_list = match original.remove(field) {
            None => None,
            Some(Value::Array(a)) => Some(a),
            Some(other) => return Err(not_a_list(field, &other)),
        };
        let patch_list = match patch.remove(field) {
            None => None,
            Some(Value::Array(a)) => Some(a),
            Some(other) => return Err(not_a_list(field, &other)),
        };
        let meta = list_meta(schema, field);
        if let Some(p) = &patch_list {
            validate_against_order(p, &order, meta.key)?;
        }
        element_type(original_list.iter().chain(patch_list.iter()).flatten())?;

        let mut server_ids = match &original_list {
            Some(o) => identities(o, meta.key)?,
            None => Vec::new(),
        };
        let merged = match (original_list, patch_list) {
            (None, None) => continue,
            (Some(o), None) => o,
            (None, Some(p)) => take_patch_list(p),
            (Some(o), Some(p)) if meta.merge => {
                let merged = merge_list(o, p, meta, false, field)?;
                if let Some(view) = merged.original_view {
                    server_ids = view;
                }
                merged.items
            }
            (Some(_), Some(p)) => take_patch_list(p),
        };
        let order_ids = identities(&order, meta.key)?;
        let ordered = order_list(merged, meta.key, &order_ids, &server_ids)?;
        original.insert(field.to_owned(), Value::Array(ordered));
    }
    Ok(())
}

fn not_a_list(field: &str, v: &Value) -> PatchError {
    smp_error(format!(
        "expected a []interface {{}} for {field}, but received a {}",
        type_name(v)
    ))
}

/// Upstream's consistency check between a patch list and its
/// `$setElementOrder` list: the patch's elements (ignoring deletions and
/// directive elements) must appear in the order list, in the same order.
fn validate_against_order(
    patch: &[Value],
    order: &[Value],
    key: Option<&str>,
) -> Result<(), PatchError> {
    if order.is_empty() {
        return Ok(());
    }
    let order_ids = identities(order, key)?;
    let mut next = 0;
    for item in patch {
        if item.get(DIRECTIVE).is_some() {
            continue;
        }
        let id = identity(item, key)?;
        match order_ids[next..].iter().position(|o| *o == id) {
            Some(offset) => next += offset + 1,
            None => {
                return Err(smp_error(format!(
                    "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
                    Value::Array(patch.to_vec()),
                    Value::Array(order.to_vec())
                )));
            }
        }
    }
    Ok(())
}

/// Checks that all elements of a merged list share one JSON type and are not
/// lists themselves; returns whether they are objects.
fn element_type<'a>(
    elements: impl Iterator<Item = &'a Value>,
) -> Result<Option<&'static str>, PatchError> {
    let mut seen = None;
    for v in elements {
        let t = type_name(v);
        match seen {
            None if t == "array" => return Err(PatchError::ListOfLists),
            None => seen = Some(t),
            Some(s) if s != t => {
                return Err(smp_error(format!(
                    "list element types are not identical: {s} and {t}"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(seen)
}

/// A merged list, and how upstream's `$setElementOrder` step sees the
/// original list afterwards (see [`upstream_original_view`]).
struct MergedList {
    items: Vec<Value>,
    /// Identities of the original list as upstream reads them after merging;
    /// `None` when that is the original list unchanged.
    original_view: Option<Vec<String>>,
}

/// Merges a patch list into an original list tagged `merge` (or named by a
/// `$deleteFromPrimitiveList` directive, `is_delete_list`).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: ListMeta,
    is_delete_list: bool,
    field: &str,
) -> Result<MergedList, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(MergedList {
            items: original,
            original_view: None,
        });
    }
    let elements = element_type(original.iter().chain(&patch))?;

    if elements != Some("object") {
        let patch_ids: HashSet<String> = patch.iter().map(canonical).collect();
        let items = if is_delete_list {
            original
                .into_iter()
                .filter(|v| !patch_ids.contains(&canonical(v)))
                .collect()
        } else {
            let server_ids = identities(&original, None)?;
            let order_ids = identities(&patch, None)?;
            let mut seen = HashSet::new();
            let union = original
                .into_iter()
                .chain(patch)
                .filter(|v| seen.insert(canonical(v)))
                .collect();
            order_list(union, None, &order_ids, &server_ids)?
        };
        return Ok(MergedList {
            items,
            original_view: None,
        });
    }

    let key = meta
        .key
        .ok_or_else(|| smp_error(format!("cannot merge lists without merge key for {field}")))?;
    let full_ids = identities(&original, Some(key))?;
    let directives = apply_list_directives(original, patch, key)?;
    let server_ids = identities(&directives.original, Some(key))?;
    let order_ids = identities(&directives.patch, Some(key))?;
    let (merged, appended) = merge_by_key(directives.original, directives.patch, key, meta.item)?;
    Ok(MergedList {
        items: order_list(merged, Some(key), &order_ids, &server_ids)?,
        original_view: Some(upstream_original_view(
            &full_ids,
            &directives.removed,
            &appended,
        )),
    })
}

/// A keyed list after its `$patch` elements were applied.
struct ListDirectives {
    /// The original without deleted elements, or the replacement list.
    original: Vec<Value>,
    /// The patch elements left to merge.
    patch: Vec<Value>,
    /// Indices of the deleted original elements, in upstream's removal order.
    removed: Vec<usize>,
}

/// Handles `$patch` elements of a list of objects: `delete` removes the
/// original elements with that key; `replace` makes the remaining patch
/// elements the new original.
fn apply_list_directives(
    original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<ListDirectives, PatchError> {
    let mut rest = Vec::with_capacity(patch.len());
    let mut deletions = Vec::new();
    let mut replace = false;
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            rest.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => deletions.push(
                item.get(key)
                    .map(canonical)
                    .ok_or_else(|| no_merge_key(&item, key))?,
            ),
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(smp_error(
                    "merging lists cannot yet be specified in the patch".to_owned(),
                ));
            }
            _ => {
                return Err(smp_error(format!(
                    "unknown patch type: {} in map: {item}",
                    display_directive(directive)
                )));
            }
        }
    }

    // Every element matching a deletion goes, first match first.
    let mut positions: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, item) in original.iter().enumerate() {
        if let Some(k) = item.get(key) {
            positions.entry(canonical(k)).or_default().push(i);
        }
    }
    let removed: Vec<usize> = deletions
        .iter()
        .filter_map(|id| positions.remove(id))
        .flatten()
        .collect();
    if replace {
        return Ok(ListDirectives {
            original: take_patch_list(rest),
            patch: Vec::new(),
            removed,
        });
    }
    let mut keep = vec![true; original.len()];
    for &i in &removed {
        keep[i] = false;
    }
    let original = original
        .into_iter()
        .zip(keep)
        .filter_map(|(v, keep)| keep.then_some(v))
        .collect();
    Ok(ListDirectives {
        original,
        patch: rest,
        removed,
    })
}

/// Upstream deletes from and appends to the original list *in place* (Go
/// slice semantics) and afterwards, for `$setElementOrder`, reads the
/// original order through its old slice header of the original length.
/// What it sees is: the surviving elements; then, in the freed positions,
/// the appended elements; and in positions still free, the stale values Go's
/// in-place deletion left behind (each removal leaves a copy of the then
/// last element at the end). This decides where server-only elements land,
/// so it is reproduced here on identities. It does not depend on the Go
/// slice's capacity.
fn upstream_original_view(
    full_ids: &[String],
    removed: &[usize],
    appended: &[String],
) -> Vec<String> {
    let n = full_ids.len();
    let mut gone = vec![false; n];
    let mut stale = vec![None; n];
    let mut len = n;
    // Exclusive bound of the last surviving element; only moves down.
    let mut last = n;
    for &i in removed {
        while last > 0 && gone[last - 1] {
            last -= 1;
        }
        len -= 1;
        stale[len] = last.checked_sub(1);
        gone[i] = true;
    }
    let mut view: Vec<String> = (0..n)
        .filter(|&i| !gone[i])
        .map(|i| full_ids[i].clone())
        .collect();
    for (offset, stale) in stale[len..].iter().enumerate() {
        let id = match appended.get(offset) {
            Some(id) => id.clone(),
            None => stale.map(|i| full_ids[i].clone()).unwrap_or_default(),
        };
        view.push(id);
    }
    view
}

/// Merges each patch element into the original element with the same merge
/// key value, or appends it. Returns the merged list and the identities of
/// the appended elements.
fn merge_by_key(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
    item_schema: Option<&'static TypeInfo>,
) -> Result<(Vec<Value>, Vec<String>), PatchError> {
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, item) in original.iter().enumerate() {
        index.entry(identity(item, Some(key))?).or_insert(i);
    }
    let mut appended = Vec::new();
    for item in patch {
        let id = identity(&item, Some(key))?;
        let patch_map = match item {
            Value::Object(m) => m,
            other => return Err(no_merge_key(&other, key)),
        };
        match index.get(&id).copied() {
            Some(i) => {
                let Some(Value::Object(orig_map)) = original.get_mut(i).map(std::mem::take) else {
                    return Err(smp_error(format!("value for key {i} is not a map")));
                };
                original[i] = Value::Object(merge_map(orig_map, patch_map, item_schema)?);
            }
            None => {
                if let Some(v) = take_patch_value(Value::Object(patch_map)) {
                    index.insert(id.clone(), original.len());
                    appended.push(id);
                    original.push(v);
                }
            }
        }
    }
    Ok((original, appended))
}

fn no_merge_key(item: &Value, key: &str) -> PatchError {
    smp_error(format!(
        "map: {item} does not contain declared merge key: {key}"
    ))
}

/// The identity of a list element: its merge key value for keyed lists, the
/// element itself otherwise, in [`canonical`] form.
fn identity(item: &Value, key: Option<&str>) -> Result<String, PatchError> {
    match key {
        None => Ok(canonical(item)),
        Some(key) => match item {
            Value::Object(m) => m
                .get(key)
                .map(canonical)
                .ok_or_else(|| no_merge_key(item, key)),
            other => Err(smp_error(format!(
                "expected a map with merge key {key}, but received a {}",
                type_name(other)
            ))),
        },
    }
}

fn identities(items: &[Value], key: Option<&str>) -> Result<Vec<String>, PatchError> {
    items.iter().map(|item| identity(item, key)).collect()
}

/// A string equal for JSON-equal values (numbers by value, object keys in
/// any order), used to compare and hash list elements and merge keys.
fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Number(n) => {
            let as_int = n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from));
            match (as_int, n.as_f64()) {
                (Some(i), _) => out.push_str(&i.to_string()),
                // Integral floats print like the integer they equal.
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e18 => {
                    out.push_str(&(f as i128).to_string())
                }
                _ => out.push_str(&n.to_string()),
            }
        }
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Orders a merged list like upstream's `normalizeElementOrder`: elements
/// named in `order_ids` come in that order; the others ("server-only") keep
/// their order from `server_ids`; the two runs are interleaved so that a
/// server-only element goes before the next ordered element when it was
/// before it on the server.
fn order_list(
    merged: Vec<Value>,
    key: Option<&str>,
    order_ids: &[String],
    server_ids: &[String],
) -> Result<Vec<Value>, PatchError> {
    let position = |ids: &[String]| {
        let mut pos: HashMap<String, usize> = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            pos.entry(id.clone()).or_insert(i);
        }
        pos
    };
    let order_pos = position(order_ids);
    let server_pos = position(server_ids);

    let mut ordered = Vec::new();
    let mut server_only = Vec::new();
    for item in merged {
        let id = identity(&item, key)?;
        match order_pos.get(&id) {
            Some(&p) => ordered.push((p, server_pos.get(&id).copied(), item)),
            None => server_only.push((server_pos.get(&id).copied().unwrap_or(usize::MAX), item)),
        }
    }
    ordered.sort_by_key(|(p, _, _)| *p);
    server_only.sort_by_key(|(p, _)| *p);

    let mut out = Vec::with_capacity(ordered.len() + server_only.len());
    let mut ordered = ordered.into_iter().peekable();
    let mut server_only = server_only.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), ordered.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((s, _)), Some((_, o, _))) => o.is_some_and(|o| *s != usize::MAX && *s < o),
        };
        if take_server {
            out.extend(server_only.next().map(|(_, v)| v));
        } else {
            out.extend(ordered.next().map(|(_, _, v)| v));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

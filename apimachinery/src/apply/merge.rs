//! Schema-aware operations on JSON objects, with structured-merge-diff semantics: merging an
//! applied configuration into an object, comparing two objects field by field, listing the
//! fields an object sets, and removing a set of fields.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, Path, PathElement, path_to_string, values_equal};
use super::schema::{ListDef, ListKind, MapDef, SCALAR, Schema, TypeDef, TypeId, UNTYPED_MAP};

/// Why an item of a list with set or map semantics cannot be identified.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    #[error("associative list with keys may not have a null element")]
    NullInKeyedList,
    #[error("associative list with keys may not have non-map elements")]
    NonMapInKeyedList,
    /// An item of a keyed list with none of the key fields (`keys`) and no defaults for them.
    #[error(
        "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
        quoted_keys(.keys)
    )]
    NoKeyFields { keys: Vec<String> },
    #[error("associative list without keys has an element that's a map type")]
    MapInSet,
    #[error("not supported: associative list with lists as elements")]
    ListInSet,
    #[error("associative list without keys has an element that's an explicit null")]
    NullInSet,
    #[error("invalid indexing of non-associative list")]
    NotAssociative,
}

fn quoted_keys(keys: &[String]) -> String {
    let names: Vec<String> = keys.iter().map(|k| super::fieldset::go_quote(k)).collect();
    names.join(" ")
}

/// A list in an applied configuration (or the object it is merged into) whose items cannot
/// be told apart; `path` is the list's path (the message is prefixed with it unless empty).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Item `index` cannot be identified.
    #[error("{}element {index}: {source}", path_prefix(.path))]
    Element {
        path: Path,
        index: usize,
        #[source]
        source: ItemError,
    },
    /// Two items with the same key (or value, in a set).
    #[error("{}duplicate entries for key {key}", path_prefix(.path))]
    Duplicate { path: Path, key: PathElement },
}

fn path_prefix(path: &Path) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{}: ", path_to_string(path))
    }
}

impl MergeError {
    fn element(path: &Path, index: usize, source: ItemError) -> MergeError {
        MergeError::Element {
            path: path.clone(),
            index,
            source,
        }
    }

    fn duplicate(path: &Path, key: &PathElement) -> MergeError {
        MergeError::Duplicate {
            path: path.clone(),
            key: key.clone(),
        }
    }
}

/// How a value is walked.
#[derive(Clone, Copy)]
enum Atom<'a> {
    /// A scalar or anything replaced as a whole.
    Leaf,
    List(&'a ListDef),
    Map(&'a MapDef),
}

impl Atom<'_> {
    fn tag(&self) -> u8 {
        match self {
            Atom::Leaf => 0,
            Atom::List(_) => 1,
            Atom::Map(_) => 2,
        }
    }
}

fn deduce<'a>(s: &'a Schema, ty: TypeId, v: Option<&Value>) -> Atom<'a> {
    match s.def(ty) {
        TypeDef::Scalar | TypeDef::UntypedAtomic => Atom::Leaf,
        TypeDef::Untyped => match v {
            Some(Value::Object(_)) | Some(Value::Null) | None => match s.def(UNTYPED_MAP) {
                TypeDef::Map(m) => Atom::Map(m),
                _ => Atom::Leaf,
            },
            _ => Atom::Leaf,
        },
        TypeDef::Map(m) => match v {
            Some(Value::Object(_)) | Some(Value::Null) | None => Atom::Map(m),
            _ => Atom::Leaf,
        },
        TypeDef::List(l) => match v {
            Some(Value::Array(_)) | Some(Value::Null) | None => Atom::List(l),
            _ => Atom::Leaf,
        },
    }
}

/// The atom for a pair of values; values of different shapes are compared and merged as leaves.
fn deduce2<'a>(s: &'a Schema, ty: TypeId, lhs: Option<&Value>, rhs: Option<&Value>) -> Atom<'a> {
    let a = deduce(s, ty, rhs.or(lhs));
    if let (Some(l), Some(_)) = (lhs, rhs)
        && deduce(s, ty, Some(l)).tag() != a.tag()
    {
        return Atom::Leaf;
    }
    a
}

/// The type and path element semantics of the items of a list.
fn elem_type(s: &Schema, ty: TypeId, pe: &PathElement) -> TypeId {
    match (s.def(ty), pe) {
        (TypeDef::Map(m), PathElement::Field(name)) => m.field_type(name),
        (TypeDef::Untyped, PathElement::Field(_)) => super::schema::UNTYPED,
        (TypeDef::List(l), PathElement::Key(_)) => l.elem,
        _ => SCALAR,
    }
}

fn as_list(v: Option<&Value>) -> Option<&Vec<Value>> {
    match v {
        Some(Value::Array(a)) => Some(a),
        _ => None,
    }
}

fn as_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    match v {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// The path element that identifies `item` in a list with set or map semantics.
fn item_pe(list: &ListDef, item: &Value) -> Result<PathElement, ItemError> {
    item_pe_typed(list, item, &[])
}

/// [`item_pe`] of the item as its type shows it: key fields missing from the JSON but in
/// `present` (see [`fill_present`]) count as there.
fn item_pe_typed(
    list: &ListDef,
    item: &Value,
    present: &[(String, bool)],
) -> Result<PathElement, ItemError> {
    match &list.kind {
        ListKind::Map(keys) => {
            let m = match item {
                Value::Object(m) => m,
                Value::Null => return Err(ItemError::NullInKeyedList),
                _ => return Err(ItemError::NonMapInKeyedList),
            };
            let mut fields = Vec::with_capacity(keys.len());
            for (k, default) in keys {
                if let Some(v) = view_get(m, k, present) {
                    fields.push((k.clone(), v.clone()));
                } else if let Some(d) = default {
                    fields.push((k.clone(), d.clone()));
                }
            }
            if fields.is_empty() {
                return Err(ItemError::NoKeyFields {
                    keys: keys.iter().map(|(k, _)| k.clone()).collect(),
                });
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
        ListKind::Set => match item {
            Value::Object(_) => Err(ItemError::MapInSet),
            Value::Array(_) => Err(ItemError::ListInSet),
            Value::Null => Err(ItemError::NullInSet),
            v => Ok(PathElement::Value(v.clone())),
        },
        ListKind::Atomic => Err(ItemError::NotAssociative),
    }
}

/// Checks an applied configuration: list items must carry their keys, and sets and keyed
/// lists may not repeat an item.
pub(crate) fn validate(
    s: &Schema,
    ty: TypeId,
    v: &Value,
    path: &mut Path,
) -> Result<(), MergeError> {
    match deduce(s, ty, Some(v)) {
        Atom::Leaf => Ok(()),
        Atom::List(l) => {
            let Some(items) = v.as_array() else {
                return Ok(());
            };
            if matches!(l.kind, ListKind::Atomic) {
                return Ok(());
            }
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_pe(l, item).map_err(|e| MergeError::element(path, i, e))?;
                if !seen.insert(pe.clone()) {
                    return Err(MergeError::duplicate(path, &pe));
                }
                path.push(pe);
                let r = validate(s, l.elem, item, path);
                path.pop();
                r?;
            }
            Ok(())
        }
        Atom::Map(m) => {
            let Some(obj) = v.as_object() else {
                return Ok(());
            };
            if m.atomic {
                return Ok(());
            }
            for (k, child) in obj {
                path.push(PathElement::Field(k.clone()));
                let r = validate(s, m.field_type(k), child, path);
                path.pop();
                r?;
            }
            Ok(())
        }
    }
}

/// Merges `rhs` (an applied configuration) into `lhs` (the live object).
pub(crate) fn merge(
    s: &Schema,
    ty: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Path,
) -> Result<Option<Value>, MergeError> {
    let r = match (lhs, rhs) {
        (None, None) => return Ok(None),
        (Some(l), None) => return Ok(Some(l.clone())),
        (None, Some(r)) => return Ok(Some(r.clone())),
        (Some(_), Some(r)) => r,
    };
    match deduce2(s, ty, lhs, rhs) {
        Atom::Leaf => Ok(Some(r.clone())),
        Atom::List(def) => {
            let (la, ra) = (as_list(lhs), as_list(rhs));
            let empty = la.is_none_or(|a| a.is_empty()) && ra.is_none_or(|a| a.is_empty());
            if matches!(def.kind, ListKind::Atomic) || empty {
                return Ok(Some(r.clone()));
            }
            let out = merge_list(
                s,
                def,
                la.map_or(&[][..], |a| &a[..]),
                ra.map_or(&[][..], |a| &a[..]),
                path,
            )?;
            Ok(if out.is_empty() {
                None
            } else {
                Some(Value::Array(out))
            })
        }
        Atom::Map(def) => {
            let (lm, rm) = (as_map(lhs), as_map(rhs));
            let empty = lm.is_none_or(|m| m.is_empty()) && rm.is_none_or(|m| m.is_empty());
            if def.atomic || empty {
                return Ok(Some(r.clone()));
            }
            let mut out = Map::new();
            let keys: BTreeSet<&String> = lm
                .into_iter()
                .flat_map(|m| m.keys())
                .chain(rm.into_iter().flat_map(|m| m.keys()))
                .collect();
            for k in keys {
                path.push(PathElement::Field(k.clone()));
                let merged = merge(
                    s,
                    def.field_type(k),
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    path,
                );
                path.pop();
                if let Some(v) = merged? {
                    out.insert(k.clone(), v);
                }
            }
            Ok(if out.is_empty() {
                None
            } else {
                Some(Value::Object(out))
            })
        }
    }
}

/// Merges two lists with set or map semantics. Items of `rhs` come in `rhs` order; items only
/// in `lhs` keep their place relative to the shared ones.
fn merge_list(
    s: &Schema,
    def: &ListDef,
    lhs: &[Value],
    rhs: &[Value],
    path: &mut Path,
) -> Result<Vec<Value>, MergeError> {
    let mut rhs_pes = Vec::with_capacity(rhs.len());
    let mut observed_rhs: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for (i, item) in rhs.iter().enumerate() {
        let pe = item_pe(def, item).map_err(|e| MergeError::element(path, i, e))?;
        if observed_rhs.contains_key(&pe) {
            return Err(MergeError::duplicate(path, &pe));
        }
        observed_rhs.insert(pe.clone(), item);
        rhs_pes.push(pe);
    }
    static NULL: Value = Value::Null;
    let mut lhs_pes = Vec::with_capacity(lhs.len());
    let mut observed_lhs: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for (i, item) in lhs.iter().enumerate() {
        let pe = item_pe(def, item).map_err(|e| MergeError::element(path, i, e))?;
        match observed_lhs.get_mut(&pe) {
            // A duplicated item of the live list merges as null with the applied one.
            Some(v) => *v = &NULL,
            None => {
                observed_lhs.insert(pe.clone(), item);
            }
        }
        lhs_pes.push(pe);
    }
    let mut shared: VecDeque<&PathElement> = rhs_pes
        .iter()
        .filter(|pe| observed_lhs.contains_key(*pe))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (ll, rl) = (lhs_pes.len(), rhs_pes.len());
    let (mut li, mut ri) = (0, 0);
    let item = |pe: &PathElement,
                l: Option<&Value>,
                r: Option<&Value>,
                out: &mut Vec<Value>,
                path: &mut Path| {
        path.push(pe.clone());
        let m = merge(s, def.elem, l, r, path);
        path.pop();
        if let Some(v) = m? {
            out.push(v);
        }
        Ok::<(), MergeError>(())
    };
    while li < ll || ri < rl {
        if li < ll && ri < rl {
            let pe = &lhs_pes[li];
            if *pe == rhs_pes[ri] {
                merged_rhs.insert(pe);
                item(
                    pe,
                    observed_lhs.get(pe).copied(),
                    observed_rhs.get(pe).copied(),
                    &mut out,
                    path,
                )?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if observed_rhs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < ll {
            let pe = &lhs_pes[li];
            if !observed_rhs.contains_key(pe) {
                item(pe, Some(&lhs[li]), None, &mut out, path)?;
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rl {
            let pe = &rhs_pes[ri];
            merged_rhs.insert(pe);
            item(
                pe,
                observed_lhs.get(pe).copied(),
                observed_rhs.get(pe).copied(),
                &mut out,
                path,
            )?;
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(out)
}

/// How [`compare`] sees each side: as the JSON is, or as its type shows it (`true`): with
/// the fields [`fill_present`] would add, without the object being copied and filled.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sides {
    pub lhs: bool,
    pub rhs: bool,
}

impl Sides {
    /// Both sides as their JSON is.
    pub const AS_GIVEN: Sides = Sides {
        lhs: false,
        rhs: false,
    };
    /// Both sides as their type shows them.
    pub const TYPED: Sides = Sides {
        lhs: true,
        rhs: true,
    };
}

/// The fields a typed value of `ty` always has (none for untyped values).
fn present_of(s: &Schema, ty: TypeId) -> &[(String, bool)] {
    match s.def(ty) {
        TypeDef::Map(def) => &def.present,
        _ => &[],
    }
}

/// What a typed object shows for a field of `present` it lacks: `{}` or `null`.
fn present_value(object: bool) -> &'static Value {
    static EMPTY: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| Value::Object(Map::new()));
    static NULL: Value = Value::Null;
    if object { &EMPTY } else { &NULL }
}

/// The field `key` of `m` as its type shows it, given the fields it always has (`present`).
fn view_get<'v>(
    m: &'v Map<String, Value>,
    key: &str,
    present: &[(String, bool)],
) -> Option<&'v Value> {
    m.get(key).or_else(|| {
        present
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, object)| present_value(*object))
    })
}

/// Deep equality of two values as `sides` sees them (numbers by value, see `values_equal`).
fn typed_equal(s: &Schema, ty: TypeId, l: &Value, r: &Value, sides: Sides) -> bool {
    if !sides.lhs && !sides.rhs {
        return values_equal(l, r);
    }
    match (s.def(ty), l, r) {
        (TypeDef::Map(def), Value::Object(lm), Value::Object(rm)) => {
            let lp = if sides.lhs { &def.present[..] } else { &[] };
            let rp = if sides.rhs { &def.present[..] } else { &[] };
            let same = |k: &str| match (view_get(lm, k, lp), view_get(rm, k, rp)) {
                (Some(a), Some(b)) => typed_equal(s, def.field_type(k), a, b, sides),
                (None, None) => true,
                _ => false,
            };
            lm.keys().all(|k| same(k))
                && rm.keys().all(|k| lm.contains_key(k) || same(k))
                && def.present.iter().all(|(k, _)| same(k))
        }
        (TypeDef::List(def), Value::Array(la), Value::Array(ra)) => {
            la.len() == ra.len()
                && la
                    .iter()
                    .zip(ra)
                    .all(|(a, b)| typed_equal(s, def.elem, a, b, sides))
        }
        _ => values_equal(l, r),
    }
}

/// The fields added, modified and removed between two objects.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn exclude(&mut self, ignored: &FieldSet) {
        if ignored.is_empty() {
            return;
        }
        self.added.subtract_recursive(ignored);
        self.modified.subtract_recursive(ignored);
        self.removed.subtract_recursive(ignored);
    }
}

/// Compares `lhs` with `rhs` (each as `sides` says), adding the paths below `path` that
/// were added, modified or removed to `cmp`.
pub(crate) fn compare(
    s: &Schema,
    ty: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    sides: Sides,
    path: &mut Path,
    cmp: &mut Comparison,
) {
    if lhs.is_none() && rhs.is_none() {
        return;
    }
    let mut in_leaf = false;
    let mut leaf = |path: &Path, cmp: &mut Comparison| {
        in_leaf = true;
        match (lhs, rhs) {
            (None, _) => cmp.added.insert(path),
            (_, None) => cmp.removed.insert(path),
            (Some(l), Some(r)) => {
                if !typed_equal(s, ty, l, r, sides) {
                    cmp.modified.insert(path)
                }
            }
        }
    };
    match deduce2(s, ty, lhs, rhs) {
        Atom::Leaf => leaf(path, cmp),
        Atom::List(def) => {
            let (la, ra) = (as_list(lhs), as_list(rhs));
            let empty = la.is_none_or(|a| a.is_empty()) && ra.is_none_or(|a| a.is_empty());
            if matches!(def.kind, ListKind::Atomic) || empty {
                leaf(path, cmp);
            } else if !compare_list(
                s,
                def,
                la.map_or(&[][..], |a| &a[..]),
                ra.map_or(&[][..], |a| &a[..]),
                sides,
                path,
                cmp,
            ) {
                // Items without their keys: compare the list as a whole.
                leaf(path, cmp);
            }
        }
        Atom::Map(def) => {
            let (lm, rm) = (as_map(lhs), as_map(rhs));
            // The fields each side shows although its JSON lacks them.
            let present = present_of(s, ty);
            let lp = if sides.lhs && lm.is_some() {
                present
            } else {
                &[]
            };
            let rp = if sides.rhs && rm.is_some() {
                present
            } else {
                &[]
            };
            let empty = lm.is_none_or(|m| m.is_empty() && lp.is_empty())
                && rm.is_none_or(|m| m.is_empty() && rp.is_empty());
            if def.atomic || empty {
                leaf(path, cmp);
            } else {
                // Every key of either side once (the order does not matter: sets are sorted).
                let absent = |k: &str| {
                    lm.is_none_or(|m| !m.contains_key(k)) && rm.is_none_or(|m| !m.contains_key(k))
                };
                let lkeys = lm.into_iter().flat_map(|m| m.keys()).map(String::as_str);
                let rkeys = rm
                    .into_iter()
                    .flat_map(|m| m.keys())
                    .map(String::as_str)
                    .filter(|k| lm.is_none_or(|m| !m.contains_key(*k)));
                let shown = if lp.is_empty() { rp } else { lp };
                let pkeys = shown.iter().map(|(k, _)| k.as_str()).filter(|k| absent(k));
                for k in lkeys.chain(rkeys).chain(pkeys) {
                    path.push(PathElement::Field(k.to_owned()));
                    compare(
                        s,
                        def.field_type(k),
                        lm.and_then(|m| view_get(m, k, lp)),
                        rm.and_then(|m| view_get(m, k, rp)),
                        sides,
                        path,
                        cmp,
                    );
                    path.pop();
                }
            }
        }
    }
    if !in_leaf {
        if lhs.is_none() {
            cmp.added.insert(path);
        } else if rhs.is_none() {
            cmp.removed.insert(path);
        }
    }
}

/// Compares list items by identity; returns false if an item has no identity.
fn compare_list(
    s: &Schema,
    def: &ListDef,
    lhs: &[Value],
    rhs: &[Value],
    sides: Sides,
    path: &mut Path,
    cmp: &mut Comparison,
) -> bool {
    let present = present_of(s, def.elem);
    let lp = if sides.lhs { present } else { &[] };
    let rp = if sides.rhs { present } else { &[] };
    let mut order: Vec<PathElement> = Vec::new();
    let mut lvalues: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
    let mut rvalues: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
    for item in lhs {
        let Ok(pe) = item_pe_typed(def, item, lp) else {
            return false;
        };
        match lvalues.get_mut(&pe) {
            Some(v) => v.push(item),
            None => {
                lvalues.insert(pe.clone(), vec![item]);
                order.push(pe);
            }
        }
    }
    for item in rhs {
        let Ok(pe) = item_pe_typed(def, item, rp) else {
            return false;
        };
        match rvalues.get_mut(&pe) {
            Some(v) => v.push(item),
            None => {
                rvalues.insert(pe.clone(), vec![item]);
                if !lvalues.contains_key(&pe) {
                    order.push(pe);
                }
            }
        }
    }
    for pe in order {
        let l = lvalues.get(&pe).map_or(&[][..], |v| &v[..]);
        let r = rvalues.get(&pe).map_or(&[][..], |v| &v[..]);
        path.push(pe);
        if l.len() <= 1 && r.len() <= 1 {
            compare(
                s,
                def.elem,
                l.first().copied(),
                r.first().copied(),
                sides,
                path,
                cmp,
            );
        } else if l.len() >= 2 && r.len() >= 2 {
            if l.len() != r.len()
                || l.iter()
                    .zip(r)
                    .any(|(a, b)| !typed_equal(s, def.elem, a, b, sides))
            {
                cmp.modified.insert(path);
            }
        } else if l.len() >= 2 {
            if let Some(first) = r.first() {
                compare(s, def.elem, None, Some(first), sides, path, cmp);
            }
            cmp.removed.insert(path);
        } else {
            if let Some(first) = l.first() {
                compare(s, def.elem, Some(first), None, sides, path, cmp);
            }
            cmp.added.insert(path);
        }
        path.pop();
    }
    true
}

/// The set of fields `v` sets.
pub(crate) fn to_field_set(s: &Schema, ty: TypeId, v: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    field_set_walk(s, ty, v, &mut path, &mut set);
    set
}

fn field_set_walk(s: &Schema, ty: TypeId, v: &Value, path: &mut Path, set: &mut FieldSet) {
    match deduce(s, ty, Some(v)) {
        Atom::Leaf => set.insert(path),
        Atom::List(def) => {
            if matches!(def.kind, ListKind::Atomic) {
                set.insert(path);
                return;
            }
            let Some(items) = v.as_array() else { return };
            let pes: Vec<Option<PathElement>> =
                items.iter().map(|i| item_pe(def, i).ok()).collect();
            let mut seen = BTreeSet::new();
            let mut duplicates = BTreeSet::new();
            for pe in pes.iter().flatten() {
                if !seen.insert(pe) && duplicates.insert(pe) {
                    path.push(pe.clone());
                    set.insert(path);
                    path.pop();
                }
            }
            for (item, pe) in items.iter().zip(&pes) {
                let Some(pe) = pe else { continue };
                if duplicates.contains(pe) {
                    continue;
                }
                path.push(pe.clone());
                field_set_walk(s, def.elem, item, path, set);
                set.insert(path);
                path.pop();
            }
        }
        Atom::Map(def) => {
            if def.atomic {
                set.insert(path);
                return;
            }
            let Some(m) = v.as_object() else { return };
            for (k, child) in m {
                path.push(PathElement::Field(k.clone()));
                field_set_walk(s, def.field_type(k), child, path, set);
                let empty_map = child.as_object().is_some_and(|m| m.is_empty());
                if child.is_null() || empty_map || !def.has_field(k) {
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
}

/// `v` without the fields in `to_remove` (a removed list item or map key goes entirely).
/// `None` when nothing is left of a list or map.
pub(crate) fn remove_items(
    s: &Schema,
    ty: TypeId,
    v: &Value,
    to_remove: &FieldSet,
) -> Option<Value> {
    match deduce(s, ty, Some(v)) {
        Atom::Leaf => Some(v.clone()),
        Atom::List(def) => {
            let items = v.as_array()?;
            if items.is_empty() || matches!(def.kind, ListKind::Atomic) {
                return None;
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let Ok(pe) = item_pe(def, item) else {
                    out.push(item.clone());
                    continue;
                };
                if to_remove.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                let sub = to_remove.with_prefix(&pe);
                if sub.is_empty() {
                    out.push(item.clone());
                } else {
                    out.push(
                        remove_items(s, def.elem, item, sub)
                            .unwrap_or_else(|| Value::Object(Map::new())),
                    );
                }
            }
            if out.is_empty() {
                None
            } else {
                Some(Value::Array(out))
            }
        }
        Atom::Map(def) => {
            let m = v.as_object()?;
            if m.is_empty() || def.atomic {
                return None;
            }
            let mut out = Map::new();
            for (k, child) in m {
                let pe = PathElement::Field(k.clone());
                if to_remove.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                let sub = to_remove.with_prefix(&pe);
                if sub.is_empty() {
                    out.insert(k.clone(), child.clone());
                } else if let Some(c) = remove_items(s, def.field_type(k), child, sub) {
                    out.insert(k.clone(), c);
                }
            }
            if out.is_empty() {
                None
            } else {
                Some(Value::Object(out))
            }
        }
    }
}

/// Adds, as members, the struct fields that have descendants in the set.
pub(crate) fn ensure_named_fields_are_members(s: &Schema, ty: TypeId, set: &FieldSet) -> FieldSet {
    let mut out = FieldSet::new();
    for m in set.members() {
        out.add_member(m.clone());
    }
    let def = match s.def(ty) {
        TypeDef::Map(m) => Some(m),
        _ => None,
    };
    for (pe, child) in set.children() {
        if let (PathElement::Field(name), Some(d)) = (pe, def)
            && d.has_field(name)
        {
            out.add_member(pe.clone());
        }
        let child_ty = elem_type(s, ty, pe);
        out.set_child(
            pe.clone(),
            ensure_named_fields_are_members(s, child_ty, child),
        );
    }
    out
}

/// Adds the fields a typed object always has (see `MapDef::present`) where they are missing,
/// so that comparisons see objects as upstream's typed comparison does.
pub(crate) fn fill_present(s: &Schema, ty: TypeId, v: &mut Value) {
    match (s.def(ty), v) {
        (TypeDef::Map(def), Value::Object(m)) => {
            for (name, object) in &def.present {
                if !m.contains_key(name) {
                    m.insert(
                        name.clone(),
                        if *object {
                            Value::Object(Map::new())
                        } else {
                            Value::Null
                        },
                    );
                }
            }
            for (k, child) in m.iter_mut() {
                fill_present(s, def.field_type(k), child);
            }
        }
        (TypeDef::List(def), Value::Array(items)) => {
            for item in items {
                fill_present(s, def.elem, item);
            }
        }
        _ => {}
    }
}

/// Removes `null` values of struct fields and map entries (Kubernetes drops them when the
/// merged object is converted back to its type); untyped values are kept as they are.
pub(crate) fn drop_nulls(s: &Schema, ty: TypeId, v: &mut Value) {
    match (s.def(ty), v) {
        (TypeDef::Map(def), Value::Object(m)) => {
            m.retain(|_, child| !child.is_null());
            for (k, child) in m.iter_mut() {
                drop_nulls(s, def.field_type(k), child);
            }
        }
        (TypeDef::List(def), Value::Array(items)) => {
            for item in items {
                drop_nulls(s, def.elem, item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::schema::{TypeKey, schema_for};
    use serde_json::json;

    fn pod() -> &'static Schema {
        schema_for(TypeKey {
            group: "",
            kind: "Pod",
        })
        .unwrap()
    }

    #[test]
    fn merge_keeps_live_order_and_adds_new_items() {
        let s = pod();
        let live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}, {"name": "c"}]}});
        let cfg = json!({"spec": {"containers": [{"name": "c", "image": "2"}, {"name": "d"}, {"name": "a", "image": "3"}]}});
        let out = merge(s, s.root(), Some(&live), Some(&cfg), &mut Vec::new())
            .unwrap()
            .unwrap();
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["b", "c", "d", "a"]);
        assert_eq!(out["spec"]["containers"][3]["image"], json!("3"));
    }

    #[test]
    fn compare_reports_paths() {
        let s = pod();
        let a = json!({"metadata": {"labels": {"x": "1", "y": "1"}}, "spec": {"containers": [{"name": "a", "image": "1"}]}});
        let b = json!({"metadata": {"labels": {"x": "2", "z": "1"}}, "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}});
        let mut cmp = Comparison::default();
        compare(
            s,
            s.root(),
            Some(&a),
            Some(&b),
            Sides::AS_GIVEN,
            &mut Vec::new(),
            &mut cmp,
        );
        assert_eq!(cmp.modified.to_string(), ".metadata.labels.x");
        assert_eq!(cmp.removed.to_string(), ".metadata.labels.y");
        assert_eq!(
            cmp.added.to_string(),
            ".metadata.labels.z\n.spec.containers[name=\"b\"]\n.spec.containers[name=\"b\"].name"
        );
    }

    /// The sets of a comparison, printed.
    fn compared(s: &Schema, a: &Value, b: &Value, sides: Sides) -> [String; 3] {
        let mut cmp = Comparison::default();
        compare(
            s,
            s.root(),
            Some(a),
            Some(b),
            sides,
            &mut Vec::new(),
            &mut cmp,
        );
        [
            cmp.added.to_string(),
            cmp.modified.to_string(),
            cmp.removed.to_string(),
        ]
    }

    fn filled(s: &Schema, v: &Value) -> Value {
        let mut v = v.clone();
        fill_present(s, s.root(), &mut v);
        v
    }

    #[test]
    fn typed_sides_compare_as_filled_copies() {
        // Seeing a side as typed gives exactly the comparison of the filled copy, for every
        // pair of these objects of a kind, either way round and with either side typed.
        let kinds: Vec<(&str, &str, Vec<Value>)> = vec![
            (
                "",
                "Pod",
                vec![
                    json!({}),
                    json!({"metadata": {"name": "p", "labels": {"a": "1"}}}),
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
                        "spec": {"containers": [{"name": "c", "image": "i", "resources": {},
                            "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}]}],
                            "securityContext": {}, "tolerations": [{"key": "k", "operator": "Exists"}]},
                        "status": {}}),
                    json!({"metadata": {"name": "p", "ownerReferences": [{"uid": "u", "kind": "RS", "name": "r", "apiVersion": "v1"}]},
                        "spec": {"containers": [{"name": "c", "image": "j",
                            "resources": {"requests": {"cpu": "1"}}, "env": [{"name": "E", "value": "1"}, {"name": "E", "value": "2"}]}],
                            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]}]}}}},
                        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
                    json!({"metadata": null, "spec": {"containers": [{"image": "no key"}], "volumes": null}}),
                    json!({"metadata": {"name": "p"}, "spec": "not an object", "status": {"conditions": []}}),
                    json!({"spec": {"containers": [{"name": "c", "resources": null, "securityContext": {"capabilities": {}}}],
                        "initContainers": [], "nodeSelector": {}}}),
                ],
            ),
            (
                "apps",
                "Deployment",
                vec![
                    json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}),
                    json!({"metadata": {"name": "d"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                        "strategy": {}}}),
                    json!({"metadata": {"name": "d"}, "spec": {"template": {}}, "status": {"replicas": 1}}),
                ],
            ),
            (
                "",
                "Service",
                vec![
                    json!({"spec": {"ports": [{"port": 80}, {"port": 80, "protocol": "UDP"}], "selector": {"a": "b"}}}),
                    json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}], "type": "ClusterIP"}, "status": {"loadBalancer": {}}}),
                ],
            ),
            (
                "",
                "Event",
                vec![
                    json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Scheduled", "source": {}}),
                    json!({"metadata": {"name": "e"}, "involvedObject": {}, "count": 2, "series": {"count": 2}}),
                ],
            ),
        ];
        for (group, kind, objects) in kinds {
            let s = schema_for(TypeKey { group, kind }).unwrap();
            for a in &objects {
                for b in &objects {
                    let (fa, fb) = (filled(s, a), filled(s, b));
                    let cases = [
                        (Sides::TYPED, &fa, &fb),
                        (
                            Sides {
                                lhs: false,
                                rhs: true,
                            },
                            a,
                            &fb,
                        ),
                        (
                            Sides {
                                lhs: true,
                                rhs: false,
                            },
                            &fa,
                            b,
                        ),
                    ];
                    for (sides, ea, eb) in cases {
                        assert_eq!(
                            compared(s, a, b, sides),
                            compared(s, ea, eb, Sides::AS_GIVEN),
                            "{kind} {sides:?}\n{a}\n{b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn validation_errors() {
        let s = pod();
        let bad = json!({"spec": {"containers": [{"image": "x"}]}});
        let err = validate(s, s.root(), &bad, &mut Vec::new()).unwrap_err();
        assert!(matches!(
            err,
            MergeError::Element {
                index: 0,
                source: ItemError::NoKeyFields { .. },
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            r#".spec.containers: element 0: associative list with keys has an element that omits all key fields ["name"] (and doesn't have default values for any key fields)"#
        );
        let dup = json!({"metadata": {"finalizers": ["a", "a"]}});
        let err = validate(s, s.root(), &dup, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, MergeError::Duplicate { .. }));
        assert_eq!(
            err.to_string(),
            r#".metadata.finalizers: duplicate entries for key [="a"]"#
        );
        let set_items = [
            (
                json!({}),
                "associative list without keys has an element that's a map type",
            ),
            (
                json!([]),
                "not supported: associative list with lists as elements",
            ),
            (
                Value::Null,
                "associative list without keys has an element that's an explicit null",
            ),
        ];
        for (item, text) in set_items {
            let v = json!({"metadata": {"finalizers": ["a", item]}});
            let err = validate(s, s.root(), &v, &mut Vec::new()).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(".metadata.finalizers: element 1: {text}")
            );
        }
        let keyed_items = [
            (
                Value::Null,
                "associative list with keys may not have a null element",
            ),
            (
                json!(1),
                "associative list with keys may not have non-map elements",
            ),
        ];
        for (item, text) in keyed_items {
            let v = json!({"spec": {"containers": [item]}});
            let err = validate(s, s.root(), &v, &mut Vec::new()).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(".spec.containers: element 0: {text}")
            );
        }
        assert_eq!(
            ItemError::NotAssociative.to_string(),
            "invalid indexing of non-associative list"
        );
        // At the root the message has no path prefix.
        let err = MergeError::duplicate(&Vec::new(), &PathElement::Index(1));
        assert_eq!(err.to_string(), "duplicate entries for key [1]");
    }
}

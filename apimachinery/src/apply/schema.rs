//! Per-type merge semantics: which values are scalars, structs, maps and lists, and how lists
//! and maps merge (`atomic`, `set`, `map` with keys; `granular` or `atomic` maps and structs).
//!
//! Built-in kinds come from a table generated from the Kubernetes 1.33 API types
//! (`builtin.rs`); custom resources get a schema built from their `openAPIV3Schema`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::builtin;

pub(crate) type TypeId = usize;

/// A scalar (string, number, boolean), or any value treated as one.
pub(crate) const SCALAR: TypeId = 0;
/// A value of unknown type: maps are granular, lists atomic.
pub(crate) const UNTYPED: TypeId = 1;
// Type 2 is an untyped value replaced as a whole.
/// The granular map of `UNTYPED` values that an untyped object is treated as.
pub(crate) const UNTYPED_MAP: TypeId = 3;

#[derive(Clone, Debug)]
pub(crate) enum TypeDef {
    Scalar,
    Untyped,
    UntypedAtomic,
    Map(MapDef),
    List(ListDef),
}

/// A struct (declared `fields`) and/or a map (`elem` for other keys).
#[derive(Clone, Debug, Default)]
pub(crate) struct MapDef {
    pub fields: BTreeMap<String, TypeId>,
    /// The type of keys that are not declared fields; `None` when the type declares none
    /// (such keys are then tolerated as untyped values).
    pub elem: Option<TypeId>,
    pub atomic: bool,
    /// Fields a typed (Go) object always has: `(name, true)` for non-pointer structs (`{}`
    /// when unset), `(name, false)` for lists, maps and pointers without `omitempty` (null).
    /// Upstream compares typed objects, so these never count as added or removed containers.
    pub present: Vec<(String, bool)>,
}

impl MapDef {
    pub fn field_type(&self, key: &str) -> TypeId {
        self.fields
            .get(key)
            .copied()
            .or(self.elem)
            .unwrap_or(UNTYPED)
    }

    pub fn has_field(&self, key: &str) -> bool {
        self.fields.contains_key(key)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct ListDef {
    pub elem: TypeId,
    pub kind: ListKind,
}

#[derive(Clone, Debug)]
pub(crate) enum ListKind {
    Atomic,
    Set,
    /// Items are maps identified by these key fields (with defaults for absent keys).
    Map(Vec<(String, Option<Value>)>),
}

/// The merge semantics of one kind (or custom resource version).
#[derive(Clone, Debug)]
pub struct Schema {
    types: Arc<Vec<TypeDef>>,
    root: TypeId,
    status_subresource: bool,
}

/// Identifies a kind: `group` is `""` for the core group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeKey<'a> {
    pub group: &'a str,
    pub kind: &'a str,
}

impl Schema {
    /// A schema that knows nothing about the type: objects are granular maps, lists atomic,
    /// and `metadata` is typed as ObjectMeta.
    pub fn untyped() -> Schema {
        let mut b = Builder::new();
        let meta = b.import_builtin("meta.v1.ObjectMeta");
        let root = b.push(TypeDef::Map(MapDef {
            fields: [("metadata".to_string(), meta)].into_iter().collect(),
            elem: Some(UNTYPED),
            ..MapDef::default()
        }));
        b.finish(root)
    }

    /// Whether the kind has a `status` subresource: writes to the main resource then do not
    /// take ownership of `status`, and writes to `/status` do not take ownership of `spec`.
    pub fn status_subresource(&self) -> bool {
        self.status_subresource
    }

    /// Sets whether the kind has a `status` subresource.
    pub fn with_status_subresource(mut self, status: bool) -> Schema {
        self.status_subresource = status;
        self
    }

    pub(crate) fn root(&self) -> TypeId {
        self.root
    }

    pub(crate) fn def(&self, id: TypeId) -> &TypeDef {
        self.types.get(id).unwrap_or(&TypeDef::Untyped)
    }
}

/// The built-in schema of a kind, or `None` if the kind is not built in.
pub fn schema_for(key: TypeKey<'_>) -> Option<&'static Schema> {
    builtin_registry()
        .kinds
        .get(&(key.group.to_string(), key.kind.to_string()))
}

/// The kinds in the built-in table, as `(group, kind, version)`.
pub fn builtin_kinds() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut out: Vec<_> = builtin_registry()
        .versions
        .iter()
        .map(|((g, k), v)| (g.as_str(), k.as_str(), v.as_str()))
        .collect();
    out.sort();
    out
}

struct Registry {
    types: Arc<Vec<TypeDef>>,
    names: HashMap<String, TypeId>,
    kinds: HashMap<(String, String), Schema>,
    versions: HashMap<(String, String), String>,
}

fn builtin_registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| parse_table(builtin::TABLE))
}

struct Builder {
    types: Vec<TypeDef>,
    imported: HashMap<TypeId, TypeId>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            types: vec![
                TypeDef::Scalar,
                TypeDef::Untyped,
                TypeDef::UntypedAtomic,
                TypeDef::Map(MapDef {
                    elem: Some(UNTYPED),
                    ..MapDef::default()
                }),
            ],
            imported: HashMap::new(),
        }
    }

    fn push(&mut self, def: TypeDef) -> TypeId {
        self.types.push(def);
        self.types.len() - 1
    }

    /// Copies a built-in named type (and everything it refers to) into this schema.
    fn import_builtin(&mut self, name: &str) -> TypeId {
        let reg = builtin_registry();
        match reg.names.get(name) {
            Some(&id) => self.import(&reg.types, id),
            None => UNTYPED,
        }
    }

    fn import(&mut self, from: &[TypeDef], id: TypeId) -> TypeId {
        if id <= UNTYPED_MAP {
            return id;
        }
        if let Some(&mine) = self.imported.get(&id) {
            return mine;
        }
        let mine = self.push(TypeDef::Untyped);
        self.imported.insert(id, mine);
        let def = match &from[id] {
            TypeDef::Map(m) => {
                let mut m = m.clone();
                for t in m.fields.values_mut() {
                    *t = self.import(from, *t);
                }
                m.elem = m.elem.map(|e| self.import(from, e));
                TypeDef::Map(m)
            }
            TypeDef::List(l) => TypeDef::List(ListDef {
                elem: self.import(from, l.elem),
                kind: l.kind.clone(),
            }),
            other => other.clone(),
        };
        self.types[mine] = def;
        mine
    }

    fn finish(self, root: TypeId) -> Schema {
        Schema {
            types: Arc::new(self.types),
            root,
            status_subresource: false,
        }
    }
}

/// Parses the generated table (see `builtin.rs` for the format).
fn parse_table(table: &str) -> Registry {
    // First pass: number the named types.
    let mut names: HashMap<String, TypeId> = HashMap::new();
    let mut b = Builder::new();
    for line in table.lines() {
        if let Some(rest) = line.strip_prefix('@') {
            let name = rest.split_whitespace().next().unwrap_or_default();
            let id = b.push(TypeDef::Map(MapDef::default()));
            names.insert(name.to_string(), id);
        }
    }
    // Second pass: fields and kinds.
    let mut current: Option<TypeId> = None;
    let mut kind_lines = Vec::new();
    for line in table.lines() {
        if let Some(rest) = line.strip_prefix('@') {
            let mut parts = rest.split_whitespace();
            let name = parts.next().unwrap_or_default();
            current = names.get(name).copied();
            if parts.next() == Some("atomic")
                && let Some(TypeDef::Map(m)) = current.and_then(|id| b.types.get_mut(id))
            {
                m.atomic = true;
            }
        } else if let Some(rest) = line.strip_prefix("K ") {
            kind_lines.push(rest);
        } else if let Some(rest) = line.strip_prefix(' ') {
            let mut parts = rest.split(' ');
            let (Some(field), Some(expr)) = (parts.next(), parts.next()) else {
                continue;
            };
            let presence = parts.next();
            let ty = parse_type_expr(expr, &names, &mut b);
            if let Some(TypeDef::Map(m)) = current.and_then(|id| b.types.get_mut(id)) {
                m.fields.insert(field.to_string(), ty);
                if let Some(p) = presence {
                    m.present.push((field.to_string(), p == "s"));
                }
            }
        }
    }
    let types = Arc::new(b.types);
    let mut kinds = HashMap::new();
    let mut versions = HashMap::new();
    for k in kind_lines {
        let parts: Vec<&str> = k.split_whitespace().collect();
        if parts.len() < 4 {
            continue;
        }
        let group = if parts[0] == "-" { "" } else { parts[0] };
        let Some(&root) = names.get(parts[3]) else {
            continue;
        };
        let status = parts.get(4) == Some(&"status");
        let key = (group.to_string(), parts[1].to_string());
        kinds.insert(
            key.clone(),
            Schema {
                types: types.clone(),
                root,
                status_subresource: status,
            },
        );
        versions.insert(key, parts[2].to_string());
    }
    Registry {
        types,
        names,
        kinds,
        versions,
    }
}

fn parse_type_expr(expr: &str, names: &HashMap<String, TypeId>, b: &mut Builder) -> TypeId {
    if let Some(rest) = expr.strip_prefix('[') {
        let Some((kind, elem)) = rest.split_once(']') else {
            return UNTYPED;
        };
        let elem = parse_type_expr(elem, names, b);
        let kind = match kind {
            "atomic" => ListKind::Atomic,
            "set" => ListKind::Set,
            k => match k.strip_prefix("map:") {
                Some(keys) => ListKind::Map(
                    keys.split(',')
                        .map(|k| match k.split_once('=') {
                            Some((name, default)) => {
                                (name.to_string(), serde_json::from_str(default).ok())
                            }
                            None => (k.to_string(), None),
                        })
                        .collect(),
                ),
                None => ListKind::Atomic,
            },
        };
        return b.push(TypeDef::List(ListDef { elem, kind }));
    }
    if let Some(rest) = expr.strip_prefix('{') {
        let Some((kind, elem)) = rest.split_once('}') else {
            return UNTYPED;
        };
        let elem = parse_type_expr(elem, names, b);
        return b.push(TypeDef::Map(MapDef {
            elem: Some(elem),
            atomic: kind == "a",
            ..MapDef::default()
        }));
    }
    match expr {
        "s" => SCALAR,
        "j" => UNTYPED,
        name => names.get(name).copied().unwrap_or(UNTYPED),
    }
}

/// Builds the schema of a custom resource from its `openAPIV3Schema` (the value of
/// `spec.versions[].schema.openAPIV3Schema` of a CustomResourceDefinition).
///
/// `x-kubernetes-list-type` (`atomic` (default), `set`, `map` with
/// `x-kubernetes-list-map-keys`), `x-kubernetes-map-type` (`granular` (default), `atomic`),
/// `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource` and
/// `x-kubernetes-int-or-string` are honoured. `apiVersion`, `kind` and `metadata` (as
/// ObjectMeta) are always typed at the root.
pub fn schema_from_openapi(v: &Value) -> Schema {
    let mut b = Builder::new();
    let meta = b.import_builtin("meta.v1.ObjectMeta");
    let root = openapi_type(v, &mut b, meta, 0);
    let root = match b.types.get_mut(root) {
        Some(TypeDef::Map(m)) if root > UNTYPED_MAP => {
            add_object_meta(m, meta);
            root
        }
        _ => {
            let mut m = MapDef {
                elem: Some(UNTYPED),
                ..MapDef::default()
            };
            add_object_meta(&mut m, meta);
            b.push(TypeDef::Map(m))
        }
    };
    b.finish(root)
}

fn add_object_meta(m: &mut MapDef, meta: TypeId) {
    m.fields.insert("apiVersion".to_string(), SCALAR);
    m.fields.insert("kind".to_string(), SCALAR);
    m.fields.insert("metadata".to_string(), meta);
    m.atomic = false;
}

fn openapi_type(v: &Value, b: &mut Builder, meta: TypeId, depth: usize) -> TypeId {
    let Some(o) = v.as_object() else {
        return UNTYPED;
    };
    if depth > 64 {
        return UNTYPED;
    }
    let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    if flag("x-kubernetes-int-or-string") {
        return SCALAR;
    }
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let embedded = flag("x-kubernetes-embedded-resource");
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    let props = o.get("properties").and_then(Value::as_object);
    match ty {
        "string" | "integer" | "number" | "boolean" => SCALAR,
        "array" => {
            let elem = o
                .get("items")
                .map_or(UNTYPED, |i| openapi_type(i, b, meta, depth + 1));
            let kind = match o.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListKind::Set,
                Some("map") => {
                    let item_props = o.get("items").and_then(|i| i.get("properties"));
                    let keys = o
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|keys| {
                            keys.iter()
                                .filter_map(Value::as_str)
                                .map(|k| {
                                    let default = item_props
                                        .and_then(|p| p.get(k))
                                        .and_then(|p| p.get("default"))
                                        .cloned();
                                    (k.to_string(), default)
                                })
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default();
                    if keys.is_empty() {
                        ListKind::Atomic
                    } else {
                        ListKind::Map(keys)
                    }
                }
                _ => ListKind::Atomic,
            };
            b.push(TypeDef::List(ListDef { elem, kind }))
        }
        "object" | "" => {
            let additional = match o.get("additionalProperties") {
                Some(Value::Bool(true)) => Some(UNTYPED),
                Some(a @ Value::Object(_)) => Some(openapi_type(a, b, meta, depth + 1)),
                _ => None,
            };
            // An object with neither properties nor a type is untyped; `type: object` alone is
            // a granular map of untyped values.
            if props.is_none() && additional.is_none() && !embedded && (ty.is_empty() || preserve) {
                return UNTYPED;
            }
            let atomic = o.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
            let mut m = MapDef {
                atomic,
                ..MapDef::default()
            };
            if let Some(props) = props {
                for (name, p) in props {
                    let t = openapi_type(p, b, meta, depth + 1);
                    m.fields.insert(name.clone(), t);
                }
            }
            m.elem = additional.or(if preserve || props.is_none() {
                Some(UNTYPED)
            } else {
                None
            });
            if embedded {
                for f in ["apiVersion", "kind"] {
                    m.fields.entry(f.to_string()).or_insert(SCALAR);
                }
                m.fields.insert("metadata".to_string(), meta);
            }
            b.push(TypeDef::Map(m))
        }
        _ => UNTYPED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field<'a>(s: &'a Schema, id: TypeId, name: &str) -> (&'a TypeDef, TypeId) {
        match s.def(id) {
            TypeDef::Map(m) => {
                let t = m.field_type(name);
                (s.def(t), t)
            }
            other => panic!("not a map: {other:?}"),
        }
    }

    /// Every kind the API server serves has a schema: its own test
    /// (`k1s_apiserver::registry`, `served_kinds_have_patch_and_apply_tables`).
    #[test]
    fn builtin_kinds_are_covered() {
        assert!(
            schema_for(TypeKey {
                group: "apps",
                kind: "Deployment"
            })
            .unwrap()
            .status_subresource()
        );
        assert!(
            !schema_for(TypeKey {
                group: "",
                kind: "ConfigMap"
            })
            .unwrap()
            .status_subresource()
        );
        assert!(
            schema_for(TypeKey {
                group: "nope",
                kind: "Nope"
            })
            .is_none()
        );
        assert!(builtin_kinds().len() > 60);
    }

    #[test]
    fn pod_semantics() {
        let s = schema_for(TypeKey {
            group: "",
            kind: "Pod",
        })
        .unwrap();
        let (_, spec) = field(s, s.root(), "spec");
        let (containers, _) = field(s, spec, "containers");
        let TypeDef::List(l) = containers else {
            panic!()
        };
        assert!(matches!(&l.kind, ListKind::Map(k) if k.len() == 1 && k[0].0 == "name"));
        let (ports, _) = field(s, l.elem, "ports");
        let TypeDef::List(p) = ports else { panic!() };
        let ListKind::Map(keys) = &p.kind else {
            panic!()
        };
        assert_eq!(
            keys,
            &vec![
                ("containerPort".to_string(), None),
                ("protocol".to_string(), Some(json!("TCP")))
            ]
        );
        let (tolerations, _) = field(s, spec, "tolerations");
        assert!(matches!(
            tolerations,
            TypeDef::List(ListDef {
                kind: ListKind::Atomic,
                ..
            })
        ));
        let (ns, _) = field(s, spec, "nodeSelector");
        assert!(matches!(ns, TypeDef::Map(m) if m.atomic));
        let (_, meta) = field(s, s.root(), "metadata");
        let (fin, _) = field(s, meta, "finalizers");
        assert!(matches!(
            fin,
            TypeDef::List(ListDef {
                kind: ListKind::Set,
                ..
            })
        ));
        let (owners, _) = field(s, meta, "ownerReferences");
        assert!(
            matches!(owners, TypeDef::List(ListDef { kind: ListKind::Map(k), .. }) if k[0].0 == "uid")
        );
        let (labels, _) = field(s, meta, "labels");
        assert!(matches!(labels, TypeDef::Map(m) if !m.atomic && m.elem == Some(SCALAR)));
        let d = schema_for(TypeKey {
            group: "apps",
            kind: "Deployment",
        })
        .unwrap();
        let (_, dspec) = field(d, d.root(), "spec");
        let (sel, _) = field(d, dspec, "selector");
        assert!(matches!(sel, TypeDef::Map(m) if m.atomic));
    }

    #[test]
    fn openapi_schema() {
        let s = schema_from_openapi(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name", "proto"],
                        "items": {"type": "object", "properties": {
                            "name": {"type": "string"}, "proto": {"type": "string", "default": "TCP"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "sel": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
                    "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "n": {"x-kubernetes-int-or-string": true}
                }}
            }
        }));
        let (_, spec) = field(&s, s.root(), "spec");
        let (items, _) = field(&s, spec, "items");
        assert!(
            matches!(items, TypeDef::List(ListDef { kind: ListKind::Map(k), .. }) if k[1] == ("proto".to_string(), Some(json!("TCP"))))
        );
        let (tags, _) = field(&s, spec, "tags");
        assert!(matches!(
            tags,
            TypeDef::List(ListDef {
                kind: ListKind::Set,
                ..
            })
        ));
        let (sel, _) = field(&s, spec, "sel");
        assert!(matches!(sel, TypeDef::Map(m) if m.atomic));
        let (raw, _) = field(&s, spec, "raw");
        assert!(matches!(raw, TypeDef::Untyped));
        let (_, meta) = field(&s, s.root(), "metadata");
        let (labels, _) = field(&s, meta, "labels");
        assert!(matches!(labels, TypeDef::Map(m) if !m.atomic));
        // Garbage does not panic.
        let _ = schema_from_openapi(&json!("x"));
        let _ = schema_from_openapi(&json!({"type": "array", "items": 3}));
        let u = Schema::untyped();
        assert!(matches!(u.def(u.root()), TypeDef::Map(_)));
    }
}

//! The schemas of every type the documents mention, in OpenAPI 3 form (refs to
//! `#/components/schemas/<name>`), keyed by upstream's definition names.
//!
//! Built-in kinds come from k8s-openapi's schemars impls (through the catalog's
//! [`SchemaFn`](crate::registry::SchemaFn)); list kinds, which k8s-openapi only has as the
//! generic `List<T>` without a schema, and custom resources, whose schema lives in their CRD,
//! are written here. On top of what k8s-openapi emits this module adds what clients read from
//! upstream's documents: `x-kubernetes-group-version-kind` on top-level kinds, the
//! strategic-merge-patch extensions (from [`k1s_apimachinery::patch::merge_keys`]), and a `type` on
//! `IntOrString` / `Quantity`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::{authentication, autoscaling, core, policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::registry::{Catalog, ResourceType, SchemaFn};
use k1s_apimachinery::patch::PatchKey;
use k1s_apimachinery::patch::merge_keys::{self, Field, TypeInfo};

/// Where schemas live in an OpenAPI 3 document.
pub const V3_PREFIX: &str = "#/components/schemas/";

pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub const API_RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// A (group, version, kind).
pub type Gvk<'a> = (&'a str, &'a str, &'a str);

/// The kinds served by subresources that are not kinds of the catalog themselves.
const SUBRESOURCE_KINDS: &[(&str, &str, &str, SchemaFn)] = &[
    (
        "autoscaling",
        "v1",
        "Scale",
        <autoscaling::v1::Scale as JsonSchema>::json_schema,
    ),
    (
        "policy",
        "v1",
        "Eviction",
        <policy::v1::Eviction as JsonSchema>::json_schema,
    ),
    (
        "",
        "v1",
        "Binding",
        <core::v1::Binding as JsonSchema>::json_schema,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        <authentication::v1::TokenRequest as JsonSchema>::json_schema,
    ),
];

/// Upstream's definition name of a kind.
///
/// Built-in kinds are named after their Go package (`io.k8s.api.<package>.<version>.<Kind>`,
/// the package being the first label of the group, `core` for the core group); custom
/// resources after their group with its labels reversed (`com.example.stable.v1.CronTab`).
pub fn type_name(group: &str, version: &str, kind: &str, builtin: bool) -> String {
    if !builtin {
        let reversed: Vec<&str> = group.split('.').rev().collect();
        return format!("{}.{version}.{kind}", reversed.join("."));
    }
    let package = match group {
        "" => "io.k8s.api.core".to_owned(),
        "apiextensions.k8s.io" => {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_owned()
        }
        "apiregistration.k8s.io" => "io.k8s.kube-aggregator.pkg.apis.apiregistration".to_owned(),
        "internal.apiserver.k8s.io" => "io.k8s.api.apiserverinternal".to_owned(),
        g => format!("io.k8s.api.{}", g.split('.').next().unwrap_or(g)),
    };
    format!("{package}.{version}.{kind}")
}

/// The definition name of a resource's kind.
pub fn kind_name(r: &ResourceType) -> String {
    type_name(&r.group, &r.version, &r.kind, r.schema.is_some())
}

/// The definition name of a resource's list kind.
pub fn list_name(r: &ResourceType) -> String {
    type_name(&r.group, &r.version, &r.list_kind, r.schema.is_some())
}

/// The definition name of the kind a subresource serves, if the documents carry its schema.
pub fn subresource_kind_name(r: &ResourceType, kind: Option<Gvk<'_>>) -> Option<String> {
    match kind {
        None => Some(kind_name(r)),
        Some((g, v, k)) => SUBRESOURCE_KINDS
            .iter()
            .any(|&(sg, sv, sk, _)| (sg, sv, sk) == (g, v, k))
            .then(|| type_name(g, v, k, true)),
    }
}

/// `x-kubernetes-group-version-kind` as a single object (operations carry one).
pub fn gvk_object(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// All schemas of a catalog, in OpenAPI 3 form.
#[derive(Default)]
pub struct Components {
    pub schemas: BTreeMap<String, Value>,
    /// The names of the custom resources' schemas (OpenAPI v2 publishes them with the
    /// simplifications upstream's CRD builder makes), each with whether its CRD declares a
    /// schema.
    pub custom: BTreeMap<String, bool>,
}

impl Components {
    pub fn new(catalog: &Catalog) -> Self {
        let mut generator = SchemaSettings::openapi3()
            .with(|s| s.meta_schema = None)
            .into_generator();
        // Types that operations mention besides the kinds.
        generator.subschema_for::<meta::Status>();
        generator.subschema_for::<meta::DeleteOptions>();
        generator.subschema_for::<meta::WatchEvent<core::v1::ConfigMap>>();
        generator.subschema_for::<meta::Patch>();
        generator.subschema_for::<meta::APIResourceList>();

        let mut tops: Vec<(String, Value)> = Vec::new();
        let mut gvks: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut add = |name: String, schema: Value, gvk: Value| {
            gvks.entry(name.clone()).or_default().push(gvk);
            if !tops.iter().any(|(n, _)| *n == name) {
                tops.push((name, schema));
            }
        };
        let mut custom = BTreeMap::new();
        for r in &catalog.resources {
            let kind = kind_name(r);
            let list = list_name(r);
            if r.schema.is_none() {
                let declared = r
                    .custom
                    .as_ref()
                    .is_some_and(|c| c.openapi_schema.is_object());
                custom.insert(kind.clone(), declared);
            }
            let body = match r.schema {
                Some(f) => top_level(f(&mut generator)),
                None => custom_resource_schema(r),
            };
            add(
                kind.clone(),
                body,
                gvk_object(&r.group, &r.version, &r.kind),
            );
            add(
                list,
                list_schema(r, &kind),
                gvk_object(&r.group, &r.version, &r.list_kind),
            );
        }
        for &(g, v, k, f) in SUBRESOURCE_KINDS {
            let used = catalog
                .resources
                .iter()
                .any(|r| r.subresources.iter().any(|s| s.kind == Some((g, v, k))));
            if used {
                add(
                    type_name(g, v, k, true),
                    top_level(f(&mut generator)),
                    gvk_object(g, v, k),
                );
            }
        }
        for (name, mut schema) in tops {
            if let Some(obj) = schema.as_object_mut() {
                obj.insert(
                    "x-kubernetes-group-version-kind".into(),
                    Value::Array(gvks.remove(&name).unwrap_or_default()),
                );
            }
            generator.definitions_mut().insert(name, schema);
        }
        // Applies the OpenAPI 3 transforms (refs with siblings become `allOf`) to all.
        let definitions = generator.take_definitions(true);
        let mut schemas: BTreeMap<String, Value> = definitions.into_iter().collect();
        for (name, schema) in &mut schemas {
            fix_int_or_string(name, schema);
        }
        let mut components = Self { schemas, custom };
        components.add_patch_extensions(catalog);
        components
    }

    /// The names of all schemas reachable from the schemas named `roots` (themselves included).
    pub fn closure(&self, roots: impl IntoIterator<Item = String>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = roots.into_iter().collect();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(schema) = self.schemas.get(&name) {
                collect_refs(schema, V3_PREFIX, &mut todo);
            }
        }
        seen
    }

    /// Adds `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` to the fields
    /// strategic merge patch treats specially, as upstream's documents carry them (kubectl's
    /// client-side apply computes its patches from them when it has a document).
    fn add_patch_extensions(&mut self, catalog: &Catalog) {
        let mut done = BTreeSet::new();
        for r in &catalog.resources {
            let key = PatchKey {
                group: &r.group,
                kind: &r.kind,
            };
            if let (Some(info), true) = (merge_keys::lookup(key), r.schema.is_some()) {
                self.annotate(&kind_name(r), info, &mut done);
            }
        }
        let scale = PatchKey {
            group: "autoscaling",
            kind: "Scale",
        };
        if let Some(info) = merge_keys::lookup(scale) {
            self.annotate(
                &type_name("autoscaling", "v1", "Scale", true),
                info,
                &mut done,
            );
        }
    }

    fn annotate(
        &mut self,
        name: &str,
        info: &'static TypeInfo,
        done: &mut BTreeSet<(String, usize)>,
    ) {
        // A type is annotated once per table entry (tables are shared between kinds).
        if !done.insert((name.to_owned(), std::ptr::from_ref(info) as usize)) {
            return;
        }
        for (field, meta) in info.fields {
            let Some(property) = self
                .schemas
                .get_mut(name)
                .and_then(|s| s.get_mut("properties"))
                .and_then(|p| p.get_mut(*field))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            let mut set = |strategy: &str, key: Option<&str>| {
                property.insert("x-kubernetes-patch-strategy".into(), strategy.into());
                if let Some(key) = key {
                    property.insert("x-kubernetes-patch-merge-key".into(), key.into());
                }
            };
            let next = match meta {
                Field::Object(inner) => Some(*inner),
                Field::RetainKeysObject(inner) => {
                    set("retainKeys", None);
                    Some(*inner)
                }
                Field::ReplaceObject => {
                    set("replace", None);
                    None
                }
                Field::MergeList {
                    key,
                    item,
                    retain_keys,
                } => {
                    set(
                        if *retain_keys {
                            "merge,retainKeys"
                        } else {
                            "merge"
                        },
                        Some(key),
                    );
                    *item
                }
                Field::Set => {
                    set("merge", None);
                    None
                }
            };
            let target = referenced_name(property);
            if let (Some(inner), Some(target)) = (next, target) {
                self.annotate(&target, inner, done);
            }
        }
    }
}

/// The definition a property refers to, directly, through `allOf`, or as its items.
fn referenced_name(property: &Map<String, Value>) -> Option<String> {
    let direct = property.get("$ref");
    let all_of = property
        .get("allOf")
        .and_then(|a| a.get(0))
        .and_then(|s| s.get("$ref"));
    let items = property.get("items").and_then(|s| s.get("$ref"));
    direct
        .or(all_of)
        .or(items)
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(V3_PREFIX))
        .map(str::to_owned)
}

/// Pushes the definition names of all `$ref`s under `value` that start with `prefix`.
pub fn collect_refs(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(prefix) {
                            out.push(name.to_owned());
                        }
                    }
                    _ => collect_refs(v, prefix, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, prefix, out)),
        _ => {}
    }
}

/// A kind's schema as served at top level: k8s-openapi requires `metadata` (its structs hold
/// it unconditionally), upstream does not.
fn top_level(schema: schemars::Schema) -> Value {
    let mut value = schema.to_value();
    if let Some(required) = value.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|f| f != "metadata");
        if required.is_empty() {
            value.as_object_mut().map(|o| o.remove("required"));
        }
    }
    value
}

fn type_meta_properties() -> Map<String, Value> {
    // The descriptions upstream gives `apiVersion` and `kind` everywhere (what `kubectl
    // explain` prints, and clients match on), as k8s-openapi's schema of any kind carries them.
    static PROPS: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    PROPS
        .get_or_init(|| {
            let mut generator = SchemaSettings::openapi3().into_generator();
            let config_map = generator.root_schema_for::<core::v1::ConfigMap>();
            let config_map = serde_json::to_value(config_map).unwrap_or_default();
            ["apiVersion", "kind"]
                .into_iter()
                .map(|k| {
                    let mut p = config_map["properties"][k].clone();
                    if !p.is_object() {
                        p = json!({});
                    }
                    p["type"] = json!("string");
                    (k.to_owned(), p)
                })
                .collect()
        })
        .clone()
}

/// `<Kind>List`: `items` of the kind plus list metadata.
fn list_schema(r: &ResourceType, item: &str) -> Value {
    let mut props = type_meta_properties();
    props.insert(
        "items".into(),
        json!({
            "description": format!("The {} objects of the list.", r.kind),
            "type": "array",
            "items": {"$ref": format!("{V3_PREFIX}{item}")},
        }),
    );
    props.insert(
        "metadata".into(),
        json!({
            "description": "Standard list metadata.",
            "$ref": format!("{V3_PREFIX}{LIST_META}"),
        }),
    );
    json!({
        "description": format!("{} is a list of {} objects.", r.list_kind, r.kind),
        "type": "object",
        "properties": props,
        "required": ["items"],
    })
}

/// A custom resource: the CRD version's `openAPIV3Schema` with the object frame (apiVersion,
/// kind, ObjectMeta) filled in, so `kubectl explain` shows its fields; without a schema, the
/// frame alone, letting everything else through.
fn custom_resource_schema(r: &ResourceType) -> Value {
    let mut props = type_meta_properties();
    props.insert(
        "metadata".into(),
        json!({
            "description": "Standard object's metadata.",
            "$ref": format!("{V3_PREFIX}{OBJECT_META}"),
        }),
    );
    let declared = r
        .custom
        .as_ref()
        .map(|c| &c.openapi_schema)
        .filter(|s| s.is_object());
    let Some(declared) = declared else {
        return json!({
            "description": format!("{} is a custom resource of {}.", r.kind, r.api_version()),
            "type": "object",
            "properties": props,
            "x-kubernetes-preserve-unknown-fields": true,
        });
    };
    let mut schema = declared.clone();
    let own = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, v) in own {
        // The frame's metadata reference wins over the CRD's (restricted) metadata schema.
        props.entry(k).or_insert(v);
    }
    schema["properties"] = Value::Object(props);
    schema["type"] = json!("object");
    if schema["description"].is_null() {
        schema["description"] = json!(format!(
            "{} is a custom resource of {}.",
            r.kind,
            r.api_version()
        ));
    }
    schema
}

/// k8s-openapi describes `IntOrString` and `Quantity` by `x-kubernetes-int-or-string` alone;
/// upstream's documents give them `type: string` (and `IntOrString` `format: int-or-string`),
/// which is what clients print and OpenAPI v2 parsers require.
fn fix_int_or_string(name: &str, schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        && !obj.contains_key("type")
    {
        obj.insert("type".into(), "string".into());
        if name != QUANTITY {
            obj.insert("format".into(), "int-or-string".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::Resource;

    fn check<T: Resource + JsonSchema>() {
        assert_eq!(
            type_name(T::GROUP, T::VERSION, T::KIND, true),
            T::schema_name(),
            "{}",
            T::KIND
        );
    }

    #[test]
    fn custom_resources_describe_type_meta_as_built_in_kinds() {
        let props = type_meta_properties();
        let api_version = props["apiVersion"]["description"].as_str().unwrap();
        assert!(
            api_version.starts_with("APIVersion defines"),
            "{api_version}"
        );
        assert_eq!(props["kind"]["type"], "string");
        assert!(
            props["kind"]["description"]
                .as_str()
                .unwrap()
                .starts_with("Kind is")
        );
    }

    #[test]
    fn builtin_names_match_k8s_openapi() {
        use k8s_openapi::api::{
            apps, authorization, batch, coordination, discovery, events, networking, rbac,
            scheduling, storage,
        };
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
        check::<core::v1::ConfigMap>();
        check::<core::v1::PersistentVolumeClaim>();
        check::<core::v1::Binding>();
        check::<apps::v1::Deployment>();
        check::<events::v1::Event>();
        check::<authorization::v1::SubjectAccessReview>();
        check::<authentication::v1::TokenRequest>();
        check::<autoscaling::v1::Scale>();
        check::<batch::v1::CronJob>();
        check::<networking::v1::IngressClass>();
        check::<policy::v1::Eviction>();
        check::<rbac::v1::ClusterRoleBinding>();
        check::<storage::v1::CSIStorageCapacity>();
        check::<apiextensions::v1::CustomResourceDefinition>();
        check::<scheduling::v1::PriorityClass>();
        check::<coordination::v1::Lease>();
        check::<discovery::v1::EndpointSlice>();
        assert_eq!(
            type_name("stable.example.com", "v1", "CronTab", false),
            "com.example.stable.v1.CronTab"
        );
    }
}

//! The Swagger 2.0 document (`/openapi/v2`): all paths of all group versions, all schemas as
//! `definitions`.
//!
//! The schemas are those of the OpenAPI 3 documents rewritten for Swagger 2.0: refs point to
//! `#/definitions/`, a ref wrapped in `allOf` (OpenAPI 3 forbids siblings of `$ref`) is
//! unwrapped again, as upstream writes it, and keywords Swagger 2.0 lacks (`oneOf`, `anyOf`,
//! `not`, `nullable`) are dropped.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::paths::{BodyKind, Operation, Param, PathItem, Payload};
use super::schemas::{Components, V3_PREFIX};
use super::v3::{RESPONSE_TYPES, WATCH_TYPES, patch_media_types, status_text};
use super::{SERVER_VERSION, security_scheme};

pub const V2_PREFIX: &str = "#/definitions/";

fn param(p: &Param) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), p.name.into());
    out.insert("in".into(), p.location.as_str().into());
    out.insert("description".into(), p.description.clone().into());
    if p.required {
        out.insert("required".into(), true.into());
    }
    out.insert("type".into(), p.ty.into());
    if p.unique_items {
        out.insert("uniqueItems".into(), true.into());
    }
    Value::Object(out)
}

fn payload_schema(payload: &Payload) -> Value {
    match payload {
        Payload::Ref(name) => json!({"$ref": format!("{V2_PREFIX}{name}")}),
        Payload::Text => json!({"type": "string"}),
    }
}

fn operation(op: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("tags".into(), json!([op.tag]));
    out.insert("description".into(), op.description.clone().into());
    out.insert("operationId".into(), op.id.clone().into());
    out.insert("schemes".into(), json!(["https"]));
    if let Some(body) = &op.body {
        let consumes = match body.kind {
            BodyKind::Object => vec!["*/*"],
            BodyKind::Patch { strategic } => patch_media_types(strategic),
        };
        out.insert("consumes".into(), json!(consumes));
    } else {
        out.insert("consumes".into(), json!(["*/*"]));
    }
    let text = op.responses.iter().any(|(_, p)| *p == Payload::Text);
    let produces: &[&str] = if text {
        &["*/*"]
    } else if op.watch {
        WATCH_TYPES
    } else {
        RESPONSE_TYPES
    };
    out.insert("produces".into(), json!(produces));
    let mut params: Vec<Value> = Vec::new();
    if let Some(body) = &op.body {
        let mut b = Map::new();
        b.insert("name".into(), "body".into());
        b.insert("in".into(), "body".into());
        if body.required {
            b.insert("required".into(), true.into());
        }
        b.insert("schema".into(), payload_schema(&body.payload));
        params.push(Value::Object(b));
    }
    params.extend(op.params.iter().map(param));
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    let mut responses = Map::new();
    for (code, payload) in &op.responses {
        responses.insert(
            code.to_string(),
            json!({"description": status_text(*code), "schema": payload_schema(payload)}),
        );
    }
    responses.insert("401".into(), json!({"description": status_text(401)}));
    out.insert("responses".into(), Value::Object(responses));
    if !op.action.is_empty() {
        out.insert("x-kubernetes-action".into(), op.action.into());
    }
    if let Some(gvk) = &op.gvk {
        out.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
    }
    Value::Object(out)
}

fn path_item(item: &PathItem) -> Value {
    let mut out = Map::new();
    for op in &item.ops {
        out.insert(op.method.as_str().into(), operation(op));
    }
    if !item.params.is_empty() {
        out.insert(
            "parameters".into(),
            Value::Array(item.params.iter().map(param).collect()),
        );
    }
    Value::Object(out)
}

/// Rewrites an OpenAPI 3 schema (from [`Components`]) for Swagger 2.0.
pub fn schema(v3: &Value) -> Value {
    let Value::Object(map) = v3 else {
        // Boolean schemas: `true` accepts anything.
        return json!({});
    };
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "$ref" => {
                let r = value.as_str().unwrap_or_default();
                let name = r.strip_prefix(V3_PREFIX).unwrap_or(r);
                out.insert(key.clone(), format!("{V2_PREFIX}{name}").into());
            }
            "oneOf" | "anyOf" | "not" | "nullable" => {}
            "allOf" => {
                let parts: Vec<Value> = value
                    .as_array()
                    .map(|a| a.iter().map(schema).collect())
                    .unwrap_or_default();
                match parts.as_slice() {
                    [single] if single.get("$ref").is_some() && !map.contains_key("$ref") => {
                        out.insert("$ref".into(), single["$ref"].clone());
                    }
                    _ => {
                        out.insert(key.clone(), Value::Array(parts));
                    }
                }
            }
            "properties" => {
                let props: Map<String, Value> = value
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), schema(v))).collect())
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" => {
                let items = match value {
                    Value::Array(a) => a.first().map(schema).unwrap_or_else(|| json!({})),
                    v => schema(v),
                };
                out.insert(key.clone(), items);
            }
            "additionalProperties" => {
                let ap = match value {
                    Value::Bool(b) => Value::Bool(*b),
                    v => schema(v),
                };
                out.insert(key.clone(), ap);
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// What upstream's CRD builder changes in a structural schema for OpenAPI v2, because
/// kubectl's v2 validation cannot express it: a nullable or
/// `x-kubernetes-preserve-unknown-fields` node loses `items` and `properties` (and its type
/// when nullable, or when an object keeping unknown fields), an array without items loses
/// its type, and nullable properties (or any, when the additional properties are nullable)
/// are not `required`.
fn crd_for_v2(s: &mut Value) {
    let Some(map) = s.as_object_mut() else {
        return;
    };
    let nullable = map.remove("nullable").and_then(|v| v.as_bool()) == Some(true);
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if nullable {
        map.remove("type");
    }
    if nullable || preserve {
        map.remove("items");
        map.remove("properties");
    }
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
    if (kind == "array" && !map.contains_key("items")) || (preserve && kind == "object") {
        map.remove("type");
    }
    let nullable_props: Vec<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| v.get("nullable") == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(required) = map.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| {
            !r.as_str()
                .is_some_and(|r| nullable_props.iter().any(|n| n == r))
        });
    }
    if map
        .get("additionalProperties")
        .is_some_and(|ap| ap.get("nullable") == Some(&Value::Bool(true)))
    {
        map.remove("required");
    }
    if let Some(props) = map.get_mut("properties").and_then(Value::as_object_mut) {
        props.values_mut().for_each(crd_for_v2);
    }
    if let Some(items) = map.get_mut("items") {
        crd_for_v2(items);
    }
    if let Some(ap) = map
        .get_mut("additionalProperties")
        .filter(|v| v.is_object())
    {
        crd_for_v2(ap);
    }
}

/// The whole document.
pub fn document(components: &Components, paths: &BTreeMap<String, PathItem>) -> Value {
    let paths: Map<String, Value> = paths
        .iter()
        .map(|(path, item)| (path.clone(), path_item(item)))
        .collect();
    let definitions: Map<String, Value> = components
        .schemas
        .iter()
        .map(|(name, s)| {
            // A CRD schema that keeps unknown fields at its root is published as one without
            // a schema (upstream's builder: kubectl's v2 validation would refuse the fields).
            let preserve_root = s["x-kubernetes-preserve-unknown-fields"] == true;
            let v2 = match components.custom.get(name) {
                Some(true) if !preserve_root => {
                    let mut crd = s.clone();
                    crd_for_v2(&mut crd);
                    schema(&crd)
                }
                // A CRD without a schema: an object, nothing more (upstream's v2 publication).
                Some(_) => json!({
                    "type": "object",
                    "x-kubernetes-group-version-kind": s["x-kubernetes-group-version-kind"],
                }),
                None => schema(s),
            };
            (name.clone(), v2)
        })
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": security_scheme()},
        "security": [{"BearerToken": []}],
    })
}

#[cfg(test)]
mod crd_tests {
    use super::*;

    #[test]
    fn crd_schemas_simplified_for_v2_as_upstream() {
        let mut s = json!({"type": "object", "required": ["a", "n"],
            "properties": {
                "a": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                      "properties": {"b": {"type": "string"}}},
                "n": {"type": "string", "nullable": true},
                "l": {"type": "array", "nullable": true, "items": {"type": "string"}},
                "m": {"type": "object", "additionalProperties": {"type": "string", "nullable": true},
                      "required": ["x"]}}});
        crd_for_v2(&mut s);
        assert_eq!(s["required"], json!(["a"]));
        assert_eq!(
            s["properties"]["a"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(s["properties"]["n"], json!({}));
        assert_eq!(s["properties"]["l"], json!({}));
        assert!(s["properties"]["m"].get("required").is_none());
        let mut root = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"apiVersion": {"type": "string"}}});
        crd_for_v2(&mut root);
        assert_eq!(root, json!({"x-kubernetes-preserve-unknown-fields": true}));
    }

    #[test]
    fn crds_keeping_unknown_fields_at_the_root_are_plain_objects_in_v2() {
        // The conformance suite's "CRD without validation schema": a v1 CRD must have a
        // schema, so it declares one that lets everything through.
        let gvk = json!([{"group": "example.com", "version": "v1", "kind": "Empty"}]);
        let mut components = Components::default();
        components.schemas.insert(
            "com.example.v1.Empty".into(),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "description": "Empty is a custom resource of example.com/v1.",
                "properties": {"apiVersion": {"type": "string"}},
                "x-kubernetes-group-version-kind": gvk}),
        );
        components
            .custom
            .insert("com.example.v1.Empty".into(), true);
        let doc = document(&components, &BTreeMap::new());
        assert_eq!(
            doc["definitions"]["com.example.v1.Empty"],
            json!({"type": "object", "x-kubernetes-group-version-kind": gvk})
        );
    }
}

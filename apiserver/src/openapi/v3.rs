//! OpenAPI 3.0 documents: one per group version (`/openapi/v3/api/v1`,
//! `/openapi/v3/apis/<group>/<version>`), each with the schemas its operations reach.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::paths::{Body, BodyKind, Operation, Param, PathItem, Payload};
use super::schemas::{Components, V3_PREFIX, collect_refs};
use super::{SERVER_VERSION, security_scheme};

/// The patch media types a patch operation accepts.
pub fn patch_media_types(strategic: bool) -> Vec<&'static str> {
    let mut types = vec![
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if strategic {
        types.push("application/strategic-merge-patch+json");
    }
    types
}

/// The media types of object responses.
pub const RESPONSE_TYPES: &[&str] = &["application/json", "application/yaml"];
/// The media types of watch responses.
pub const WATCH_TYPES: &[&str] = &["application/json", "application/json;stream=watch"];

fn payload_schema(payload: &Payload, prefix: &str) -> Value {
    match payload {
        Payload::Ref(name) => json!({"$ref": format!("{prefix}{name}")}),
        Payload::Text => json!({"type": "string"}),
    }
}

fn param(p: &Param) -> Value {
    let mut schema = Map::new();
    schema.insert("type".into(), p.ty.into());
    if p.unique_items {
        schema.insert("uniqueItems".into(), true.into());
    }
    let mut out = Map::new();
    out.insert("name".into(), p.name.into());
    out.insert("in".into(), p.location.as_str().into());
    out.insert("description".into(), p.description.clone().into());
    if p.required {
        out.insert("required".into(), true.into());
    }
    out.insert("schema".into(), Value::Object(schema));
    Value::Object(out)
}

fn content(types: &[&str], schema: &Value) -> Value {
    Value::Object(
        types
            .iter()
            .map(|t| ((*t).to_owned(), json!({"schema": schema})))
            .collect(),
    )
}

fn request_body(body: &Body) -> Value {
    let schema = payload_schema(&body.payload, V3_PREFIX);
    let types = match body.kind {
        BodyKind::Object => vec!["*/*"],
        BodyKind::Patch { strategic } => patch_media_types(strategic),
    };
    let mut out = Map::new();
    out.insert("content".into(), content(&types, &schema));
    if body.required {
        out.insert("required".into(), true.into());
    }
    Value::Object(out)
}

pub fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        401 => "Unauthorized",
        _ => "",
    }
}

fn operation(op: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("tags".into(), json!([op.tag]));
    out.insert("description".into(), op.description.clone().into());
    out.insert("operationId".into(), op.id.clone().into());
    if !op.params.is_empty() {
        out.insert(
            "parameters".into(),
            Value::Array(op.params.iter().map(param).collect()),
        );
    }
    if let Some(body) = &op.body {
        out.insert("requestBody".into(), request_body(body));
    }
    let mut responses = Map::new();
    for (code, payload) in &op.responses {
        let schema = payload_schema(payload, V3_PREFIX);
        let types: &[&str] = match payload {
            Payload::Text => &["*/*"],
            Payload::Ref(_) if op.watch => WATCH_TYPES,
            Payload::Ref(_) => RESPONSE_TYPES,
        };
        responses.insert(
            code.to_string(),
            json!({"description": status_text(*code), "content": content(types, &schema)}),
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

/// The document of one group version.
pub fn document(components: &Components, paths: &BTreeMap<String, PathItem>) -> Value {
    let paths: Map<String, Value> = paths
        .iter()
        .map(|(path, item)| (path.clone(), path_item(item)))
        .collect();
    let mut roots = Vec::new();
    for item in paths.values() {
        collect_refs(item, V3_PREFIX, &mut roots);
    }
    let schemas: Map<String, Value> = components
        .closure(roots)
        .into_iter()
        .filter_map(|name| {
            let schema = components.schemas.get(&name)?.clone();
            Some((name, schema))
        })
        .collect();
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": security_scheme()},
        },
        "security": [{"BearerToken": []}],
    })
}

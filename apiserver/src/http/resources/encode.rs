//! Answers in the representation the client asked for: JSON or YAML, a Table, or
//! PartialObjectMetadata; lists with their metadata; `Warning` headers.

use std::collections::HashMap;

use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::http::body::{self, Body};
use crate::http::negotiate::Output;
use crate::http::table_output;
use crate::registry::ResourceType;
use crate::rest::{ListPage, Written};
use crate::status::ApiError;

/// Encodes a value as JSON or YAML with `Warning` headers.
pub fn encode(code: StatusCode, out: Output, value: &Value, warnings: &[String]) -> Response<Body> {
    let (ct, bytes) = match out {
        Output::Yaml => (
            "application/yaml",
            serde_yaml::to_string(value)
                .unwrap_or_default()
                .into_bytes(),
        ),
        _ => (
            "application/json",
            serde_json::to_vec(value).unwrap_or_default(),
        ),
    };
    let mut resp = body::respond(code, ct, bytes);
    for w in warnings {
        let text = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

/// One object in the requested representation.
pub(super) fn single(
    res: &ResourceType,
    obj: Value,
    out: Output,
    q: &HashMap<String, String>,
) -> Value {
    match out {
        Output::Table => {
            let rv = obj["metadata"]["resourceVersion"].clone();
            table_output::table(
                res,
                std::slice::from_ref(&obj),
                json!({"resourceVersion": rv}),
                q,
                true,
            )
        }
        Output::Metadata => partial_metadata(&obj),
        Output::Json | Output::Yaml => obj,
    }
}

/// The list object of a page in the requested representation.
pub(super) fn list_object(
    res: &ResourceType,
    page: ListPage,
    out: Output,
    q: &HashMap<String, String>,
) -> Value {
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        metadata["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        metadata["remainingItemCount"] = json!(r);
    }
    match out {
        Output::Table => table_output::table(res, &page.items, metadata, q, true),
        Output::Metadata => json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": page.items.iter().map(partial_metadata).collect::<Vec<_>>(),
        }),
        Output::Json | Output::Yaml => json!({
            "kind": res.list_kind, "apiVersion": res.api_version(),
            "metadata": metadata, "items": page.items,
        }),
    }
}

pub(super) fn written(
    res: &ResourceType,
    w: Written,
    out: Output,
    q: &HashMap<String, String>,
) -> Response<Body> {
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    encode(code, out, &single(res, w.object, out, q), &w.warnings)
}

/// A `Status` of success, as upstream answers bindings and evictions.
pub(super) fn success(code: StatusCode) -> Response<Body> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code.as_u16()});
    encode(code, Output::Json, &status, &[])
}

/// Upstream's 406 where no table can be printed: the media types its serializers offer.
pub(super) fn not_acceptable_without_table() -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )
}

//! What a request's query and body say beyond the object: list, watch, write and delete
//! options as upstream parses them, and request bodies in the media type sent.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, header};
use k1s_api::selector::{FieldSelector, LabelSelector};
use serde_json::Value;

use super::{Call, header_str};
use crate::http::negotiate::{self, Input};
use crate::rest::{DeleteOptions, FieldValidation, ListOptions, RvMatch, WriteOptions};
use crate::status::ApiError;
use crate::user::UserInfo;

/// Decodes a request body (JSON, YAML, or protobuf as kubectl 1.32+ sends it): the resource's
/// kind, or another for action subresources (Binding, Eviction).
pub(super) fn decode_body(call: &Call<'_>) -> Result<Value, ApiError> {
    let input = negotiate::input(header_str(call.headers, header::CONTENT_TYPE))?;
    match input {
        Input::Protobuf => k1s_apimachinery::protobuf::decode(&call.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as protobuf: {e}"
            ))
        }),
        other => negotiate::decode(other, &call.body),
    }
}

fn parse_selector<T>(
    q: &HashMap<String, String>,
    key: &str,
    parse: impl Fn(&str) -> Result<T, k1s_api::selector::SelectorError>,
) -> Result<Option<T>, ApiError> {
    q.get(key)
        .map(|s| parse(s).map_err(|e| ApiError::bad_request(e.to_string())))
        .transpose()
}

pub(super) fn list_options(q: &HashMap<String, String>) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        label_selector: parse_selector(q, "labelSelector", LabelSelector::parse)?
            .unwrap_or_default(),
        field_selector: parse_selector(q, "fieldSelector", FieldSelector::parse)?
            .unwrap_or_default(),
        limit: match q.get("limit").map(|l| l.parse::<i64>()) {
            None => 0,
            Some(Ok(n)) => usize::try_from(n.max(0)).unwrap_or(0),
            Some(Err(_)) => return Err(ApiError::bad_request("limit must be an integer")),
        },
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: match q.get("resourceVersionMatch").map(String::as_str) {
            None | Some("") => None,
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        },
    })
}

/// Write options from the query; the field manager defaults to the User-Agent's program
/// name, as upstream's does.
pub(super) fn write_options(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    user: &UserInfo,
) -> Result<WriteOptions, ApiError> {
    let field_manager = q.get("fieldManager").cloned();
    if field_manager.as_ref().is_some_and(|m| m.len() > 128) {
        return Err(ApiError::invalid(
            "PatchOptions",
            "",
            vec![(
                "fieldManager".into(),
                "Too long: may not be more than 128 bytes".into(),
            )],
        ));
    }
    let from_agent = || {
        header_str(headers, header::USER_AGENT)
            .and_then(|ua| ua.split('/').next())
            .filter(|p| !p.is_empty())
            .map(|p| p.chars().take(128).collect())
    };
    Ok(WriteOptions {
        dry_run: dry_run(q)?,
        field_validation: FieldValidation::parse(
            q.get("fieldValidation").map_or("", String::as_str),
        )?,
        field_manager: field_manager.or_else(from_agent),
        user: Some(Arc::new(user.clone())),
        ..Default::default()
    })
}

pub(super) fn dry_run(q: &HashMap<String, String>) -> Result<bool, ApiError> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

/// The options of a DELETE: query parameters, then a body (JSON, YAML or protobuf, as
/// client-go sends its DeleteOptions with its default protobuf content type).
pub(super) fn delete_options(
    q: &HashMap<String, String>,
    call: &Call<'_>,
) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        grace_period_seconds: q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()),
        propagation_policy: q.get("propagationPolicy").cloned(),
        dry_run: dry_run(q)?,
        user: Some(Arc::new(call.user.clone())),
        ..Default::default()
    };
    if !call.body.is_empty() {
        // A bad body is a 400 that names DeleteOptions; an unsupported media type keeps its 415.
        let v = decode_body(call).map_err(|e| {
            if e.code == 400 {
                ApiError::bad_request(format!(
                    "the DeleteOptions body could not be decoded: {}",
                    e.message
                ))
            } else {
                e
            }
        })?;
        opts.merge_body(&v)?;
    }
    Ok(opts)
}

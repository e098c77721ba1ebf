//! Writes of an object: `create` (POST), `update` (PUT of the object or of its `status`,
//! `finalize` or `approval`), and `patch` (JSON, merge and strategic merge patches, and
//! server-side apply).

use http::{Response, header};

use super::encode::written;
use super::options::{decode_body, write_options};
use super::{Call, header_str};
use crate::http::body::Body;
use crate::http::negotiate::Output;
use crate::http::request::flag;
use crate::registry::ResourceType;
use crate::rest::patch::PatchKind;
use crate::state::ApiState;
use crate::status::ApiError;

/// `POST` to a collection.
pub(super) async fn create(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let obj = decode_body(call)?;
    let w = state
        .rest
        .create(
            res,
            call.target.namespace.as_deref(),
            obj,
            &write_options(call.query, call.headers, call.user)?,
        )
        .await?;
    Ok(written(res, w, out, call.query))
}

/// `PUT` of an object, or of its `status`, `finalize` or `approval` subresource.
pub(super) async fn update(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
    sub: Option<&str>,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let obj = decode_body(call)?;
    let w = state
        .rest
        .update(
            res,
            call.target.namespace.as_deref(),
            name,
            obj,
            sub,
            &write_options(call.query, call.headers, call.user)?,
        )
        .await?;
    Ok(written(res, w, out, call.query))
}

/// `PATCH` of an object or of its `status`, `scale` or `approval`, in the patch type the
/// `Content-Type` names; `application/apply-patch+yaml` is server-side apply.
pub(super) async fn patch(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
    sub: Option<&str>,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let q = call.query;
    let ct = header_str(call.headers, header::CONTENT_TYPE).unwrap_or("");
    let mut kind = PatchKind::from_content_type(ct).ok_or_else(|| {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"),
        )
    })?;
    if let PatchKind::Apply { force } = &mut kind {
        *force = flag(q, "force") == Some(true);
        if q.get("fieldManager").is_none_or(String::is_empty) {
            return Err(ApiError::bad_request(
                "PATCH request is not valid: fieldManager is required for apply requests",
            ));
        }
    }
    let w = state
        .rest
        .patch(
            res,
            call.target.namespace.as_deref(),
            name,
            sub,
            kind,
            &call.body,
            &write_options(q, call.headers, call.user)?,
        )
        .await?;
    Ok(written(res, w, out, q))
}

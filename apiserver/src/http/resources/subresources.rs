//! Subresources that act rather than store: `scale` (read and written through the object),
//! a pod's `binding` and `eviction`, a ServiceAccount's `token`, and the review kinds
//! (TokenReview, SubjectAccessReview, ...: answered at once, stored nowhere).

use http::{Response, StatusCode, header};

use super::encode::{encode, not_acceptable_without_table, success};
use super::options::{decode_body, write_options};
use super::{Call, header_str};
use crate::http::body::Body;
use crate::http::negotiate::{self, Output};
use crate::registry::ResourceType;
use crate::state::ApiState;
use crate::status::ApiError;

/// `POST` of a review: stored nowhere, answered at once, and never as a table (upstream's
/// review storages have no table convertor: a request for one alone is a 406).
pub(super) async fn review(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
) -> Result<Response<Body>, ApiError> {
    let out = negotiate::output_without_table(header_str(call.headers, header::ACCEPT))
        .ok_or_else(not_acceptable_without_table)?;
    let obj = decode_body(call)?;
    let answered = crate::authz::reviews::answer(
        &state.authz,
        &state.authn,
        call.user,
        &res.kind,
        call.target.namespace.as_deref(),
        obj,
    )
    .await?;
    Ok(encode(StatusCode::CREATED, out, &answered, &[]))
}

/// `POST serviceaccounts/NAME/token`: a TokenRequest answered with a token.
pub(super) async fn token(
    state: &ApiState,
    call: &Call<'_>,
    name: &str,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let req = decode_body(call)?;
    let node = call.user.node_name();
    let answered = state
        .tokens
        .token_request(
            call.target.namespace.as_deref().unwrap_or(""),
            name,
            req,
            node,
        )
        .await?;
    Ok(encode(StatusCode::CREATED, out, &answered, &[]))
}

/// `GET .../scale`: the object's Scale.
pub(super) async fn get_scale(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let obj = state
        .rest
        .get(res, call.target.namespace.as_deref(), name)
        .await?;
    Ok(encode(
        StatusCode::OK,
        out,
        &crate::rest::scale_of(res, &obj),
        &[],
    ))
}

/// `PUT .../scale`: the object's replicas set from a Scale.
pub(super) async fn update_scale(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let new = decode_body(call)?;
    let scale = state
        .rest
        .update_scale(
            res,
            call.target.namespace.as_deref(),
            name,
            &write_options(call.query, call.headers, call.user)?,
            |_| Ok(new.clone()),
        )
        .await?;
    Ok(encode(StatusCode::OK, out, &scale, &[]))
}

/// `POST pods/NAME/binding`: the scheduler's (or a client's) choice of node.
pub(super) async fn binding(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let binding = decode_body(call)?;
    state
        .rest
        .bind_pod(
            res,
            call.target.namespace.as_deref().unwrap_or(""),
            name,
            &binding,
            &write_options(call.query, call.headers, call.user)?,
        )
        .await?;
    Ok(success(StatusCode::CREATED))
}

/// `POST pods/NAME/eviction`: a delete that respects PodDisruptionBudgets.
pub(super) async fn eviction(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let eviction = decode_body(call)?;
    state
        .rest
        .evict_pod(
            res,
            call.target.namespace.as_deref().unwrap_or(""),
            name,
            &eviction,
        )
        .await?;
    Ok(success(StatusCode::CREATED))
}

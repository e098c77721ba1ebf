//! Deletes: of one object (at once, or marked for its finalizers or grace period) and of a
//! collection (`deletecollection`).

use http::{Response, StatusCode};
use serde_json::json;

use super::Call;
use super::encode::{encode, list_object, single};
use super::options::{delete_options, list_options};
use crate::http::body::Body;
use crate::http::negotiate::Output;
use crate::registry::ResourceType;
use crate::rest::ListPage;
use crate::state::ApiState;
use crate::status::ApiError;

/// `DELETE` of one object: the object as deleted (or as it waits), or upstream's `Status` of
/// success for kinds other than pods once it is gone.
pub(super) async fn one(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let q = call.query;
    let opts = delete_options(q, call)?;
    let d = state
        .rest
        .delete(res, call.target.namespace.as_deref(), name, &opts)
        .await?;
    if d.gone && res.kind != "Pod" {
        let status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": res.group, "kind": res.plural,
                "uid": d.object["metadata"]["uid"]},
        });
        Ok(encode(StatusCode::OK, Output::Json, &status, &[]))
    } else {
        Ok(encode(
            StatusCode::OK,
            out,
            &single(res, d.object, out, q),
            &[],
        ))
    }
}

/// `DELETE` of a collection: the objects deleted, as a list.
pub(super) async fn collection(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
) -> Result<Response<Body>, ApiError> {
    let q = call.query;
    let rest = &state.rest;
    let opts = delete_options(q, call)?;
    let items = rest
        .delete_collection(
            res,
            call.target.namespace.as_deref(),
            &list_options(q)?,
            &opts,
        )
        .await?;
    let rv = rest.store.current_revision().await?;
    let page = ListPage {
        items,
        resource_version: rv,
        continue_token: None,
        remaining: None,
    };
    Ok(encode(
        StatusCode::OK,
        Output::Json,
        &list_object(res, page, Output::Json, q),
        &[],
    ))
}

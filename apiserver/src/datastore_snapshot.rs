//! `GET /k1s/v1/snapshot`: a snapshot of the datastore ([`k1s_store::snapshot`]) as the
//! response body, for `k1s snapshot save` against a running server whichever datastore it
//! uses (the embedded store's file is locked by the server, so no other process can read
//! it). Admins only: RBAC grants the non-resource URL to no role but `cluster-admin`'s `*`.

use http::{Response, StatusCode};

use crate::http::body::Body;
use crate::status::ApiError;
use crate::user::UserInfo;

/// The path of the snapshot.
pub const PATH: &str = "/k1s/v1/snapshot";

/// Takes a snapshot and answers it (`application/octet-stream`).
pub async fn serve(
    store: &dyn k1s_store::Store,
    user: &UserInfo,
) -> Result<Response<Body>, ApiError> {
    let now = k1s_api::time::format_nano(k1s_api::time::now());
    let mut file = Vec::new();
    let header = k1s_store::snapshot::save(store, &now, &mut file)
        .await
        .map_err(|e| match e {
            k1s_store::snapshot::SnapshotError::Store(e) => ApiError::from(e),
            other => ApiError::new(500, "InternalError", other.to_string()),
        })?;
    tracing::info!(requester = %user.name, revision = header.revision, keys = header.keys, bytes = file.len(), "datastore snapshot taken");
    Ok(crate::http::body::respond(
        StatusCode::OK,
        "application/octet-stream",
        file,
    ))
}

//! Writes a reconciler makes to an object that may have gone since it was read: NotFound
//! then means the object was deleted meanwhile, which is no error for a reconciler (the
//! deletion is its own event).

use k1s_api::client::{Client, ClientError, Patch, ResourceRef, WriteParams};
use serde_json::Value;

use crate::key;

/// Patches `obj` (or its subresource `sub`); `Ok(false)` when it is gone.
pub async fn patch_existing(
    client: &dyn Client,
    r: &ResourceRef,
    obj: &Value,
    patch: &Patch,
    sub: Option<&str>,
) -> Result<bool, ClientError> {
    match client
        .patch(r, key::name(obj), patch, sub, &WriteParams::default())
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Replaces the status of `obj` (a PUT of its `status` subresource, so a concurrent change
/// is a conflict); `Ok(false)` when it is gone.
pub async fn update_status(
    client: &dyn Client,
    r: &ResourceRef,
    obj: Value,
) -> Result<bool, ClientError> {
    match client
        .update(r, obj, Some("status"), &WriteParams::default())
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

//! Errors about one object of a resource type, as upstream's `NewNotFound`, `NewAlreadyExists`
//! and `NewConflict` write them: the qualified resource in the message, its group and plural
//! and the object's name in the details.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusDetails;

use super::ResourceType;
use crate::status::ApiError;

impl ApiError {
    /// 404 for a missing object: `deployments.apps "x" not found`.
    pub fn not_found(res: &ResourceType, name: &str) -> Self {
        Self::for_object(
            404,
            "NotFound",
            res,
            name,
            format!("{} {name:?} not found", res.qualified()),
        )
    }

    /// 409 for a create of an existing object.
    pub fn already_exists(res: &ResourceType, name: &str) -> Self {
        Self::for_object(
            409,
            "AlreadyExists",
            res,
            name,
            format!("{} {name:?} already exists", res.qualified()),
        )
    }

    /// 409 for a write based on a stale resourceVersion.
    pub fn conflict(res: &ResourceType, name: &str) -> Self {
        Self::for_object(
            409,
            "Conflict",
            res,
            name,
            format!(
                "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                res.qualified()
            ),
        )
    }

    pub(crate) fn for_object(
        code: u16,
        reason: &'static str,
        res: &ResourceType,
        name: &str,
        message: String,
    ) -> Self {
        Self {
            code,
            reason,
            message,
            details: Some(Box::new(StatusDetails {
                name: Some(name.into()),
                group: Some(res.group.clone()),
                kind: Some(res.plural.clone()),
                ..Default::default()
            })),
        }
    }
}

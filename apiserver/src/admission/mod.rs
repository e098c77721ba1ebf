//! Admission: the plugins kube-apiserver enables by default, run on every create and update
//! after authorization, before the object is validated and stored. Mutating plugins change
//! the object; validating ones refuse it with upstream's 403 message.
//!
//! Order, as upstream's: NamespaceLifecycle (in [`crate::rest`]), LimitRanger, ServiceAccount,
//! NodeRestriction, Priority, DefaultTolerationSeconds, DefaultStorageClass, the RBAC
//! escalation checks (upstream does them in the RBAC storage), PodSecurity, ResourceQuota.
//! Requests without a user (the server's own components) skip the user-based checks only.

pub mod default_storage_class;
pub mod default_tolerations;
pub mod limit_ranger;
pub mod node_restriction;
pub mod pod_security;
pub mod priority;
pub mod quota;
pub mod service_account;

use std::sync::Arc;

use serde_json::Value;

use crate::auth::UserInfo;
use crate::authz::Authorizer;
use crate::registry::ResourceType;
use crate::rest::Rest;
use crate::status::ApiError;

/// What is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// One write, as admission sees it.
pub struct Request<'a> {
    pub res: &'a ResourceType,
    pub operation: Operation,
    /// `status`, `binding`, ... for subresource writes.
    pub subresource: Option<&'a str>,
    /// `None` for the server's own writes.
    pub user: Option<&'a UserInfo>,
    pub dry_run: bool,
}

impl Request<'_> {
    /// `(group, kind)` of the object.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.res.group == group && self.res.kind == kind && self.res.custom.is_none()
    }

    /// A create of the object itself (not a subresource).
    pub fn creating(&self) -> bool {
        self.operation == Operation::Create && self.subresource.is_none()
    }
}

/// Runs the admission plugins over a write.
#[async_trait::async_trait]
pub trait Admission: Send + Sync {
    /// Admits `obj` (changing it), or refuses it. Returns warnings for the client.
    async fn admit(
        &self,
        rest: &Rest,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError>;
}

/// Upstream's admission refusal: `pods "x" is forbidden: <why>`.
pub fn forbidden(res: &ResourceType, obj: &Value, why: impl std::fmt::Display) -> ApiError {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let mut e = ApiError::new(
        403,
        "Forbidden",
        format!("{} {name:?} is forbidden: {why}", res.qualified()),
    );
    e.details = Some(Box::new(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusDetails {
            name: Some(name.into()),
            group: Some(res.group.clone()),
            kind: Some(res.plural.clone()),
            ..Default::default()
        },
    ));
    e
}

/// The default chain.
pub struct Chain {
    authz: Arc<Authorizer>,
}

impl Chain {
    pub fn new(authz: Arc<Authorizer>) -> Self {
        Self { authz }
    }
}

#[async_trait::async_trait]
impl Admission for Chain {
    async fn admit(
        &self,
        rest: &Rest,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let warnings = Vec::new();
        if req.creating() && req.is("", "Pod") {
            service_account::admit(rest, req, obj).await?;
        }
        if let Some(user) = req.user {
            node_restriction::admit(req, user, obj, old)?;
        }
        if req.creating() && req.is("", "Pod") {
            priority::admit(rest, req, obj).await?;
            default_tolerations::admit(obj);
        }
        if req.creating() && req.is("", "PersistentVolumeClaim") {
            default_storage_class::admit(rest, obj).await?;
        }
        if let Some(user) = req.user
            && req.res.group == "rbac.authorization.k8s.io"
            && req.subresource.is_none()
            && !user.in_group(crate::auth::MASTERS)
        {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
            crate::authz::escalation::check(&self.authz, user, &req.res.plural, ns, obj)?;
        }
        Ok(warnings)
    }
}

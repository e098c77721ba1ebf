//! The cluster as admission and authentication see it: the served resource types, and objects
//! read through the API server's storage layer (its short-lived caches included), plus the one
//! write admission makes, a ResourceQuota's usage. [`crate::rest::Rest`] implements it; the
//! admission plugins and the ServiceAccount token authenticator take a `&dyn Reader`, so they
//! depend on this narrow view rather than on the storage layer that calls them.

use std::sync::Arc;

use serde_json::Value;

use crate::registry::ResourceType;
use crate::status::ApiError;

#[async_trait::async_trait]
pub trait Reader: Send + Sync {
    /// The served resource `group`/`resource` (the plural), if it is served.
    fn served(&self, group: &str, resource: &str) -> Option<Arc<ResourceType>>;

    /// The built-in resource of `group`/`kind`.
    fn builtin_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>>;

    /// One object as stored now, or 404.
    async fn get(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError>;

    /// One object of a kind admission reads on every create (Namespaces, ServiceAccounts,
    /// PriorityClasses), remembered between writes to the kind; other kinds as [`Reader::get`].
    async fn get_remembered(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError>;

    /// Every object of `res` in `ns` (every namespace: `None`) as stored now.
    async fn list(&self, res: &ResourceType, ns: Option<&str>) -> Result<Vec<Value>, ApiError>;

    /// Every object of `res` in `ns`, for the few kinds admission lists on every create
    /// (PriorityClasses, LimitRanges, quotas, webhook configurations), remembered between
    /// writes to them.
    async fn list_shared(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, ApiError>;

    /// Forgets the list [`Reader::list_shared`] remembers: the caller found it stale.
    fn forget_shared_list(&self, res: &ResourceType, ns: Option<&str>);

    /// `body` decoded as a client's body is (unknown fields dropped, custom resources
    /// pruned): for what a mutating webhook changed.
    fn decode(&self, res: &ResourceType, body: Value) -> Result<Value, ApiError>;

    /// Replaces the `status` of an object (ResourceQuota admission's charge), with the
    /// resourceVersion `obj` carries as the precondition.
    async fn update_status(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
    ) -> Result<(), ApiError>;
}

//! The client trait every component talks to the API through: the in-process client (inside
//! `k1s server`, calling the API server's storage layer directly) and the HTTP client (agents,
//! tools) implement it with the same semantics, so a controller cannot tell them apart.
//!
//! Objects are JSON values; [`Api`] adds typed access for k8s-openapi kinds.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A failed request: the `Status` the server answered with (or a transport failure as 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ClientError {
    /// HTTP status code; 0 when the server was not reached.
    pub code: u16,
    /// The `Status` reason, e.g. `NotFound`, `Conflict`, `Expired`.
    pub reason: String,
    pub message: String,
}

impl ClientError {
    pub fn transport(message: impl Into<String>) -> Self {
        Self {
            code: 0,
            reason: "ServiceUnavailable".into(),
            message: message.into(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }

    pub fn is_conflict(&self) -> bool {
        self.code == 409 && self.reason == "Conflict"
    }

    pub fn is_already_exists(&self) -> bool {
        self.code == 409 && self.reason == "AlreadyExists"
    }

    /// 410 Expired/Gone: list again, then watch from the list's resourceVersion.
    pub fn is_expired(&self) -> bool {
        self.code == 410
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// Which resource (and namespace) a request is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceRef {
    /// "" for the core group.
    pub group: String,
    pub version: String,
    /// The plural resource name, e.g. `pods`.
    pub resource: String,
    /// `None`: cluster-scoped, or all namespaces for a list/watch.
    pub namespace: Option<String>,
}

impl ResourceRef {
    pub fn new(group: &str, version: &str, resource: &str, namespace: Option<&str>) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            namespace: namespace.map(Into::into),
        }
    }

    /// The resource of a k8s-openapi kind, in `namespace`.
    pub fn of<K: k8s_openapi::Resource>(namespace: Option<&str>) -> Self {
        Self::new(K::GROUP, K::VERSION, K::URL_PATH_SEGMENT, namespace)
    }

    /// The URL path of the collection (`/api/v1/namespaces/ns/pods`), or of one object.
    pub fn path(&self, name: Option<&str>, subresource: Option<&str>) -> String {
        let mut p = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let Some(ns) = &self.namespace {
            p.push_str("/namespaces/");
            p.push_str(ns);
        }
        p.push('/');
        p.push_str(&self.resource);
        if let Some(n) = name {
            p.push('/');
            p.push_str(n);
            if let Some(s) = subresource {
                p.push('/');
                p.push_str(s);
            }
        }
        p
    }
}

/// The parameters of a list (and of the list that starts a watch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<u32>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectList {
    pub items: Vec<Value>,
    pub resource_version: String,
    pub continue_token: Option<String>,
}

/// The parameters of a watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Watch changes after this version; `None` starts with the current objects as ADDED.
    pub resource_version: Option<String>,
    pub allow_bookmarks: bool,
    pub timeout_seconds: Option<u32>,
}

/// A watch event. The object is shared: an in-process watch hands every watcher of a change
/// the same decoded object.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    Added(Arc<Value>),
    Modified(Arc<Value>),
    Deleted(Arc<Value>),
    /// Everything up to this resourceVersion has been sent.
    Bookmark(String),
}

pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent>> + Send>>;

/// The body of a PATCH.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    Json(Value),
    Merge(Value),
    Strategic(Value),
    /// Server-side apply as `field_manager`.
    Apply {
        config: Value,
        force: bool,
    },
}

impl Patch {
    pub fn content_type(&self) -> &'static str {
        match self {
            Patch::Json(_) => "application/json-patch+json",
            Patch::Merge(_) => "application/merge-patch+json",
            Patch::Strategic(_) => "application/strategic-merge-patch+json",
            Patch::Apply { .. } => "application/apply-patch+yaml",
        }
    }

    pub fn body(&self) -> &Value {
        match self {
            Patch::Json(v) | Patch::Merge(v) | Patch::Strategic(v) => v,
            Patch::Apply { config, .. } => config,
        }
    }
}

/// Options of a write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteParams {
    pub field_manager: Option<String>,
    pub dry_run: bool,
}

/// Options of a delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteParams {
    pub grace_period_seconds: Option<i64>,
    /// `Foreground`, `Background` or `Orphan`.
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

/// What every API client does.
#[async_trait::async_trait]
pub trait Client: Send + Sync {
    async fn get(&self, r: &ResourceRef, name: &str) -> Result<Value>;
    async fn list(&self, r: &ResourceRef, params: &ListParams) -> Result<ObjectList>;
    async fn create(&self, r: &ResourceRef, obj: Value, params: &WriteParams) -> Result<Value>;
    /// PUT of the object (or of its `subresource`, e.g. `status`).
    async fn update(
        &self,
        r: &ResourceRef,
        obj: Value,
        subresource: Option<&str>,
        params: &WriteParams,
    ) -> Result<Value>;
    async fn patch(
        &self,
        r: &ResourceRef,
        name: &str,
        patch: &Patch,
        subresource: Option<&str>,
        params: &WriteParams,
    ) -> Result<Value>;
    /// Returns the object as deleted, or as it is while it waits for finalizers or its grace
    /// period.
    async fn delete(&self, r: &ResourceRef, name: &str, params: &DeleteParams) -> Result<Value>;
    /// POST to a subresource such as `binding` or `eviction`.
    async fn create_subresource(
        &self,
        r: &ResourceRef,
        name: &str,
        subresource: &str,
        body: Value,
    ) -> Result<Value>;
    async fn watch(&self, r: &ResourceRef, params: &WatchParams) -> Result<WatchStream>;
}

/// Typed access to one kind through any [`Client`].
pub struct Api<K> {
    client: std::sync::Arc<dyn Client>,
    r: ResourceRef,
    _kind: PhantomData<fn() -> K>,
}

fn decode<K: DeserializeOwned>(v: Value) -> Result<K> {
    serde_json::from_value(v).map_err(|e| ClientError {
        code: 0,
        reason: "BadResponse".into(),
        message: format!("the server's answer does not decode: {e}"),
    })
}

fn encode<K: Serialize>(k: &K) -> Result<Value> {
    serde_json::to_value(k).map_err(|e| ClientError {
        code: 0,
        reason: "BadRequest".into(),
        message: e.to_string(),
    })
}

impl<K> Api<K>
where
    K: k8s_openapi::Resource + Serialize + DeserializeOwned,
{
    pub fn new(client: std::sync::Arc<dyn Client>, namespace: Option<&str>) -> Self {
        Self {
            client,
            r: ResourceRef::of::<K>(namespace),
            _kind: PhantomData,
        }
    }

    pub async fn get(&self, name: &str) -> Result<K> {
        decode(self.client.get(&self.r, name).await?)
    }

    pub async fn list(&self, params: &ListParams) -> Result<Vec<K>> {
        let list = self.client.list(&self.r, params).await?;
        list.items.into_iter().map(decode).collect()
    }

    pub async fn create(&self, obj: &K) -> Result<K> {
        decode(
            self.client
                .create(&self.r, encode(obj)?, &WriteParams::default())
                .await?,
        )
    }

    pub async fn replace(&self, obj: &K) -> Result<K> {
        decode(
            self.client
                .update(&self.r, encode(obj)?, None, &WriteParams::default())
                .await?,
        )
    }

    pub async fn replace_status(&self, obj: &K) -> Result<K> {
        decode(
            self.client
                .update(
                    &self.r,
                    encode(obj)?,
                    Some("status"),
                    &WriteParams::default(),
                )
                .await?,
        )
    }

    pub async fn patch(&self, name: &str, patch: &Patch) -> Result<K> {
        decode(
            self.client
                .patch(&self.r, name, patch, None, &WriteParams::default())
                .await?,
        )
    }

    pub async fn delete(&self, name: &str) -> Result<()> {
        self.client
            .delete(&self.r, name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    #[test]
    fn paths() {
        assert_eq!(
            ResourceRef::of::<Pod>(Some("d")).path(Some("p"), Some("status")),
            "/api/v1/namespaces/d/pods/p/status"
        );
        assert_eq!(
            ResourceRef::of::<Deployment>(None).path(None, None),
            "/apis/apps/v1/deployments"
        );
        assert_eq!(
            ResourceRef::of::<Namespace>(None).path(Some("x"), None),
            "/api/v1/namespaces/x"
        );
    }
}

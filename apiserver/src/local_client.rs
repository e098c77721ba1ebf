//! The in-process client: [`k1s_api::client::Client`] over the API server's storage layer
//! ([`Rest`]) without HTTP, for the scheduler, controllers and kubelet inside `k1s server`.
//!
//! It goes through the same code as an HTTP request after decoding (defaulting, validation,
//! admission-like checks, resourceVersion rules, watch semantics), so a component behaves the
//! same whichever client it is given. Watch events arrive over a channel.

use std::sync::Arc;

use futures::StreamExt;
use k1s_api::client::{
    Client, ClientError, DeleteParams, ListParams, ObjectList, Patch, ResourceRef, Result,
    WatchEvent, WatchParams, WatchStream, WriteParams,
};
use k1s_api::selector::{FieldSelector, LabelSelector};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::registry::ResourceType;
use crate::rest::patch::PatchKind;
use crate::rest::{self, DeleteOptions, ListOptions, Rest, WatchRequest, WriteOptions};
use crate::status::ApiError;

/// An in-process client acting as one component (its name is the default field manager).
#[derive(Clone)]
pub struct LocalClient {
    rest: Arc<Rest>,
    manager: String,
    /// Ends this client's watches when the server stops.
    cancel: CancellationToken,
    /// Issues TokenRequests (`serviceaccounts/token`), when the server signs tokens.
    tokens: Option<Arc<crate::auth::serviceaccount::TokenAuthenticator>>,
}

impl LocalClient {
    pub fn new(rest: Arc<Rest>, manager: &str, cancel: CancellationToken) -> Self {
        Self {
            rest,
            manager: manager.to_owned(),
            cancel,
            tokens: None,
        }
    }

    /// Lets this client answer TokenRequests (the in-process kubelet mounts SA tokens).
    pub fn with_tokens(
        mut self,
        tokens: Arc<crate::auth::serviceaccount::TokenAuthenticator>,
    ) -> Self {
        self.tokens = Some(tokens);
        self
    }

    fn resource(&self, r: &ResourceRef) -> Result<Arc<ResourceType>> {
        self.rest
            .registry
            .get(&r.group, &r.version, &r.resource)
            .ok_or_else(|| ClientError {
                code: 404,
                reason: "NotFound".into(),
                message: format!(
                    "the server could not find the requested resource ({})",
                    r.path(None, None)
                ),
            })
    }

    fn write_options(&self, p: &WriteParams) -> WriteOptions {
        WriteOptions {
            dry_run: p.dry_run,
            field_manager: Some(
                p.field_manager
                    .clone()
                    .unwrap_or_else(|| self.manager.clone()),
            ),
            ..Default::default()
        }
    }
}

fn client_error(e: ApiError) -> ClientError {
    ClientError {
        code: e.code,
        reason: e.reason.to_owned(),
        message: e.message,
    }
}

fn selectors(label: Option<&str>, field: Option<&str>) -> Result<(LabelSelector, FieldSelector)> {
    let bad = |e: k1s_api::selector::SelectorError| ClientError {
        code: 400,
        reason: "BadRequest".into(),
        message: e.to_string(),
    };
    Ok((
        LabelSelector::parse(label.unwrap_or("")).map_err(bad)?,
        FieldSelector::parse(field.unwrap_or("")).map_err(bad)?,
    ))
}

fn name_of(obj: &Value) -> Result<String> {
    match rest::meta::name(obj) {
        "" => Err(ClientError {
            code: 400,
            reason: "BadRequest".into(),
            message: "the object has no metadata.name".into(),
        }),
        name => Ok(name.to_owned()),
    }
}

#[async_trait::async_trait]
impl Client for LocalClient {
    async fn get(&self, r: &ResourceRef, name: &str) -> Result<Value> {
        let res = self.resource(r)?;
        self.rest
            .get(&res, r.namespace.as_deref(), name)
            .await
            .map_err(client_error)
    }

    async fn list(&self, r: &ResourceRef, p: &ListParams) -> Result<ObjectList> {
        let res = self.resource(r)?;
        let (label_selector, field_selector) =
            selectors(p.label_selector.as_deref(), p.field_selector.as_deref())?;
        let opts = ListOptions {
            label_selector,
            field_selector,
            limit: p.limit.map_or(0, |l| l as usize),
            continue_token: p.continue_token.clone(),
            resource_version: p.resource_version.clone(),
            resource_version_match: None,
        };
        let page = self
            .rest
            .list(&res, r.namespace.as_deref(), &opts)
            .await
            .map_err(client_error)?;
        Ok(ObjectList {
            items: page.items,
            resource_version: page.resource_version.to_string(),
            continue_token: page.continue_token,
        })
    }

    async fn create(&self, r: &ResourceRef, obj: Value, p: &WriteParams) -> Result<Value> {
        let res = self.resource(r)?;
        self.rest
            .create(&res, r.namespace.as_deref(), obj, &self.write_options(p))
            .await
            .map(|w| w.object)
            .map_err(client_error)
    }

    async fn update(
        &self,
        r: &ResourceRef,
        obj: Value,
        subresource: Option<&str>,
        p: &WriteParams,
    ) -> Result<Value> {
        let res = self.resource(r)?;
        let name = name_of(&obj)?;
        let opts = self.write_options(p);
        let ns = r.namespace.as_deref();
        if subresource == Some("scale") {
            return self
                .rest
                .update_scale(&res, ns, &name, &opts, |_| Ok(obj.clone()))
                .await
                .map_err(client_error);
        }
        self.rest
            .update(&res, ns, &name, obj, subresource, &opts)
            .await
            .map(|w| w.object)
            .map_err(client_error)
    }

    async fn patch(
        &self,
        r: &ResourceRef,
        name: &str,
        patch: &Patch,
        subresource: Option<&str>,
        p: &WriteParams,
    ) -> Result<Value> {
        let res = self.resource(r)?;
        let kind = match patch {
            Patch::Json(_) => PatchKind::Json,
            Patch::Merge(_) => PatchKind::Merge,
            Patch::Strategic(_) => PatchKind::Strategic,
            Patch::Apply { force, .. } => PatchKind::Apply { force: *force },
        };
        let body = serde_json::to_vec(patch.body()).unwrap_or_default();
        self.rest
            .patch(
                &res,
                r.namespace.as_deref(),
                name,
                subresource,
                kind,
                &body,
                &self.write_options(p),
            )
            .await
            .map(|w| w.object)
            .map_err(client_error)
    }

    async fn delete(&self, r: &ResourceRef, name: &str, p: &DeleteParams) -> Result<Value> {
        let res = self.resource(r)?;
        let opts = DeleteOptions {
            grace_period_seconds: p.grace_period_seconds,
            propagation_policy: p.propagation_policy.clone(),
            precondition_uid: p.precondition_uid.clone(),
            precondition_resource_version: p.precondition_resource_version.clone(),
            dry_run: false,
            user: None,
        };
        self.rest
            .delete(&res, r.namespace.as_deref(), name, &opts)
            .await
            .map(|d| d.object)
            .map_err(client_error)
    }

    async fn create_subresource(
        &self,
        r: &ResourceRef,
        name: &str,
        subresource: &str,
        body: Value,
    ) -> Result<Value> {
        let res = self.resource(r)?;
        let ns = r.namespace.as_deref().unwrap_or_default();
        let done = match (res.kind.as_str(), subresource) {
            ("Pod", "binding") => {
                self.rest
                    .bind_pod(
                        &res,
                        ns,
                        name,
                        &body,
                        &self.write_options(&WriteParams::default()),
                    )
                    .await
            }
            ("Pod", "eviction") => self.rest.evict_pod(&res, ns, name, &body).await,
            ("ServiceAccount", "token") => {
                let Some(tokens) = &self.tokens else {
                    return Err(client_error(ApiError::no_route()));
                };
                return tokens
                    .token_request(ns, name, body, None)
                    .await
                    .map_err(client_error);
            }
            _ => Err(ApiError::no_route()),
        };
        done.map_err(client_error)?;
        Ok(serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}))
    }

    async fn watch(&self, r: &ResourceRef, p: &WatchParams) -> Result<WatchStream> {
        let res = self.resource(r)?;
        let (label_selector, field_selector) =
            selectors(p.label_selector.as_deref(), p.field_selector.as_deref())?;
        let req = WatchRequest {
            label_selector,
            field_selector,
            resource_version: p.resource_version.clone(),
            send_initial_events: None,
            allow_bookmarks: p.allow_bookmarks,
            timeout: p
                .timeout_seconds
                .map(|s| std::time::Duration::from_secs(u64::from(s))),
        };
        let rx = self
            .rest
            .watch(res, r.namespace.clone(), req, self.cancel.child_token())
            .map_err(client_error)?;
        let stream =
            futures::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|ev| (ev, rx)) },
            )
            .map(|ev| match ev {
                rest::WatchEvent::Added(o) => Ok(WatchEvent::Added(o)),
                rest::WatchEvent::Modified(o) => Ok(WatchEvent::Modified(o)),
                rest::WatchEvent::Deleted(o) => Ok(WatchEvent::Deleted(o)),
                rest::WatchEvent::Bookmark(rv, _) => Ok(WatchEvent::Bookmark(rv.to_string())),
                rest::WatchEvent::Error(e) => Err(client_error(e)),
            });
        Ok(Box::pin(stream))
    }
}

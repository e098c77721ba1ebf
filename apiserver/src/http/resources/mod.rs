//! The handlers of resource requests. A request's method, name and subresource pick its verb
//! family ([`handle`]); each family is a file: reads (`get`, `list`, `watch`) in `read.rs`,
//! writes (`create`, `update`, `patch`/apply) in `write.rs`, deletes in `delete.rs`, acting
//! subresources (`scale`, `binding`, `eviction`, `token`, reviews) in `subresources.rs`, and
//! what is passed on (`proxy`, `log`, `exec`/`attach`/`portforward`) in `connect.rs`. They share
//! the query and body parsing of `options.rs` and the answers of `encode.rs`, and call
//! [`crate::rest`] for the storage work.

mod connect;
mod delete;
mod encode;
mod options;
mod read;
mod subresources;
mod write;

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, Method, Response, header};

use super::body::Body;
use super::negotiate;
use super::request::{Target, flag};
use crate::registry::ResourceType;
use crate::state::ApiState;
use crate::status::ApiError;
use crate::user::UserInfo;

pub use encode::{encode, partial_metadata};

/// Everything a resource request carries.
pub struct Call<'a> {
    pub method: &'a Method,
    pub target: &'a Target,
    pub query: &'a HashMap<String, String>,
    pub headers: &'a HeaderMap,
    pub body: bytes::Bytes,
    /// Who asks (authorized for the request already).
    pub user: &'a UserInfo,
    /// The query as sent (repeated keys such as exec's `command` kept).
    pub raw_query: Option<&'a str>,
    /// The connection's upgrade, for the streaming subresources.
    pub upgrade: Option<hyper::upgrade::OnUpgrade>,
}

pub(super) fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Serves a request for a resource (or its subresource): picks the verb family's handler.
pub async fn handle(
    state: &ApiState,
    res: Arc<ResourceType>,
    call: Call<'_>,
) -> Result<Response<Body>, ApiError> {
    if connect::is_pod_or_service_proxy(&res, &call) {
        return connect::pod_or_service_proxy(state, &res, &call).await;
    }
    let out = negotiate::output(header_str(call.headers, header::ACCEPT)).ok_or_else(|| {
        ApiError::new(406, "NotAcceptable", "only the following media types are accepted: application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io")
    })?;
    let t = call.target;
    let watch = t.watch_path || flag(call.query, "watch") == Some(true);
    let is_review = res.verbs.contains(&"create") && res.verbs.len() == 1;
    match (call.method, t.name.as_deref(), t.subresource.as_deref()) {
        // Reads.
        (&Method::GET, None, None) if watch => read::watch(state, res, &call, out),
        (&Method::GET, None, None) => read::list(state, &res, &call, out).await,
        (&Method::GET, Some(name), sub @ (None | Some("status") | Some("approval")))
            if sub.is_none_or(|s| s == "status" || res.subresource(s).is_some()) =>
        {
            read::get(state, &res, &call, name, out).await
        }
        // Writes.
        (&Method::POST, None, None) if is_review => subresources::review(state, &res, &call).await,
        (&Method::POST, None, None) => write::create(state, &res, &call, out).await,
        (
            &Method::PUT,
            Some(name),
            sub @ (None | Some("status") | Some("finalize") | Some("approval")),
        ) if sub.is_none_or(|s| res.subresource(s).is_some()) => {
            write::update(state, &res, &call, name, sub, out).await
        }
        (&Method::PATCH, Some(name), sub)
            if sub.is_none_or(|s| {
                matches!(s, "status" | "scale" | "approval") && res.subresource(s).is_some()
            }) =>
        {
            write::patch(state, &res, &call, name, sub, out).await
        }
        // Deletes.
        (&Method::DELETE, None, None) => delete::collection(state, &res, &call).await,
        (&Method::DELETE, Some(name), None) => delete::one(state, &res, &call, name, out).await,
        // Acting subresources.
        (&Method::GET, Some(name), Some("scale")) if res.subresource("scale").is_some() => {
            subresources::get_scale(state, &res, &call, name, out).await
        }
        (&Method::PUT, Some(name), Some("scale")) if res.subresource("scale").is_some() => {
            subresources::update_scale(state, &res, &call, name, out).await
        }
        (&Method::POST, Some(name), Some("token")) if res.kind == "ServiceAccount" => {
            subresources::token(state, &call, name, out).await
        }
        (&Method::POST, Some(name), Some("binding")) if res.kind == "Pod" => {
            subresources::binding(state, &res, &call, name).await
        }
        (&Method::POST, Some(name), Some("eviction")) if res.kind == "Pod" => {
            subresources::eviction(state, &res, &call, name).await
        }
        // Passed on.
        (&Method::GET, Some(name), Some("log")) if res.kind == "Pod" => {
            connect::pod_log(
                &state.rest,
                &res,
                t.namespace.as_deref().unwrap_or(""),
                name,
                call.query,
                call.headers,
                call.upgrade,
            )
            .await
        }
        (&Method::GET | &Method::POST, Some(name), Some(sub))
            if res.kind == "Pod" && k1s_streaming::Kind::from_subresource(sub).is_some() =>
        {
            let kind =
                k1s_streaming::Kind::from_subresource(sub).unwrap_or(k1s_streaming::Kind::Exec);
            connect::stream(state, &res, call, name, kind).await
        }
        (m, Some(name), Some("proxy")) if res.kind == "Node" && res.group.is_empty() => {
            connect::node_proxy(
                &state.rest,
                name,
                m,
                t.proxy_path.as_deref().unwrap_or("/"),
                call.raw_query,
            )
            .await
        }
        (_, _, Some(sub)) if res.subresource(sub).is_none() => Err(ApiError::no_route()),
        (m, _, Some(sub)) => Err(ApiError::new(
            501,
            "NotImplemented",
            format!("{m} of {}/{sub} is not implemented yet", res.plural),
        )),
        (m, _, None) => Err(ApiError::method_not_allowed(m)),
    }
}

//! The Kubernetes REST API over HTTP: paths under `/api` and `/apis`, discovery, content
//! negotiation and the resource handlers. Everything stateful is in [`crate::rest`].

pub mod aggregator;
pub mod body;
pub mod discovery;
pub mod negotiate;
pub mod openapi;
pub mod proxy;
pub mod request;
pub mod resources;
pub mod streaming;
mod table_output;
pub mod upstream;

use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use self::body::Body;
use self::request::ApiPath;
use crate::state::ApiState;
use crate::status::ApiError;
use crate::user::UserInfo;

/// Serves a request under `/api` or `/apis` for `user` (authorized already).
pub async fn serve_api(
    state: &ApiState,
    req: Request<Incoming>,
    user: &UserInfo,
) -> Response<Body> {
    match serve(state, req, user).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn serve(
    state: &ApiState,
    req: Request<Incoming>,
    user: &UserInfo,
) -> Result<Response<Body>, ApiError> {
    let (mut parts, incoming) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let catalog = state.registry.catalog();
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let json_doc =
        |v: serde_json::Value| resources::encode(StatusCode::OK, negotiate::Output::Json, &v, &[]);
    let is_get = parts.method == Method::GET || parts.method == Method::HEAD;
    let parsed = request::parse(&path);
    // The aggregated groups matter to the discovery of `/apis` and to group versions no
    // local resource serves.
    let remote = match &parsed {
        ApiPath::Root { core: false } | ApiPath::Group(_) => {
            aggregator::remote_apiservices(&state.rest).await
        }
        ApiPath::Resource(t) if !t.group.is_empty() && !catalog.serves(&t.group, &t.version) => {
            aggregator::remote_apiservices(&state.rest).await
        }
        _ => Vec::new(),
    };
    match parsed {
        ApiPath::Root { core } if is_get => {
            if let Some(v) = negotiate::aggregated_discovery(accept).filter(|_| remote.is_empty()) {
                let doc = discovery::aggregated(&catalog, core, v);
                let ct = format!(
                    "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
                );
                let mut resp = body::respond(
                    StatusCode::OK,
                    &ct,
                    serde_json::to_vec(&doc).unwrap_or_default(),
                );
                resp.headers_mut()
                    .insert(header::VARY, header::HeaderValue::from_static("Accept"));
                return Ok(resp);
            }
            let host = parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .or(parts.uri.authority().map(|a| a.as_str()))
                .unwrap_or("127.0.0.1:6443")
                .to_owned();
            Ok(json_doc(if core {
                discovery::api_versions(&host)
            } else {
                let mut list = discovery::group_list(&catalog);
                aggregator::add_groups(&mut list, &remote);
                list
            }))
        }
        ApiPath::Group(g) if is_get => discovery::group(&catalog, &g)
            .or_else(|| aggregator::group_document(&g, &remote))
            .map(json_doc)
            .ok_or_else(ApiError::no_route),
        ApiPath::Resource(t) if !t.group.is_empty() && !catalog.serves(&t.group, &t.version) => {
            let Some(apiservice) = remote.iter().find(|a| {
                a["spec"]["group"] == t.group.as_str() && a["spec"]["version"] == t.version.as_str()
            }) else {
                return Err(ApiError::no_route());
            };
            let path_and_query = match parts.uri.query() {
                Some(q) => format!("{path}?{q}"),
                None => path.clone(),
            };
            let body = body::read(incoming).await?;
            aggregator::proxy(
                &state.rest,
                state.pki.as_ref().map(|p| &p.front_proxy),
                apiservice,
                aggregator::Forward {
                    method: &parts.method,
                    path_and_query,
                    headers: &parts.headers,
                    body,
                    user: Some(user),
                },
            )
            .await
        }
        ApiPath::Resource(t) if t.resource.is_empty() => {
            if !is_get {
                return Err(ApiError::method_not_allowed(&parts.method));
            }
            discovery::resource_list(&catalog, &t.group, &t.version)
                .map(json_doc)
                .ok_or_else(ApiError::no_route)
        }
        ApiPath::Resource(t) => {
            let res = catalog
                .get(&t.group, &t.version, &t.resource)
                .cloned()
                .ok_or_else(ApiError::no_route)?;
            // A namespaced resource by name needs its namespace; a cluster one has none.
            if (res.namespaced && t.namespace.is_none() && t.name.is_some())
                || (!res.namespaced && t.namespace.is_some())
            {
                return Err(ApiError::no_route());
            }
            let query = request::query(parts.uri.query());
            let body = body::read(incoming).await?;
            let call = resources::Call {
                method: &parts.method,
                target: &t,
                query: &query,
                headers: &parts.headers,
                body,
                user,
                raw_query: parts.uri.query(),
                upgrade: parts.extensions.remove::<hyper::upgrade::OnUpgrade>(),
            };
            resources::handle(state, res, call).await
        }
        _ if !is_get => Err(ApiError::method_not_allowed(&parts.method)),
        _ => Err(ApiError::no_route()),
    }
}

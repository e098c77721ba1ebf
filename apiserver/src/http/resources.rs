//! The handlers of resource requests: HTTP verbs and query parameters mapped onto
//! [`crate::rest`], and the answers encoded as the client asked.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use k1s_api::selector::{FieldSelector, LabelSelector};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::body::{self, Body};
use super::negotiate::{self, Input, Output};
use super::request::{Target, flag};
use super::table_output;
use crate::registry::ResourceType;
use crate::rest::patch::PatchKind;
use crate::rest::{
    DeleteOptions, FieldValidation, ListOptions, ListPage, Rest, RvMatch, WatchEvent, WatchRequest,
    WriteOptions, Written,
};
use crate::state::ApiState;
use crate::status::ApiError;
use crate::user::UserInfo;

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

fn header(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Serves a request for a resource (or its subresource).
pub async fn handle(
    state: &ApiState,
    res: Arc<ResourceType>,
    call: Call<'_>,
) -> Result<Response<Body>, ApiError> {
    let (rest, metrics, cancel) = (&state.rest, &state.metrics, &state.cancel);
    let t = call.target;
    // Proxied requests carry the client's own media types: no negotiation of ours applies.
    if let (Some(id), Some("proxy"), Some(ns)) = (
        t.name.as_deref(),
        t.subresource.as_deref(),
        t.namespace.as_deref(),
    ) && res.group.is_empty()
        && matches!(res.kind.as_str(), "Pod" | "Service")
    {
        let forward = super::proxy::Forward {
            method: call.method,
            path: t.proxy_path.as_deref().unwrap_or("/"),
            query: call.raw_query,
            headers: call.headers,
            body: call.body.clone(),
        };
        return if res.kind == "Pod" {
            super::proxy::pod(rest, &res, ns, id, forward).await
        } else {
            super::proxy::service(rest, &res, ns, id, forward).await
        };
    }
    let out = negotiate::output(header(call.headers, header::ACCEPT)).ok_or_else(|| {
        ApiError::new(406, "NotAcceptable", "only the following media types are accepted: application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io")
    })?;
    let ns = t.namespace.as_deref();
    let q = call.query;
    let watch = t.watch_path || flag(q, "watch") == Some(true);
    match (call.method, t.name.as_deref(), t.subresource.as_deref()) {
        (&Method::GET, None, None) if watch => {
            let guard = metrics.watcher(&res.group, &res.version, &res.kind);
            watch_response(rest, res, ns, q, out, cancel, guard)
        }
        (&Method::GET, None, None) => {
            let page = rest.list(&res, ns, &list_options(q)?).await?;
            Ok(encode(
                StatusCode::OK,
                out,
                &list_object(&res, page, out, q),
                &[],
            ))
        }
        (&Method::POST, None, None) if res.verbs.contains(&"create") && res.verbs.len() == 1 => {
            // Reviews: stored nowhere, answered at once, and never as a table (upstream's
            // review storages have no table convertor: a request for one alone is a 406).
            let out = negotiate::output_without_table(header(call.headers, header::ACCEPT))
                .ok_or_else(not_acceptable_without_table)?;
            let obj = decode_body(&call)?;
            let answered = crate::authz::reviews::answer(
                &state.authz,
                &state.authn,
                call.user,
                &res.kind,
                ns,
                obj,
            )
            .await?;
            Ok(encode(StatusCode::CREATED, out, &answered, &[]))
        }
        (&Method::POST, Some(name), Some("token")) if res.kind == "ServiceAccount" => {
            let req = decode_body(&call)?;
            let node = call.user.node_name();
            let answered = state
                .tokens
                .token_request(ns.unwrap_or(""), name, req, node)
                .await?;
            Ok(encode(StatusCode::CREATED, out, &answered, &[]))
        }
        (&Method::POST, None, None) => {
            let obj = decode_body(&call)?;
            let w = rest
                .create(&res, ns, obj, &write_options(q, call.headers, call.user)?)
                .await?;
            Ok(written(&res, w, out, q))
        }
        (&Method::DELETE, None, None) => {
            let opts = delete_options(q, &call)?;
            let items = rest
                .delete_collection(&res, ns, &list_options(q)?, &opts)
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
                out,
                &list_object(&res, page, Output::Json, q),
                &[],
            ))
        }
        (&Method::GET, Some(name), sub @ (None | Some("status") | Some("approval")))
            if sub.is_none_or(|s| s == "status" || res.subresource(s).is_some()) =>
        {
            let obj = rest.get(&res, ns, name).await?;
            Ok(encode(StatusCode::OK, out, &single(&res, obj, out, q), &[]))
        }
        (&Method::GET, Some(name), Some("scale")) if res.subresource("scale").is_some() => {
            let obj = rest.get(&res, ns, name).await?;
            Ok(encode(
                StatusCode::OK,
                out,
                &crate::rest::scale_of(&res, &obj),
                &[],
            ))
        }
        (
            &Method::PUT,
            Some(name),
            sub @ (None | Some("status") | Some("finalize") | Some("approval")),
        ) if sub.is_none_or(|s| res.subresource(s).is_some()) => {
            let obj = decode_body(&call)?;
            let w = rest
                .update(
                    &res,
                    ns,
                    name,
                    obj,
                    sub,
                    &write_options(q, call.headers, call.user)?,
                )
                .await?;
            Ok(written(&res, w, out, q))
        }
        (&Method::PUT, Some(name), Some("scale")) if res.subresource("scale").is_some() => {
            let new = decode_body(&call)?;
            let scale = rest
                .update_scale(
                    &res,
                    ns,
                    name,
                    &write_options(q, call.headers, call.user)?,
                    |_| Ok(new.clone()),
                )
                .await?;
            Ok(encode(StatusCode::OK, out, &scale, &[]))
        }
        (&Method::PATCH, Some(name), sub)
            if sub.is_none_or(|s| {
                matches!(s, "status" | "scale" | "approval") && res.subresource(s).is_some()
            }) =>
        {
            let ct = header(call.headers, header::CONTENT_TYPE).unwrap_or("");
            let mut kind = PatchKind::from_content_type(ct).ok_or_else(|| {
                ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"),
                )
            })?;
            if let PatchKind::Apply { force } = &mut kind {
                *force = flag(q, "force") == Some(true);
                if q.get("fieldManager").is_none_or(String::is_empty) {
                    return Err(ApiError::bad_request(
                        "PATCH request is not valid: fieldManager is required for apply requests",
                    ));
                }
            }
            let w = rest
                .patch(
                    &res,
                    ns,
                    name,
                    sub,
                    kind,
                    &call.body,
                    &write_options(q, call.headers, call.user)?,
                )
                .await?;
            Ok(written(&res, w, out, q))
        }
        (&Method::DELETE, Some(name), None) => {
            let opts = delete_options(q, &call)?;
            let d = rest.delete(&res, ns, name, &opts).await?;
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
                    &single(&res, d.object, out, q),
                    &[],
                ))
            }
        }
        (&Method::POST, Some(name), Some("binding")) if res.kind == "Pod" => {
            let binding = decode_body(&call)?;
            rest.bind_pod(
                &res,
                ns.unwrap_or(""),
                name,
                &binding,
                &write_options(q, call.headers, call.user)?,
            )
            .await?;
            Ok(success(StatusCode::CREATED))
        }
        (&Method::POST, Some(name), Some("eviction")) if res.kind == "Pod" => {
            let eviction = decode_body(&call)?;
            rest.evict_pod(&res, ns.unwrap_or(""), name, &eviction)
                .await?;
            Ok(success(StatusCode::CREATED))
        }
        (&Method::GET, Some(name), Some("log")) if res.kind == "Pod" => {
            pod_log(
                rest,
                &res,
                ns.unwrap_or(""),
                name,
                q,
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
            super::streaming::serve(
                state,
                &res,
                ns.unwrap_or(""),
                name,
                kind,
                call.user,
                call.headers,
                call.raw_query,
                call.upgrade,
            )
            .await
        }
        (m, Some(name), Some("proxy")) if res.kind == "Node" && res.group.is_empty() => {
            node_proxy(
                rest,
                name,
                m,
                call.target.proxy_path.as_deref().unwrap_or("/"),
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

/// Upstream's 406 where no table can be printed: the media types its serializers offer.
fn not_acceptable_without_table() -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )
}

/// `GET pods/NAME/log`: the container's log from the kubelet of the pod's node, as text
/// (chunked while following).
async fn pod_log(
    rest: &crate::rest::Rest,
    res: &crate::registry::ResourceType,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Result<Response<Body>, ApiError> {
    use k1s_api::streams::LogOptions;
    let pod = rest.get(res, Some(ns), name).await?;
    let options = LogOptions::from_query(q).map_err(ApiError::bad_request)?;
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let kubelet = rest.node_streams(node).await?;
    let stream = kubelet
        .logs(&pod, &options)
        .await
        .map_err(ApiError::from_kubelet)?;
    let wants_websocket =
        header(headers, header::UPGRADE).is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    if let (true, Some(upgrade)) = (wants_websocket, upgrade) {
        return Ok(k1s_streaming::websocket::logs(stream, headers, upgrade)?);
    }
    use futures::StreamExt;
    let mut resp = Response::new(crate::http::body::streamed(stream.map(bytes::Bytes::from)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    Ok(resp)
}

/// `nodes/NAME/proxy/PATH`: a plain request forwarded to the node's kubelet (the summary
/// API, `/pods`, `/healthz`, `/metrics/resource`, `/containerLogs/...`), its answer passed
/// back as it is.
async fn node_proxy(
    rest: &crate::rest::Rest,
    node: &str,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let kubelet = rest.node_streams(node).await?;
    let answer = kubelet
        .proxy(method.as_str(), path, query)
        .await
        .map_err(ApiError::from_kubelet)?;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    Ok(crate::http::body::respond(
        status,
        &answer.content_type,
        answer.body,
    ))
}

/// A `Status` of success, as upstream answers bindings and evictions.
fn success(code: StatusCode) -> Response<Body> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code.as_u16()});
    encode(code, Output::Json, &status, &[])
}

/// Decodes a request body (JSON, YAML, or protobuf as kubectl 1.32+ sends it): the resource's
/// kind, or another for action subresources (Binding, Eviction).
fn decode_body(call: &Call<'_>) -> Result<Value, ApiError> {
    let input = negotiate::input(header(call.headers, header::CONTENT_TYPE))?;
    match input {
        Input::Protobuf => k1s_apimachinery::protobuf::decode(&call.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as protobuf: {e}"
            ))
        }),
        other => negotiate::decode(other, &call.body),
    }
}

fn parse_selector<T>(
    q: &HashMap<String, String>,
    key: &str,
    parse: impl Fn(&str) -> Result<T, k1s_api::selector::SelectorError>,
) -> Result<Option<T>, ApiError> {
    q.get(key)
        .map(|s| parse(s).map_err(|e| ApiError::bad_request(e.to_string())))
        .transpose()
}

fn list_options(q: &HashMap<String, String>) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        label_selector: parse_selector(q, "labelSelector", LabelSelector::parse)?
            .unwrap_or_default(),
        field_selector: parse_selector(q, "fieldSelector", FieldSelector::parse)?
            .unwrap_or_default(),
        limit: match q.get("limit").map(|l| l.parse::<i64>()) {
            None => 0,
            Some(Ok(n)) => usize::try_from(n.max(0)).unwrap_or(0),
            Some(Err(_)) => return Err(ApiError::bad_request("limit must be an integer")),
        },
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: match q.get("resourceVersionMatch").map(String::as_str) {
            None | Some("") => None,
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        },
    })
}

/// Write options from the query; the field manager defaults to the User-Agent's program
/// name, as upstream's does.
fn write_options(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    user: &UserInfo,
) -> Result<WriteOptions, ApiError> {
    let field_manager = q.get("fieldManager").cloned();
    if field_manager.as_ref().is_some_and(|m| m.len() > 128) {
        return Err(ApiError::invalid(
            "PatchOptions",
            "",
            vec![(
                "fieldManager".into(),
                "Too long: may not be more than 128 bytes".into(),
            )],
        ));
    }
    let from_agent = || {
        header(headers, header::USER_AGENT)
            .and_then(|ua| ua.split('/').next())
            .filter(|p| !p.is_empty())
            .map(|p| p.chars().take(128).collect())
    };
    Ok(WriteOptions {
        dry_run: dry_run(q)?,
        field_validation: FieldValidation::parse(
            q.get("fieldValidation").map_or("", String::as_str),
        )?,
        field_manager: field_manager.or_else(from_agent),
        user: Some(Arc::new(user.clone())),
        ..Default::default()
    })
}

fn dry_run(q: &HashMap<String, String>) -> Result<bool, ApiError> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

/// The options of a DELETE: query parameters, then a body (JSON, YAML or protobuf, as
/// client-go sends its DeleteOptions with its default protobuf content type).
fn delete_options(q: &HashMap<String, String>, call: &Call<'_>) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        grace_period_seconds: q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()),
        propagation_policy: q.get("propagationPolicy").cloned(),
        dry_run: dry_run(q)?,
        user: Some(Arc::new(call.user.clone())),
        ..Default::default()
    };
    if !call.body.is_empty() {
        // A bad body is a 400 that names DeleteOptions; an unsupported media type keeps its 415.
        let v = decode_body(call).map_err(|e| {
            if e.code == 400 {
                ApiError::bad_request(format!(
                    "the DeleteOptions body could not be decoded: {}",
                    e.message
                ))
            } else {
                e
            }
        })?;
        opts.merge_body(&v)?;
    }
    Ok(opts)
}

/// The list object of a page in the requested representation.
fn list_object(
    res: &ResourceType,
    page: ListPage,
    out: Output,
    q: &HashMap<String, String>,
) -> Value {
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        metadata["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        metadata["remainingItemCount"] = json!(r);
    }
    match out {
        Output::Table => table_output::table(res, &page.items, metadata, q, true),
        Output::Metadata => json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": page.items.iter().map(partial_metadata).collect::<Vec<_>>(),
        }),
        Output::Json | Output::Yaml => json!({
            "kind": res.list_kind, "apiVersion": res.api_version(),
            "metadata": metadata, "items": page.items,
        }),
    }
}

/// One object in the requested representation.
fn single(res: &ResourceType, obj: Value, out: Output, q: &HashMap<String, String>) -> Value {
    match out {
        Output::Table => {
            let rv = obj["metadata"]["resourceVersion"].clone();
            table_output::table(
                res,
                std::slice::from_ref(&obj),
                json!({"resourceVersion": rv}),
                q,
                true,
            )
        }
        Output::Metadata => partial_metadata(&obj),
        Output::Json | Output::Yaml => obj,
    }
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

fn written(
    res: &ResourceType,
    w: Written,
    out: Output,
    q: &HashMap<String, String>,
) -> Response<Body> {
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    encode(code, out, &single(res, w.object, out, q), &w.warnings)
}

/// Encodes a value as JSON or YAML with `Warning` headers.
pub fn encode(code: StatusCode, out: Output, value: &Value, warnings: &[String]) -> Response<Body> {
    let (ct, bytes) = match out {
        Output::Yaml => (
            "application/yaml",
            serde_yaml::to_string(value)
                .unwrap_or_default()
                .into_bytes(),
        ),
        _ => (
            "application/json",
            serde_json::to_vec(value).unwrap_or_default(),
        ),
    };
    let mut resp = body::respond(code, ct, bytes);
    for w in warnings {
        let text = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn watch_response(
    rest: &Arc<Rest>,
    res: Arc<ResourceType>,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
    cancel: &CancellationToken,
    guard: crate::metrics::WatcherGuard,
) -> Result<Response<Body>, ApiError> {
    let lo = list_options(q)?;
    let req = WatchRequest {
        label_selector: lo.label_selector,
        field_selector: lo.field_selector,
        resource_version: lo.resource_version,
        send_initial_events: flag(q, "sendInitialEvents"),
        allow_bookmarks: flag(q, "allowWatchBookmarks") == Some(true),
        timeout: q
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs),
    };
    let rx = rest.watch(
        res.clone(),
        ns.map(str::to_owned),
        req,
        cancel.child_token(),
    )?;
    let q = q.clone();
    let mut first = true;
    let stream = tokio_stream_from(rx).map(move |ev| {
        // Counted in apiserver_registered_watchers until the stream is dropped.
        let _counted = &guard;
        // `{"type":T,"object":O}` written directly, without copying O into a wrapper value.
        let mut line = format!("{{\"type\":\"{}\",\"object\":", ev.type_name()).into_bytes();
        let written = match (&ev, out) {
            (
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o),
                Output::Table,
            ) => {
                let rv = o["metadata"]["resourceVersion"].clone();
                let t = table_output::table(
                    &res,
                    std::slice::from_ref(o.as_ref()),
                    json!({"resourceVersion": rv}),
                    &q,
                    first,
                );
                first = false;
                serde_json::to_writer(&mut line, &t)
            }
            (
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o),
                Output::Metadata,
            ) => serde_json::to_writer(&mut line, &partial_metadata(o)),
            (WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o), _) => {
                serde_json::to_writer(&mut line, o.as_ref())
            }
            _ => serde_json::to_writer(&mut line, &ev.object(&res)),
        };
        if written.is_err() {
            tracing::warn!("a watch event could not be encoded");
        }
        line.extend_from_slice(b"}\n");
        bytes::Bytes::from(line)
    });
    let mut resp = Response::new(body::streamed(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// A stream over a channel receiver.
fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

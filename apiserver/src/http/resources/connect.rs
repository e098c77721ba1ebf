//! Requests the API server passes on rather than answers from storage: the `proxy`
//! subresources (pods, services, nodes), a pod's `log`, and the streaming subresources
//! `exec`, `attach` and `portforward`.

use std::collections::HashMap;

use http::{HeaderMap, Method, Response, StatusCode, header};

use super::{Call, header_str};
use crate::http::body::Body;
use crate::registry::ResourceType;
use crate::rest::Rest;
use crate::state::ApiState;
use crate::status::ApiError;

/// Whether the request is `pods/ID/proxy/...` or `services/ID/proxy/...`: forwarded with the
/// client's own media types, so no negotiation of ours applies.
pub(super) fn is_pod_or_service_proxy(res: &ResourceType, call: &Call<'_>) -> bool {
    let t = call.target;
    t.name.is_some()
        && t.namespace.is_some()
        && t.subresource.as_deref() == Some("proxy")
        && res.group.is_empty()
        && matches!(res.kind.as_str(), "Pod" | "Service")
}

/// `pods/[SCHEME:]NAME[:PORT]/proxy/PATH` and the same for services (see
/// [`crate::http::proxy`]).
pub(super) async fn pod_or_service_proxy(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
) -> Result<Response<Body>, ApiError> {
    let t = call.target;
    let (Some(id), Some(ns)) = (t.name.as_deref(), t.namespace.as_deref()) else {
        return Err(ApiError::no_route());
    };
    let forward = crate::http::proxy::Forward {
        method: call.method,
        path: t.proxy_path.as_deref().unwrap_or("/"),
        query: call.raw_query,
        headers: call.headers,
        body: call.body.clone(),
    };
    if res.kind == "Pod" {
        crate::http::proxy::pod(&state.rest, res, ns, id, forward).await
    } else {
        crate::http::proxy::service(&state.rest, res, ns, id, forward).await
    }
}

/// `exec`, `attach` and `portforward` of a pod: the connection upgraded and joined to the
/// kubelet's stream.
pub(super) async fn stream(
    state: &ApiState,
    res: &ResourceType,
    call: Call<'_>,
    name: &str,
    kind: k1s_streaming::Kind,
) -> Result<Response<Body>, ApiError> {
    crate::http::streaming::serve(
        state,
        res,
        call.target.namespace.as_deref().unwrap_or(""),
        name,
        kind,
        call.user,
        call.headers,
        call.raw_query,
        call.upgrade,
    )
    .await
}

/// `GET pods/NAME/log`: the container's log from the kubelet of the pod's node, as text
/// (chunked while following).
pub(super) async fn pod_log(
    rest: &Rest,
    res: &ResourceType,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Result<Response<Body>, ApiError> {
    use k1s_api::streams::LogOptions;
    let pod = rest.get(res, Some(ns), name).await?;
    let options = LogOptions::from_query(q).map_err(|e| ApiError::bad_request(e.to_string()))?;
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
        header_str(headers, header::UPGRADE).is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
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
pub(super) async fn node_proxy(
    rest: &Rest,
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

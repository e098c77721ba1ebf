//! The streaming subresources of pods — `pods/NAME/{exec,attach,portforward}` — on the API
//! server: the pod and the request checked (upstream's errors before any upgrade), validating
//! admission asked with the connect options, then the session of [`k1s_streaming`] against
//! the pod's node.

use http::{HeaderMap, Response};
use hyper::upgrade::OnUpgrade;
use k1s_api::streams::StreamOptions;
use k1s_streaming::{Kind, Request, container_running, query_pairs, query_ports, stream_options};
use serde_json::Value;

use super::body::Body;
use crate::registry::ResourceType;
use crate::state::ApiState;
use crate::status::ApiError;

/// Serves `GET|POST pods/NAME/{exec,attach,portforward}`: the pod checks, then the upgrade.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    state: &ApiState,
    res: &ResourceType,
    ns: &str,
    name: &str,
    kind: Kind,
    user: &crate::user::UserInfo,
    headers: &HeaderMap,
    raw_query: Option<&str>,
    upgrade: Option<OnUpgrade>,
) -> Result<Response<Body>, ApiError> {
    let pairs = query_pairs(raw_query);
    let pod = state.rest.get(res, Some(ns), name).await?;
    let (options, ports) = match kind {
        Kind::Exec | Kind::Attach => (stream_options(kind, &pairs, &pod, name)?, Vec::new()),
        Kind::PortForward => (StreamOptions::default(), query_ports(&pairs)?),
    };
    // Validating admission (webhooks) sees a connect with what the client asked for.
    let subresource = match kind {
        Kind::Exec => "exec",
        Kind::Attach => "attach",
        Kind::PortForward => "portforward",
    };
    let attributes = crate::admission::webhook::Attributes {
        res,
        operation: "CONNECT",
        subresource,
        namespace: ns,
        name,
        user: Some(user),
        dry_run: false,
    };
    let asked = connect_options(kind, &options, &ports);
    state
        .rest
        .admit_other(&attributes, Some(&asked), None)
        .await?;
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    if let Some(c) = &options.container
        && !container_running(&pod, c)
    {
        return Err(ApiError::bad_request(format!(
            "container not found ({c:?})"
        )));
    }
    let kubelet = state.rest.node_streams(node).await?;
    let request = Request {
        kind,
        pod,
        kubelet,
        options,
        ports,
        cancel: state.cancel.child_token(),
    };
    Ok(k1s_streaming::start(request, headers, upgrade)?)
}

/// The `PodExecOptions`, `PodAttachOptions` or `PodPortForwardOptions` a connect asked for.
fn connect_options(kind: Kind, o: &StreamOptions, ports: &[u16]) -> Value {
    let mut v = match kind {
        Kind::Exec => serde_json::json!({"kind": "PodExecOptions", "command": o.command}),
        Kind::Attach => serde_json::json!({"kind": "PodAttachOptions"}),
        Kind::PortForward => {
            return serde_json::json!({"kind": "PodPortForwardOptions", "apiVersion": "v1",
                                      "ports": ports});
        }
    };
    v["apiVersion"] = "v1".into();
    v["stdin"] = o.stdin.into();
    v["stdout"] = o.stdout.into();
    v["stderr"] = o.stderr.into();
    v["tty"] = o.tty.into();
    if let Some(c) = &o.container {
        v["container"] = c.as_str().into();
    }
    v
}

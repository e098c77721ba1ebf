//! A streaming session's set-up: the options of the query (validated as upstream), the
//! protocol the `Upgrade` header asks for, the 101 answer, and the session run on the upgraded
//! connection against a [`NodeStreams`], whose plain byte channels never see a protocol.

use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use k1s_api::streams::{NodeStreams, StreamOptions};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::Refusal;
use crate::body::{self, Body};
use crate::{portforward, remotecommand, spdy, websocket};

/// Writes what `rx` brings to `wr` until either ends, then shuts `wr` down so the far end
/// sees EOF: the client-to-pod half of a forwarded connection, whatever the protocol.
pub(crate) async fn drain_into<B: AsRef<[u8]>>(
    mut rx: mpsc::Receiver<B>,
    mut wr: impl AsyncWrite + Unpin,
) {
    while let Some(b) = rx.recv().await {
        if wr.write_all(b.as_ref()).await.is_err() {
            break;
        }
    }
    let _ = wr.shutdown().await;
}

/// The header carrying SPDY's sub-protocol negotiation (both ways).
pub const STREAM_PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";
/// The SPDY sub-protocol of port-forward.
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// Which streaming subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exec,
    Attach,
    PortForward,
}

impl Kind {
    pub fn from_subresource(sub: &str) -> Option<Self> {
        match sub {
            "exec" => Some(Self::Exec),
            "attach" => Some(Self::Attach),
            "portforward" => Some(Self::PortForward),
            _ => None,
        }
    }
}

/// Everything a session needs once the connection is upgraded.
pub struct Request {
    pub kind: Kind,
    pub pod: Value,
    pub kubelet: Arc<dyn NodeStreams>,
    /// For exec and attach.
    pub options: StreamOptions,
    /// For websocket port-forward: the `ports` of the query.
    pub ports: Vec<u16>,
    pub cancel: CancellationToken,
}

/// Upgrades to the protocol the `Upgrade` header asks for (websocket or SPDY/3.1) and runs
/// `request`'s session on the upgraded connection.
pub fn start(
    request: Request,
    headers: &HeaderMap,
    upgrade: Option<OnUpgrade>,
) -> Result<Response<Body>, Refusal> {
    let upgrade_to = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(upgrade) = upgrade else {
        return Err(upgrade_required());
    };
    if upgrade_to.eq_ignore_ascii_case("websocket") {
        websocket::upgrade(request, headers, upgrade)
    } else if upgrade_to
        .split(',')
        .any(|p| p.trim().eq_ignore_ascii_case("SPDY/3.1"))
    {
        spdy_upgrade(request, headers, upgrade)
    } else {
        Err(upgrade_required())
    }
}

/// Upstream's answer to a streaming request that does not ask for an upgrade.
fn upgrade_required() -> Refusal {
    Refusal::bad_request("Upgrade request required")
}

/// Answers 101 for SPDY/3.1 with the negotiated sub-protocol and starts the session.
fn spdy_upgrade(
    request: Request,
    headers: &HeaderMap,
    upgrade: OnUpgrade,
) -> Result<Response<Body>, Refusal> {
    let offered: Vec<String> = headers
        .get_all(STREAM_PROTOCOL_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let supported: &[&str] = match request.kind {
        Kind::PortForward => &[PORT_FORWARD_PROTOCOL],
        _ => remotecommand::SPDY_PROTOCOLS,
    };
    let chosen = match offered.iter().find(|p| supported.contains(&p.as_str())) {
        Some(p) => Some(p.clone()),
        // A client that offers nothing gets the oldest protocol, as upstream does.
        None if offered.is_empty() => None,
        None => {
            return Err(Refusal::new(
                403,
                "Forbidden",
                format!(
                    "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {supported:?}"
                ),
            ));
        }
    };
    let mut resp = Response::new(body::full(bytes::Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    if let Some(p) = &chosen
        && let Ok(v) = HeaderValue::from_str(p)
    {
        h.insert(STREAM_PROTOCOL_HEADER, v);
    }
    tokio::spawn(async move {
        let io = match upgrade.await {
            Ok(u) => hyper_util::rt::TokioIo::new(u),
            Err(e) => {
                tracing::debug!(error = %e, "spdy upgrade failed");
                return;
            }
        };
        let session = spdy::Session::start(io, request.cancel.clone());
        match request.kind {
            Kind::PortForward => portforward::serve_spdy(session, request).await,
            Kind::Exec | Kind::Attach => {
                let version = chosen.as_deref().unwrap_or(remotecommand::V1);
                remotecommand::serve_spdy(session, request, version).await
            }
        }
    });
    Ok(resp)
}

/// The query's pairs in order, repeated keys kept (`command` repeats).
pub fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    raw.map(|q| {
        form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    })
    .unwrap_or_default()
}

fn flag(pairs: &[(String, String)], key: &str) -> bool {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .is_some_and(|(_, v)| matches!(v.as_str(), "true" | "1" | "True" | "TRUE"))
}

/// `PodExecOptions`/`PodAttachOptions` from the query, validated as upstream does, with the
/// container defaulted when the pod has only one.
pub fn stream_options(
    kind: Kind,
    pairs: &[(String, String)],
    pod: &Value,
    name: &str,
) -> Result<StreamOptions, Refusal> {
    let command: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let options = StreamOptions {
        container: pairs
            .iter()
            .rev()
            .find(|(k, _)| k == "container")
            .map(|(_, v)| v.clone())
            .filter(|c| !c.is_empty()),
        command: if kind == Kind::Exec {
            command
        } else {
            Vec::new()
        },
        stdin: flag(pairs, "stdin"),
        stdout: flag(pairs, "stdout"),
        stderr: flag(pairs, "stderr"),
        tty: flag(pairs, "tty"),
    };
    if kind == Kind::Exec && options.command.is_empty() {
        return Err(Refusal::bad_request(
            "you must specify at least one command for the container",
        ));
    }
    if !options.stdin && !options.stdout && !options.stderr {
        return Err(Refusal::bad_request(
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    let container = resolve_container(pod, name, options.container.as_deref())?;
    Ok(StreamOptions {
        container: Some(container),
        ..options
    })
}

fn container_names(pod: &Value, field: &str) -> Vec<String> {
    pod["spec"][field]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The container a request names, or the pod's only one (upstream's messages otherwise).
fn resolve_container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, Refusal> {
    let containers = container_names(pod, "containers");
    let init = container_names(pod, "initContainers");
    let ephemeral = container_names(pod, "ephemeralContainers");
    match asked {
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => {
            let mut msg = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !init.is_empty() {
                msg.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(Refusal::bad_request(msg))
        }
        Some(c)
            if containers.iter().any(|n| n == c)
                || init.iter().any(|n| n == c)
                || ephemeral.iter().any(|n| n == c) =>
        {
            Ok(c.to_owned())
        }
        Some(c) => Err(Refusal::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
    }
}

/// Whether the pod's status shows `container` running.
pub fn container_running(pod: &Value, container: &str) -> bool {
    [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ]
    .iter()
    .filter_map(|f| pod["status"][*f].as_array())
    .flatten()
    .any(|s| s["name"].as_str() == Some(container) && s["state"]["running"].is_object())
}

/// The `ports` of a port-forward query (repeated or comma-separated).
pub fn query_ports(pairs: &[(String, String)]) -> Result<Vec<u16>, Refusal> {
    let mut ports = Vec::new();
    for (_, v) in pairs.iter().filter(|(k, _)| k == "ports") {
        for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p.parse::<u16>() {
                Ok(n) if n > 0 => ports.push(n),
                _ => {
                    return Err(Refusal::bad_request(format!(
                        "unable to parse {p:?} as a port: port must be > 0 and < 65536"
                    )));
                }
            }
        }
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(q: &str) -> Vec<(String, String)> {
        query_pairs(Some(q))
    }

    fn pod() -> Value {
        json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}})
    }

    #[test]
    fn exec_options_keep_the_command_in_order() {
        let p = json!({"spec": {"containers": [{"name": "only"}]}});
        let o = stream_options(
            Kind::Exec,
            &pairs("command=sh&command=-c&command=echo+%22hi%22&stdout=true&stderr=1&tty=false"),
            &p,
            "p",
        )
        .unwrap();
        assert_eq!(o.command, ["sh", "-c", "echo \"hi\""]);
        assert_eq!(o.container.as_deref(), Some("only"));
        assert!(o.stdout && o.stderr && !o.stdin && !o.tty);
    }

    #[test]
    fn exec_errors_are_upstreams() {
        let e = stream_options(Kind::Exec, &pairs("stdout=true"), &pod(), "p").unwrap_err();
        assert_eq!(
            e.message,
            "you must specify at least one command for the container"
        );
        let e = stream_options(Kind::Exec, &pairs("command=ls"), &pod(), "p").unwrap_err();
        assert_eq!(
            e.message,
            "you must specify at least 1 of stdin, stdout, stderr"
        );
        let e =
            stream_options(Kind::Exec, &pairs("command=ls&stdout=true"), &pod(), "p").unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        let e = stream_options(
            Kind::Attach,
            &pairs("container=zz&stdout=true"),
            &pod(),
            "p",
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container zz is not valid for pod p")
        );
        let o =
            stream_options(Kind::Attach, &pairs("container=b&stdin=true"), &pod(), "p").unwrap();
        assert!(o.command.is_empty());
    }

    #[test]
    fn running_containers_come_from_the_status() {
        let p = json!({"status": {"containerStatuses": [
            {"name": "a", "state": {"running": {"startedAt": "x"}}},
            {"name": "b", "state": {"terminated": {"exitCode": 0}}},
        ]}});
        assert!(container_running(&p, "a"));
        assert!(!container_running(&p, "b"));
        assert!(!container_running(&p, "c"));
    }

    #[test]
    fn ports_parse_repeated_and_comma_separated() {
        assert_eq!(
            query_ports(&pairs("ports=80,8080&ports=9")).unwrap(),
            [80, 8080, 9]
        );
        assert!(query_ports(&pairs("ports=0")).is_err());
        assert!(query_ports(&pairs("ports=x")).is_err());
        assert!(query_ports(&pairs("")).unwrap().is_empty());
    }
}

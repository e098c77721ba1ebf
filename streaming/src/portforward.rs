//! Port-forward over SPDY (`portforward.k8s.io`): for each forwarded connection the client
//! opens an `error` and a `data` stream carrying the same `requestID` and `port` headers;
//! once both are there, the pod's port is dialled through the kubelet and bytes flow until
//! both sides have half-closed. Errors go to the `error` stream as text.

use std::collections::HashMap;

use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::Request;
use super::spdy::{self, Session};

/// Upstream's message for a failed forward.
pub fn error_message(pod: &Value, port: u16, cause: &str) -> String {
    format!(
        "error forwarding port {port} to pod {}, uid {}: {cause}",
        pod["metadata"]["name"].as_str().unwrap_or_default(),
        pod["metadata"]["uid"].as_str().unwrap_or_default(),
    )
}

#[derive(Default)]
struct Pair {
    error: Option<spdy::Stream>,
    data: Option<spdy::Stream>,
}

/// Serves the streams of one port-forward connection until the client hangs up.
pub async fn serve_spdy(mut session: Session, request: Request) {
    let mut pending: HashMap<String, Pair> = HashMap::new();
    loop {
        let s = tokio::select! {
            () = request.cancel.cancelled() => break,
            s = session.accept() => match s { Some(s) => s, None => break },
        };
        // Clients before requestID existed paired streams by port alone.
        let key = s
            .header("requestid")
            .or_else(|| s.header("port"))
            .unwrap_or("")
            .to_owned();
        let pair = pending.entry(key.clone()).or_default();
        let stream_type = s.header("streamtype").map(str::to_owned);
        match stream_type.as_deref() {
            Some("error") => pair.error = Some(s),
            Some("data") => pair.data = Some(s),
            other => {
                tracing::debug!(stream_type = ?other, "port-forward: unexpected stream");
                s.out.reset(spdy::RST_PROTOCOL_ERROR).await;
                continue;
            }
        }
        if pair.error.is_some() && pair.data.is_some() {
            let Some(Pair {
                error: Some(error),
                data: Some(data),
            }) = pending.remove(&key)
            else {
                continue;
            };
            let kubelet = request.kubelet.clone();
            let pod = request.pod.clone();
            let cancel = request.cancel.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = forward(kubelet.as_ref(), &pod, error, data) => {}
                    () = cancel.cancelled() => {}
                }
            });
        }
    }
    request.cancel.cancel();
}

async fn forward(
    kubelet: &dyn k1s_api::streams::NodeStreams,
    pod: &Value,
    error: spdy::Stream,
    data: spdy::Stream,
) {
    let port = match data.header("port").map(|p| p.parse::<u16>()) {
        Some(Ok(p)) if p > 0 => p,
        other => {
            let raw = data.header("port").unwrap_or("").to_owned();
            let msg = match other {
                None => "port header is required".to_owned(),
                _ => format!("unable to parse {raw:?} as a port"),
            };
            error.out.write(msg.as_bytes()).await;
            error.out.close().await;
            data.out.close().await;
            return;
        }
    };
    let conn = match kubelet.port_forward(pod, port).await {
        Ok(c) => c,
        Err(e) => {
            let msg = error_message(pod, port, &e.message);
            error.out.write(msg.as_bytes()).await;
            error.out.close().await;
            data.out.close().await;
            return;
        }
    };
    let (mut rd, wr) = tokio::io::split(conn);
    let spdy::Stream {
        data: inbound, out, ..
    } = data;
    let up = super::drain_into(inbound, wr);
    let down = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if !out.write(&buf[..n]).await {
                        break;
                    }
                }
            }
        }
        out.close().await;
    };
    tokio::join!(up, down);
    error.out.close().await;
}

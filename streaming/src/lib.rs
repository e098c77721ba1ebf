//! The streaming subresources of pods — `exec`, `attach` and `portforward` — as upstream's
//! API server and kubelet speak them to kubectl and the client libraries, shared by the API
//! server (which checks the pod and admission first) and the kubelet's own port (which serves
//! an agent's pods):
//! - [`session`]: the query's options, the protocol the `Upgrade` header asks for, the 101
//!   answer, and the session run on the upgraded connection against
//!   [`k1s_api::streams::NodeStreams`], whose plain byte channels never see a protocol;
//! - [`websocket`]: RFC 6455 with the `*.channel.k8s.io` protocols for exec/attach, the
//!   port-forward channel protocol, and the tunnel of SPDY inside websocket messages that
//!   kubectl 1.30+ uses for port-forward;
//! - [`spdy`]: SPDY/3.1 framing, header compression and sessions;
//! - [`remotecommand`]: exec and attach over SPDY streams, and the final `Status` of a command;
//! - [`portforward`]: port-forward over SPDY streams;
//! - [`body`]: response bodies; [`Refusal`]: a request refused before any upgrade, answered
//!   with a `metav1.Status` as upstream;
//! - [`peer`]: who holds a connection's client certificate (chained to the cluster CA), which
//!   both HTTPS ports authenticate with.
//!
//! It owns no state: a session lives as long as its connection, ended by either side or by
//! the caller's cancellation.

pub mod body;
pub mod peer;
pub mod portforward;
pub mod remotecommand;
pub mod session;
pub mod spdy;
pub mod websocket;

pub(crate) use session::drain_into;
pub use session::{
    Kind, PORT_FORWARD_PROTOCOL, Request, STREAM_PROTOCOL_HEADER, container_running, query_pairs,
    query_ports, start, stream_options,
};

use bytes::Bytes;
use http::{Response, StatusCode, header};

/// A streaming request refused before any upgrade: upstream's code, `StatusReason` and
/// message, answered as a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// A kubelet's refusal or failure as it is passed on (a transport failure, code 0, is
    /// 503).
    pub fn from_kubelet(e: k1s_api::client::ClientError) -> Self {
        let reason = match e.code {
            400 => "BadRequest",
            403 => "Forbidden",
            404 => "NotFound",
            502 => "BadGateway",
            0 | 503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        Self::new(if e.code == 0 { 503 } else { e.code }, reason, e.message)
    }

    /// The `metav1.Status` response kube-apiserver and the kubelet send.
    pub fn into_response(self) -> Response<body::Body> {
        let status = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut resp = Response::new(body::full(Bytes::from(status.to_string())));
        *resp.status_mut() =
            StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_refusal_is_a_status() {
        let resp = Refusal::new(403, "Forbidden", "no").into_response();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "no", "reason": "Forbidden", "code": 403})
        );
        let e = Refusal::from_kubelet(k1s_api::client::ClientError {
            code: 0,
            reason: String::new(),
            message: "refused".into(),
        });
        assert_eq!((e.code, e.reason), (503, "ServiceUnavailable"));
    }
}

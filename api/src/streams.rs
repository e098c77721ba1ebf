//! What the API server asks of a kubelet: the streaming subresources of pods (`log`, `exec`,
//! `attach`, `portforward`) and the plain requests of `nodes/NAME/proxy/PATH` (the summary
//! API, `/pods`, `/healthz`, ...). The kubelet of the server's own node implements it in
//! process; a remote node's kubelet will be reached over HTTPS on its port 10250 (with the
//! agents' join, a later issue).
//!
//! The wire protocols (websocket channels, SPDY) are the API server's business; this trait
//! deals in plain byte channels, so a kubelet never sees them.

use std::pin::Pin;

use futures_core::Stream;
use serde_json::Value;

use crate::client::ClientError;

/// A log request's query that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogOptionsError {
    /// `tailLines`, `sinceSeconds` or `limitBytes` is not an integer.
    #[error("{key}: {value:?} is not an integer")]
    NotAnInteger {
        key: String,
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
}

/// `PodLogOptions`, as the query of `GET .../pods/NAME/log` carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub tail_lines: Option<i64>,
    pub since_seconds: Option<i64>,
    /// RFC 3339.
    pub since_time: Option<String>,
    pub timestamps: bool,
    pub limit_bytes: Option<i64>,
}

impl LogOptions {
    /// The options of a log request's query (`container`, `follow`, `previous`, `tailLines`,
    /// `sinceSeconds`, `sinceTime`, `timestamps`, `limitBytes`); a number that does not parse
    /// is an error with a message for the user.
    pub fn from_query(
        q: &std::collections::HashMap<String, String>,
    ) -> Result<Self, LogOptionsError> {
        let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
        let int = |k: &str| -> Result<Option<i64>, LogOptionsError> {
            q.get(k)
                .map(|v| {
                    v.parse::<i64>()
                        .map_err(|source| LogOptionsError::NotAnInteger {
                            key: k.to_string(),
                            value: v.clone(),
                            source,
                        })
                })
                .transpose()
        };
        Ok(Self {
            container: q.get("container").cloned(),
            follow: flag("follow"),
            previous: flag("previous"),
            tail_lines: int("tailLines")?,
            since_seconds: int("sinceSeconds")?,
            since_time: q.get("sinceTime").cloned(),
            timestamps: flag("timestamps"),
            limit_bytes: int("limitBytes")?,
        })
    }
}

/// Chunks of a log.
pub type ByteStream = Pin<Box<dyn Stream<Item = Vec<u8>> + Send>>;

/// What `exec` and `attach` are asked for (`PodExecOptions` / `PodAttachOptions`). `command`
/// is empty for attach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub container: Option<String>,
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// A terminal size sent on the resize channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct TerminalSize {
    #[serde(rename = "Width")]
    pub width: u16,
    #[serde(rename = "Height")]
    pub height: u16,
}

/// The byte channels of an exec or attach session, seen from the kubelet. A channel is
/// `None` when the client did not ask for that stream. `stdin` closes when the client sends
/// EOF; with `tty`, stderr is merged into stdout and `stderr` is `None`. The kubelet drops
/// `stdout`/`stderr` when the process has ended and its output is drained.
#[derive(Debug, Default)]
pub struct StreamIo {
    pub stdin: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
    pub stdout: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
    pub stderr: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
    pub resize: Option<tokio::sync::mpsc::Receiver<TerminalSize>>,
}

/// A byte stream both ways: one port-forward connection.
pub trait Duplex: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Duplex for T {}

/// The kubelet's answer to a plain HTTP request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

#[async_trait::async_trait]
pub trait NodeStreams: Send + Sync {
    /// The node this kubelet runs.
    fn node_name(&self) -> &str;
    /// The log of a container of `pod` (the Pod object as stored).
    async fn logs(&self, pod: &Value, options: &LogOptions) -> Result<ByteStream, ClientError>;
    /// Runs `options.command` in a running container of `pod` and returns its exit code
    /// (128 + signal when killed by one) once it has ended and its output is drained. An
    /// `Err` means it never ran (no such container, not running, executable not found) and
    /// its message is the user's to read.
    async fn exec(
        &self,
        pod: &Value,
        options: &StreamOptions,
        io: StreamIo,
    ) -> Result<i32, ClientError>;
    /// Attaches to the main process of a running container: its output from now on, and its
    /// stdin when the container has `stdin: true`. Returns when the container ends (with its
    /// exit code) or the client goes away (`Ok(0)`).
    async fn attach(
        &self,
        pod: &Value,
        options: &StreamOptions,
        io: StreamIo,
    ) -> Result<i32, ClientError>;
    /// Opens a TCP connection to `port` on the pod's loopback, inside its network namespace.
    async fn port_forward(&self, pod: &Value, port: u16) -> Result<Box<dyn Duplex>, ClientError>;
    /// A plain request to the kubelet's HTTP API (`path` as the kubelet serves it, e.g.
    /// `/stats/summary`; `query` undecoded), as `nodes/NAME/proxy/PATH` forwards it.
    async fn proxy(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Result<ProxyResponse, ClientError> {
        let _ = (method, query);
        Err(not_served(self.node_name(), path))
    }
}

/// The 503 of a kubelet that does not serve `path`.
pub fn not_served(node: &str, path: &str) -> ClientError {
    ClientError {
        code: 503,
        reason: "ServiceUnavailable".into(),
        message: format!("the kubelet of node {node} does not serve {path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_options_reject_non_integers() {
        let q = std::collections::HashMap::from([
            ("follow".to_string(), "true".to_string()),
            ("tailLines".to_string(), "ten".to_string()),
        ]);
        let e = LogOptions::from_query(&q).unwrap_err();
        let LogOptionsError::NotAnInteger { key, value, .. } = &e;
        assert_eq!((key.as_str(), value.as_str()), ("tailLines", "ten"));
        assert_eq!(e.to_string(), "tailLines: \"ten\" is not an integer");
        let q = std::collections::HashMap::from([("limitBytes".to_string(), "7".to_string())]);
        assert_eq!(LogOptions::from_query(&q).unwrap().limit_bytes, Some(7));
    }
}

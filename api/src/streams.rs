//! What the API server asks of a kubelet for the streaming subresources of pods (`pods/log`
//! today; exec, attach and port-forward next). The kubelet of the server's own node
//! implements it in process; a remote node's kubelet will be reached over HTTPS.

use std::pin::Pin;

use futures_core::Stream;
use serde_json::Value;

use crate::client::ClientError;

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

/// Chunks of a log.
pub type ByteStream = Pin<Box<dyn Stream<Item = Vec<u8>> + Send>>;

#[async_trait::async_trait]
pub trait NodeStreams: Send + Sync {
    /// The node this kubelet runs.
    fn node_name(&self) -> &str;
    /// The log of a container of `pod` (the Pod object as stored).
    async fn logs(&self, pod: &Value, options: &LogOptions) -> Result<ByteStream, ClientError>;
}

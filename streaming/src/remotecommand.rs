//! Exec and attach: the byte channels handed to the kubelet, the final `Status` of a command
//! as the `remotecommand` protocols carry it, and the SPDY flavour of those protocols
//! (one SPDY stream per `streamType`: error, stdin, stdout, stderr, resize).

use std::time::Duration;

use k1s_api::streams::{StreamIo, StreamOptions, TerminalSize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::spdy::{self, Session};
use super::{Kind, Request};

pub const V1: &str = "channel.k8s.io";
pub const V2: &str = "v2.channel.k8s.io";
pub const V3: &str = "v3.channel.k8s.io";
pub const V4: &str = "v4.channel.k8s.io";
pub const V5: &str = "v5.channel.k8s.io";

/// What a SPDY client may negotiate, newest first (v5 exists on websockets only).
pub const SPDY_PROTOCOLS: &[&str] = &[V4, V3, V2, V1];

/// How long the client gets to open the streams it asked for (upstream's default).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a finished session waits for the client to hang up before closing itself.
const LINGER: Duration = Duration::from_secs(10);

/// The protocol's way of reporting the end of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusStyle {
    /// v1–v3: nothing on success, the failure's message as text.
    Text,
    /// v4 and later: a `metav1.Status` as JSON, success included.
    Json,
}

impl StatusStyle {
    pub fn of(protocol: &str) -> Self {
        if protocol.starts_with("v4.") || protocol.starts_with("v5.") {
            Self::Json
        } else {
            Self::Text
        }
    }

    /// The bytes to write on the error channel for `status`; `None` for nothing.
    pub fn encode(self, status: &Value) -> Option<Vec<u8>> {
        match self {
            Self::Json => serde_json::to_vec(status).ok(),
            Self::Text if status["status"] == "Success" => None,
            Self::Text => Some(
                status["message"]
                    .as_str()
                    .unwrap_or("error executing command")
                    .as_bytes()
                    .to_vec(),
            ),
        }
    }
}

/// The server's ends of a session's byte channels.
#[derive(Default)]
pub struct Channels {
    pub stdin: Option<mpsc::Sender<Vec<u8>>>,
    pub stdout: Option<mpsc::Receiver<Vec<u8>>>,
    pub stderr: Option<mpsc::Receiver<Vec<u8>>>,
    pub resize: Option<mpsc::Sender<TerminalSize>>,
}

/// The channels `options` ask for: the server's ends and the kubelet's.
pub fn channels(options: &StreamOptions) -> (Channels, StreamIo) {
    let mut ours = Channels::default();
    let mut io = StreamIo::default();
    if options.stdin {
        let (tx, rx) = mpsc::channel(16);
        ours.stdin = Some(tx);
        io.stdin = Some(rx);
    }
    if options.stdout {
        let (tx, rx) = mpsc::channel(16);
        ours.stdout = Some(rx);
        io.stdout = Some(tx);
    }
    if options.stderr && !options.tty {
        let (tx, rx) = mpsc::channel(16);
        ours.stderr = Some(rx);
        io.stderr = Some(tx);
    }
    if options.tty {
        let (tx, rx) = mpsc::channel(4);
        ours.resize = Some(tx);
        io.resize = Some(rx);
    }
    (ours, io)
}

/// Runs the command (or attaches) through the kubelet: the `Status` to report.
pub async fn run(request: &Request, io: StreamIo) -> Value {
    let result = match request.kind {
        Kind::Exec => {
            request
                .kubelet
                .exec(&request.pod, &request.options, io)
                .await
        }
        _ => request
            .kubelet
            .attach(&request.pod, &request.options, io)
            .await
            .map(|_| 0),
    };
    match result {
        Ok(0) => success(),
        Ok(code) => non_zero_exit(&request.options.command, code),
        Err(e) => {
            let what = if request.kind == Kind::Exec {
                "error executing command in container"
            } else {
                "error attaching to container"
            };
            internal_error(&format!("{what}: {}", e.message))
        }
    }
}

/// `Status` Success, as upstream writes it on the error channel.
pub fn success() -> Value {
    json!({"metadata": {}, "status": "Success"})
}

/// The `Status` of a command that exited non-zero: reason `NonZeroExitCode` with an
/// `ExitCode` cause, from which clients take the exit code.
pub fn non_zero_exit(command: &[String], code: i32) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command [{}], exit code {code}", command.join(" ")),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// `apierrors.NewInternalError` as a `Status`.
pub fn internal_error(message: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("Internal error occurred: {message}"),
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    })
}

/// Decodes the resize messages in `buf` (concatenated JSON objects), keeping an incomplete
/// tail for later.
pub fn take_sizes(buf: &mut Vec<u8>) -> Vec<TerminalSize> {
    let mut sizes = Vec::new();
    let mut it = serde_json::Deserializer::from_slice(buf).into_iter::<TerminalSize>();
    let mut consumed = 0;
    loop {
        match it.next() {
            Some(Ok(s)) => {
                sizes.push(s);
                consumed = it.byte_offset();
            }
            Some(Err(e)) if e.is_eof() => break,
            Some(Err(_)) => {
                // Garbage: drop it all, as a JSON decoder would fail the stream.
                consumed = buf.len();
                break;
            }
            None => {
                consumed = buf.len();
                break;
            }
        }
    }
    buf.drain(..consumed);
    sizes
}

/// Exec or attach over SPDY: waits for the streams the options need, runs the command and
/// reports its end on the error stream.
pub async fn serve_spdy(mut session: Session, request: Request, protocol: &str) {
    let opts = &request.options;
    let style = StatusStyle::of(protocol);
    let resize_wanted = opts.tty && !matches!(protocol, V1 | V2);
    let mut error: Option<spdy::Stream> = None;
    let mut stdin: Option<spdy::Stream> = None;
    let mut stdout: Option<spdy::Stream> = None;
    let mut stderr: Option<spdy::Stream> = None;
    let mut resize: Option<spdy::Stream> = None;
    let complete = |e: &Option<_>, i: &Option<_>, o: &Option<_>, r: &Option<_>, z: &Option<_>| {
        e.is_some()
            && (i.is_some() || !opts.stdin)
            && (o.is_some() || !opts.stdout)
            && (r.is_some() || !opts.stderr || opts.tty)
            && (z.is_some() || !resize_wanted)
    };
    let deadline = tokio::time::sleep(STREAM_CREATION_TIMEOUT);
    tokio::pin!(deadline);
    while !complete(&error, &stdin, &stdout, &stderr, &resize) {
        let s = tokio::select! {
            () = &mut deadline => {
                tracing::debug!("spdy: the client did not open its streams in time");
                if let Some(e) = &error {
                    e.out.write(b"timed out waiting for client to create streams").await;
                    e.out.close().await;
                }
                return;
            }
            () = request.cancel.cancelled() => return,
            s = session.accept() => match s { Some(s) => s, None => return },
        };
        let stream_type = s.header("streamtype").unwrap_or("").to_owned();
        match stream_type.as_str() {
            "error" => error = Some(s),
            "stdin" => stdin = Some(s),
            "stdout" => stdout = Some(s),
            "stderr" => stderr = Some(s),
            "resize" => resize = Some(s),
            other => {
                tracing::debug!(stream_type = other, "spdy: unexpected stream");
                s.out.reset(spdy::RST_PROTOCOL_ERROR).await;
            }
        }
    }
    let Some(error) = error else { return };
    let (ours, io) = channels(opts);
    let Channels {
        stdin: stdin_tx,
        stdout: stdout_rx,
        stderr: stderr_rx,
        resize: resize_tx,
    } = ours;
    // Client → command.
    if let (Some(mut s), Some(tx)) = (stdin, stdin_tx) {
        tokio::spawn(async move {
            while let Some(b) = s.data.recv().await {
                if tx.send(b.to_vec()).await.is_err() {
                    break;
                }
            }
        });
    }
    if let (Some(mut s), Some(tx)) = (resize, resize_tx) {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            while let Some(b) = s.data.recv().await {
                buf.extend_from_slice(&b);
                for size in take_sizes(&mut buf) {
                    if tx.send(size).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
    // Command → client.
    let pump = |rx: Option<mpsc::Receiver<Vec<u8>>>, s: Option<spdy::Stream>| async move {
        if let (Some(mut rx), Some(s)) = (rx, s) {
            while let Some(b) = rx.recv().await {
                if !s.out.write(&b).await {
                    break;
                }
            }
            s.out.close().await;
        }
    };
    let out = pump(stdout_rx, stdout);
    let err = pump(stderr_rx, stderr);
    let cancel = request.cancel.clone();
    let status = tokio::select! {
        (status, (), ()) = async { tokio::join!(run(&request, io), out, err) } => status,
        () = cancel.cancelled() => return,
    };
    if let Some(b) = style.encode(&status) {
        error.out.write(&b).await;
    }
    error.out.close().await;
    // Let the client read everything and hang up; then close the connection ourselves.
    let _ = tokio::time::timeout(LINGER, async {
        while let Some(s) = session.accept().await {
            s.out.reset(spdy::RST_CANCEL).await;
        }
    })
    .await;
    request.cancel.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_carries_the_code_as_a_cause() {
        let s = non_zero_exit(&["sh".into(), "-c".into(), "exit 3".into()], 3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
        assert_eq!(
            StatusStyle::of(V4).encode(&success()).unwrap(),
            br#"{"metadata":{},"status":"Success"}"#
        );
        assert_eq!(StatusStyle::of(V1).encode(&success()), None);
        assert_eq!(
            StatusStyle::of(V3).encode(&internal_error("boom")).unwrap(),
            b"Internal error occurred: boom"
        );
    }

    #[test]
    fn resize_messages_split_anywhere() {
        let mut buf = br#"{"Width":80,"Height":24}{"Width":1"#.to_vec();
        assert_eq!(
            take_sizes(&mut buf),
            [TerminalSize {
                width: 80,
                height: 24
            }]
        );
        buf.extend_from_slice(br#"00,"Height":50}"#);
        assert_eq!(
            take_sizes(&mut buf),
            [TerminalSize {
                width: 100,
                height: 50
            }]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn channels_follow_the_options() {
        let (ours, io) = channels(&StreamOptions {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: true,
            ..Default::default()
        });
        assert!(ours.stdin.is_some() && ours.stdout.is_some() && ours.resize.is_some());
        assert!(
            ours.stderr.is_none() && io.stderr.is_none(),
            "a tty merges stderr"
        );
    }
}

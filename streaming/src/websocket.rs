//! Websocket (RFC 6455, server side, via tungstenite over the hyper upgrade) for the
//! streaming subresources:
//! - exec/attach with the channel protocols `v5.channel.k8s.io`, `v4.channel.k8s.io`,
//!   `v3.`/`v2.channel.k8s.io`, `channel.k8s.io` and the base64 variants: every message is
//!   one channel byte (stdin 0, stdout 1, stderr 2, error 3, resize 4) and its data; v5 adds
//!   `0xff <channel>` to close a channel (stdin);
//! - port-forward with the channel protocols: for the i-th port of `ports`, channel 2i
//!   carries data and 2i+1 errors, each opened by the port number (2 bytes, little endian);
//! - port-forward tunnelled (`SPDY/3.1+portforward.k8s.io`, kubectl 1.30+): the SPDY byte
//!   stream carried in binary messages, served by [`super::portforward`].
//!
//! Output is held back for [`FIRST_OUTPUT_DELAY`] after the 101: client-go registers its
//! channels only after its reader has started, and drops (with "Unknown stream id") any
//! message that arrives before.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use super::body::{self, Body};
use super::remotecommand::{self, Channels, StatusStyle, V1, V2, V3, V4, V5, take_sizes};
use super::{Kind, Request, spdy};
use crate::Refusal;

/// How long output waits after the 101 (see the module doc).
pub const FIRST_OUTPUT_DELAY: Duration = Duration::from_millis(100);

pub const V4_BASE64: &str = "v4.base64.channel.k8s.io";
pub const BASE64: &str = "base64.channel.k8s.io";
/// Port-forward as SPDY inside websocket messages.
pub const TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";
/// The binary port-forward channel protocol.
pub const PORT_FORWARD: &str = "portforward.k8s.io";

const EXEC_PROTOCOLS: &[&str] = &[V5, V4, V4_BASE64, V3, V2, V1, BASE64];
const PORT_FORWARD_PROTOCOLS: &[&str] = &[TUNNEL, PORT_FORWARD, V4, V4_BASE64, V1, BASE64];

/// The channel byte that closes a channel in v5.
const CLOSE_CHANNEL: u8 = 0xff;

type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Answers the websocket handshake (101 with the negotiated protocol) and starts the session.
pub fn upgrade(
    request: Request,
    headers: &HeaderMap,
    upgrade: OnUpgrade,
) -> Result<Response<Body>, Refusal> {
    let (key, offered) = handshake(headers)?;
    let supported = match request.kind {
        Kind::PortForward => PORT_FORWARD_PROTOCOLS,
        _ => EXEC_PROTOCOLS,
    };
    let chosen = match offered.iter().find(|p| supported.contains(p)) {
        Some(p) => Some((*p).to_owned()),
        None if offered.is_empty() => None,
        None => {
            return Err(Refusal::bad_request(format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {supported:?}"
            )));
        }
    };
    let protocol = chosen.clone().unwrap_or_else(|| V1.to_owned());
    if request.kind == Kind::PortForward && protocol != TUNNEL && request.ports.is_empty() {
        return Err(Refusal::bad_request("query parameter \"port\" is required"));
    }
    let resp = switching_protocols(key, chosen.as_deref());
    tokio::spawn(async move {
        let Some(ws) = accept(upgrade).await else {
            return;
        };
        match request.kind {
            Kind::Exec | Kind::Attach => exec(ws, request, &protocol).await,
            Kind::PortForward if protocol == TUNNEL => tunnel(ws, request).await,
            Kind::PortForward => port_forward(ws, request, protocol.contains("base64")).await,
        }
    });
    Ok(resp)
}

/// The websocket on the upgraded connection, once the client has it (`None`: it went away).
async fn accept(upgrade: OnUpgrade) -> Option<Ws> {
    match upgrade.await {
        Ok(u) => Some(WebSocketStream::from_raw_socket(TokioIo::new(u), Role::Server, None).await),
        Err(e) => {
            tracing::debug!(error = %e, "websocket upgrade failed");
            None
        }
    }
}

/// The handshake's key and the sub-protocols the client offers, in its order.
fn handshake(headers: &HeaderMap) -> Result<(&HeaderValue, Vec<&str>), Refusal> {
    let key = headers.get("Sec-WebSocket-Key").ok_or_else(|| {
        Refusal::bad_request("websocket: the Sec-WebSocket-Key header is missing")
    })?;
    let offered = headers
        .get_all("Sec-WebSocket-Protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    Ok((key, offered))
}

/// The 101 answer to a websocket handshake with `key`, naming the `chosen` sub-protocol.
fn switching_protocols(key: &HeaderValue, chosen: Option<&str>) -> Response<Body> {
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut resp = Response::new(body::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("Sec-WebSocket-Accept", v);
    }
    if let Some(p) = chosen
        && let Ok(v) = HeaderValue::from_str(p)
    {
        h.insert("Sec-WebSocket-Protocol", v);
    }
    resp
}

/// The binary log protocol: each message carries log bytes as they are.
pub const LOG_BINARY: &str = "binary.k8s.io";
/// The same, each message base64 text.
pub const LOG_BASE64: &str = "base64.binary.k8s.io";

/// `pods/NAME/log` over a websocket (what upstream serves to a GET that asks to upgrade): the
/// log's bytes in messages (`binary.k8s.io`, the default, or `base64.binary.k8s.io`), then a
/// normal close when the log ends.
pub fn logs(
    stream: k1s_api::streams::ByteStream,
    headers: &HeaderMap,
    upgrade: OnUpgrade,
) -> Result<Response<Body>, Refusal> {
    let (key, offered) = handshake(headers)?;
    let chosen = offered
        .iter()
        .copied()
        .find(|p| *p == LOG_BINARY || *p == LOG_BASE64);
    if chosen.is_none() && !offered.is_empty() {
        return Err(Refusal::bad_request(format!(
            "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {:?}",
            [LOG_BINARY, LOG_BASE64]
        )));
    }
    let base64 = chosen == Some(LOG_BASE64);
    let resp = switching_protocols(key, chosen);
    tokio::spawn(async move {
        let Some(ws) = accept(upgrade).await else {
            return;
        };
        let (sink, mut incoming) = ws.split();
        let (tx, task) = writer(sink);
        let mut stream = stream;
        loop {
            tokio::select! {
                chunk = stream.next() => {
                    let Some(chunk) = chunk else { break };
                    let msg = if base64 {
                        Message::text(base64::engine::general_purpose::STANDARD.encode(&chunk))
                    } else {
                        Message::binary(chunk)
                    };
                    if tx.send(msg).await.is_err() {
                        break;
                    }
                }
                // The client hung up (or closed): stop following the log.
                msg = incoming.next() => match msg {
                    Some(Ok(m)) if !m.is_close() => {}
                    _ => break,
                },
            }
        }
        let _ = tx.send(normal_close()).await;
        drop(tx);
        let _ = task.await;
    });
    Ok(resp)
}

/// A message on `channel` in the binary or base64 framing.
pub fn encode(base64: bool, channel: u8, data: &[u8]) -> Message {
    if base64 {
        let mut s = String::with_capacity(1 + data.len() * 4 / 3 + 4);
        s.push(char::from(b'0' + channel));
        base64::engine::general_purpose::STANDARD.encode_string(data, &mut s);
        Message::text(s)
    } else {
        let mut b = Vec::with_capacity(1 + data.len());
        b.push(channel);
        b.extend_from_slice(data);
        Message::binary(b)
    }
}

/// The channel and data of a message; `None` for control messages and garbage.
pub fn decode(base64: bool, msg: &Message) -> Option<(u8, Vec<u8>)> {
    match msg {
        Message::Binary(b) if !b.is_empty() => Some((b[0], b[1..].to_vec())),
        // The Python client sends binary-protocol data in text messages.
        Message::Text(t) if !base64 && !t.is_empty() => {
            Some((t.as_bytes()[0], t.as_bytes()[1..].to_vec()))
        }
        Message::Text(t) if !t.is_empty() => {
            let s = t.as_str();
            let first = s.as_bytes()[0];
            if !first.is_ascii_digit() {
                return None;
            }
            let ch = first - b'0';
            let data = base64::engine::general_purpose::STANDARD
                .decode(&s[1..])
                .ok()?;
            Some((ch, data))
        }
        _ => None,
    }
}

/// Spawns the task that owns the sending half: messages from the returned queue go out in
/// order, the first one no sooner than [`FIRST_OUTPUT_DELAY`] after now. A `Close` message
/// ends it.
fn writer(
    mut sink: futures::stream::SplitSink<Ws, Message>,
) -> (mpsc::Sender<Message>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Message>(32);
    let first = tokio::time::Instant::now() + FIRST_OUTPUT_DELAY;
    let task = tokio::spawn(async move {
        tokio::time::sleep_until(first).await;
        while let Some(m) = rx.recv().await {
            let close = m.is_close();
            if sink.send(m).await.is_err() || close {
                break;
            }
        }
        let _ = sink.close().await;
    });
    (tx, task)
}

fn normal_close() -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
}

/// Exec or attach over a channel protocol.
async fn exec(ws: Ws, request: Request, protocol: &str) {
    let base64 = protocol.contains("base64");
    let style = StatusStyle::of(protocol);
    let (sink, mut source) = ws.split();
    let (out, writer_task) = writer(sink);
    let (ours, io) = remotecommand::channels(&request.options);
    let Channels {
        stdin,
        stdout,
        stderr,
        resize,
    } = ours;
    // Client → command; ends when the client goes away.
    let reader = async move {
        let mut stdin = stdin;
        let mut sizes = Vec::new();
        while let Some(Ok(msg)) = source.next().await {
            if msg.is_close() {
                break;
            }
            let Some((ch, data)) = decode(base64, &msg) else {
                continue;
            };
            match ch {
                0 => {
                    if let Some(tx) = &stdin
                        && !data.is_empty()
                        && tx.send(data).await.is_err()
                    {
                        stdin = None;
                    }
                }
                4 => {
                    sizes.extend_from_slice(&data);
                    if let Some(tx) = &resize {
                        for s in take_sizes(&mut sizes) {
                            let _ = tx.send(s).await;
                        }
                    }
                }
                CLOSE_CHANNEL if data.first() == Some(&0) => stdin = None,
                _ => {}
            }
        }
    };
    let pump = |rx: Option<mpsc::Receiver<Vec<u8>>>, channel: u8| {
        let out = out.clone();
        async move {
            if let Some(mut rx) = rx {
                while let Some(b) = rx.recv().await {
                    if out.send(encode(base64, channel, &b)).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    let session = async {
        let (status, (), ()) = tokio::join!(
            remotecommand::run(&request, io),
            pump(stdout, 1),
            pump(stderr, 2)
        );
        status
    };
    tokio::pin!(reader);
    let status = tokio::select! {
        status = session => status,
        () = &mut reader => {
            tracing::debug!("websocket: the client went away during exec");
            return;
        }
        () = request.cancel.cancelled() => return,
    };
    if let Some(b) = style.encode(&status) {
        let _ = out.send(encode(base64, 3, &b)).await;
    }
    let _ = out.send(normal_close()).await;
    drop(out);
    let _ = writer_task.await;
    // Read on until the client's close answers ours (or it hangs up).
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
}

/// Port-forward over a channel protocol: one pod connection per port.
async fn port_forward(ws: Ws, request: Request, base64: bool) {
    let (sink, mut source) = ws.split();
    let (out, writer_task) = writer(sink);
    let ports = request.ports.clone();
    let mut to_pod: Vec<Option<mpsc::Sender<Vec<u8>>>> = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, &port) in ports.iter().enumerate() {
        let (data_ch, err_ch) = ((2 * i) as u8, (2 * i + 1) as u8);
        let _ = out.send(encode(base64, data_ch, &port.to_le_bytes())).await;
        let _ = out.send(encode(base64, err_ch, &port.to_le_bytes())).await;
        let (tx, rx) = mpsc::channel::<Vec<u8>>(16);
        to_pod.push(Some(tx));
        let out = out.clone();
        let kubelet = request.kubelet.clone();
        let pod = request.pod.clone();
        tasks.spawn(async move {
            let conn = match kubelet.port_forward(&pod, port).await {
                Ok(c) => c,
                Err(e) => {
                    let msg = super::portforward::error_message(&pod, port, &e.message);
                    let _ = out.send(encode(base64, err_ch, msg.as_bytes())).await;
                    return;
                }
            };
            let (mut rd, wr) = tokio::io::split(conn);
            let up = super::drain_into(rx, wr);
            let down = async {
                let mut buf = vec![0u8; 32 * 1024];
                loop {
                    match rd.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if out.send(encode(base64, data_ch, &buf[..n])).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            };
            // As upstream's kubelet: a port's forward ends when the pod's side does (the
            // channel protocol has no half-close), and the session when every port's has.
            tokio::pin!(up, down);
            tokio::select! {
                () = &mut down => {}
                () = &mut up => down.await,
            }
        });
    }
    let reader = async {
        while let Some(Ok(msg)) = source.next().await {
            if msg.is_close() {
                break;
            }
            let Some((ch, data)) = decode(base64, &msg) else {
                continue;
            };
            let i = usize::from(ch / 2);
            if ch % 2 == 0
                && let Some(slot) = to_pod.get_mut(i)
                && let Some(tx) = slot
                && !data.is_empty()
                && tx.send(data).await.is_err()
            {
                *slot = None;
            }
        }
        // The client is gone: end every pod connection's upload.
        to_pod.clear();
    };
    let all_done = async { while tasks.join_next().await.is_some() {} };
    tokio::select! {
        () = reader => {}
        () = all_done => {
            let _ = out.send(normal_close()).await;
        }
        () = request.cancel.cancelled() => {}
    }
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer_task).await;
}

/// Port-forward as SPDY carried in binary messages.
async fn tunnel(ws: Ws, request: Request) {
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let (mut rd, mut wr) = tokio::io::split(ours);
    let (mut sink, mut source) = ws.split();
    let cancel = request.cancel.clone();
    let inbound = async move {
        while let Some(Ok(msg)) = source.next().await {
            match msg {
                Message::Binary(b) if wr.write_all(&b).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = wr.shutdown().await;
    };
    let outbound = async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sink.send(Message::binary(buf[..n].to_vec())).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sink.send(normal_close()).await;
        let _ = sink.close().await;
    };
    let bridge = tokio::spawn(async move {
        tokio::select! {
            _ = async { tokio::join!(inbound, outbound) } => {}
            () = cancel.cancelled() => {}
        }
    });
    let session = spdy::Session::start(theirs, request.cancel.clone());
    super::portforward::serve_spdy(session, request).await;
    let _ = bridge.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_messages_round_trip_in_both_framings() {
        for b64 in [false, true] {
            let m = encode(b64, 2, b"\x00\xffhello");
            assert_eq!(decode(b64, &m), Some((2, b"\x00\xffhello".to_vec())));
        }
        assert_eq!(encode(true, 1, b"hi"), Message::text("1aGk="));
        assert_eq!(encode(false, 1, b"hi"), Message::binary(b"\x01hi".to_vec()));
        assert_eq!(decode(true, &Message::text("x!!")), None);
        assert_eq!(decode(true, &Message::text("\u{e9}x")), None);
        assert_eq!(decode(false, &Message::binary(Vec::new())), None);
    }
}

//! grpc handlers: one `grpc.health.v1.Health/Check` call over HTTP/2 without TLS (h2c). The
//! two messages are written here with prost derives (field numbers from the protocol); the
//! call is a plain HTTP/2 POST with the 5-byte gRPC message prefix, and `grpc-status` read
//! from the trailers (or the headers of a trailers-only answer).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;

use super::{Outcome, USER_AGENT_VERSION};

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(enumeration = "ServingStatus", tag = "1")]
    pub status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

impl ServingStatus {
    /// The protocol's name, as upstream quotes it.
    pub fn name(self) -> &'static str {
        match self {
            ServingStatus::Unknown => "UNKNOWN",
            ServingStatus::Serving => "SERVING",
            ServingStatus::NotServing => "NOT_SERVING",
            ServingStatus::ServiceUnknown => "SERVICE_UNKNOWN",
        }
    }
}

/// The path of the health check method.
pub const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// A message with the gRPC length prefix (not compressed).
pub fn frame(msg: &impl Message) -> Bytes {
    let body = msg.encode_to_vec();
    let mut b = BytesMut::with_capacity(5 + body.len());
    b.put_u8(0);
    b.put_u32(body.len() as u32);
    b.put_slice(&body);
    b.freeze()
}

/// The first message of a gRPC body.
pub fn unframe<M: Message + Default>(mut b: Bytes) -> Option<M> {
    if b.len() < 5 || b[0] != 0 {
        return None;
    }
    b.advance(1);
    let len = b.get_u32() as usize;
    (b.len() >= len).then(|| M::decode(b.slice(..len)).ok())?
}

/// gRPC status code names, for `rpc error: code = NAME desc = ...`.
fn code_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "Canceled",
        2 => "Unknown",
        3 => "InvalidArgument",
        4 => "DeadlineExceeded",
        5 => "NotFound",
        6 => "AlreadyExists",
        7 => "PermissionDenied",
        8 => "ResourceExhausted",
        9 => "FailedPrecondition",
        10 => "Aborted",
        11 => "OutOfRange",
        12 => "Unimplemented",
        13 => "Internal",
        14 => "Unavailable",
        15 => "DataLoss",
        16 => "Unauthenticated",
        _ => "Unknown",
    }
}

enum CallError {
    Connect(String),
    Rpc(u32, String),
}

async fn call(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
) -> Result<ServingStatus, CallError> {
    // The message only: it goes into the probe's output.
    let tcp = super::tcp::connect(host, port, timeout)
        .await
        .map_err(|e| CallError::Connect(e.to_string()))?;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .map_err(|e| CallError::Connect(e.to_string()))?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let _abort = Abort(task);
    let addr = super::tcp::join_host_port(host, port);
    let req = http::Request::post(format!("http://{addr}{CHECK_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("user-agent", format!("kube-probe/{USER_AGENT_VERSION}"))
        .header("grpc-timeout", format!("{}m", timeout.as_millis()))
        .body(Full::new(frame(&HealthCheckRequest {
            service: service.into(),
        })))
        .map_err(|e| CallError::Rpc(13, e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| CallError::Rpc(14, e.to_string()))?;
    if resp.status() != http::StatusCode::OK {
        return Err(CallError::Rpc(
            2,
            format!(
                "unexpected HTTP status code received from server: {}",
                resp.status().as_u16()
            ),
        ));
    }
    let (parts, body) = resp.into_parts();
    let collected = body
        .collect()
        .await
        .map_err(|e| CallError::Rpc(14, e.to_string()))?;
    let trailers = collected.trailers().cloned();
    let data = collected.to_bytes();
    let status_of = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u32>().ok())
            .map(|c| {
                let msg = h
                    .get("grpc-message")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                (c, msg)
            })
    };
    let (code, msg) = trailers
        .as_ref()
        .and_then(status_of)
        .or_else(|| status_of(&parts.headers))
        .unwrap_or((
            2,
            "server closed the stream without sending trailers".into(),
        ));
    if code != 0 {
        return Err(CallError::Rpc(code, msg));
    }
    let resp: HealthCheckResponse =
        unframe(data).ok_or_else(|| CallError::Rpc(13, "failed to decode the response".into()))?;
    Ok(ServingStatus::try_from(resp.status).unwrap_or(ServingStatus::Unknown))
}

/// Aborts the connection task when the call is done (or abandoned).
struct Abort(tokio::task::JoinHandle<()>);
impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Go's duration formatting for whole seconds and milliseconds (`1s`, `500ms`).
fn go_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// A grpc probe, with upstream's messages.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> Outcome {
    let addr = super::tcp::join_host_port(host, port);
    match tokio::time::timeout(timeout, call(host, port, service, timeout)).await {
        Err(_) => Outcome::failure(format!(
            "timeout: health rpc did not complete within {}",
            go_duration(timeout)
        )),
        Ok(Err(CallError::Connect(e))) => Outcome::failure(format!(
            "timeout: failed to connect service {addr:?} within {}: {e}",
            go_duration(timeout)
        )),
        Ok(Err(CallError::Rpc(12, msg))) => Outcome::failure(format!(
            "this server does not implement the grpc health protocol (grpc.health.v1.Health): {msg}"
        )),
        Ok(Err(CallError::Rpc(4, _))) => Outcome::failure(format!(
            "timeout: health rpc did not complete within {}",
            go_duration(timeout)
        )),
        Ok(Err(CallError::Rpc(code, msg))) => Outcome::failure(format!(
            "error: health rpc probe failed: rpc error: code = {} desc = {msg}",
            code_name(code)
        )),
        Ok(Ok(ServingStatus::Serving)) => Outcome::success("service healthy"),
        Ok(Ok(s)) => Outcome::failure(format!("service unhealthy (responded with {:?})", s.name())),
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use http_body_util::StreamBody;
    use hyper::body::Frame;
    use hyper::service::service_fn;

    use super::*;

    type Body =
        StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

    /// An h2c health server: the status of each service, or `Unimplemented` for service
    /// "none"; records the services asked for.
    async fn server(
        statuses: Vec<(&'static str, ServingStatus)>,
        asked: Arc<Mutex<Vec<String>>>,
    ) -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let statuses = statuses.clone();
                let asked = asked.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let statuses = statuses.clone();
                        let asked = asked.clone();
                        async move {
                            assert_eq!(req.uri().path(), CHECK_PATH);
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let q: HealthCheckRequest = unframe(body).unwrap();
                            asked.lock().unwrap().push(q.service.clone());
                            let mut trailers = http::HeaderMap::new();
                            let mut frames = Vec::new();
                            match statuses.iter().find(|(s, _)| *s == q.service) {
                                Some((_, st)) => {
                                    frames.push(Ok(Frame::data(frame(&HealthCheckResponse {
                                        status: *st as i32,
                                    }))));
                                    trailers.insert("grpc-status", "0".parse().unwrap());
                                }
                                None if q.service == "none" => {
                                    trailers.insert("grpc-status", "12".parse().unwrap());
                                    trailers
                                        .insert("grpc-message", "unknown service".parse().unwrap());
                                }
                                None => {
                                    trailers.insert("grpc-status", "5".parse().unwrap());
                                    trailers
                                        .insert("grpc-message", "unknown service".parse().unwrap());
                                }
                            }
                            frames.push(Ok(Frame::trailers(trailers)));
                            let body: Body = StreamBody::new(futures::stream::iter(frames));
                            Ok::<_, Infallible>(
                                http::Response::builder()
                                    .header("content-type", "application/grpc")
                                    .body(body)
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        port
    }

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn health_check_answers() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let port = server(
            vec![
                ("", ServingStatus::Serving),
                ("db", ServingStatus::NotServing),
            ],
            asked.clone(),
        )
        .await;
        assert_eq!(
            probe("127.0.0.1", port, "", T).await,
            Outcome::success("service healthy")
        );
        assert_eq!(
            probe("127.0.0.1", port, "db", T).await,
            Outcome::failure("service unhealthy (responded with \"NOT_SERVING\")")
        );
        assert_eq!(
            probe("127.0.0.1", port, "none", T).await,
            Outcome::failure(
                "this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service"
            )
        );
        assert_eq!(
            probe("127.0.0.1", port, "other", T).await,
            Outcome::failure(
                "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
            )
        );
        assert_eq!(*asked.lock().unwrap(), vec!["", "db", "none", "other"]);
    }

    #[tokio::test]
    async fn nothing_listening() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let o = probe("127.0.0.1", port, "", T).await;
        assert_eq!(
            o.output,
            format!(
                "timeout: failed to connect service \"127.0.0.1:{port}\" within 5s: dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }

    #[test]
    fn messages_round_trip_with_the_protocol_bytes() {
        // Field 1, length-delimited, "db".
        let f = frame(&HealthCheckRequest {
            service: "db".into(),
        });
        assert_eq!(&f[..], &[0, 0, 0, 0, 4, 0x0a, 2, b'd', b'b']);
        // Field 1, varint, SERVING.
        let r: HealthCheckResponse =
            unframe(Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 1])).unwrap();
        assert_eq!(r.status, ServingStatus::Serving as i32);
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
    }
}

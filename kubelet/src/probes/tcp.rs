//! tcpSocket handlers: success when a TCP connection opens within the timeout.

use std::time::Duration;

use tokio::net::TcpStream;

use super::Outcome;

/// `host:port`, with brackets around an IPv6 address.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A connection that did not open, worded as Go's dialer:
/// `dial tcp ADDR: connect: connection refused`.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("dial tcp {addr}: i/o timeout")]
    Timeout { addr: String },
    #[error("dial tcp {addr}: connect: {}", go_reason(source))]
    Connect {
        addr: String,
        source: std::io::Error,
    },
}

/// How Go words the reason of a failed connect.
fn go_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        std::io::ErrorKind::HostUnreachable => "no route to host".to_string(),
        std::io::ErrorKind::NetworkUnreachable => "network is unreachable".to_string(),
        _ => e.to_string(),
    }
}

/// Opens a connection to `host:port` within `timeout`.
pub async fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, DialError> {
    let addr = join_host_port(host, port);
    match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
        Err(_) => Err(DialError::Timeout { addr }),
        Ok(Err(source)) => Err(DialError::Connect { addr, source }),
        Ok(Ok(s)) => Ok(s),
    }
}

pub async fn probe(host: &str, port: u16, timeout: Duration) -> Outcome {
    match connect(host, port, timeout).await {
        Ok(_) => Outcome::success(""),
        Err(e) => Outcome::failure(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::Verdict;

    #[tokio::test]
    async fn open_and_closed_ports() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let o = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(o.verdict, Verdict::Success);
        drop(l);
        let o = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(
            o,
            Outcome::failure(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
    }
}

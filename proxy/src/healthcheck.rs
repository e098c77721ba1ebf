//! `healthCheckNodePort`: for a `type: LoadBalancer` Service with `externalTrafficPolicy:
//! Local`, an external load balancer asks each node over HTTP whether to send it traffic.
//! As kube-proxy does, the node answers on that port with `200` and the number of the
//! Service's endpoints on this node when it has one, else `503`, and a JSON body
//! `{"service":{"namespace":…,"name":…},"localEndpoints":N,"serviceProxyHealthy":true}`.
//!
//! [`HealthServer`] owns one listener per port, opened and closed as Services come and go
//! ([`HealthServer::update`]); every task it starts is tracked and ends on cancel. The
//! answer is a fixed HTTP/1.1 response with `Connection: close`: a health checker's GET needs
//! no more, and the request is read only up to its end of headers (at most 4 KiB, 5 s).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What one health check port reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub namespace: String,
    pub name: String,
    /// Usable endpoints of the Service on this node.
    pub local_endpoints: usize,
}

impl Entry {
    /// The status code and body of the answer.
    pub fn answer(&self) -> (u16, String) {
        let body = format!(
            "{{\"service\":{{\"namespace\":\"{}\",\"name\":\"{}\"}},\"localEndpoints\":{},\"serviceProxyHealthy\":true}}",
            self.namespace, self.name, self.local_endpoints
        );
        let code = if self.local_endpoints > 0 { 200 } else { 503 };
        (code, body)
    }
}

type State = Arc<Mutex<BTreeMap<u16, Entry>>>;

/// The health check listeners of this node.
pub struct HealthServer {
    bind: IpAddr,
    state: State,
    listeners: Mutex<BTreeMap<u16, CancellationToken>>,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HealthServer {
    /// Listeners on `bind` (`0.0.0.0`: every node address), stopped by `cancel`.
    pub fn new(bind: IpAddr, cancel: CancellationToken) -> Self {
        Self {
            bind,
            state: State::default(),
            listeners: Mutex::default(),
            tasks: TaskTracker::new(),
            cancel,
        }
    }

    /// Serves exactly the ports of `want`: opens new ones, closes gone ones, and updates what
    /// each answers. A port that cannot be opened (in use) is logged and tried again at the
    /// next update.
    pub async fn update(&self, want: BTreeMap<u16, Entry>) {
        let stale: Vec<u16> = lock(&self.listeners)
            .keys()
            .filter(|p| !want.contains_key(p))
            .copied()
            .collect();
        for p in stale {
            if let Some(token) = lock(&self.listeners).remove(&p) {
                token.cancel();
            }
        }
        let new: Vec<u16> = want
            .keys()
            .filter(|p| !lock(&self.listeners).contains_key(p))
            .copied()
            .collect();
        *lock(&self.state) = want;
        for port in new {
            match TcpListener::bind(SocketAddr::new(self.bind, port)).await {
                Ok(listener) => {
                    let token = self.cancel.child_token();
                    lock(&self.listeners).insert(port, token.clone());
                    self.tasks.spawn(serve(
                        listener,
                        port,
                        self.state.clone(),
                        self.tasks.clone(),
                        token,
                    ));
                }
                Err(e) => {
                    tracing::warn!(port, error = %e, "service proxy: cannot open a health check port")
                }
            }
        }
    }

    /// The ports served now.
    pub fn ports(&self) -> Vec<u16> {
        lock(&self.listeners).keys().copied().collect()
    }

    /// Waits for every listener and connection task to end (after cancel).
    pub async fn wait(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

async fn serve(
    listener: TcpListener,
    port: u16,
    state: State,
    tasks: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let conn = tokio::select! {
            () = cancel.cancelled() => return,
            c = listener.accept() => c,
        };
        match conn {
            Ok((stream, _)) => {
                let answer = lock(&state).get(&port).map(Entry::answer);
                tasks.spawn(respond(stream, answer, cancel.clone()));
            }
            Err(e) => {
                tracing::debug!(port, error = %e, "health check accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn respond(mut stream: TcpStream, answer: Option<(u16, String)>, cancel: CancellationToken) {
    let read_head = async {
        let mut buf = Vec::with_capacity(512);
        let mut chunk = [0u8; 512];
        while buf.len() < 4096 && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::select! {
        () = cancel.cancelled() => return,
        _ = tokio::time::timeout(Duration::from_secs(5), read_head) => {}
    }
    let (code, body) = answer.unwrap_or((503, String::new()));
    let reason = if code == 200 {
        "OK"
    } else {
        "Service Unavailable"
    };
    let response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[tokio::test]
    async fn answers_with_the_local_endpoint_count_and_follows_updates() {
        let cancel = CancellationToken::new();
        let h = HealthServer::new("127.0.0.1".parse().unwrap(), cancel.clone());
        let port = free_port();
        let entry = |n| Entry {
            namespace: "ns".into(),
            name: "lb".into(),
            local_endpoints: n,
        };
        h.update([(port, entry(2))].into()).await;
        let out = get(port).await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.ends_with(r#"{"service":{"namespace":"ns","name":"lb"},"localEndpoints":2,"serviceProxyHealthy":true}"#),
            "{out}"
        );
        h.update([(port, entry(0))].into()).await;
        assert!(
            get(port)
                .await
                .starts_with("HTTP/1.1 503 Service Unavailable")
        );
        // Gone: the port is closed.
        h.update(BTreeMap::new()).await;
        assert!(h.ports().is_empty());
        let mut closed = false;
        for _ in 0..50 {
            if TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                closed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(closed);
        cancel.cancel();
        h.wait().await;
    }
}

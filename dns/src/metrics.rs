//! The DNS server's counters, in Prometheus text format on the metrics port (`/metrics`,
//! 9153 as CoreDNS), with `/health` answering 200 while the server runs.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::transport::Proto;

#[derive(Debug, Default)]
pub struct Metrics {
    udp: AtomicU64,
    tcp: AtomicU64,
    noerror: AtomicU64,
    nxdomain: AtomicU64,
    servfail: AtomicU64,
    other: AtomicU64,
    truncated: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    forward_failures: AtomicU64,
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Gauges read at scrape time.
pub struct Gauges {
    pub services: usize,
    pub endpoints: usize,
    pub cache_entries: usize,
}

impl Metrics {
    pub fn request(&self, proto: Proto) {
        inc(match proto {
            Proto::Udp => &self.udp,
            Proto::Tcp => &self.tcp,
        });
    }

    pub fn response(&self, rcode: ResponseCode) {
        inc(match rcode {
            ResponseCode::NoError => &self.noerror,
            ResponseCode::NXDomain => &self.nxdomain,
            ResponseCode::ServFail => &self.servfail,
            _ => &self.other,
        });
    }

    pub fn truncated(&self) {
        inc(&self.truncated);
    }

    pub fn cache(&self, hit: bool) {
        inc(if hit {
            &self.cache_hits
        } else {
            &self.cache_misses
        });
    }

    pub fn forward_failed(&self) {
        inc(&self.forward_failures);
    }

    /// Requests answered so far (all transports).
    pub fn requests(&self) -> u64 {
        self.udp.load(Ordering::Relaxed) + self.tcp.load(Ordering::Relaxed)
    }

    /// The text exposition.
    pub fn encode(&self, g: &Gauges) -> String {
        let v = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# HELP k1s_dns_requests_total DNS requests received.\n# TYPE k1s_dns_requests_total counter\n\
             k1s_dns_requests_total{{proto=\"udp\"}} {}\nk1s_dns_requests_total{{proto=\"tcp\"}} {}",
            v(&self.udp),
            v(&self.tcp)
        );
        let _ = writeln!(
            s,
            "# HELP k1s_dns_responses_total DNS responses by response code.\n# TYPE k1s_dns_responses_total counter"
        );
        for (code, c) in [
            ("NOERROR", &self.noerror),
            ("NXDOMAIN", &self.nxdomain),
            ("SERVFAIL", &self.servfail),
            ("other", &self.other),
        ] {
            let _ = writeln!(s, "k1s_dns_responses_total{{rcode=\"{code}\"}} {}", v(c));
        }
        for (name, help, c) in [
            (
                "k1s_dns_truncated_total",
                "UDP responses sent truncated.",
                &self.truncated,
            ),
            (
                "k1s_dns_cache_hits_total",
                "Forwarded names answered from the cache.",
                &self.cache_hits,
            ),
            (
                "k1s_dns_cache_misses_total",
                "Forwarded names asked of an upstream.",
                &self.cache_misses,
            ),
            (
                "k1s_dns_forward_failures_total",
                "Forwarded names no upstream answered.",
                &self.forward_failures,
            ),
        ] {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v(c)
            );
        }
        for (name, help, n) in [
            ("k1s_dns_services", "Services known.", g.services),
            (
                "k1s_dns_endpoints",
                "Endpoint addresses known.",
                g.endpoints,
            ),
            (
                "k1s_dns_cache_entries",
                "Forwarded answers cached.",
                g.cache_entries,
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {n}");
        }
        s
    }
}

/// Serves `GET /metrics` (from `scrape`) and `GET /health` on `addr` until `cancel`.
pub async fn serve(
    listener: TcpListener,
    scrape: Arc<dyn Fn() -> String + Send + Sync>,
    tasks: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let mut stream = tokio::select! {
            () = cancel.cancelled() => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let scrape = scrape.clone();
        tasks.spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let read = async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            };
            if !matches!(tokio::time::timeout(Duration::from_secs(5), read).await, Ok(true)) {
                return;
            }
            let line = String::from_utf8_lossy(&head);
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let (code, body) = match path {
                "/metrics" => ("200 OK", scrape()),
                "/health" => ("200 OK", "OK".to_string()),
                _ => ("404 Not Found", "not found\n".to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {code}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes()).await;
        });
    }
}

/// Binds the metrics port (with `IP_FREEBIND`, like the DNS ports).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::transport::bind_tcp(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_and_serves() {
        let m = Arc::new(Metrics::default());
        m.request(Proto::Udp);
        m.response(ResponseCode::NXDomain);
        m.cache(true);
        let g = Gauges {
            services: 3,
            endpoints: 4,
            cache_entries: 1,
        };
        let text = m.encode(&g);
        assert!(
            text.contains("k1s_dns_requests_total{proto=\"udp\"} 1"),
            "{text}"
        );
        assert!(text.contains("k1s_dns_responses_total{rcode=\"NXDOMAIN\"} 1"));
        assert!(text.contains("k1s_dns_services 3"));
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let (tasks, cancel) = (TaskTracker::new(), CancellationToken::new());
        let mm = m.clone();
        tasks.spawn(serve(
            l,
            Arc::new(move || {
                mm.encode(&Gauges {
                    services: 3,
                    endpoints: 0,
                    cache_entries: 0,
                })
            }),
            tasks.clone(),
            cancel.clone(),
        ));
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.contains("k1s_dns_services 3"));
        cancel.cancel();
        tasks.close();
        tasks.wait().await;
    }
}

//! Stale UDP connection-tracking entries. UDP has no connection to close: after an endpoint
//! goes away, a client that keeps sending from the same port (a DNS resolver) keeps hitting
//! the conntrack entry that DNATs to the dead endpoint until the entry times out. Like
//! kube-proxy, the proxy deletes those entries when it removes an endpoint, and the entries
//! of a Service that had no endpoints (and so cached the rejection) when it gets one.
//!
//! [`ConntrackCommand`] runs the `conntrack` program (Debian's `conntrack` package);
//! [`FakeConntrack`] records what was asked, for tests.

use std::net::Ipv4Addr;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::process::Command;

/// One deletion of entries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flush {
    /// UDP entries to `vip` (a ClusterIP or external address) DNATed to `endpoint`.
    Nat { vip: Ipv4Addr, endpoint: Ipv4Addr },
    /// UDP entries to a NodePort DNATed to `endpoint`.
    NodePortNat { node_port: u16, endpoint: Ipv4Addr },
    /// Every UDP entry to `vip` (it had no endpoints; replies were rejections).
    Address { vip: Ipv4Addr },
}

impl Flush {
    fn args(&self) -> Vec<String> {
        let mut a = vec!["-D".to_string(), "-p".into(), "udp".into()];
        match self {
            Flush::Nat { vip, endpoint } => a.extend([
                "--orig-dst".into(),
                vip.to_string(),
                "--dst-nat".into(),
                endpoint.to_string(),
            ]),
            Flush::NodePortNat {
                node_port,
                endpoint,
            } => a.extend([
                "--orig-port-dst".into(),
                node_port.to_string(),
                "--dst-nat".into(),
                endpoint.to_string(),
            ]),
            Flush::Address { vip } => a.extend(["--orig-dst".into(), vip.to_string()]),
        }
        a
    }
}

/// Deletes conntrack entries.
#[async_trait::async_trait]
pub trait Conntrack: Send + Sync {
    async fn flush(&self, what: &Flush);
}

/// The `conntrack` program. A missing program is reported once, as a warning: UDP Services
/// then recover only when the kernel's entries time out.
#[derive(Debug, Default)]
pub struct ConntrackCommand {
    warned: AtomicBool,
}

#[async_trait::async_trait]
impl Conntrack for ConntrackCommand {
    async fn flush(&self, what: &Flush) {
        let out = Command::new("conntrack")
            .args(what.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await;
        match out {
            // Exit 1 with "0 flow entries have been deleted" is not an error.
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the conntrack program is not installed (apt-get install conntrack): stale UDP flows to removed endpoints are kept until they time out"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, ?what, "conntrack failed"),
        }
    }
}

/// Records deletions.
#[derive(Debug, Default)]
pub struct FakeConntrack {
    pub flushed: Mutex<Vec<Flush>>,
}

#[async_trait::async_trait]
impl Conntrack for FakeConntrack {
    async fn flush(&self, what: &Flush) {
        self.flushed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(what.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_as_conntrack_reads_them() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            Flush::Nat {
                vip: ip("10.43.0.10"),
                endpoint: ip("10.42.0.5")
            }
            .args()
            .join(" "),
            "-D -p udp --orig-dst 10.43.0.10 --dst-nat 10.42.0.5"
        );
        assert_eq!(
            Flush::NodePortNat {
                node_port: 30053,
                endpoint: ip("10.42.0.5")
            }
            .args()
            .join(" "),
            "-D -p udp --orig-port-dst 30053 --dst-nat 10.42.0.5"
        );
        assert_eq!(
            Flush::Address {
                vip: ip("10.43.0.10")
            }
            .args()
            .join(" "),
            "-D -p udp --orig-dst 10.43.0.10"
        );
    }
}

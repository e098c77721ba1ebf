//! Failover between API servers for one [`crate::http_client::HttpClient`]: the addresses a
//! client may dial besides its configured URL, and the order it tries them in.
//!
//! An agent joins with one `--server` URL, but with several servers on one datastore every
//! server is the same cluster (one CA, one identity) and the `default/kubernetes` endpoints
//! list them all. The agent puts those addresses here ([`ServerPool::set`]); the client's
//! connector then dials, for each new connection, the server that last answered first, the
//! rest after, and servers that failed lately last — the client-side load balancer of k3s's
//! agents, inside the connector instead of a local TCP proxy. Requests and watches in flight
//! on a server that dies fail as any transport error does; their retries open a connection
//! here and reach a live server.
//!
//! TLS: the configured URL is verified against its own host name, as without a pool; a
//! learned address is verified against [`LEARNED_SERVER_NAME`], a name every k1s serving
//! certificate carries. The pool is policy only (which address, in which order): the dialing
//! stays in the connector.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The name learned servers' certificates are checked against (in every k1s serving
/// certificate, as in every kube-apiserver's).
pub const LEARNED_SERVER_NAME: &str = "kubernetes.default.svc";

/// A server that failed within this long is tried after the others.
const FAILED_RECENTLY: Duration = Duration::from_secs(30);

/// One address a connection may be dialed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// The host and port of the client's URL.
    Configured,
    /// An address learned from the cluster.
    Learned(SocketAddr),
}

#[derive(Default)]
struct State {
    learned: Vec<SocketAddr>,
    /// The target of the last connection that succeeded.
    preferred: Option<Target>,
    failed: HashMap<Target, Instant>,
}

/// The servers a client may reach, shared by every client of one process (clone the `Arc`).
#[derive(Default)]
pub struct ServerPool {
    state: Mutex<State>,
}

impl std::fmt::Debug for ServerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerPool")
            .field("learned", &self.learned())
            .finish_non_exhaustive()
    }
}

impl ServerPool {
    /// A pool with no learned server yet (the configured URL only).
    pub fn new(learned: Vec<SocketAddr>) -> Self {
        let pool = Self::default();
        pool.set(learned);
        pool
    }

    /// Replaces the learned servers (duplicates dropped, order kept). An empty list is
    /// ignored: a server list read while the cluster briefly lists no server must not leave
    /// the client with fewer choices than before. Returns whether the list changed.
    pub fn set(&self, learned: Vec<SocketAddr>) -> bool {
        if learned.is_empty() {
            return false;
        }
        let mut unique = Vec::with_capacity(learned.len());
        for a in learned {
            if !unique.contains(&a) {
                unique.push(a);
            }
        }
        let mut s = self.lock();
        if s.learned == unique {
            return false;
        }
        if let Some(Target::Learned(p)) = s.preferred
            && !unique.contains(&p)
        {
            s.preferred = None;
        }
        s.learned = unique;
        true
    }

    /// The learned servers.
    pub fn learned(&self) -> Vec<SocketAddr> {
        self.lock().learned.clone()
    }

    /// The order to dial in: the server that answered last, then the configured URL, then the
    /// learned servers; those that failed in the last 30 s after all others (oldest failure
    /// first). `configured` is the URL's address when it is an IP literal, so that a learned
    /// copy of it is not dialed twice.
    pub fn order(&self, configured: Option<SocketAddr>) -> Vec<Target> {
        let now = Instant::now();
        let mut s = self.lock();
        s.failed
            .retain(|_, at| now.duration_since(*at) < FAILED_RECENTLY);
        let mut all = Vec::with_capacity(s.learned.len() + 2);
        if let Some(p) = &s.preferred {
            all.push(p.clone());
        }
        for t in std::iter::once(Target::Configured).chain(
            s.learned
                .iter()
                .filter(|a| Some(**a) != configured)
                .map(|a| Target::Learned(*a)),
        ) {
            if !all.contains(&t) {
                all.push(t);
            }
        }
        let (mut ok, mut failed): (Vec<Target>, Vec<Target>) =
            all.into_iter().partition(|t| !s.failed.contains_key(t));
        failed.sort_by_key(|t| s.failed[t]);
        ok.append(&mut failed);
        ok
    }

    /// A connection to `target` was made: dial it first from now on.
    pub fn connected(&self, target: &Target) {
        let mut s = self.lock();
        s.failed.remove(target);
        s.preferred = Some(target.clone());
    }

    /// Dialing `target` failed.
    pub fn failed(&self, target: &Target) {
        let mut s = self.lock();
        s.failed.insert(target.clone(), Instant::now());
        if s.preferred.as_ref() == Some(target) {
            s.preferred = None;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent across a panic in a holder (each method writes whole
        // fields), so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn configured_first_then_learned_without_duplicates() {
        let pool = ServerPool::new(vec![a("10.0.0.1:6443"), a("10.0.0.2:6443")]);
        assert_eq!(
            pool.order(Some(a("10.0.0.1:6443"))),
            vec![Target::Configured, Target::Learned(a("10.0.0.2:6443"))]
        );
        assert_eq!(
            pool.order(None),
            vec![
                Target::Configured,
                Target::Learned(a("10.0.0.1:6443")),
                Target::Learned(a("10.0.0.2:6443"))
            ]
        );
    }

    #[test]
    fn the_last_server_that_answered_comes_first_and_failed_ones_last() {
        let pool = ServerPool::new(vec![a("10.0.0.1:6443"), a("10.0.0.2:6443")]);
        let two = Target::Learned(a("10.0.0.2:6443"));
        pool.failed(&Target::Configured);
        assert_eq!(
            pool.order(Some(a("10.0.0.1:6443"))),
            vec![two.clone(), Target::Configured]
        );
        pool.connected(&two);
        assert_eq!(pool.order(None)[0], two);
        // The preferred server fails: it is not preferred any more, and goes last.
        pool.failed(&two);
        let order = pool.order(None);
        assert_eq!(order[0], Target::Learned(a("10.0.0.1:6443")));
        assert_eq!(order.len(), 3);
        assert_eq!(
            order[1],
            Target::Configured,
            "failed earlier, so tried before two"
        );
        assert_eq!(order[2], two);
    }

    #[test]
    fn an_empty_list_keeps_what_was_learned() {
        let pool = ServerPool::new(vec![a("10.0.0.1:6443")]);
        assert!(!pool.set(vec![]));
        assert!(!pool.set(vec![a("10.0.0.1:6443"), a("10.0.0.1:6443")]));
        assert_eq!(pool.learned(), vec![a("10.0.0.1:6443")]);
        assert!(pool.set(vec![a("10.0.0.3:6443")]));
        assert_eq!(
            pool.order(None),
            vec![Target::Configured, Target::Learned(a("10.0.0.3:6443"))]
        );
    }
}

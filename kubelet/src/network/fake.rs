//! [`FakePodNetwork`]: the pod network for pod-worker tests. In-memory IPAM, no netlink, no
//! namespaces; it records which pods are set up and can be told to fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::ipam::{Ipam, Ipv4Cidr};
use super::{NetworkError, PodAddress, PodNetwork};

/// An in-memory [`PodNetwork`]; see the module docs.
#[derive(Debug)]
pub struct FakePodNetwork {
    ipam: Ipam,
    /// Pods set up and not torn down, with the namespace they were given.
    active: Mutex<BTreeMap<String, PathBuf>>,
    fail_setup: AtomicBool,
    inits: AtomicUsize,
    teardowns: AtomicUsize,
}

impl Default for FakePodNetwork {
    fn default() -> Self {
        Self::new()
    }
}

impl FakePodNetwork {
    /// Addresses from 10.42.0.0/24.
    pub fn new() -> Self {
        // A constant, valid CIDR.
        let cidr = Ipv4Cidr::new(std::net::Ipv4Addr::new(10, 42, 0, 0), 24)
            .unwrap_or_else(|_| unreachable!("10.42.0.0/24 is a valid pod CIDR"));
        Self::with_cidr(cidr)
    }

    /// Addresses from `cidr`.
    pub fn with_cidr(cidr: Ipv4Cidr) -> Self {
        FakePodNetwork {
            ipam: Ipam::in_memory(cidr),
            active: Mutex::new(BTreeMap::new()),
            fail_setup: AtomicBool::new(false),
            inits: AtomicUsize::new(0),
            teardowns: AtomicUsize::new(0),
        }
    }

    /// Makes every following `setup` fail (until called with `false`).
    pub fn fail_setup(&self, fail: bool) {
        self.fail_setup.store(fail, Ordering::SeqCst);
    }

    /// Whether `pod_uid` is set up (and not torn down).
    pub fn is_set_up(&self, pod_uid: &str) -> bool {
        self.lock().contains_key(pod_uid)
    }

    /// The namespace `pod_uid` was set up with.
    pub fn netns_of(&self, pod_uid: &str) -> Option<PathBuf> {
        self.lock().get(pod_uid).cloned()
    }

    /// The UIDs of the pods set up.
    pub fn active(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// How often `init` was called.
    pub fn init_calls(&self) -> usize {
        self.inits.load(Ordering::SeqCst)
    }

    /// How often `teardown` was called.
    pub fn teardown_calls(&self) -> usize {
        self.teardowns.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, PathBuf>> {
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait::async_trait]
impl PodNetwork for FakePodNetwork {
    async fn init(&self) -> Result<(), NetworkError> {
        self.inits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn setup(&self, pod_uid: &str, netns: &Path) -> Result<PodAddress, NetworkError> {
        if self.fail_setup.load(Ordering::SeqCst) {
            return Err(NetworkError::Netlink(format!(
                "fake: setup of {pod_uid} told to fail"
            )));
        }
        let address = self.ipam.allocate(pod_uid)?;
        self.lock().insert(pod_uid.to_string(), netns.to_path_buf());
        Ok(address)
    }

    async fn teardown(&self, pod_uid: &str, _netns: Option<&Path>) -> Result<(), NetworkError> {
        self.teardowns.fetch_add(1, Ordering::SeqCst);
        self.lock().remove(pod_uid);
        self.ipam.release(pod_uid)?;
        Ok(())
    }

    fn address(&self, pod_uid: &str) -> Option<PodAddress> {
        self.ipam.get(pod_uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fake_allocates_and_releases() {
        let net = FakePodNetwork::new();
        net.init().await.unwrap();
        let a = net.setup("a", Path::new("/run/k1s/netns/a")).await.unwrap();
        assert_eq!(a.ip.to_string(), "10.42.0.2");
        assert_eq!(a.gateway.to_string(), "10.42.0.1");
        assert_eq!(a.prefix_len, 24);
        assert_eq!(net.setup("a", Path::new("/x")).await.unwrap(), a);
        assert!(net.is_set_up("a"));
        assert_eq!(net.address("a"), Some(a));
        let b = net.setup("b", Path::new("/run/k1s/netns/b")).await.unwrap();
        assert_eq!(b.ip.to_string(), "10.42.0.3");
        net.teardown("a", None).await.unwrap();
        net.teardown("a", None).await.unwrap();
        assert!(!net.is_set_up("a"));
        assert_eq!(net.address("a"), None);
        assert_eq!(net.active(), vec!["b".to_string()]);
        net.fail_setup(true);
        assert!(net.setup("c", Path::new("/c")).await.is_err());
        assert_eq!(net.address("c"), None);
        assert_eq!((net.init_calls(), net.teardown_calls()), (1, 2));
    }
}

//! The kernel settings the proxy's data path needs, set at start (each is a sysctl that
//! kube-proxy sets too), and what is reported when the host cannot provide them.
//!
//! - `net.ipv4.ip_forward = 1`: DNATed traffic to pods is forwarded.
//! - `net.bridge.bridge-nf-call-iptables = 1`: replies between two pods on one bridge (a pod
//!   that reached another through a ClusterIP) pass netfilter, so conntrack undoes the DNAT.
//! - `net.ipv4.conf.all.route_localnet = 1` (only with localhost NodePorts): traffic to
//!   127.0.0.1:NODEPORT may be DNATed and routed to a pod; packets for 127.0.0.0/8 from other
//!   hosts are dropped by the proxy's own rule.

use std::path::Path;

pub use k1s_nft::sysctl::SysctlError;
use k1s_nft::sysctl::{BRIDGE_NF_CALL_IPTABLES, set};

/// Applies the settings under `root` (`/proc/sys`); returns the ones that failed (the proxy
/// still runs: what they enable is then missing, and each is logged).
pub fn prepare(root: &Path, localhost_nodeports: bool) -> Vec<SysctlError> {
    let mut wanted = vec![("net/ipv4/ip_forward", "1"), (BRIDGE_NF_CALL_IPTABLES, "1")];
    if localhost_nodeports {
        wanted.push(("net/ipv4/conf/all/route_localnet", "1"));
    }
    wanted
        .into_iter()
        .filter_map(|(rel, v)| set(root, rel, v).err())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_what_is_missing_and_reports_what_cannot_be_set() {
        let dir = std::env::temp_dir().join(format!("k1s-proxy-host-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("net/ipv4/conf/all")).unwrap();
        std::fs::write(dir.join("net/ipv4/ip_forward"), "0\n").unwrap();
        std::fs::write(dir.join("net/ipv4/conf/all/route_localnet"), "1\n").unwrap();
        // No net/bridge: as on a host without br_netfilter.
        let failed = prepare(&dir, true);
        assert_eq!(failed.len(), 1);
        assert!(failed[0].path.ends_with("bridge-nf-call-iptables"));
        assert_eq!(
            std::fs::read_to_string(dir.join("net/ipv4/ip_forward")).unwrap(),
            "1"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

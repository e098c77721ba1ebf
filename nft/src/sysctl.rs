//! The netfilter-related kernel settings the table owners need (`net.ipv4.ip_forward`,
//! `net.bridge.bridge-nf-call-iptables`, ...), set through `/proc/sys` and reported clearly
//! when the host cannot provide them.

use std::path::{Path, PathBuf};

/// One setting that could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("cannot set {path} to {value}: {source}")]
pub struct SysctlError {
    pub path: PathBuf,
    pub value: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// Sets `root/rel` (`/proc/sys` + `net/ipv4/ip_forward`) to `value` unless it already is.
pub fn set(root: &Path, rel: &str, value: &'static str) -> Result<(), SysctlError> {
    let path = root.join(rel);
    match std::fs::read_to_string(&path) {
        Ok(v) if v.trim() == value => return Ok(()),
        _ => {}
    }
    std::fs::write(&path, value).map_err(|source| SysctlError {
        path,
        value,
        source,
    })
}

/// `bridge-nf-call-iptables`: traffic between two pods on one bridge passes the `ip`
/// family's netfilter hooks (needs the `br_netfilter` module).
pub const BRIDGE_NF_CALL_IPTABLES: &str = "net/bridge/bridge-nf-call-iptables";

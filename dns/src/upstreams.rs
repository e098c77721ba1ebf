//! Which resolvers the host uses: the `resolv.conf` the DNS server forwards to and the
//! kubelet gives `dnsPolicy: Default` pods.
//!
//! As k3s does, a host whose `/etc/resolv.conf` names only loopback resolvers (systemd-
//! resolved's stub at 127.0.0.53, a local dnsmasq) is read through
//! `/run/systemd/resolve/resolv.conf`, which lists the real upstreams, when that file has
//! one: a pod cannot reach the host's loopback. An explicit `--resolv-conf` is taken as it
//! is. [`choose`] says which file it took and why, for the log.

use std::path::{Path, PathBuf};

/// The host's file.
pub const ETC_RESOLV_CONF: &str = "/etc/resolv.conf";
/// systemd-resolved's list of the real upstreams.
pub const SYSTEMD_RESOLV_CONF: &str = "/run/systemd/resolve/resolv.conf";

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub use k1s_api::dns::ResolvConf;

/// The file chosen, what it says, and why it was chosen.
#[derive(Debug, Clone)]
pub struct Choice {
    pub path: PathBuf,
    pub conf: ResolvConf,
    pub reason: &'static str,
}

/// The resolv.conf to use: `explicit` when given, else [`ETC_RESOLV_CONF`] unless it names
/// only loopback resolvers and [`SYSTEMD_RESOLV_CONF`] names a reachable one. `root`
/// prefixes both default paths (tests).
pub fn choose(explicit: Option<&Path>, root: &Path) -> Result<Choice, UpstreamError> {
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .map(|t| ResolvConf::parse(&t))
            .map_err(|source| UpstreamError::Read {
                path: p.to_path_buf(),
                source,
            })
    };
    if let Some(p) = explicit {
        return Ok(Choice {
            path: p.to_path_buf(),
            conf: read(p)?,
            reason: "given with --resolv-conf",
        });
    }
    let etc = root.join(ETC_RESOLV_CONF.trim_start_matches('/'));
    let etc_conf = read(&etc).unwrap_or_default();
    if etc_conf.reachable().is_empty() {
        let systemd = root.join(SYSTEMD_RESOLV_CONF.trim_start_matches('/'));
        if let Ok(conf) = read(&systemd)
            && !conf.reachable().is_empty()
        {
            return Ok(Choice {
                path: systemd,
                conf,
                reason: "the host's resolv.conf names only loopback resolvers; systemd-resolved's upstream list is used",
            });
        }
        return Ok(Choice {
            path: etc,
            conf: etc_conf,
            reason: "the host's resolv.conf names no resolver a pod can reach; names outside the cluster are forwarded to its loopback resolvers from the host only",
        });
    }
    Ok(Choice {
        path: etc,
        conf: etc_conf,
        reason: "the host's resolv.conf",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn loopback_only_hosts_read_systemd_resolveds_list() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::create_dir_all(root.path().join("run/systemd/resolve")).unwrap();
        std::fs::write(
            root.path().join("etc/resolv.conf"),
            "nameserver 127.0.0.53\n",
        )
        .unwrap();
        let c = choose(None, root.path()).unwrap();
        assert!(c.path.ends_with("etc/resolv.conf"), "no systemd file yet");
        std::fs::write(
            root.path().join("run/systemd/resolve/resolv.conf"),
            "nameserver 198.51.100.1\n",
        )
        .unwrap();
        let c = choose(None, root.path()).unwrap();
        assert!(c.path.ends_with("run/systemd/resolve/resolv.conf"));
        assert_eq!(
            c.conf.nameservers,
            vec!["198.51.100.1".parse::<IpAddr>().unwrap()]
        );
        // A reachable resolver in /etc/resolv.conf: that file.
        std::fs::write(
            root.path().join("etc/resolv.conf"),
            "nameserver 192.0.2.1\n",
        )
        .unwrap();
        assert!(
            choose(None, root.path())
                .unwrap()
                .path
                .ends_with("etc/resolv.conf")
        );
        // Explicit wins, and a missing explicit file is an error that names it.
        let e = choose(Some(&root.path().join("nope")), root.path()).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}

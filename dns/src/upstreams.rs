//! Which resolvers the host uses: the `resolv.conf` the DNS server forwards to and the
//! kubelet gives `dnsPolicy: Default` pods.
//!
//! As k3s does, a host whose `/etc/resolv.conf` names only loopback resolvers (systemd-
//! resolved's stub at 127.0.0.53, a local dnsmasq) is read through
//! `/run/systemd/resolve/resolv.conf`, which lists the real upstreams, when that file has
//! one: a pod cannot reach the host's loopback. An explicit `--resolv-conf` is taken as it
//! is. [`choose`] says which file it took and why, for the log.

use std::net::{IpAddr, SocketAddr};
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

/// What a `resolv.conf` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<IpAddr>,
    pub search: Vec<String>,
    pub options: Vec<String>,
}

impl ResolvConf {
    /// Parses the file's `nameserver`, `search`/`domain` and `options` lines (the last
    /// `search` or `domain` line wins, as in glibc; comments start with `#` or `;`).
    pub fn parse(text: &str) -> Self {
        let mut out = Self::default();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // A scoped IPv6 address (`fe80::1%eth0`) cannot be used from elsewhere.
                    if let Some(ip) = words.next().and_then(|w| w.parse().ok()) {
                        out.nameservers.push(ip);
                    }
                }
                Some("search") | Some("domain") => {
                    out.search = words.map(String::from).collect();
                }
                Some("options") => out.options.extend(words.map(String::from)),
                _ => {}
            }
        }
        out
    }

    /// The nameservers a pod can reach (not loopback).
    pub fn reachable(&self) -> Vec<IpAddr> {
        self.nameservers
            .iter()
            .copied()
            .filter(|ip| !ip.is_loopback())
            .collect()
    }

    /// The resolvers to forward to on port 53.
    pub fn upstreams(&self) -> Vec<SocketAddr> {
        self.nameservers
            .iter()
            .map(|ip| SocketAddr::new(*ip, 53))
            .collect()
    }
}

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

    #[test]
    fn parses_resolv_conf() {
        let c = ResolvConf::parse(
            "# generated\nnameserver 127.0.0.53\nnameserver 192.0.2.1 # x\nnameserver fe80::1%eth0\n\
             domain a.example\nsearch b.example c.example\noptions edns0 trust-ad\n; c\n",
        );
        assert_eq!(c.nameservers.len(), 2);
        assert_eq!(c.reachable(), vec!["192.0.2.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(c.search, ["b.example", "c.example"]);
        assert_eq!(c.options, ["edns0", "trust-ad"]);
        assert_eq!(c.upstreams()[1].to_string(), "192.0.2.1:53");
    }

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

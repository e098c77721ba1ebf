//! Facts about this machine that the commands need (its host name, the addresses it
//! registers as a node), and what every long-running command shares: Go-style duration
//! flags and the shutdown signals.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::time::Duration;

/// This machine's host name.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The node IPs, as upstream's kubelet chooses them: the flags; else the non-loopback
/// addresses the host name resolves to; else (a host name mapped to 127.0.0.1 in
/// `/etc/hosts`, as on many machines) the address of the default route's interface.
pub(crate) fn node_ips(flags: &[IpAddr], hostname: &str) -> Vec<IpAddr> {
    if !flags.is_empty() {
        return flags.to_vec();
    }
    let mut ips: Vec<IpAddr> = (hostname, 0)
        .to_socket_addrs()
        .map(|addrs| {
            addrs
                .map(|a| a.ip())
                .filter(|ip| !ip.is_loopback())
                .collect()
        })
        .unwrap_or_default();
    ips.sort();
    ips.dedup();
    if ips.is_empty()
        && let Some(ip) = default_route_address()
    {
        tracing::info!(%ip, hostname, "the host name resolves to loopback only: using the default route's interface address as the node IP");
        ips.push(IpAddr::V4(ip));
    }
    ips
}

/// The interface of the IPv4 default route with the lowest metric, from `/proc/net/route`
/// (columns: Iface Destination Gateway Flags RefCnt Use Metric Mask ...).
fn default_route_interface(table: &str) -> Option<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (iface, dest, mask, metric) = (f.first()?, f.get(1)?, f.get(7)?, f.get(6)?);
            (*dest == "00000000" && *mask == "00000000")
                .then(|| (metric.parse::<u32>().unwrap_or(u32::MAX), iface.to_string()))
        })
        .min()
        .map(|(_, iface)| iface)
}

/// The first IPv4 address of the default route's interface.
fn default_route_address() -> Option<Ipv4Addr> {
    let iface = default_route_interface(&std::fs::read_to_string("/proc/net/route").ok()?)?;
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|a| a.interface_name == iface)
        .find_map(|a| a.address?.as_sockaddr_in().map(|s| s.ip()))
}

/// A Go-style duration (`40s`, `1m30s`, `500ms`; a bare number is seconds).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration such as 40s, 1m or 500ms");
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        total += match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
    }
    if s.is_empty() { Err(bad()) } else { Ok(total) }
}

/// Installs the SIGTERM and SIGINT handlers now; the returned future completes on either.
pub(crate) fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// Replaces `path` with `body` at once (a file beside it, synced, renamed over it), mode 644:
/// a crash leaves the old file or the new one, never a part.
pub(crate) fn write_atomic(path: &std::path::Path, body: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    tmp.write_all(body)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_route_with_the_lowest_metric() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth1\t00000000\t0100A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n\
                     eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                     eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(default_route_interface(table).as_deref(), Some("eth0"));
        assert_eq!(default_route_interface("Iface\tDestination\n"), None);
    }

    #[test]
    fn flags_win() {
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(node_ips(&[ip], "whatever"), vec![ip]);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("40s"), Ok(Duration::from_secs(40)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("s").is_err());
    }
}

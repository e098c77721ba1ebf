//! Host firewall rules for the pod network: masquerade for egress and forwarding accepts.
//!
//! This file owns every rule the pod network puts in the host firewall. It shells out, as
//! kube-proxy and k3s do, rather than speaking nf_tables netlink itself:
//!
//! * with `iptables` (any backend; Debian's 1.8 defaults to nft): in the `nat` table a chain
//!   `K1S-POSTROUTING`, jumped to from `POSTROUTING`, with one rule per pod CIDR
//!   `-s CIDR ! -d CIDR -j MASQUERADE`; in the `filter` table a chain `K1S-FORWARD`, jumped
//!   to from the top of `FORWARD` (Docker may have set its policy to DROP), with
//!   `-i BRIDGE -j ACCEPT` and `-o BRIDGE -j ACCEPT`. Every rule is checked with `-C` before
//!   it is added, so applying twice changes nothing.
//! * without `iptables`, with `nft`: a table `ip k1s` with two base chains per bridge,
//!   `post-BRIDGE` (nat, postrouting) and `fwd-BRIDGE` (filter, forward), rewritten in one
//!   transaction. An accept there cannot override a drop in another table, so this only
//!   helps where nothing else filters forwarding.
//!
//! Callers treat failures as warnings: without these rules pods still reach each other and
//! the host, only egress beyond the node is off.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::ipam::Ipv4Cidr;

/// The nat chain holding the masquerade rules.
pub const NAT_CHAIN: &str = "K1S-POSTROUTING";
/// The filter chain holding the forwarding accepts.
pub const FORWARD_CHAIN: &str = "K1S-FORWARD";
/// The nft table used when `iptables` is missing.
pub const NFT_TABLE: &str = "k1s";

/// Which tool installed the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Iptables,
    Nft,
}

/// Why rules could not be installed or removed.
#[derive(Debug, thiserror::Error)]
pub enum FirewallError {
    #[error("{tool} is not installed")]
    Missing { tool: &'static str },
    #[error("running {command}: {message}")]
    Failed { command: String, message: String },
}

struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn run(tool: &'static str, args: &[&str], stdin: Option<&str>) -> Result<Ran, FirewallError> {
    let mut cmd = Command::new(tool);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let shown = || format!("{tool} {}", args.join(" "));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(FirewallError::Missing { tool });
        }
        Err(e) => {
            return Err(FirewallError::Failed {
                command: shown(),
                message: e.to_string(),
            });
        }
    };
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())
            .await
            .map_err(|e| FirewallError::Failed {
                command: shown(),
                message: format!("writing stdin: {e}"),
            })?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| FirewallError::Failed {
            command: shown(),
            message: e.to_string(),
        })?;
    Ok(Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Runs iptables and requires success.
async fn iptables(args: &[&str]) -> Result<String, FirewallError> {
    let mut full = vec!["-w", "5"];
    full.extend_from_slice(args);
    let ran = run("iptables", &full, None).await?;
    if ran.ok {
        Ok(ran.stdout)
    } else {
        Err(FirewallError::Failed {
            command: format!("iptables {}", full.join(" ")),
            message: ran.stderr,
        })
    }
}

/// Runs iptables and reports only whether it succeeded (for `-C` and `-S` probes).
async fn iptables_probe(args: &[&str]) -> Result<bool, FirewallError> {
    let mut full = vec!["-w", "5"];
    full.extend_from_slice(args);
    Ok(run("iptables", &full, None).await?.ok)
}

async fn ensure_chain(table: &str, chain: &str) -> Result<(), FirewallError> {
    if !iptables_probe(&["-t", table, "-S", chain]).await? {
        iptables(&["-t", table, "-N", chain]).await?;
    }
    Ok(())
}

/// Adds `rule` to `chain` unless `-C` finds it; `insert` puts it first.
async fn ensure_rule(
    table: &str,
    chain: &str,
    rule: &[&str],
    insert: bool,
) -> Result<(), FirewallError> {
    let mut check = vec!["-t", table, "-C", chain];
    check.extend_from_slice(rule);
    if iptables_probe(&check).await? {
        return Ok(());
    }
    let mut add = if insert {
        vec!["-t", table, "-I", chain, "1"]
    } else {
        vec!["-t", table, "-A", chain]
    };
    add.extend_from_slice(rule);
    iptables(&add).await.map(drop)
}

/// Deletes every copy of `rule` from `chain`.
async fn delete_rule(table: &str, chain: &str, rule: &[&str]) -> Result<(), FirewallError> {
    let mut check = vec!["-t", table, "-C", chain];
    check.extend_from_slice(rule);
    let mut del = vec!["-t", table, "-D", chain];
    del.extend_from_slice(rule);
    // Bounded: a rule cannot be present more than a few times, and a failing -D stops it.
    for _ in 0..16 {
        if !iptables_probe(&check).await? {
            break;
        }
        iptables(&del).await?;
    }
    Ok(())
}

/// Removes `chain` and the jump to it from `parent` if `chain` holds no rules.
async fn delete_chain_if_empty(
    table: &str,
    parent: &str,
    chain: &str,
) -> Result<(), FirewallError> {
    let Ok(listing) = iptables(&["-t", table, "-S", chain]).await else {
        return Ok(()); // no such chain
    };
    if listing.lines().any(|l| l.starts_with("-A ")) {
        return Ok(());
    }
    delete_rule(table, parent, &["-j", chain]).await?;
    iptables(&["-t", table, "-X", chain]).await.map(drop)
}

/// Masquerade what leaves `cidr` for anywhere outside `cluster` (the cluster's pod network:
/// pod-to-pod traffic across nodes keeps its source address).
fn masquerade_rule<'a>(cidr: &'a str, cluster: &'a str) -> [&'a str; 7] {
    ["-s", cidr, "!", "-d", cluster, "-j", "MASQUERADE"]
}

async fn iptables_ensure(bridge: &str, cidr: &str, cluster: &str) -> Result<(), FirewallError> {
    ensure_chain("nat", NAT_CHAIN).await?;
    // An earlier start may have masqueraded everything leaving the node's own range.
    if cluster != cidr {
        delete_rule("nat", NAT_CHAIN, &masquerade_rule(cidr, cidr)).await?;
    }
    ensure_rule("nat", NAT_CHAIN, &masquerade_rule(cidr, cluster), false).await?;
    ensure_rule("nat", "POSTROUTING", &["-j", NAT_CHAIN], false).await?;
    ensure_chain("filter", FORWARD_CHAIN).await?;
    ensure_rule(
        "filter",
        FORWARD_CHAIN,
        &["-i", bridge, "-j", "ACCEPT"],
        false,
    )
    .await?;
    ensure_rule(
        "filter",
        FORWARD_CHAIN,
        &["-o", bridge, "-j", "ACCEPT"],
        false,
    )
    .await?;
    ensure_rule("filter", "FORWARD", &["-j", FORWARD_CHAIN], true).await
}

async fn iptables_remove(bridge: &str, cidr: &str, cluster: &str) -> Result<(), FirewallError> {
    if iptables_probe(&["-t", "nat", "-S", NAT_CHAIN]).await? {
        delete_rule("nat", NAT_CHAIN, &masquerade_rule(cidr, cluster)).await?;
        delete_rule("nat", NAT_CHAIN, &masquerade_rule(cidr, cidr)).await?;
        delete_chain_if_empty("nat", "POSTROUTING", NAT_CHAIN).await?;
    }
    if iptables_probe(&["-t", "filter", "-S", FORWARD_CHAIN]).await? {
        delete_rule("filter", FORWARD_CHAIN, &["-i", bridge, "-j", "ACCEPT"]).await?;
        delete_rule("filter", FORWARD_CHAIN, &["-o", bridge, "-j", "ACCEPT"]).await?;
        delete_chain_if_empty("filter", "FORWARD", FORWARD_CHAIN).await?;
    }
    Ok(())
}

/// The nft script that (re)writes the per-bridge chains in one transaction.
fn nft_script(bridge: &str, cidr: &str, cluster: &str) -> String {
    format!(
        "add table ip {t}\n\
         add chain ip {t} post-{b} {{ type nat hook postrouting priority 100 ; policy accept ; }}\n\
         flush chain ip {t} post-{b}\n\
         add rule ip {t} post-{b} ip saddr {c} ip daddr != {k} masquerade\n\
         add chain ip {t} fwd-{b} {{ type filter hook forward priority 0 ; policy accept ; }}\n\
         flush chain ip {t} fwd-{b}\n\
         add rule ip {t} fwd-{b} iifname \"{b}\" accept\n\
         add rule ip {t} fwd-{b} oifname \"{b}\" accept\n",
        t = NFT_TABLE,
        b = bridge,
        c = cidr,
        k = cluster
    )
}

async fn nft(script: &str) -> Result<(), FirewallError> {
    let ran = run("nft", &["-f", "-"], Some(script)).await?;
    if ran.ok {
        Ok(())
    } else {
        Err(FirewallError::Failed {
            command: format!("nft -f - <<< {script:?}"),
            message: ran.stderr,
        })
    }
}

/// The file whose lock serialises [`ensure`] and [`remove`] between the k1s processes of one
/// host (several kubelets: tests, `k1s bench idle`). They share the `K1S-*` chains and the
/// jumps to them, and `iptables -C` then `-A` are two commands: two kubelets racing used to
/// add a jump twice, or fail on `-N` of a chain the other just made (and fall back to nft).
const HOST_LOCK: &str = "/run/k1s/firewall.lock";

/// Takes the host-wide lock (see [`HOST_LOCK`]); `None` where it cannot be had (no `/run`
/// write access), in which case the caller goes on unserialised, as before.
async fn host_lock() -> Option<nix::fcntl::Flock<std::fs::File>> {
    tokio::task::spawn_blocking(|| {
        let path = std::path::Path::new(HOST_LOCK);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ok()?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
    })
    .await
    .ok()
    .flatten()
}

/// Installs masquerade (for traffic from `cidr` leaving `cluster`, the cluster's pod
/// network) and forwarding rules for `bridge` (idempotent), with `iptables` or else `nft`.
pub async fn ensure(
    bridge: &str,
    cidr: Ipv4Cidr,
    cluster: Ipv4Cidr,
) -> Result<Backend, FirewallError> {
    let _serialised = host_lock().await;
    let (cidr, cluster) = (cidr.to_string(), cluster.to_string());
    match iptables_ensure(bridge, &cidr, &cluster).await {
        Ok(()) => Ok(Backend::Iptables),
        Err(ipt) => match nft(&nft_script(bridge, &cidr, &cluster)).await {
            Ok(()) => {
                if !matches!(ipt, FirewallError::Missing { .. }) {
                    tracing::warn!(error = %ipt, "iptables failed; installed the pod network rules with nft");
                }
                Ok(Backend::Nft)
            }
            // Report the iptables failure unless iptables is simply missing.
            Err(nft_err) => Err(match ipt {
                FirewallError::Missing { .. } => nft_err,
                other => other,
            }),
        },
    }
}

/// Removes what [`ensure`] installed for `bridge` and `cidr` (chains shared with other
/// bridges stay while they hold rules).
pub async fn remove(bridge: &str, cidr: Ipv4Cidr, cluster: Ipv4Cidr) -> Result<(), FirewallError> {
    let _serialised = host_lock().await;
    let (cidr, cluster) = (cidr.to_string(), cluster.to_string());
    let ipt = iptables_remove(bridge, &cidr, &cluster).await;
    let script = format!(
        "delete chain ip {t} post-{b}\ndelete chain ip {t} fwd-{b}\n",
        t = NFT_TABLE,
        b = bridge
    );
    // Only if our nft chains exist (listing fails otherwise).
    let listed = run(
        "nft",
        &["list", "chain", "ip", NFT_TABLE, &format!("post-{bridge}")],
        None,
    )
    .await;
    if let Ok(Ran { ok: true, .. }) = listed {
        let flush = format!(
            "flush chain ip {t} post-{b}\nflush chain ip {t} fwd-{b}\n{script}",
            t = NFT_TABLE,
            b = bridge
        );
        nft(&flush).await?;
        // The table goes when no other bridge has chains in it.
        if let Ok(Ran {
            ok: true, stdout, ..
        }) = run("nft", &["list", "table", "ip", NFT_TABLE], None).await
            && !stdout.contains("chain ")
        {
            nft(&format!("delete table ip {NFT_TABLE}\n")).await?;
        }
    }
    match ipt {
        Err(FirewallError::Missing { .. }) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nft_script_names_bridge_and_cidr() {
        let s = nft_script("k1s0", "10.42.0.0/24", "10.42.0.0/16");
        assert!(s.contains(
            "add rule ip k1s post-k1s0 ip saddr 10.42.0.0/24 ip daddr != 10.42.0.0/16 masquerade"
        ));
        assert!(s.contains("iifname \"k1s0\" accept"));
        assert!(s.contains("oifname \"k1s0\" accept"));
        assert!(s.contains("flush chain ip k1s post-k1s0"));
    }

    #[test]
    fn masquerade_rule_shape() {
        assert_eq!(
            masquerade_rule("10.42.0.0/24", "10.42.0.0/16").join(" "),
            "-s 10.42.0.0/24 ! -d 10.42.0.0/16 -j MASQUERADE"
        );
    }
}

//! What end-to-end tests with real containers need from the host: a root check, a local
//! registry serving the busybox test image, and [`HostCleanup`], which removes what a test
//! kubelet leaves behind (its containers, bridge and cgroup tree) even when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{Cluster, eventually, registry};

/// Whether this process runs as root (containers need it; CI runs as root).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// The host processes whose command line holds `needle` (this test process excepted).
pub fn pids_with(needle: &str) -> Vec<i32> {
    pids_where(|cmd| cmd.contains(needle))
}

/// The host processes whose command line (arguments joined by NULs) satisfies `matches`,
/// this test process excepted.
pub fn pids_where(matches: impl Fn(&str) -> bool) -> Vec<i32> {
    // (pid, parent pid) of every matching process.
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if matches(&String::from_utf8_lossy(&cmd)) && pid != std::process::id() as i32 {
            found.push((pid, parent_of(pid)));
        }
    }
    // A shell that runs `sleep` (or a plugin that runs a tool) forks first: until the child
    // execs, it has its parent's command line. Such a child is the same process, not a second.
    let pids: Vec<i32> = found.iter().map(|(pid, _)| *pid).collect();
    found
        .into_iter()
        .filter(|(_, parent)| !parent.is_some_and(|p| pids.contains(&p)))
        .map(|(pid, _)| pid)
        .collect()
}

/// The parent pid from `/proc/PID/stat` (the field after the state, which follows the
/// command name's closing parenthesis), or `None` once the process is gone.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A local registry with `busybox:latest`, and the registries.yaml that makes it plain HTTP.
pub struct Images {
    _dir: tempfile::TempDir,
    pub registry: registry::Registry,
    pub config: PathBuf,
}

impl Images {
    /// Builds and serves the test image, or says visibly why the test skips (not root, or the
    /// registry tools missing and not installable) and returns `None`.
    pub fn start() -> Option<Images> {
        if !is_root() {
            eprintln!("SKIP: tests with real containers need root (namespaces, cgroups, mounts)");
            return None;
        }
        if !registry::ensure_tools() {
            eprintln!(
                "SKIP: docker-registry, skopeo, umoci or busybox-static missing and not installable"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("layout");
        registry::build_busybox_layout(&layout).unwrap();
        let registry = registry::Registry::start(&dir.path().join("registry")).unwrap();
        registry::push(
            &layout,
            "latest",
            &format!("{}/busybox:latest", registry.host()),
        )
        .unwrap();
        let config = dir.path().join("registries.yaml");
        std::fs::write(&config, registry.registries_yaml()).unwrap();
        Some(Images {
            _dir: dir,
            registry,
            config,
        })
    }

    /// The test image's reference.
    pub fn busybox(&self) -> String {
        format!("{}/busybox:latest", self.registry.host())
    }

    /// Pushes the test image again as `busybox:TAG` (another image reference for rollouts)
    /// and returns that reference.
    pub fn busybox_tag(&self, tag: &str) -> String {
        let reference = format!("{}/busybox:{tag}", self.registry.host());
        registry::push(&self._dir.path().join("layout"), "latest", &reference).unwrap();
        reference
    }

    /// Writes the test image as an airgap archive (`docker save` format) tagged like
    /// [`Images::busybox`], for a node that cannot reach this registry (one in a network
    /// namespace of its own): put it in its `DATA_DIR/agent/images`.
    pub fn save_archive(&self, dest: &Path) {
        registry::save_archive(
            &self._dir.path().join("layout"),
            "latest",
            "docker-archive",
            dest,
            &self.busybox(),
        )
        .unwrap();
    }

    /// [`crate::kubelet_flags`] plus this registry's config.
    pub fn kubelet_flags(&self, tag: &str) -> Vec<String> {
        let mut flags = crate::kubelet_flags(tag);
        flags.push("--private-registry".into());
        flags.push(self.config.display().to_string());
        flags
    }
}

/// Removes what a test kubelet leaves on the host: its containers, bridge, firewall rules,
/// nftables tables and cgroup tree.
/// Holds the kubelet's flags (from [`crate::kubelet_flags`]) to know their names.
pub struct HostCleanup(pub Vec<String>);

impl HostCleanup {
    fn flag(&self, name: &str) -> String {
        self.0
            .iter()
            .position(|f| f == name)
            .and_then(|i| self.0.get(i + 1))
            .cloned()
            .unwrap_or_default()
    }
}

/// Deletes the rules of iptables chain `chain` (in `table`) that `mine` recognises, by their
/// `-S` text.
fn delete_iptables_rules(table: &str, chain: &str, mine: impl Fn(&str) -> bool) {
    let Ok(out) = Command::new("iptables")
        .args(["-t", table, "-S", chain])
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return;
    };
    for rule in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(spec) = rule.strip_prefix(&format!("-A {chain} ")) else {
            continue;
        };
        if mine(spec) {
            let mut args = vec!["-t", table, "-D", chain];
            args.extend(spec.split_whitespace());
            let _ = Command::new("iptables")
                .args(&args)
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for HostCleanup {
    fn drop(&mut self) {
        let bridge = self.flag("--bridge-name");
        let _ = Command::new("ip").args(["link", "del", &bridge]).status();
        // The pod network's host firewall rules (kubelet/src/network/firewall.rs) of a
        // kubelet that was killed rather than stopped: its bridge's accepts and its pod
        // CIDR's masquerade.
        if !bridge.is_empty() {
            delete_iptables_rules("filter", "K1S-FORWARD", |spec| {
                spec.split_whitespace().any(|w| w == bridge)
            });
        }
        // Where the pod network used nft instead of iptables: its two chains for the bridge
        // in table `ip k1s`, and the table once no other bridge has chains there.
        for chain in [format!("post-{bridge}"), format!("fwd-{bridge}")] {
            let _ = Command::new("nft")
                .args(["delete", "chain", "ip", "k1s", &chain])
                .stderr(std::process::Stdio::null())
                .status();
        }
        if let Ok(listed) = Command::new("nft")
            .args(["list", "table", "ip", "k1s"])
            .stderr(std::process::Stdio::null())
            .output()
            && listed.status.success()
            && !String::from_utf8_lossy(&listed.stdout).contains("chain ")
        {
            let _ = Command::new("nft")
                .args(["delete", "table", "ip", "k1s"])
                .stderr(std::process::Stdio::null())
                .status();
        }
        // Masquerade by the node's pod CIDR, or (node IPAM chose it) by the test's own cluster
        // CIDR; never the default one, which a k1s on the host may use.
        let pod_cidr = self.flag("--pod-cidr");
        let cluster_cidr = self.flag("--cluster-cidr");
        delete_iptables_rules("nat", "K1S-POSTROUTING", |spec| {
            (!pod_cidr.is_empty() && spec.starts_with(&format!("-s {pod_cidr} ")))
                || (!cluster_cidr.is_empty()
                    && cluster_cidr != "10.42.0.0/16"
                    && spec.contains(&format!("! -d {cluster_cidr} ")))
        });
        // The proxy's and the policy's tables stay when k1s stops (traffic and policies hold
        // across a restart): a test's own tables go with it. The default names are never
        // touched (a node in a namespace of its own uses them; the host may run k1s).
        for (flag, default) in [
            ("--proxy-table", "k1s-proxy"),
            ("--policy-table", "k1s-policy"),
        ] {
            let table = self.flag(flag);
            if !table.is_empty() && table != default {
                let _ = Command::new("nft")
                    .args(["delete", "table", "ip", &table])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let top = self.flag("--cgroup-top");
        let hierarchies: Vec<PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
            .map(|h| h.path().join(&top))
            .collect();
        // Containers outlive their kubelet (the shims keep them): a failed test must not
        // leave them running into the next one.
        for _ in 0..20 {
            let mut any = false;
            for h in &hierarchies {
                any |= kill_cgroup_tree(h);
            }
            if !any {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for h in &hierarchies {
            remove_cgroup_tree(h);
        }
    }
}

/// SIGKILLs every process in the cgroup tree at `dir`; whether there was any.
fn kill_cgroup_tree(dir: &Path) -> bool {
    let mut any = false;
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in procs.lines().filter(|l| !l.trim().is_empty()) {
            any = true;
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                any |= kill_cgroup_tree(&e.path());
            }
        }
    }
    any
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}

/// Starts a server with a kubelet (`flags` from [`Images::kubelet_flags`] with the same
/// `tag`) and waits for its node to be Ready and the `default` ServiceAccount to exist.
pub fn start_with_kubelet(tag: &str, flags: &[String]) -> Option<Cluster> {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let c = Cluster::start(&flags)?;
    let node = format!("node-{tag}");
    eventually("the node to register and be Ready", 60, || {
        let out = c.run(&["get", "node", &node, "-o", "json"]);
        let n: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        n["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });
    eventually("the default ServiceAccount", 30, || {
        c.run(&["get", "sa", "default"]).status.success()
    });
    Some(c)
}

/// Waits until the kubelets have torn down every pod sandbox under `dir` (their namespace
/// files unmounted, so their veths are gone): call it after deleting a test's pods and before
/// stopping the server, or they stay on the host.
pub fn wait_for_teardown(dir: &Path) {
    let dir = dir.display().to_string();
    eventually("the pod sandboxes to be torn down", 60, || {
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains(&dir) && l.contains("/ns/"))
    });
}

/// Removes what CSI volumes under a test's data directory leave on the host when a test
/// fails before deleting them: mounts below `dir` (deepest first) and loop devices backed
/// by files below it.
pub struct StorageCleanup(pub PathBuf);

impl Drop for StorageCleanup {
    fn drop(&mut self) {
        crate::mounts::unmount_under(&self.0);
        let dir = self.0.to_string_lossy().into_owned();
        for e in std::fs::read_dir("/sys/block")
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let backing =
                std::fs::read_to_string(e.path().join("loop/backing_file")).unwrap_or_default();
            if name.starts_with("loop") && backing.trim().starts_with(&dir) {
                let _ = Command::new("losetup")
                    .args(["-d", &format!("/dev/{name}")])
                    .status();
            }
        }
    }
}

/// An interface of its own (a port-less bridge: this kernel has no dummy links) holding the node's address, and the proxy's table: both removed on drop.
pub struct NodeAddress {
    pub link: String,
    pub ip: String,
    table: String,
}

impl NodeAddress {
    /// Test `n`'s node address: `100.(64 + n/250).(n%250).1`, on a /24 of its own (where
    /// the services test puts an external client).
    pub fn create(n: u32, table: &str) -> NodeAddress {
        let link = format!("k1sd{n}");
        let ip = format!("100.{}.{}.1", 64 + n / 250, n % 250);
        let _ = Command::new("ip").args(["link", "del", &link]).status();
        for args in [
            vec!["link", "add", &link, "type", "bridge"],
            vec!["addr", "add", &format!("{ip}/24"), "dev", &link],
            vec!["link", "set", &link, "up"],
        ] {
            assert!(Command::new("ip").args(&args).status().unwrap().success());
        }
        NodeAddress {
            link,
            ip,
            table: table.into(),
        }
    }
}

impl Drop for NodeAddress {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        // The proxy leaves its table in place when k1s stops (traffic keeps flowing across
        // a restart); the test removes it.
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", &self.table])
            .status();
    }
}

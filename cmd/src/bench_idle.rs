//! `k1s bench idle`: what an idle k1s costs its machine (issue #31), measured on a scratch
//! data directory so a user can check the figures on their own box: this binary's size, then
//! a `k1s server` started from it and left alone — after `--warmup` seconds, its disk writes
//! (`/proc/PID/io` `write_bytes`, what reaches the block layer), CPU (`/proc/PID/stat`) over
//! `--seconds`, and its memory at the end (`VmRSS`, anonymous and file-backed parts). Beside
//! the process's own figure, the writes the data directory's block device saw in the same
//! window (`/sys/dev/block/MAJ:MIN/stat`: every process's, and the filesystem's journal
//! that each `fdatasync` commits, which no process is charged for).
//!
//! Without `--kubelet` the server runs without its node (`--disable-agent`: no root needed);
//! with it, as a node, on names of the bench's own (bridge `k1sidle0`, cgroup tree
//! `k1s-idle`, nftables tables `k1s-proxy-idle`/`k1s-policy-idle`), removed afterwards.
//! `--agent` also starts a `k1s agent` joined to that server (bridge `k1sidle1`, cgroup tree
//! `k1s-idle-agent`, tables `k1s-proxy-idlea`/`k1s-policy-idlea`) and measures it over the
//! same window (with `--agent-binary`, another build runs it: the node-only one); `--pods N`
//! runs N sleeping pods on the server's node meanwhile. Prints one
//! JSON line.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use k1s_api::client::{Client, DeleteParams, ListParams, ResourceRef, WriteParams};
use k1s_api::http_client::HttpClient;
use serde_json::json;

#[derive(Args, Debug)]
pub struct IdleBenchArgs {
    /// Seconds to let the server settle before measuring.
    #[arg(long, default_value_t = 30)]
    pub warmup: u64,
    /// Seconds to measure over.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Run the server as a node too (its kubelet, service proxy, DNS and policies; root).
    #[arg(long)]
    pub kubelet: bool,
    /// Also start a `k1s agent` joined to the server and measure it (root).
    #[arg(long)]
    pub agent: bool,
    /// The binary the agent runs (default: this one), e.g. a node-only build
    /// (`cargo build --release -p k1s --no-default-features`).
    #[arg(long, requires = "agent")]
    pub agent_binary: Option<std::path::PathBuf>,
    /// Run this many pods on the server's node while measuring (needs `--kubelet`): each one
    /// container of `--image` sleeping; deleted before the server stops.
    #[arg(long, default_value_t = 0)]
    pub pods: usize,
    /// The image of those pods (present on the node or pullable).
    #[arg(long, default_value = "busybox")]
    pub image: String,
    /// Registry configuration for the server (`k1s server --private-registry`), e.g. to pull
    /// `--image` from a local plain-HTTP registry.
    #[arg(long)]
    pub private_registry: Option<std::path::PathBuf>,
    /// Where the scratch data directory goes (a disk like the one k1s would use).
    #[arg(long, default_value = "/var/tmp")]
    pub dir: std::path::PathBuf,
}

/// The server under measurement; stopped (SIGTERM, then SIGKILL) on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nobody listens on now.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `write_bytes` of `/proc/PID/io`.
fn written(pid: u32) -> anyhow::Result<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .context("reading /proc/PID/io (needs the same user or root)")?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no write_bytes in /proc/PID/io")
}

/// Bytes written to the block device that holds `dir` so far (sectors written, field 7 of
/// its `stat`), if the kernel shows it.
fn device_written(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// utime + stime of `/proc/PID/stat`, in clock ticks.
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces: fields count from after its closing parenthesis.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the name and state.
    Ok(num(11) + num(12))
}

/// `VmRSS`, `RssAnon` and `RssFile` in KiB.
fn memory(pid: u32) -> anyhow::Result<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Ok((kib("VmRSS:"), kib("RssAnon:"), kib("RssFile:")))
}

fn wait_ready(port: u16, server: &mut Child, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = server.try_wait()? {
            anyhow::bail!("the server exited during start ({status}); run it by hand to see why");
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    anyhow::bail!("the server did not listen on {port} within {timeout:?}")
}

/// Removes an (empty) cgroup tree, deepest first.
fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The names a node of the bench uses on this host; `suffix` tells the agent's apart.
struct NodeNames {
    bridge: String,
    cgroup: String,
    proxy_table: String,
    policy_table: String,
}

impl NodeNames {
    fn new(bridge: &str, suffix: &str) -> NodeNames {
        NodeNames {
            bridge: bridge.to_string(),
            cgroup: format!("k1s-idle{suffix}"),
            proxy_table: format!("k1s-proxy-idle{}", suffix.trim_start_matches('-')),
            policy_table: format!("k1s-policy-idle{}", suffix.trim_start_matches('-')),
        }
    }

    /// The kubelet flags that put the node on these names.
    fn flags(&self, kubelet_port: u16) -> Vec<String> {
        [
            "--bridge-name",
            &self.bridge,
            "--cgroup-top",
            &self.cgroup,
            "--proxy-table",
            &self.proxy_table,
            "--policy-table",
            &self.policy_table,
            "--kubelet-port",
            &kubelet_port.to_string(),
            "--pod-network-backend",
            "none",
            "--disable-dns",
        ]
        .map(String::from)
        .to_vec()
    }
}

/// The bench's own cluster (pod) CIDR, so that its nodes' masquerade rules are told apart
/// from those of a k1s the host may run (default 10.42.0.0/16) and removed after.
const CLUSTER_CIDR: &str = "10.241.0.0/16";

/// Removes what a node of the bench left on the host (its tables outlive it by design) when
/// dropped: declared before the process it cleans up after, so dropped after it.
struct Cleanup<'a>(&'a NodeNames);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let names = self.0;
        // The kubelet's cgroup tree, in every hierarchy (v1) or the unified one (v2).
        let root = Path::new("/sys/fs/cgroup");
        remove_cgroup_tree(&root.join(&names.cgroup));
        for h in std::fs::read_dir(root).into_iter().flatten().flatten() {
            remove_cgroup_tree(&h.path().join(&names.cgroup));
        }
        for args in [
            ["nft", "delete", "table", "ip", &names.proxy_table].as_slice(),
            ["nft", "delete", "table", "ip", &names.policy_table].as_slice(),
            ["ip", "link", "del", &names.bridge].as_slice(),
        ] {
            let _ = Command::new(args[0])
                .args(&args[1..])
                .stderr(Stdio::null())
                .status();
        }
        // The pod network's forwarding accepts for the bench's bridge and masquerade for its
        // pod CIDR (they stay when a kubelet stops, as its other firewall rules do).
        for direction in ["-i", "-o"] {
            let _ = Command::new("iptables")
                .args([
                    "-D",
                    "K1S-FORWARD",
                    direction,
                    &names.bridge,
                    "-j",
                    "ACCEPT",
                ])
                .stderr(Stdio::null())
                .status();
        }
        // Where the pod network used nft instead of iptables: its two chains for the bridge
        // in table `ip k1s`, and the table once no other bridge has chains there.
        for chain in [
            format!("post-{}", names.bridge),
            format!("fwd-{}", names.bridge),
        ] {
            let _ = Command::new("nft")
                .args(["delete", "chain", "ip", "k1s", &chain])
                .stderr(Stdio::null())
                .status();
        }
        if let Ok(listed) = Command::new("nft")
            .args(["list", "table", "ip", "k1s"])
            .stderr(Stdio::null())
            .output()
            && listed.status.success()
            && !String::from_utf8_lossy(&listed.stdout).contains("chain ")
        {
            let _ = Command::new("nft")
                .args(["delete", "table", "ip", "k1s"])
                .stderr(Stdio::null())
                .status();
        }
        let listed = Command::new("iptables")
            .args(["-t", "nat", "-S", "K1S-POSTROUTING"])
            .stderr(Stdio::null())
            .output();
        for rule in listed
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .lines()
        {
            if let Some(spec) = rule.strip_prefix("-A K1S-POSTROUTING ")
                && spec.contains(&format!("! -d {CLUSTER_CIDR} "))
            {
                let _ = Command::new("iptables")
                    .args(["-t", "nat", "-D", "K1S-POSTROUTING"])
                    .args(spec.split_whitespace())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// The counters of a process and of the helpers it started (the node's CSI plugin), at one
/// moment.
struct Sample {
    written: u64,
    cpu_ticks: u64,
    /// `(pid, written, cpu_ticks)` of each descendant.
    helpers: Vec<(u32, u64, u64)>,
}

impl Sample {
    fn take(pid: u32) -> anyhow::Result<Sample> {
        Ok(Sample {
            written: written(pid)?,
            cpu_ticks: cpu_ticks(pid)?,
            helpers: descendants(pid)
                .into_iter()
                .filter_map(|p| Some((p, written(p).ok()?, cpu_ticks(p).ok()?)))
                .collect(),
        })
    }
}

/// The processes below `pid` (children, their children, ...), from `/proc/*/stat`.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let rest = stat.rsplit_once(')')?.1;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp) in &parents {
            if pp == parent {
                out.push(p);
                frontier.push(p);
            }
        }
    }
    out
}

/// `Pss` of `/proc/PID/smaps_rollup` in KiB: the process's share of the pages it maps with
/// others (the helpers map the same binary).
fn pss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// One process's figures over the window `secs` between `before` and now, and those of its
/// helper processes (CPU and writes of the helpers alive at both ends; PSS of the whole tree,
/// so the binary's pages they share are counted once).
fn figures(pid: u32, before: &Sample, secs: f64) -> anyhow::Result<serde_json::Value> {
    let after = Sample::take(pid)?;
    let (rss, anon, file) = memory(pid)?;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let cpu = |t: u64| t as f64 / ticks / secs * 100.0;
    let kib_s = |b: u64| b as f64 / 1024.0 / secs;
    let bytes = after.written.saturating_sub(before.written);
    let (mut helper_bytes, mut helper_ticks) = (0, 0);
    for (p, w, t) in &after.helpers {
        if let Some((_, w0, t0)) = before.helpers.iter().find(|h| h.0 == *p) {
            helper_bytes += w.saturating_sub(*w0);
            helper_ticks += t.saturating_sub(*t0);
        }
    }
    let tree_pss: u64 = pss(pid) + after.helpers.iter().map(|h| pss(h.0)).sum::<u64>();
    Ok(json!({
        "disk_write_kib_per_s": kib_s(bytes),
        "disk_write_bytes_per_min": (bytes as f64 * 60.0 / secs).round(),
        "cpu_percent_of_a_core": cpu(after.cpu_ticks.saturating_sub(before.cpu_ticks)),
        "rss_mib": rss as f64 / 1024.0,
        "rss_anon_mib": anon as f64 / 1024.0,
        "rss_file_mib": file as f64 / 1024.0,
        "helpers": {
            "processes": after.helpers.len(),
            "disk_write_kib_per_s": kib_s(helper_bytes),
            "cpu_percent_of_a_core": cpu(helper_ticks),
            "pss_mib_with_main": tree_pss as f64 / 1024.0,
        },
    }))
}

pub async fn run(args: IdleBenchArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let binary_bytes = std::fs::metadata(&exe)?.len();
    std::fs::create_dir_all(&args.dir)?;
    let scratch = tempfile::Builder::new()
        .prefix("k1s-bench-idle-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("--dir {}", args.dir.display()))?;
    let data = scratch.path().join("data");
    let port = free_port()?;
    let server_names = NodeNames::new("k1sidle0", "");
    let agent_names = NodeNames::new("k1sidle1", "-a");
    let mut cmd = Command::new(&exe);
    cmd.arg("server")
        .arg("--data-dir")
        .arg(&data)
        .args(["--cluster-cidr", CLUSTER_CIDR])
        .args(["--bind-address", "127.0.0.1", "--https-port"])
        .arg(port.to_string())
        .arg("--write-kubeconfig")
        .arg(scratch.path().join("k1s.yaml"))
        .env("K1S_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if args.pods > 0 && !args.kubelet {
        anyhow::bail!("--pods needs --kubelet: the pods run on the server's node");
    }
    let _server_cleanup = args.kubelet.then(|| Cleanup(&server_names));
    let _agent_cleanup = args.agent.then(|| Cleanup(&agent_names));
    if let Some(registries) = &args.private_registry {
        cmd.arg("--private-registry").arg(registries);
    }
    if args.kubelet {
        cmd.args(server_names.flags(free_port()?));
    } else {
        cmd.arg("--disable-agent");
    }
    let started = Instant::now();
    let mut child = cmd.spawn().context("starting k1s server")?;
    wait_ready(port, &mut child, Duration::from_secs(60))?;
    let server = Running(child);
    let pid = server.0.id();
    eprintln!(
        "server {pid} ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let agent = if args.agent {
        let token = std::fs::read_to_string(data.join("server/token"))
            .context("reading the server's join token")?;
        let kubelet_port = free_port()?;
        let agent_exe = args.agent_binary.as_deref().unwrap_or(&exe);
        let mut child = Command::new(agent_exe)
            .arg("agent")
            .arg("--data-dir")
            .arg(scratch.path().join("agent"))
            .args(["--server", &format!("https://127.0.0.1:{port}")])
            .args(["--cluster-cidr", CLUSTER_CIDR])
            .args(agent_names.flags(kubelet_port))
            .env("K1S_TOKEN", token.trim())
            .env("K1S_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting k1s agent")?;
        wait_ready(kubelet_port, &mut child, Duration::from_secs(60))?;
        eprintln!("agent {} joined", child.id());
        Some(Running(child))
    } else {
        None
    };
    let workload = if args.pods > 0 {
        let client = HttpClient::from_kubeconfig_with(
            scratch.path().join("k1s.yaml"),
            None,
            Default::default(),
        )?;
        start_pods(&client, args.pods, &args.image).await?;
        eprintln!("{} pods Running", args.pods);
        Some(client)
    } else {
        None
    };
    eprintln!(
        "settling for {} s, then measuring for {} s",
        args.warmup, args.seconds
    );
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let t0 = Instant::now();
    let server_before = Sample::take(pid)?;
    let device_before = device_written(&data);
    let agent_before = agent.as_ref().map(|a| Sample::take(a.0.id())).transpose()?;
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let secs = t0.elapsed().as_secs_f64();
    let mut out = figures(pid, &server_before, secs)?;
    if let (Some(a), Some(b)) = (device_before, device_written(&data)) {
        out["device_write_kib_per_s"] = json!(b.saturating_sub(a) as f64 / 1024.0 / secs);
    }
    if let (Some(a), Some(before)) = (&agent, &agent_before) {
        out["agent"] = figures(a.0.id(), before, secs)?;
        if let Some(bin) = &args.agent_binary {
            out["agent"]["binary_mib"] =
                json!(std::fs::metadata(bin)?.len() as f64 / 1024.0 / 1024.0);
        }
    }
    let db_bytes = dir_size(&data);
    if let Some(client) = &workload {
        // Pods outlive a kubelet that stops (as upstream's): remove them first.
        if let Err(e) = delete_pods(client).await {
            eprintln!("deleting the bench's pods: {e:#}");
        }
    }
    drop(agent);
    drop(server);
    out["bench"] = json!("idle");
    out["kubelet"] = json!(args.kubelet);
    out["pods"] = json!(args.pods);
    out["window_s"] = json!(secs);
    out["binary_mib"] = json!(binary_bytes as f64 / 1024.0 / 1024.0);
    out["data_dir_mib"] = json!(db_bytes as f64 / 1024.0 / 1024.0);
    out["targets"] = json!({
        "disk_write_kib_per_s": 1.0,
        "rss_mib": 40.0,
        "agent_rss_mib": 15.0,
        "cpu_percent_of_a_core": 0.3,
        "binary_mib": 30.0,
    });
    println!("{out}");
    Ok(())
}

/// Creates `n` pods of one sleeping `image` container in `default` and waits until all run.
async fn start_pods(client: &HttpClient, n: usize, image: &str) -> anyhow::Result<()> {
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    let sas = ResourceRef::new("", "v1", "serviceaccounts", Some("default"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.get(&sas, "default").await.is_err() {
        if Instant::now() > deadline {
            anyhow::bail!("namespace default got no ServiceAccount within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for i in 0..n {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("idle-{i}")},
            "spec": {"terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "86400"]}]}});
        client
            .create(&pods, pod, &WriteParams::default())
            .await
            .context("creating a pod")?;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let list = client.list(&pods, &ListParams::default()).await?;
        let running = list
            .items
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        if running == n {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("{running} of {n} pods Running after 300 s (is --image {image} there?)");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes the bench's pods (grace 0) and waits until the kubelet has removed them.
async fn delete_pods(client: &HttpClient) -> anyhow::Result<()> {
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    let zero = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for p in client.list(&pods, &ListParams::default()).await?.items {
        if let Some(name) = p["metadata"]["name"].as_str() {
            let _ = client.delete(&pods, name, &zero).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !client
        .list(&pods, &ListParams::default())
        .await?
        .items
        .is_empty()
    {
        if Instant::now() > deadline {
            anyhow::bail!("pods still there 60 s after their deletion");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

//! `k1s bench idle`: what an idle k1s costs its machine (issue #31), measured on a scratch
//! data directory so a user can check the figures on their own box: this binary's size, then
//! a `k1s server` started from it and left alone — after `--warmup` seconds, its disk writes
//! (`/proc/PID/io` `write_bytes`, what reaches the block layer), CPU (`/proc/PID/stat`) over
//! `--seconds`, and its memory at the end (`VmRSS`, anonymous and file-backed parts).
//!
//! Without `--kubelet` the server runs without its node (`--disable-agent`: no root needed);
//! with it, as a node, on names of the bench's own (bridge `k1sidle0`, cgroup tree
//! `k1s-idle`, nftables tables `k1s-proxy-idle`/`k1s-policy-idle`), removed afterwards. Prints
//! one JSON line.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
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

fn cleanup_host() {
    // The kubelet's cgroup tree, in every hierarchy (v1) or the unified one (v2).
    let root = Path::new("/sys/fs/cgroup");
    remove_cgroup_tree(&root.join("k1s-idle"));
    for h in std::fs::read_dir(root).into_iter().flatten().flatten() {
        remove_cgroup_tree(&h.path().join("k1s-idle"));
    }
    for args in [
        vec!["nft", "delete", "table", "ip", "k1s-proxy-idle"],
        vec!["nft", "delete", "table", "ip", "k1s-policy-idle"],
        vec!["ip", "link", "del", "k1sidle0"],
    ] {
        let _ = Command::new(args[0])
            .args(&args[1..])
            .stderr(Stdio::null())
            .status();
    }
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
    let mut cmd = Command::new(&exe);
    cmd.arg("server")
        .arg("--data-dir")
        .arg(&data)
        .args(["--bind-address", "127.0.0.1", "--https-port"])
        .arg(port.to_string())
        .arg("--write-kubeconfig")
        .arg(scratch.path().join("k1s.yaml"))
        .env("K1S_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if args.kubelet {
        cmd.args([
            "--bridge-name",
            "k1sidle0",
            "--cgroup-top",
            "k1s-idle",
            "--proxy-table",
            "k1s-proxy-idle",
            "--policy-table",
            "k1s-policy-idle",
            "--kubelet-port",
        ])
        .arg(free_port()?.to_string())
        .args(["--pod-network-backend", "none", "--disable-dns"]);
    } else {
        cmd.arg("--disable-agent");
    }
    let started = Instant::now();
    let mut child = cmd.spawn().context("starting k1s server")?;
    wait_ready(port, &mut child, Duration::from_secs(60))?;
    let server = Running(child);
    let pid = server.0.id();
    eprintln!(
        "server {pid} ready in {:.1} s; settling for {} s, then measuring for {} s",
        started.elapsed().as_secs_f64(),
        args.warmup,
        args.seconds
    );
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let (w0, c0, t0) = (written(pid)?, cpu_ticks(pid)?, Instant::now());
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let (w1, c1, window) = (written(pid)?, cpu_ticks(pid)?, t0.elapsed());
    let (rss, anon, file) = memory(pid)?;
    let db_bytes = dir_size(&data);
    drop(server);
    if args.kubelet {
        cleanup_host();
    }
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let secs = window.as_secs_f64();
    let bytes = w1.saturating_sub(w0);
    println!(
        "{}",
        json!({
            "bench": "idle",
            "kubelet": args.kubelet,
            "window_s": secs,
            "disk_write_kib_per_s": bytes as f64 / 1024.0 / secs,
            "disk_write_bytes_per_min": (bytes as f64 * 60.0 / secs).round(),
            "cpu_percent_of_a_core": (c1.saturating_sub(c0)) as f64 / ticks / secs * 100.0,
            "rss_mib": rss as f64 / 1024.0,
            "rss_anon_mib": anon as f64 / 1024.0,
            "rss_file_mib": file as f64 / 1024.0,
            "binary_mib": binary_bytes as f64 / 1024.0 / 1024.0,
            "data_dir_mib": db_bytes as f64 / 1024.0 / 1024.0,
            "targets": {"disk_write_kib_per_s": 1.0, "rss_mib": 40.0, "cpu_percent_of_a_core": 0.3, "binary_mib": 30.0},
        })
    );
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

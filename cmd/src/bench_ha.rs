//! `k1s bench ha`: the HA control plane (issue #30) on this machine. It starts an etcd
//! (Debian's `etcd-server`, or `--etcd`) and `--servers` k1s servers from this binary on a
//! scratch directory (the first with `--datastore-endpoint`, the others joined with
//! `--server` and `--token`), then measures:
//!
//! - **failover**: `--kills` times, the server holding the scheduler's Lease is SIGKILLed, a
//!   pod is created through another server at once, and the time until it is bound to a node
//!   (a stand-in Node) is taken: the dead leader's Lease running out plus the new leader's
//!   start and first scheduling. The killed server is started again before the next round;
//! - **throughput**: ConfigMap creates per second with `--clients` clients spread over 1, 2
//!   and 3 (up to `--servers`) servers, on the one etcd.
//!
//! Prints progress on stderr and one JSON line on stdout; everything is removed afterwards.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use k1s_api::client::{Client, ResourceRef, WriteParams};
use k1s_api::http_client::{HttpClient, HttpOptions};
use k1s_api::kubeconfig::Kubeconfig;
use serde_json::{Value, json};

use crate::bench_idle::free_port;

#[derive(Args, Debug)]
pub struct HaBenchArgs {
    /// The etcd binary (default: `etcd` on PATH).
    #[arg(long)]
    pub etcd: Option<PathBuf>,
    /// How many servers (2 or more).
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// Leader kills to time.
    #[arg(long, default_value_t = 5)]
    pub kills: usize,
    /// Concurrent clients for the throughput runs.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// ConfigMaps created per throughput run.
    #[arg(long, default_value_t = 3_000)]
    pub creates: usize,
    /// Where the scratch directory goes.
    #[arg(long, default_value = "/var/tmp")]
    pub dir: PathBuf,
}

/// A child process, SIGKILLed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn etcd_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_owned());
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("etcd"))
                .find(|p| p.is_file())
        })
        .context("no etcd on PATH: apt-get install etcd-server, or give --etcd")
}

/// One k1s server of the bench.
struct ServerProc {
    proc: Option<Proc>,
    data: PathBuf,
    port: u16,
    args: Vec<String>,
}

impl ServerProc {
    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn start(&mut self) -> anyhow::Result<()> {
        let exe = std::env::current_exe()?;
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.data.with_extension("log"))?;
        let child = Command::new(exe)
            .arg("server")
            .args(&self.args)
            .env("K1S_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()?;
        self.proc = Some(Proc(child));
        Ok(())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.data.with_extension("log")).unwrap_or_default()
    }
}

fn client_for(kubeconfig: &Path, url: &str) -> anyhow::Result<HttpClient> {
    let resolved = Kubeconfig::load(kubeconfig)?.resolve(None)?;
    Ok(HttpClient::with_options(
        url,
        resolved.tls,
        HttpOptions {
            request_timeout: Duration::from_secs(30),
            ..Default::default()
        },
    )?)
}

async fn wait_ready(c: &HttpClient, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if c.get_bytes("/readyz").await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("{what} did not become ready in 120 s")
}

async fn lease_holder(c: &HttpClient) -> Option<String> {
    let lease = c
        .get(
            &ResourceRef::new("coordination.k8s.io", "v1", "leases", Some("kube-system")),
            "kube-scheduler",
        )
        .await
        .ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
}

pub async fn run(args: HaBenchArgs) -> anyhow::Result<()> {
    if args.servers < 2 {
        bail!("--servers must be at least 2");
    }
    let etcd_bin = etcd_binary(args.etcd.as_deref())?;
    let scratch = tempfile::Builder::new()
        .prefix("k1s-bench-ha-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("a scratch directory in {}", args.dir.display()))?;
    let root = scratch.path();
    let (client_port, peer_port) = (free_port()?, free_port()?);
    let endpoint = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let _etcd = Proc(
        Command::new(&etcd_bin)
            .arg(format!("--data-dir={}", root.join("etcd").display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=default={peer}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", etcd_bin.display()))?,
    );
    let version =
        String::from_utf8_lossy(&Command::new(&etcd_bin).arg("--version").output()?.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();

    let mut servers: Vec<ServerProc> = Vec::new();
    let kubeconfig = root.join("admin.yaml");
    for i in 0..args.servers {
        let data = root.join(format!("server-{i}"));
        let port = free_port()?;
        let mut a: Vec<String> = [
            "--data-dir",
            &data.display().to_string(),
            "--bind-address",
            "127.0.0.1",
            "--https-port",
            &port.to_string(),
            "--disable-agent",
            "--disable-snapshots",
            "--node-monitor-grace-period=1h",
            "--write-kubeconfig",
            &root
                .join(format!("kubeconfig-{i}.yaml"))
                .display()
                .to_string(),
        ]
        .map(String::from)
        .to_vec();
        if i == 0 {
            a.extend(["--datastore-endpoint".into(), endpoint.clone()]);
        } else {
            let token = std::fs::read_to_string(servers[0].data.join("server/token"))?;
            a.extend([
                "--server".into(),
                servers[0].url(),
                "--token".into(),
                token.trim().to_owned(),
            ]);
        }
        let mut s = ServerProc {
            proc: None,
            data,
            port,
            args: a,
        };
        s.start()?;
        if i == 0 {
            // The others join through the first: it must be up, and its kubeconfig is the
            // bench's (the same CA and admin certificate are good on every server).
            let path = root.join("kubeconfig-0.yaml");
            let deadline = Instant::now() + Duration::from_secs(60);
            while !path.exists() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            std::fs::copy(&path, &kubeconfig).context("the first server's kubeconfig")?;
        }
        wait_ready(&client_for(&kubeconfig, &s.url())?, &format!("server {i}")).await?;
        eprintln!("server {i} ready at {}", s.url());
        servers.push(s);
    }
    let clients: Vec<HttpClient> = servers
        .iter()
        .map(|s| client_for(&kubeconfig, &s.url()))
        .collect::<anyhow::Result<_>>()?;
    clients[0]
        .create(
            &ResourceRef::new("", "v1", "nodes", None),
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "stand-in", "labels": {"kubernetes.io/hostname": "stand-in"}},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                           "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}),
            &WriteParams::default(),
        )
        .await
        .context("creating the stand-in node")?;

    let failover = failovers(&args, &mut servers, &clients).await?;
    let throughput = throughputs(&args, &clients).await?;
    let report = json!({
        "etcd": version,
        "servers": args.servers,
        "failover_seconds": failover,
        "creates_per_second": throughput,
    });
    println!("{report}");
    Ok(())
}

/// Kill rounds: the failover times, with p50/p99.
async fn failovers(
    args: &HaBenchArgs,
    servers: &mut [ServerProc],
    clients: &[HttpClient],
) -> anyhow::Result<Value> {
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    let mut times = Vec::new();
    for round in 0..args.kills {
        // Wait for a leader, and find which server it is (its identity is in its own log).
        let deadline = Instant::now() + Duration::from_secs(60);
        let (leader, holder) = loop {
            if let Some(h) = lease_holder(&clients[0]).await
                && let Some(i) = servers.iter().position(|s| s.log().contains(&h))
                && servers[i].proc.is_some()
            {
                break (i, h);
            }
            if Instant::now() > deadline {
                bail!("no scheduler leader after 60 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let other = (leader + 1) % servers.len();
        let name = format!("failover-{round}");
        let t0 = Instant::now();
        servers[leader].proc = None; // SIGKILL
        clients[other]
            .create(
                &pods,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}),
                &WriteParams::default(),
            )
            .await
            .context("creating a pod through a surviving server")?;
        loop {
            let pod = clients[other].get(&pods, &name).await?;
            if pod["spec"]["nodeName"].as_str().is_some() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(120) {
                bail!("{name} not scheduled within 120 s of the leader's death");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = t0.elapsed().as_secs_f64();
        eprintln!(
            "round {round}: leader {leader} killed, a pod scheduled {took:.2} s later (old holder {holder})"
        );
        times.push(took);
        servers[leader].start()?;
        wait_ready(&clients[leader], &format!("server {leader} again")).await?;
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| sorted[((sorted.len() as f64 - 1.0) * p).round() as usize];
    Ok(json!({
        "runs": times,
        "p50": pct(0.5),
        "p99": pct(0.99),
    }))
}

/// Creates per second with the clients spread over 1, 2, 3 servers.
async fn throughputs(args: &HaBenchArgs, clients: &[HttpClient]) -> anyhow::Result<Value> {
    let mut out = serde_json::Map::new();
    for n in 1..=clients.len().min(3) {
        let ns = format!("bench-ha-{n}");
        clients[0]
            .create(
                &ResourceRef::new("", "v1", "namespaces", None),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                &WriteParams::default(),
            )
            .await?;
        let r = ResourceRef::new("", "v1", "configmaps", Some(&ns));
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        let started = Instant::now();
        for k in 0..args.clients.max(1) {
            let c = clients[k % n].clone();
            let (r, next, total) = (r.clone(), next.clone(), args.creates);
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return Ok::<(), k1s_api::client::ClientError>(());
                    }
                    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("c-{i}")}, "data": {"k": "v"}});
                    c.create(&r, obj, &WriteParams::default()).await?;
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.context("a client task")?
                .context("creating ConfigMaps")?;
        }
        let rate = args.creates as f64 / started.elapsed().as_secs_f64();
        eprintln!("{n} server(s): {rate:.0} creates/s");
        out.insert(format!("{n}"), json!(rate.round()));
    }
    Ok(Value::Object(out))
}

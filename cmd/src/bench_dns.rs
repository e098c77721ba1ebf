//! `k1s bench dns`: the cluster DNS server's throughput, latency and memory, beside
//! Debian's dnsmasq serving the same names in the same run.
//!
//! - **Cluster names**: k1s's server with N ClusterIP Services in its index (fed directly:
//!   the informers' delivery is the API benchmark's concern) and a dnsmasq with the same N
//!   names in a hosts file, both on loopback; one load generator (closed loop, `--clients`
//!   queries in flight, its own thread) asks random names of the set for `--seconds`, and
//!   reports answers per second and latency p50/p99 under that load.
//! - **Forwarded names, cached**: k1s's forwarder and a caching dnsmasq both in front of a
//!   third dnsmasq that answers `*.ext.bench`; warmed with every name once, then asked again.
//! - **Memory**: the RSS growth of this process for N Services in the index, and of dnsmasq
//!   for N hosts lines (each against an empty start).
//! - **Propagation**: an API server in process on a scratch store and the DNS server's real
//!   informers on its client; Services created and deleted one at a time, each timed from the
//!   API's answer to the DNS server answering (resp. NXDOMAIN), polled every 0.5 ms.
//!
//! Prints one JSON line per measurement. Needs dnsmasq (Debian `dnsmasq-base`).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use serde_json::json;

#[derive(Args, Debug)]
pub struct DnsBenchArgs {
    /// Services (names) in the cluster zone.
    #[arg(long, default_value_t = 10_000)]
    pub services: usize,
    /// Seconds of load per measurement.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Queries in flight.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Forwarded names asked (each cached after its first answer).
    #[arg(long, default_value_t = 1_000)]
    pub forwarded: usize,
    /// Services created and deleted one at a time through an API server in process, each
    /// timed from the write to the DNS answer (0 skips it).
    #[arg(long, default_value_t = 100)]
    pub propagation: usize,
}

/// A dnsmasq of the bench's own, killed on drop.
struct Dnsmasq(Child);

impl Dnsmasq {
    fn start(port: u16, extra: &[String]) -> anyhow::Result<Dnsmasq> {
        let child = Command::new("dnsmasq")
            .args([
                "--keep-in-foreground",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--listen-address=127.0.0.1",
                &format!("--port={port}"),
                "--pid-file=",
                "--user=root",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting dnsmasq (apt-get install dnsmasq-base)")?;
        Ok(Dnsmasq(child))
    }

    fn rss_kib(&self) -> u64 {
        rss_of(&format!("/proc/{}/status", self.0.id()))
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_of(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn free_udp_port() -> anyhow::Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn cluster_ip(i: usize) -> String {
    format!("10.43.{}.{}", i / 250, i % 250 + 1)
}

fn service_name(i: usize) -> String {
    format!("svc-{i}.bench.svc.cluster.local")
}

/// A query for `name`, encoded (its ID is set per send).
fn query(name: &str) -> anyhow::Result<Vec<u8>> {
    let mut m = Message::new();
    m.set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name)?, RecordType::A));
    Ok(m.to_vec()?)
}

/// What one load run measured.
struct Load {
    answers: u64,
    failures: u64,
    qps: f64,
    p50_us: u64,
    p99_us: u64,
}

/// Closed-loop load from its own thread: `clients` tasks each send a query for a random one
/// of `queries` and wait for its answer (1 s at most), for `seconds`.
fn load(
    server: SocketAddr,
    queries: Arc<Vec<Vec<u8>>>,
    clients: usize,
    seconds: u64,
) -> anyhow::Result<Load> {
    std::thread::spawn(move || -> anyhow::Result<Load> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let mut tasks = Vec::new();
            for _ in 0..clients {
                let queries = queries.clone();
                tasks.push(tokio::spawn(async move {
                    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
                    sock.connect(server).await?;
                    let mut hist = hdrhistogram::Histogram::<u64>::new(3)?;
                    let mut failures = 0u64;
                    let mut buf = [0u8; 4096];
                    while Instant::now() < deadline {
                        let mut q = queries[rand::random_range(0..queries.len())].clone();
                        let id: u16 = rand::random();
                        q[..2].copy_from_slice(&id.to_be_bytes());
                        let start = Instant::now();
                        sock.send(&q).await?;
                        let got = tokio::time::timeout(Duration::from_secs(1), async {
                            loop {
                                let n = sock.recv(&mut buf).await?;
                                if n >= 2 && buf[..2] == id.to_be_bytes() {
                                    return Ok::<_, std::io::Error>(());
                                }
                            }
                        })
                        .await;
                        match got {
                            Ok(Ok(())) => {
                                hist.record(start.elapsed().as_micros() as u64)?;
                            }
                            _ => failures += 1,
                        }
                    }
                    Ok::<_, anyhow::Error>((hist, failures))
                }));
            }
            let mut all = hdrhistogram::Histogram::<u64>::new(3)?;
            let mut failures = 0;
            for t in tasks {
                let (h, f) = t.await??;
                all.add(h)?;
                failures += f;
            }
            Ok(Load {
                answers: all.len(),
                failures,
                qps: all.len() as f64 / seconds as f64,
                p50_us: all.value_at_quantile(0.5),
                p99_us: all.value_at_quantile(0.99),
            })
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the load generator panicked"))?
}

fn report(case: &str, server: &str, names: usize, args: &DnsBenchArgs, l: &Load) {
    println!(
        "{}",
        json!({
            "bench": "dns", "case": case, "server": server, "names": names,
            "clients": args.clients, "seconds": args.seconds,
            "qps": l.qps.round(), "p50_us": l.p50_us, "p99_us": l.p99_us,
            "answers": l.answers, "failures": l.failures,
        })
    );
}

/// Waits (5 s at most) until `server` answers `q`.
fn answering(server: SocketAddr, q: &[u8]) -> anyhow::Result<()> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(server)?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        // Refused while nothing listens yet: try again.
        if sock.send(q).is_ok() && sock.recv(&mut buf).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!("{server} did not answer within 5 s")
}

/// Asks every query once (fills caches).
fn warm(server: SocketAddr, queries: &[Vec<u8>]) -> anyhow::Result<()> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(server)?;
    sock.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0u8; 4096];
    for q in queries {
        sock.send(q)?;
        sock.recv(&mut buf)
            .with_context(|| format!("no answer from {server} while warming"))?;
    }
    Ok(())
}

pub async fn run(args: DnsBenchArgs) -> anyhow::Result<()> {
    let n = args.services;
    // The names and their addresses.
    let services: Vec<k8s_openapi::api::core::v1::Service> = (0..n)
        .map(|i| {
            serde_json::from_value(json!({
                "metadata": {"namespace": "bench", "name": format!("svc-{i}")},
                "spec": {"clusterIP": cluster_ip(i), "clusterIPs": [cluster_ip(i)],
                    "ports": [{"name": "http", "port": 80}]},
            }))
        })
        .collect::<Result<_, _>>()?;
    let cluster_queries = Arc::new(
        (0..n)
            .map(|i| query(&format!("{}.", service_name(i))))
            .collect::<anyhow::Result<Vec<_>>>()?,
    );

    // The upstream for forwarded names: every *.ext.bench is 192.0.2.1, TTL 300.
    let up_port = free_udp_port()?;
    let _upstream = Dnsmasq::start(
        up_port,
        &[
            "--address=/ext.bench/192.0.2.1".into(),
            "--local-ttl=300".into(),
        ],
    )?;

    // k1s: its server on loopback, the index filled directly.
    let mut config = k1s_dns::DnsConfig::new("bench", "127.0.0.1".parse()?);
    config.port = 0;
    config.metrics_port = None;
    config.upstreams = vec![SocketAddr::from(([127, 0, 0, 1], up_port))];
    let server = k1s_dns::DnsServer::bind(config)?;
    let k1s_addr = server.local_addr()?;
    let index = server.index();
    let before = rss_of("/proc/self/status");
    {
        let mut ix = index.write().map_err(|_| anyhow::anyhow!("index lock"))?;
        for s in &services {
            let name = s.metadata.name.as_deref().unwrap_or_default();
            ix.apply_service("bench", name, Some(s));
        }
    }
    let k1s_kib = rss_of("/proc/self/status").saturating_sub(before);
    drop(services);
    server.set_synced();
    let cancel = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(server.serve(cancel.clone()));

    // dnsmasq: the same names in a hosts file.
    let dir = tempfile::tempdir()?;
    let hosts = dir.path().join("hosts");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "")?;
    let mut text = String::with_capacity(n * 48);
    for i in 0..n {
        text.push_str(&format!("{} {}\n", cluster_ip(i), service_name(i)));
    }
    std::fs::write(&hosts, text)?;
    let peer_port = free_udp_port()?;
    let flags = |file: &std::path::Path| -> Vec<String> {
        vec![
            format!("--addn-hosts={}", file.display()),
            "--local-ttl=5".into(),
            format!("--server=/ext.bench/127.0.0.1#{up_port}"),
            "--cache-size=10000".into(),
        ]
    };
    // Its memory for the names: against the same dnsmasq with an empty hosts file.
    let base = Dnsmasq::start(free_udp_port()?, &flags(&empty))?;
    let peer = Dnsmasq::start(peer_port, &flags(&hosts))?;
    let peer_addr = SocketAddr::from(([127, 0, 0, 1], peer_port));
    // Both up (dnsmasq reads its hosts file at start).
    for addr in [
        peer_addr,
        k1s_addr,
        SocketAddr::from(([127, 0, 0, 1], up_port)),
    ] {
        answering(addr, &cluster_queries[0])?;
    }
    let dnsmasq_kib = peer.rss_kib().saturating_sub(base.rss_kib());
    drop(base);
    for (server, kib) in [("k1s", k1s_kib), ("dnsmasq", dnsmasq_kib)] {
        println!(
            "{}",
            json!({"bench": "dns", "case": "memory for the names", "server": server,
                "names": n, "kib": kib,
                "kib_per_10000": (kib as f64 * 10_000.0 / n.max(1) as f64).round()})
        );
    }

    for (name, addr) in [("k1s", k1s_addr), ("dnsmasq", peer_addr)] {
        let l = load(addr, cluster_queries.clone(), args.clients, args.seconds)?;
        report("cluster names", name, n, &args, &l);
    }

    let forwarded = Arc::new(
        (0..args.forwarded)
            .map(|i| query(&format!("n{i}.ext.bench.")))
            .collect::<anyhow::Result<Vec<_>>>()?,
    );
    for (name, addr) in [("k1s", k1s_addr), ("dnsmasq", peer_addr)] {
        warm(addr, &forwarded)?;
        let l = load(addr, forwarded.clone(), args.clients, args.seconds)?;
        report("forwarded names, cached", name, args.forwarded, &args, &l);
    }
    cancel.cancel();
    let _ = serving.await;
    if args.propagation > 0 {
        propagation(&args).await?;
    }
    Ok(())
}

/// Whether `server` answers `name` with an address (true) or NXDOMAIN (false); `None` for
/// anything else (no answer yet, SERVFAIL).
fn resolves(sock: &std::net::UdpSocket, name: &str) -> Option<bool> {
    let q = query(name).ok()?;
    sock.send(&q).ok()?;
    let mut buf = [0u8; 1500];
    let n = sock.recv(&mut buf).ok()?;
    let m = Message::from_vec(&buf[..n]).ok()?;
    match m.response_code() {
        hickory_proto::op::ResponseCode::NoError if !m.answers().is_empty() => Some(true),
        hickory_proto::op::ResponseCode::NXDomain => Some(false),
        _ => None,
    }
}

/// Polls (every 0.5 ms, 10 s at most) until `name` resolves as `want`: the time it took.
fn until(sock: &std::net::UdpSocket, name: &str, want: bool, from: Instant) -> Option<Duration> {
    while from.elapsed() < Duration::from_secs(10) {
        if resolves(sock, name) == Some(want) {
            return Some(from.elapsed());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    None
}

/// Creation → answered and deletion → NXDOMAIN through the real path: an API server in
/// process on a scratch store, the DNS server's informers on its client.
async fn propagation(args: &DnsBenchArgs) -> anyhow::Result<()> {
    let parent = std::env::temp_dir();
    let cluster =
        crate::bench_scheduler::cluster::Cluster::start(&parent, false, Default::default()).await?;
    let mut config = k1s_dns::DnsConfig::new("bench", "127.0.0.1".parse()?);
    config.port = 0;
    config.metrics_port = None;
    let server = k1s_dns::DnsServer::bind(config)?;
    let addr = server.local_addr()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(server.run(cluster.client.clone(), cancel.clone()));
    let services = k1s_api::client::ResourceRef::new("", "v1", "services", Some("default"));
    let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    // Synced: the kubernetes Service answers.
    let sync = Instant::now();
    let sock2 = sock.try_clone()?;
    tokio::task::spawn_blocking(move || {
        until(&sock2, "kubernetes.default.svc.cluster.local.", true, sync)
    })
    .await?
    .context("the DNS server never synced")?;
    let (mut added, mut deleted) = (Vec::new(), Vec::new());
    for i in 0..args.propagation {
        let name = format!("prop-{i}");
        let fqdn = format!("{name}.default.svc.cluster.local.");
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}]}});
        let t = Instant::now();
        cluster
            .client
            .create(&services, svc, &Default::default())
            .await
            .map_err(|e| anyhow::anyhow!("creating a Service: {}", e.message))?;
        let s = sock.try_clone()?;
        let f = fqdn.clone();
        added.push(
            tokio::task::spawn_blocking(move || until(&s, &f, true, t))
                .await?
                .context("a new Service never resolved")?,
        );
        let t = Instant::now();
        cluster
            .client
            .delete(&services, &name, &Default::default())
            .await
            .map_err(|e| anyhow::anyhow!("deleting a Service: {}", e.message))?;
        let s = sock.try_clone()?;
        deleted.push(
            tokio::task::spawn_blocking(move || until(&s, &fqdn, false, t))
                .await?
                .context("a deleted Service kept resolving")?,
        );
    }
    for (case, mut v) in [
        ("created → answered", added),
        ("deleted → NXDOMAIN", deleted),
    ] {
        v.sort();
        let ms = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)].as_secs_f64() * 1e3;
        println!(
            "{}",
            json!({"bench": "dns", "case": case, "server": "k1s", "services": args.propagation,
                "p50_ms": (ms(0.5) * 100.0).round() / 100.0, "p99_ms": (ms(0.99) * 100.0).round() / 100.0,
                "max_ms": (ms(1.0) * 100.0).round() / 100.0})
        );
    }
    cancel.cancel();
    let _ = running.await;
    cluster.stop().await;
    Ok(())
}

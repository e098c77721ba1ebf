//! `k1s bench store`: measures whether this machine's disk is good enough for the datastore,
//! optionally against an etcd in the same run, and prints one JSON object as its last line.
//! `k1s bench api` (in `bench_api`) measures a running API server over HTTPS.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use k1s_store::Store;
use k1s_store::bench::{self, BenchConfig, BenchReport};
use k1s_store::etcd::{EtcdStore, parse_endpoints};
use k1s_store::redb::{RedbConfig, RedbStore};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Durable put throughput and latency (1 and N writers), range reads and watch delivery.
    Store(StoreBenchArgs),
    /// A running API server over HTTPS: concurrent creates, full LISTs of many pods, and watch
    /// delivery to many watchers.
    Api(crate::bench_api::ApiBenchArgs),
    /// Pod start latency on a running server (create → Running, p50/p99), and container start
    /// time of the runtime beside runc's.
    Pods(crate::bench_pods::PodsBenchArgs),
    /// Scheduling throughput in process (scheduler_perf's shapes on hollow nodes), and a
    /// 1,000-replica Deployment with the controller manager.
    Scheduler(crate::bench_scheduler::SchedulerBenchArgs),
    /// The service proxy: rules programmed per change (p50/p99) and full syncs at 1,000 and
    /// 10,000 Services, its memory, and ClusterIP against pod-IP throughput (wrk), in
    /// scratch network namespaces.
    Proxy(crate::bench_proxy::ProxyBenchArgs),
    /// The cluster DNS: answers per second and latency for 10,000 Service names and for
    /// cached forwarded names, and memory per name, beside dnsmasq in the same run.
    Dns(crate::bench_dns::DnsBenchArgs),
    /// The pod network across nodes: pod-to-pod throughput over host-gw and VXLAN beside
    /// two plain namespaces on the same link, in scratch network namespaces.
    Podnet(crate::bench_podnet::PodnetBenchArgs),
    /// NetworkPolicy enforcement: the table programmed per change (p50/p99) and whole at 100
    /// and 1,000 policies, and its memory, in a scratch network namespace.
    Netpol(crate::bench_netpol::NetpolBenchArgs),
    /// The HA control plane: failover time (leader killed → a pod scheduled, p50/p99) and
    /// create throughput with 1, 2 and 3 servers, on a scratch etcd.
    Ha(crate::bench_ha::HaBenchArgs),
    /// What an idle server costs: disk writes per second, CPU, memory and binary size, on a
    /// scratch data directory (`--kubelet` to include its node).
    Idle(crate::bench_idle::IdleBenchArgs),
}

#[derive(Args, Debug)]
pub struct StoreBenchArgs {
    /// Directory on the disk to test; a scratch database is created in it and removed after.
    #[arg(long, default_value = "/var/lib/k1s")]
    pub dir: PathBuf,
    /// Also run the workload against this etcd (client URL) and print the ratios.
    #[arg(long)]
    pub etcd: Option<String>,
    /// Puts by the single writer.
    #[arg(long, default_value_t = 2_000)]
    pub single_ops: usize,
    /// Puts shared by the concurrent writers.
    #[arg(long, default_value_t = 40_000)]
    pub concurrent_ops: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 64)]
    pub writers: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,
    /// Keys in the prefix that each range read lists.
    #[arg(long, default_value_t = 1_000)]
    pub range_keys: usize,
    /// Range reads to time.
    #[arg(long, default_value_t = 500)]
    pub range_reads: usize,
    /// Puts whose watch delivery is timed.
    #[arg(long, default_value_t = 2_000)]
    pub watch_events: usize,
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Store(args) => store(args).await,
        BenchCommand::Api(args) => crate::bench_api::run(args).await,
        BenchCommand::Ha(args) => crate::bench_ha::run(args).await,
        BenchCommand::Pods(args) => crate::bench_pods::run(args).await,
        BenchCommand::Scheduler(args) => crate::bench_scheduler::run(args).await,
        BenchCommand::Proxy(args) => crate::bench_proxy::run(args).await,
        BenchCommand::Dns(args) => crate::bench_dns::run(args).await,
        BenchCommand::Podnet(args) => crate::bench_podnet::run(args).await,
        BenchCommand::Netpol(args) => crate::bench_netpol::run(args).await,
        BenchCommand::Idle(args) => crate::bench_idle::run(args).await,
    }
}

async fn store(args: StoreBenchArgs) -> anyhow::Result<()> {
    let cfg = BenchConfig {
        single_ops: args.single_ops,
        concurrent_ops: args.concurrent_ops,
        writers: args.writers,
        value_size: args.value_size,
        range_keys: args.range_keys,
        range_ops: args.range_reads,
        watch_ops: args.watch_events,
    };
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating bench directory {}", args.dir.display()))?;
    let scratch = args.dir.join(format!("k1s-bench-{}", std::process::id()));
    let k1s = {
        let path = scratch.join("bench.redb");
        let store =
            tokio::task::spawn_blocking(move || RedbStore::open(RedbConfig::new(path))).await??;
        let store: Arc<dyn Store> = Arc::new(store);
        eprintln!("k1s (redb) in {} ...", scratch.display());
        let report = bench::run(store, "k1s-redb", "/bench/", &cfg).await;
        let _ = std::fs::remove_dir_all(&scratch);
        report?
    };
    print_report(&k1s);
    let etcd = match &args.etcd {
        None => None,
        Some(url) => {
            let store = EtcdStore::connect(&parse_endpoints(url))
                .await
                .with_context(|| format!("connecting to etcd at {url}"))?;
            let store: Arc<dyn Store> = Arc::new(store);
            let prefix = format!("/k1s-bench-{}/", std::process::id());
            eprintln!("etcd at {url} ...");
            let report = bench::run(store.clone(), "etcd", &prefix, &cfg).await;
            let removed = bench::cleanup(&store, &prefix).await;
            if let Err(e) = removed {
                eprintln!("warning: could not remove bench keys under {prefix}: {e}");
            }
            let report = report?;
            print_report(&report);
            Some(report)
        }
    };
    let mut out = serde_json::json!({ "k1s": k1s });
    if let Some(etcd) = &etcd {
        let ratio = serde_json::json!({
            "put_1_ops": k1s.put_1.ops_per_sec / etcd.put_1.ops_per_sec,
            "put_n_ops": k1s.put_n.ops_per_sec / etcd.put_n.ops_per_sec,
            "range_reads": k1s.range.reads_per_sec / etcd.range.reads_per_sec,
        });
        println!(
            "ratio k1s/etcd: 1 writer {:.2}x, {} writers {:.2}x, range reads {:.2}x",
            ratio["put_1_ops"].as_f64().unwrap_or_default(),
            k1s.put_n.writers,
            ratio["put_n_ops"].as_f64().unwrap_or_default(),
            ratio["range_reads"].as_f64().unwrap_or_default(),
        );
        out["etcd"] = serde_json::to_value(etcd)?;
        out["ratio"] = ratio;
    }
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}

fn print_report(r: &BenchReport) {
    println!("{}:", r.backend);
    for p in [&r.put_1, &r.put_n] {
        println!(
            "  put   {:>3} writers: {:>9.0} ops/s  p50 {:>7.3} ms  p99 {:>7.3} ms",
            p.writers, p.ops_per_sec, p.p50_ms, p.p99_ms
        );
    }
    println!(
        "  range {:>5} keys:  {:>9.0} reads/s p50 {:>7.3} ms  p99 {:>7.3} ms",
        r.range.keys_per_read, r.range.reads_per_sec, r.range.p50_ms, r.range.p99_ms
    );
    println!(
        "  watch: put→event p50 {:.3} ms p99 {:.3} ms; after ack p50 {:.3} ms p99 {:.3} ms",
        r.watch.put_to_event_p50_ms,
        r.watch.put_to_event_p99_ms,
        r.watch.after_ack_p50_ms,
        r.watch.after_ack_p99_ms
    );
}

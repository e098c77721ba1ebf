//! `k1s bench netpol`: what NetworkPolicy enforcement costs, against the real kernel in a
//! network namespace of the bench's own (nothing on the host is touched).
//!
//! A policy controller for one node is fed N policies over P pods in M namespaces (half of
//! the pods on this node; its typed changes fed directly: the informers' delivery is the API
//! benchmark's concern) and programs an `ip k1s-policy` table with `nft`: the full sync,
//! then the latency from one change to its transaction applied, p50/p99 over `--changes`
//! changes (alternately a policy's port edited and a pod relabelled, which moves it between
//! policies' peer sets); and the controller's memory (RSS growth of this process).
//!
//! Prints one JSON line per size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use k1s_netpol::{PolicyConfig, PolicyController};
use k1s_runtime::reflector::Change;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;

use crate::bench_proxy::{Netns, percentile, rss_kib};

#[derive(Args, Debug)]
pub struct NetpolBenchArgs {
    /// Numbers of NetworkPolicies to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000")]
    pub policies: Vec<usize>,
    /// Pods in the cluster (half of them on the measured node).
    #[arg(long, default_value_t = 1000)]
    pub pods: usize,
    /// Namespaces the pods and policies are spread over.
    #[arg(long, default_value_t = 50)]
    pub namespaces: usize,
    /// Changes timed per size.
    #[arg(long, default_value_t = 200)]
    pub changes: usize,
}

const NODE: &str = "bench-node";

fn pod(i: usize, namespaces: usize, generation: usize) -> Pod {
    let node = if i.is_multiple_of(2) { NODE } else { "other" };
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i}"), "namespace": format!("ns-{}", i % namespaces),
                     "labels": {"app": format!("app-{}", (i / namespaces + generation) % 10), "tier": if i.is_multiple_of(3) { "db" } else { "web" }}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [
            {"name": "http", "containerPort": 8080}, {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
        "status": {"phase": "Running", "podIP": format!("10.{}.{}.{}", 42 + i / 65_000, (i / 250) % 256, i % 250 + 2)}
    }))
    .unwrap_or_default()
}

/// Policy `k`: in namespace k % M, selecting one app; ingress from a pod selector and from a
/// labelled namespace on numbered and named ports; every fourth also restricts egress.
fn policy(k: usize, namespaces: usize, generation: usize) -> NetworkPolicy {
    let mut spec = json!({
        "podSelector": {"matchLabels": {"app": format!("app-{}", k % 10)}},
        "ingress": [
            {"from": [{"podSelector": {"matchLabels": {"tier": "web"}}}],
             "ports": [{"port": 8080 + (generation % 100) as i64}, {"port": "http"}]},
            {"from": [{"namespaceSelector": {"matchLabels": {"team": format!("t{}", k % 5)}}},
                      {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}}]}
        ]
    });
    if k.is_multiple_of(4) {
        spec["policyTypes"] = json!(["Ingress", "Egress"]);
        spec["egress"] = json!([{"to": [{"namespaceSelector": {}}], "ports": [{"port": "dns", "protocol": "UDP"}]}]);
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("pol-{k}"), "namespace": format!("ns-{}", k % namespaces)},
        "spec": spec
    }))
    .unwrap_or_default()
}

fn namespace(i: usize) -> Namespace {
    serde_json::from_value(
        json!({"metadata": {"name": format!("ns-{i}"), "labels": {"team": format!("t{}", i % 5)}}}),
    )
    .unwrap_or_default()
}

async fn one(policies: usize, args: &NetpolBenchArgs) -> anyhow::Result<()> {
    let ns = Netns::new(&format!("k1s-bench-netpol-{}", std::process::id()))?;
    let rss_before = rss_kib();
    let mut c = PolicyController::new(PolicyConfig::new(NODE), Arc::new(ns.nft()));
    for i in 0..args.namespaces {
        c.on_namespace(Change::Added(namespace(i)));
    }
    for i in 0..args.pods {
        c.on_pod(Change::Added(pod(i, args.namespaces, 0)));
    }
    for k in 0..policies {
        c.on_policy(Change::Added(policy(k, args.namespaces, 0)));
    }
    c.mark_synced();
    let started = Instant::now();
    let full = c
        .sync()
        .await
        .context("the full sync (is nft installed? apt-get install nftables)")?
        .context("the full sync did nothing")?;
    let full_ms = started.elapsed().as_secs_f64() * 1000.0;
    let rss_after = rss_kib();
    let mut latencies: Vec<Duration> = Vec::with_capacity(args.changes);
    let mut nft_part: Vec<Duration> = Vec::with_capacity(args.changes);
    for k in 0..args.changes {
        if k.is_multiple_of(2) {
            c.on_policy(Change::Modified(policy(
                (k * 7_919) % policies,
                args.namespaces,
                k + 1,
            )));
        } else {
            c.on_pod(Change::Modified(pod(
                (k * 7_919) % args.pods,
                args.namespaces,
                k + 1,
            )));
        }
        let t = Instant::now();
        if let Some(r) = c.sync().await? {
            nft_part.push(r.nft);
        }
        latencies.push(t.elapsed());
    }
    latencies.sort();
    nft_part.sort();
    println!(
        "{}",
        json!({
            "bench": "netpol-programming",
            "policies": policies,
            "pods": args.pods,
            "namespaces": args.namespaces,
            "policy_chains_on_node": full.policies,
            "isolated_pod_chains_on_node": full.pods,
            "full_sync_ms": full_ms,
            "full_sync_nft_ms": full.nft.as_secs_f64() * 1000.0,
            "change_to_programmed_ms": {
                "p50": percentile(&latencies, 0.50),
                "p99": percentile(&latencies, 0.99),
                "max": percentile(&latencies, 1.0),
                "changes": latencies.len(),
                "nft_p50": percentile(&nft_part, 0.50),
                "nft_p99": percentile(&nft_part, 0.99),
            },
            "controller_rss_growth_mib": (rss_after.saturating_sub(rss_before)) as f64 / 1024.0,
        })
    );
    Ok(())
}

pub async fn run(args: NetpolBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.pods > 0 && args.namespaces > 0,
        "--pods and --namespaces must be positive"
    );
    for &n in &args.policies {
        anyhow::ensure!(n > 0, "--policies: sizes must be positive");
        one(n, &args).await?;
    }
    Ok(())
}

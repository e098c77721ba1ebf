//! `k1s bench scheduler`: scheduling throughput in process, after upstream's scheduler_perf.
//! Each shape gets a fresh cluster ([`cluster`]: scratch store, the API semantics, the
//! scheduler as `k1s server` wires it, hollow nodes, no HTTPS and no kubelet; by default
//! without the admission plugins upstream's harness turns off), creates its
//! initial pods and waits for them (untimed), then creates the measured pods with a few
//! concurrent creators and times until all are bound ([`measure`]). The `deployment` shape
//! (issue #6) instead times one Deployment's pods from the Deployment's create, with the
//! controller manager running. After each shape the placement is checked ([`verify`]); a
//! shape whose pods were not really scheduled fails the run. One human line per shape, then
//! one JSON object as the last line.

pub(crate) mod cluster;
mod measure;
mod shapes;
mod verify;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use k1s_api::client::ResourceRef;
use k1s_apiserver::admission::plugins::{Plugin, parse_disabled};
use serde_json::{Value, json};

use cluster::Cluster;
use measure::{Timing, Tracker};
use shapes::{INIT_NS, MEASURED_NS, Plan, Shape, ShapeArg};
use verify::{NodeFact, PodFact};

#[derive(Args, Debug)]
pub struct SchedulerBenchArgs {
    /// Shapes to run (repeatable): basic, node-affinity, pod-anti-affinity, topology-spread,
    /// preemption, deployment, or all.
    #[arg(long = "shape", value_enum)]
    pub shapes: Vec<ShapeArg>,
    /// Hollow nodes of every shape (default: the shape's own).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Initial (untimed) pods of every shape (default: the shape's own).
    #[arg(long)]
    pub initial_pods: Option<usize>,
    /// Measured pods of every shape; the deployment's replicas (default: the shape's own).
    #[arg(long)]
    pub measured_pods: Option<usize>,
    /// Concurrent creators of nodes and pods (upstream's test utilities create pods 30 at a
    /// time).
    #[arg(long, default_value_t = 30)]
    pub creators: usize,
    /// Give up on a batch of pods not all bound after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_seconds: u64,
    /// terminationGracePeriodSeconds of the preemption victims. Upstream's are 0 (deleted at
    /// once); with more, each victim waits for the hollow kubelet's final delete.
    #[arg(long, default_value_t = 0)]
    pub victim_grace_seconds: i64,
    /// Directory for the scratch stores (one per shape, removed after).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    pub dir: PathBuf,
    /// Admission plugins the API server runs without, as upstream's scheduler_perf starts
    /// its kube-apiserver (no ServiceAccount controller there; priorities are set in the pod
    /// specs). `--disable-admission-plugins ''` runs `k1s server`'s whole chain.
    #[arg(long, value_delimiter = ',', default_value = HARNESS_DISABLED)]
    pub disable_admission_plugins: Vec<String>,
}

/// The admission plugins upstream's scheduler_perf starts kube-apiserver without
/// (`mustSetupCluster`): the bench's default.
const HARNESS_DISABLED: &str = "ServiceAccount,TaintNodesByCondition,Priority";

pub async fn run(args: SchedulerBenchArgs) -> anyhow::Result<()> {
    let plans = Shape::selected(&args.shapes)
        .into_iter()
        .map(|s| Plan::new(s, args.nodes, args.initial_pods, args.measured_pods))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let disabled =
        parse_disabled(&args.disable_admission_plugins).map_err(|e| anyhow::anyhow!("--{e}"))?;
    let mut report = json!({"bench": "scheduler", "build": build, "shapes": {},
        "disabled_admission_plugins": disabled.iter().map(|p| p.name()).collect::<Vec<_>>()});
    let mut failed = Vec::new();
    for plan in &plans {
        for note in &plan.notes {
            eprintln!("{}: {note}", plan.shape);
        }
        eprintln!(
            "{}: {} nodes, {} initial pods, {} measured pods ...",
            plan.shape, plan.nodes, plan.initial_pods, plan.measured_pods
        );
        let cluster =
            Cluster::start(&args.dir, plan.shape == Shape::Deployment, disabled.clone()).await?;
        let result = run_shape(&cluster, plan, &args).await;
        cluster.stop().await;
        let mut entry = serde_json::to_value(plan)?;
        match result {
            Ok((timing, placement)) => {
                println!("{}", human_line(plan, &timing, &placement));
                entry["timing"] = serde_json::to_value(&timing)?;
                entry["placement"] = placement;
            }
            Err(e) => {
                println!("{}: FAILED: {e:#}", plan.shape);
                entry["error"] = json!(format!("{e:#}"));
                failed.push(plan.shape.name());
            }
        }
        report["shapes"][plan.shape.name()] = entry;
    }
    println!("{report}");
    if !failed.is_empty() {
        anyhow::bail!("shapes failed: {}", failed.join(", "));
    }
    Ok(())
}

fn human_line(plan: &Plan, t: &Timing, placement: &Value) -> String {
    let what = if plan.shape == Shape::Deployment {
        format!("{} replicas on {} nodes", t.pods, plan.nodes)
    } else {
        format!(
            "{} pods on {} nodes ({} initial)",
            t.pods, plan.nodes, plan.initial_pods
        )
    };
    format!(
        "{}: {what}: {:.0} pods/s bound in {:.2} s; created {:.0} pods/s; create→bound p50 {:.1} ms p99 {:.1} ms; CPU {:.2} s ({:.2} ms/pod); placement ok {placement}",
        plan.shape,
        t.bound_per_second,
        t.seconds,
        t.created_per_second,
        t.latency_p50_ms,
        t.latency_p99_ms,
        t.cpu_seconds,
        t.cpu_ms_per_pod,
    )
}

async fn run_shape(
    cluster: &Cluster,
    plan: &Plan,
    args: &SchedulerBenchArgs,
) -> anyhow::Result<(Timing, Value)> {
    let timeout = Duration::from_secs(args.timeout_seconds);
    // Without Priority admission, pods carry their priority themselves (as upstream's
    // scheduler_perf templates do).
    let by_value = !cluster.admits_with(Plugin::Priority);
    let pod = |measured: bool, i: usize| {
        let mut pod = shapes::pod(plan.shape, measured, i);
        if by_value {
            shapes::priority_by_value(&mut pod);
        }
        pod
    };
    let t = Instant::now();
    cluster.create_nodes(plan.nodes, args.creators).await?;
    cluster.create_namespace(INIT_NS).await?;
    cluster.create_namespace(MEASURED_NS).await?;
    if plan.shape == Shape::Preemption && !by_value {
        let pcs = ResourceRef::new("scheduling.k8s.io", "v1", "priorityclasses", None);
        for pc in shapes::priority_classes() {
            cluster.create(&pcs, pc).await?;
        }
    }
    eprintln!(
        "{}: {} nodes created in {:.1} s",
        plan.shape,
        plan.nodes,
        t.elapsed().as_secs_f64()
    );
    let timing = if plan.shape == Shape::Deployment {
        deployment(cluster, plan, timeout).await?
    } else {
        if plan.initial_pods > 0 {
            let pods = (0..plan.initial_pods)
                .map(|i| {
                    let mut pod = pod(false, i);
                    if plan.shape == Shape::Preemption {
                        pod["spec"]["terminationGracePeriodSeconds"] =
                            json!(args.victim_grace_seconds);
                    }
                    pod
                })
                .collect();
            let init = measure::run_batch(&cluster.client, INIT_NS, pods, args.creators, timeout)
                .await
                .context("initial pods")?;
            eprintln!(
                "{}: {} initial pods bound in {:.1} s (not timed)",
                plan.shape, init.pods, init.seconds
            );
        }
        let pods = (0..plan.measured_pods).map(|i| pod(true, i)).collect();
        let timing =
            measure::run_batch(&cluster.client, MEASURED_NS, pods, args.creators, timeout).await;
        match timing {
            Ok(t) => t,
            Err(e) => {
                let why = why_pending(cluster, MEASURED_NS).await;
                return Err(e.context(format!("measured pods ({why})")));
            }
        }
    };
    let placement = check_placement(cluster, plan)
        .await
        .context("checking the placement")?;
    Ok((timing, placement))
}

/// Issue #6: from the Deployment's create until each of its pods exists and is bound.
async fn deployment(cluster: &Cluster, plan: &Plan, timeout: Duration) -> anyhow::Result<Timing> {
    let tracker = Tracker::start(cluster.client.clone(), MEASURED_NS).await?;
    let start = Instant::now();
    let cpu = measure::process_cpu();
    let deployments = ResourceRef::new("apps", "v1", "deployments", Some(MEASURED_NS));
    cluster
        .create(&deployments, shapes::deployment(plan.measured_pods))
        .await?;
    tracker.wait_bound(plan.measured_pods, timeout).await?;
    let cpu = measure::process_cpu().saturating_sub(cpu);
    let s = tracker.sightings();
    let created = s.seen.values().max().copied().unwrap_or(start);
    Ok(Timing::new(start, created, &s.seen, &s.bound).with_cpu(cpu))
}

/// What one pending pod of `namespace` says about itself: the scheduler's last message,
/// its nomination, and how many pods of the cluster are terminating.
async fn why_pending(cluster: &Cluster, namespace: &str) -> String {
    let Ok(pods) = cluster
        .list(&ResourceRef::new("", "v1", "pods", None))
        .await
    else {
        return "pods cannot be listed".into();
    };
    let terminating = pods
        .iter()
        .filter(|p| !p["metadata"]["deletionTimestamp"].is_null())
        .count();
    let pending = pods.iter().find(|p| {
        p["metadata"]["namespace"] == namespace
            && p["spec"]["nodeName"].as_str().unwrap_or("").is_empty()
    });
    let Some(p) = pending else {
        return format!("none pending now; {terminating} pods terminating");
    };
    let scheduled = p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .map(|c| format!("{} {}", c["reason"], c["message"]))
        .unwrap_or_else(|| "no PodScheduled condition".into());
    format!(
        "e.g. {} nominated to {}: {scheduled}; {terminating} pods terminating",
        p["metadata"]["name"], p["status"]["nominatedNodeName"]
    )
}

/// Checks the final state against the shape; returns a summary of the placement.
async fn check_placement(cluster: &Cluster, plan: &Plan) -> anyhow::Result<Value> {
    let nodes: HashMap<String, NodeFact> = cluster
        .list(&ResourceRef::new("", "v1", "nodes", None))
        .await?
        .iter()
        .map(NodeFact::from_json)
        .collect::<anyhow::Result<_>>()?;
    let pods: Vec<PodFact> = cluster
        .list(&ResourceRef::new("", "v1", "pods", None))
        .await?
        .iter()
        .map(PodFact::from_json)
        .collect::<anyhow::Result<_>>()?;
    verify::all_bound(&pods, &nodes, MEASURED_NS, plan.measured_pods)?;
    verify::within_capacity(&pods, &nodes)?;
    let used = |ns: &str| {
        pods.iter()
            .filter(|p| p.namespace == ns)
            .filter_map(|p| p.node.as_deref())
            .collect::<BTreeSet<_>>()
            .len()
    };
    let mut summary = json!({"nodes_used": used(MEASURED_NS)});
    match plan.shape {
        Shape::Basic | Shape::Deployment => {}
        Shape::NodeAffinity => {
            let zones: BTreeSet<String> = shapes::AFFINITY_ZONES.map(String::from).into();
            verify::node_affinity(&pods, &nodes, MEASURED_NS, &zones)?;
        }
        Shape::PodAntiAffinity => {
            verify::anti_affinity(&pods, shapes::COLOR, "green")?;
        }
        Shape::TopologySpread => {
            verify::zone_spread(&pods, &nodes, shapes::COLOR, "blue", shapes::MAX_SKEW)?;
            summary["zones"] = json!(verify::zone_counts(&pods, &nodes, shapes::COLOR, "blue"));
        }
        Shape::Preemption => {
            let left = pods.iter().filter(|p| p.namespace == INIT_NS).count();
            summary["victims"] = json!(plan.initial_pods - left.min(plan.initial_pods));
        }
    }
    if plan.shape != Shape::Preemption && plan.initial_pods > 0 {
        verify::all_bound(&pods, &nodes, INIT_NS, plan.initial_pods)?;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plugins the bench turns off by default (upstream's scheduler_perf harness).
    fn harness() -> BTreeSet<Plugin> {
        parse_disabled(&HARNESS_DISABLED.split(',').collect::<Vec<_>>()).unwrap()
    }

    fn args(dir: &std::path::Path) -> SchedulerBenchArgs {
        SchedulerBenchArgs {
            shapes: vec![],
            nodes: None,
            initial_pods: None,
            measured_pods: None,
            creators: 4,
            timeout_seconds: 120,
            victim_grace_seconds: 30,
            dir: dir.to_path_buf(),
            disable_admission_plugins: vec![],
        }
    }

    /// Every shape on a few hollow nodes, through the real API, scheduler and (for the
    /// Deployment) controllers; each run's own placement checks must pass. Preemption runs on
    /// one node: one preemptor, three victims that wait for the hollow kubelet (grace 30 s,
    /// longer than nothing but the hollow kubelet could make them go in time).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_shape_places_its_pods_on_a_small_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let args = args(dir.path());
        for shape in Shape::ALL {
            // Preemption: 4 low-priority pods fill the node; 3 must go.
            let (nodes, initial) = match shape {
                Shape::Preemption => (1, None),
                _ => (6, Some(3)),
            };
            let plan = Plan::new(shape, Some(nodes), initial, Some(6)).unwrap();
            let cluster = Cluster::start(dir.path(), shape == Shape::Deployment, harness())
                .await
                .unwrap();
            let result = run_shape(&cluster, &plan, &args).await;
            cluster.stop().await;
            let (timing, placement) =
                result.unwrap_or_else(|e| panic!("{shape} on {plan:?}: {e:#}"));
            assert_eq!(timing.pods, plan.measured_pods, "{shape}: {timing:?}");
            match shape {
                Shape::Preemption => assert_eq!(placement["victims"], 3, "{placement}"),
                Shape::TopologySpread => {
                    assert_eq!(
                        placement["zones"],
                        json!({"zone-0": 2, "zone-1": 2, "zone-2": 2})
                    )
                }
                Shape::PodAntiAffinity => assert_eq!(placement["nodes_used"], 3, "{placement}"),
                _ => {}
            }
        }
        // Nothing is left behind in the scratch directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Two preemptors on two full nodes: each preempts its own node (the scheduler counts
    /// the pods nominated to a node in its preemption dry run). With the server's whole
    /// admission chain: priorities come from PriorityClasses here.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn preemptors_do_not_share_one_cleared_node() {
        let dir = tempfile::tempdir().unwrap();
        let mut args = args(dir.path());
        args.timeout_seconds = 20;
        let plan = Plan::new(Shape::Preemption, Some(2), None, None).unwrap();
        let cluster = Cluster::start(dir.path(), false, BTreeSet::new())
            .await
            .unwrap();
        let result = run_shape(&cluster, &plan, &args).await;
        cluster.stop().await;
        let (_, placement) = result.unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(placement["victims"], 6, "{placement}");
    }
}

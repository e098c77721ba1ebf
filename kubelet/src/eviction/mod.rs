//! The eviction manager: which running pods the kubelet fails to protect the node, as
//! upstream's `pkg/kubelet/eviction` does with hard thresholds.
//!
//! Every [`crate::Config::eviction_interval`] (10 s, upstream's monitoring period):
//!
//! 1. Local storage limits, whatever the node's state: a pod whose disk-backed emptyDir uses
//!    more than its `sizeLimit`, whose container uses more ephemeral storage (writable layer
//!    and logs) than its `ephemeral-storage` limit, or whose containers together use more
//!    than the sum of their limits, is evicted, with upstream's messages.
//! 2. Node pressure: the signals of [`crate::eviction::pressure`] against `--eviction-hard`. Under disk
//!    pressure, node-level resources are reclaimed first (every unused image is deleted); if
//!    a threshold is still crossed, the pods are ranked as upstream ranks them and the first
//!    is evicted, one per interval:
//!    - memory: pods using more than they request first, then lower priority, then the
//!      usage above the request;
//!    - disk: the same with ephemeral storage (writable layers, logs, disk emptyDirs);
//!    - PIDs: lower priority, then more processes.
//!
//! Static pods, mirror pods and pods at system-critical priority are never evicted; pods that
//! ended or are being deleted are not candidates. An eviction ([`Eviction`]) goes to the pod's
//! worker through the pod feed: it kills the containers (grace period 1 s, upstream's for hard
//! thresholds), tears down the sandbox and volumes, and reports the pod `Failed` with reason
//! `Evicted`, the message, a `DisruptionTarget` condition, and an `Evicted` event. The pod
//! object stays (its controller replaces it).
//!
//! Usage comes from the summary API ([`crate::stats::StatsProvider`]).
//!
//! Not done: soft thresholds and their grace periods, `evictionMinimumReclaim`, pressure
//! transition periods, and evicting for inode pressure by inode usage (inode pressure ranks
//! by bytes).
//!
//! The folder owns node pressure too: [`pressure`] reads the signals (memory, disk, PIDs) and
//! decides the node conditions and admission; this module acts on them.

pub mod pressure;

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{ListParams, ResourceRef};
use k1s_api::quantity::{Format, Quantity};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Deps;
use crate::eviction::pressure::{Reading, Signals, Threshold, Thresholds};

/// What the kubelet tells a pod worker: evict the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    pub uid: String,
    /// Upstream's message (status, condition and event).
    pub message: String,
    /// The grace period of the kill.
    pub grace: Duration,
}

/// Upstream's grace period for evictions on hard thresholds.
pub const HARD_EVICTION_GRACE: Duration = Duration::from_secs(1);

/// A signal under pressure and the resource its messages name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Starved {
    Memory,
    Disk,
    Pids,
}

impl Starved {
    fn resource(self, signal: &str) -> &'static str {
        match self {
            Starved::Memory => "memory",
            Starved::Disk if signal.ends_with("inodesFree") => "inodes",
            Starved::Disk => "ephemeral-storage",
            Starved::Pids => "pids",
        }
    }
}

/// The first crossed threshold, in upstream's order (memory, node disk, image disk, PIDs):
/// the signal, its kind, the threshold and the reading.
pub fn crossed(
    signals: &Signals,
    thresholds: &Thresholds,
) -> Option<(&'static str, Starved, Threshold, Reading)> {
    const ORDER: &[(&str, Starved)] = &[
        ("memory.available", Starved::Memory),
        ("nodefs.available", Starved::Disk),
        ("nodefs.inodesFree", Starved::Disk),
        ("imagefs.available", Starved::Disk),
        ("imagefs.inodesFree", Starved::Disk),
        ("pid.available", Starved::Pids),
    ];
    ORDER.iter().find_map(|(signal, kind)| {
        let r = *signals.get(signal)?;
        let t = thresholds.get(signal)?;
        t.crossed(r.available, r.capacity)
            .then_some((*signal, *kind, t, r))
    })
}

/// A pod that may be evicted, with what ranking needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub uid: String,
    pub priority: i32,
    /// Usage of the starved resource (bytes, or processes).
    pub usage: i128,
    /// What the pod requests of it (0 for PIDs).
    pub request: i128,
    /// Per container: name, usage, request (for the message).
    pub containers: Vec<(String, i128, i128)>,
}

/// Orders `pods` as upstream's ranking for `kind`: the first is evicted.
pub fn rank(kind: Starved, pods: &mut [Candidate]) {
    pods.sort_by(|a, b| {
        let exceeds = |c: &Candidate| c.usage > c.request;
        let by_exceeding = || exceeds(b).cmp(&exceeds(a));
        let by_priority = || a.priority.cmp(&b.priority);
        match kind {
            Starved::Pids => by_priority().then(b.usage.cmp(&a.usage)),
            Starved::Memory | Starved::Disk => by_exceeding()
                .then_with(by_priority)
                .then((b.usage - b.request).cmp(&(a.usage - a.request))),
        }
    });
}

fn quantity(bytes: i128) -> String {
    Quantity::from_value(bytes.clamp(0, i64::MAX as i128) as i64, Format::BinarySI).to_canonical()
}

/// Upstream's eviction message for a pod evicted because `signal` crossed `threshold`.
pub fn pressure_message(
    signal: &str,
    kind: Starved,
    threshold: Threshold,
    reading: Reading,
    pod: &Candidate,
) -> String {
    let resource = kind.resource(signal);
    let amount = |v: i128| match kind {
        Starved::Memory | Starved::Disk if resource != "inodes" => quantity(v),
        _ => v.to_string(),
    };
    let mut m = format!(
        "The node was low on resource: {resource}. Threshold quantity: {}, available: {}. ",
        amount(threshold.amount(reading.capacity)),
        amount(reading.available),
    );
    if kind != Starved::Pids {
        for (name, usage, request) in &pod.containers {
            if usage > request {
                m.push_str(&format!(
                    "Container {name} was using {}, request is {}, has larger consumption of {resource}. ",
                    amount(*usage),
                    amount(*request)
                ));
            }
        }
    }
    m
}

/// Whether the kubelet may evict `pod`: not static, not a mirror, below system-critical
/// priority, running (not ended, not being deleted).
pub fn evictable(pod: &Value) -> bool {
    let ann = &pod["metadata"]["annotations"];
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    ann.get("kubernetes.io/config.mirror").is_none()
        && ann
            .get(crate::pod::static_pods::SOURCE_ANNOTATION)
            .is_none()
        && pod["spec"]["priority"].as_i64().unwrap_or(0)
            < i64::from(crate::eviction::pressure::SYSTEM_CRITICAL_PRIORITY)
        && pod["metadata"]["deletionTimestamp"].is_null()
        && !matches!(phase, "Succeeded" | "Failed")
}

fn requests(c: &Value, resource: &str) -> i128 {
    c["resources"]["requests"][resource]
        .as_str()
        .or(c["resources"]["limits"][resource].as_str())
        .and_then(|q| Quantity::parse(q).ok())
        .map_or(0, |q| i128::from(q.value()))
}

fn limit(c: &Value, resource: &str) -> Option<i128> {
    c["resources"]["limits"][resource]
        .as_str()
        .and_then(|q| Quantity::parse(q).ok())
        .map(|q| i128::from(q.value()))
}

fn used(v: &Value) -> i128 {
    i128::from(v["usedBytes"].as_u64().unwrap_or(0))
}

/// A container's ephemeral storage use in a summary entry: writable layer and logs.
fn container_ephemeral(c: &Value) -> i128 {
    used(&c["rootfs"]) + used(&c["logs"])
}

/// The candidate for `pod` (the API object) from its summary entry `stats`, for `kind`.
pub fn candidate(kind: Starved, pod: &Value, stats: &Value) -> Candidate {
    let spec_containers = pod["spec"]["containers"].as_array();
    let spec_of = |name: &str| {
        spec_containers
            .into_iter()
            .flatten()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let resource = match kind {
        Starved::Memory => "memory",
        _ => "ephemeral-storage",
    };
    let containers: Vec<(String, i128, i128)> = stats["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            let usage = match kind {
                Starved::Memory => i128::from(c["memory"]["workingSetBytes"].as_u64().unwrap_or(0)),
                _ => container_ephemeral(c),
            };
            let request = requests(&spec_of(&name), resource);
            (name, usage, request)
        })
        .collect();
    let (usage, request) = match kind {
        Starved::Memory => (
            i128::from(stats["memory"]["workingSetBytes"].as_u64().unwrap_or(0)),
            containers.iter().map(|c| c.2).sum(),
        ),
        Starved::Disk => (
            used(&stats["ephemeral-storage"]),
            containers.iter().map(|c| c.2).sum(),
        ),
        Starved::Pids => (
            i128::from(
                stats["process_stats"]["process_count"]
                    .as_u64()
                    .unwrap_or(0),
            ),
            0,
        ),
    };
    Candidate {
        uid: pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        priority: pod["spec"]["priority"].as_i64().unwrap_or(0) as i32,
        usage,
        request,
        containers,
    }
}

/// Why `pod` breaks its local storage limits (upstream's message), from its summary entry.
pub fn local_storage_violation(pod: &Value, stats: &Value) -> Option<String> {
    // emptyDir sizeLimit (disk-backed ones; memory-backed ones are bounded by their tmpfs).
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        let Some(size) = v["emptyDir"]["sizeLimit"].as_str() else {
            continue;
        };
        if v["emptyDir"]["medium"] == "Memory" {
            continue;
        }
        let Ok(limit) = Quantity::parse(size) else {
            continue;
        };
        let usage = stats["volume"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == v["name"])
            .map_or(0, used);
        if limit.value() > 0 && usage > i128::from(limit.value()) {
            return Some(format!(
                "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                v["name"].as_str().unwrap_or_default(),
                size
            ));
        }
    }
    // Per container.
    let spec_containers: Vec<&Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    for c in stats["containers"].as_array().into_iter().flatten() {
        let Some(spec) = spec_containers.iter().find(|s| s["name"] == c["name"]) else {
            continue;
        };
        if let Some(l) = limit(spec, "ephemeral-storage")
            && container_ephemeral(c) > l
        {
            return Some(format!(
                "Container {} exceeded its local ephemeral storage limit {:?}. ",
                c["name"].as_str().unwrap_or_default(),
                spec["resources"]["limits"]["ephemeral-storage"]
                    .as_str()
                    .unwrap_or_default()
            ));
        }
    }
    // The pod: only when every container has a limit.
    let limits: Option<Vec<i128>> = spec_containers
        .iter()
        .map(|c| limit(c, "ephemeral-storage"))
        .collect();
    if let Some(limits) = limits.filter(|l| !l.is_empty()) {
        let total: i128 = limits.iter().sum();
        if used(&stats["ephemeral-storage"]) > total {
            return Some(format!(
                "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
                quantity(total)
            ));
        }
    }
    None
}

/// Whether the pod has a local storage limit to watch (a disk emptyDir `sizeLimit`, a
/// container `ephemeral-storage` limit).
fn has_local_limits(pod: &Value) -> bool {
    let volumes = pod["spec"]["volumes"].as_array().into_iter().flatten();
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    volumes
        .into_iter()
        .any(|v| v["emptyDir"]["sizeLimit"].is_string() && v["emptyDir"]["medium"] != "Memory")
        || containers
            .into_iter()
            .any(|c| limit(c, "ephemeral-storage").is_some())
}

/// Why an eviction pass could not run (logged; the next pass tries again).
#[derive(Debug, thiserror::Error)]
pub enum EvictionError {
    #[error("listing this node's pods: {0}")]
    ListPods(#[source] k1s_api::client::ClientError),
}

/// One pass: the evictions to make now. The summary (which walks layers, logs and emptyDirs)
/// is built only when a pod has a local storage limit or a threshold is crossed.
pub async fn synchronize(
    deps: &Deps,
    stats: &crate::stats::StatsProvider,
) -> Result<Vec<Eviction>, EvictionError> {
    let cfg = &deps.config;
    let observe = || crate::eviction::pressure::observe(&cfg.root_dir, &cfg.images_dir());
    let mut pressure = crossed(&observe(), &cfg.eviction_hard);
    let list = deps
        .client
        .list(
            &ResourceRef::new("", "v1", "pods", None),
            &ListParams {
                field_selector: Some(format!("spec.nodeName={}", cfg.node_name)),
                ..Default::default()
            },
        )
        .await
        .map_err(EvictionError::ListPods)?;
    let pods: Vec<Value> = list.items.into_iter().filter(evictable).collect();
    let local_limits = pods.iter().any(has_local_limits);
    if !local_limits && pressure.is_none() {
        return Ok(Vec::new());
    }
    let summary = stats.summary(&pods);
    let entries: std::collections::HashMap<&str, &Value> = summary["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["podRef"]["uid"].as_str()?, s)))
        .collect();
    let uid = |pod: &Value| {
        pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let entry = |pod: &Value| entries.get(pod["metadata"]["uid"].as_str()?).copied();
    let evict = |uid: String, message: String| Eviction {
        uid,
        message,
        grace: HARD_EVICTION_GRACE,
    };
    if local_limits {
        let local: Vec<Eviction> = pods
            .iter()
            .filter_map(|p| Some(evict(uid(p), local_storage_violation(p, entry(p)?)?)))
            .collect();
        if !local.is_empty() {
            return Ok(local);
        }
    }

    if pressure.is_some_and(|(_, kind, _, _)| kind == Starved::Disk) {
        // Node-level resources first: every image no pod uses.
        match crate::images::gc_loop::reclaim(deps).await {
            Ok(freed) => tracing::info!(freed, "reclaimed unused images under disk pressure"),
            Err(e) => tracing::warn!(error = %e, "reclaiming unused images"),
        }
        pressure = crossed(&observe(), &cfg.eviction_hard);
    }
    let Some((signal, kind, threshold, reading)) = pressure else {
        return Ok(Vec::new());
    };
    let mut candidates: Vec<Candidate> = pods
        .iter()
        .filter_map(|p| Some(candidate(kind, p, entry(p)?)))
        .collect();
    rank(kind, &mut candidates);
    let Some(first) = candidates.first() else {
        tracing::warn!(signal, "under pressure, and no pod to evict");
        return Ok(Vec::new());
    };
    let message = pressure_message(signal, kind, threshold, reading, first);
    Ok(vec![evict(first.uid.clone(), message)])
}

/// Runs [`synchronize`] every `eviction_interval` until `cancel`, sending the evictions.
pub async fn run(deps: Arc<Deps>, tx: mpsc::Sender<Eviction>, cancel: CancellationToken) {
    let stats = crate::stats::StatsProvider::new(deps.config.clone(), deps.cgroups.clone());
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(deps.config.eviction_interval) => {}
        }
        match synchronize(&deps, &stats).await {
            Ok(evictions) => {
                for e in evictions {
                    tracing::warn!(pod_uid = %e.uid, message = %e.message, "evicting");
                    if tx.send(e).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "eviction manager"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cand(uid: &str, priority: i32, usage: i128, request: i128) -> Candidate {
        Candidate {
            uid: uid.into(),
            priority,
            usage,
            request,
            containers: vec![("c".into(), usage, request)],
        }
    }

    fn order(kind: Starved, mut c: Vec<Candidate>) -> Vec<String> {
        rank(kind, &mut c);
        c.into_iter().map(|c| c.uid).collect()
    }

    #[test]
    fn ranking_as_upstream() {
        // Over its request beats priority; then lower priority; then usage above request.
        let pods = vec![
            cand("within-low-prio", -10, 50, 100),
            cand("over-high-prio", 1000, 200, 100),
            cand("over-by-little", 0, 110, 100),
            cand("over-by-much", 0, 500, 100),
        ];
        assert_eq!(
            order(Starved::Memory, pods.clone()),
            [
                "over-by-much",
                "over-by-little",
                "over-high-prio",
                "within-low-prio"
            ]
        );
        assert_eq!(order(Starved::Disk, pods)[0], "over-by-much");
        // PIDs: priority, then more processes.
        let pods = vec![cand("a", 0, 5, 0), cand("b", 0, 50, 0), cand("c", -1, 1, 0)];
        assert_eq!(order(Starved::Pids, pods), ["c", "b", "a"]);
    }

    #[test]
    fn the_first_crossed_signal_in_upstreams_order() {
        let t =
            Thresholds::parse("memory.available<1Gi,nodefs.available<10%,pid.available<5").unwrap();
        let mut s = Signals::new();
        s.insert(
            "memory.available",
            Reading {
                available: 2 << 30,
                capacity: 8 << 30,
            },
        );
        s.insert(
            "nodefs.available",
            Reading {
                available: 5,
                capacity: 100,
            },
        );
        s.insert(
            "pid.available",
            Reading {
                available: 1,
                capacity: 100,
            },
        );
        let (signal, kind, _, _) = crossed(&s, &t).unwrap();
        assert_eq!((signal, kind), ("nodefs.available", Starved::Disk));
        s.insert(
            "memory.available",
            Reading {
                available: 1 << 20,
                capacity: 8 << 30,
            },
        );
        assert_eq!(crossed(&s, &t).unwrap().1, Starved::Memory);
        s.clear();
        assert!(crossed(&s, &t).is_none());
    }

    #[test]
    fn messages_as_upstream() {
        let pod = Candidate {
            uid: "u".into(),
            priority: 0,
            usage: 300 << 20,
            request: 0,
            containers: vec![
                ("hog".into(), 300 << 20, 0),
                ("quiet".into(), 1 << 20, 2 << 20),
            ],
        };
        let m = pressure_message(
            "memory.available",
            Starved::Memory,
            Threshold::Amount(100 << 20),
            Reading {
                available: 50 << 20,
                capacity: 8 << 30,
            },
            &pod,
        );
        assert_eq!(
            m,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
             Container hog was using 300Mi, request is 0, has larger consumption of memory. "
        );
        let m = pressure_message(
            "nodefs.available",
            Starved::Disk,
            Threshold::Percent(10.0),
            Reading {
                available: 1 << 30,
                capacity: 20 << 30,
            },
            &pod,
        );
        assert!(
            m.starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: 1Gi. Container hog"),
            "{m}"
        );
    }

    #[test]
    fn local_storage_limits() {
        let pod = json!({
            "metadata": {"uid": "u"},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"limits": {"ephemeral-storage": "1Mi"}}},
                    {"name": "b", "resources": {"limits": {"ephemeral-storage": "2Mi"}}}
                ],
                "volumes": [
                    {"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}},
                    {"name": "ram", "emptyDir": {"medium": "Memory", "sizeLimit": "1Ki"}}
                ]
            }
        });
        let stats = |scratch: u64, a: u64, b: u64| {
            json!({
                "volume": [{"name": "scratch", "usedBytes": scratch}, {"name": "ram", "usedBytes": 1 << 20}],
                "containers": [
                    {"name": "a", "rootfs": {"usedBytes": a}, "logs": {"usedBytes": 0}},
                    {"name": "b", "rootfs": {"usedBytes": b}, "logs": {"usedBytes": 0}}
                ],
                "ephemeral-storage": {"usedBytes": scratch + a + b}
            })
        };
        assert_eq!(local_storage_violation(&pod, &stats(1 << 20, 0, 0)), None);
        assert_eq!(
            local_storage_violation(&pod, &stats(2 << 20, 0, 0)).unwrap(),
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
        );
        assert_eq!(
            local_storage_violation(&pod, &stats(0, 2 << 20, 0)).unwrap(),
            "Container a exceeded its local ephemeral storage limit \"1Mi\". "
        );
        assert_eq!(
            local_storage_violation(&pod, &stats(1 << 20, 1 << 20, 2 << 20)).unwrap(),
            "Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. "
        );
    }

    #[test]
    fn who_may_be_evicted() {
        let running = json!({"metadata": {}, "spec": {}, "status": {"phase": "Running"}});
        assert!(evictable(&running));
        for bad in [
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            json!({"metadata": {}, "spec": {"priority": 2_000_001_000}}),
            json!({"metadata": {"deletionTimestamp": "t"}}),
            json!({"metadata": {}, "status": {"phase": "Failed"}}),
        ] {
            assert!(!evictable(&bad), "{bad}");
        }
    }
}

//! The pod garbage collector, as upstream's `pkg/controller/podgc`. Every [`Config::period`]
//! (20 s) it lists pods and nodes and:
//!
//! - deletes the oldest terminated (Succeeded/Failed) pods above
//!   [`Config::terminated_threshold`] (`--terminated-pod-gc-threshold`, 12500; 0 disables),
//!   evicted ones first;
//! - force-deletes terminating pods on a NotReady node tainted
//!   `node.kubernetes.io/out-of-service`;
//! - deletes pods bound to a node that no longer exists, once the node has been missing for
//!   [`Config::quarantine`] (40 s) and a live read confirms it: a running pod first gets phase
//!   Failed and the `DisruptionTarget` condition (reason `DeletionByPodGC`);
//! - force-deletes terminating pods that were never scheduled.
//!
//! Deletions use grace period 0, as upstream's. It deletes pods and writes their status, and
//! nothing else.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k1s_api::client::{Client, ClientError, DeleteParams, ListParams, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::node_lifecycle::set_disruption_target;
use k1s_runtime::clock::{self, Clock, SystemClock};
use k1s_runtime::key;

const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// Settings (upstream's flag and constants).
#[derive(Clone)]
pub struct Config {
    /// `--terminated-pod-gc-threshold` (12500; 0 disables that part).
    pub terminated_threshold: usize,
    /// How often a pass runs (20 s).
    pub period: Duration,
    /// How long a node must be missing before its pods count as orphaned (40 s).
    pub quarantine: Duration,
    pub clock: Arc<dyn Clock>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            terminated_threshold: 12500,
            period: Duration::from_secs(20),
            quarantine: Duration::from_secs(40),
            clock: Arc::new(SystemClock),
        }
    }
}

fn all_pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", None)
}

fn pods(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some(ns))
}

fn nodes() -> ResourceRef {
    ResourceRef::new("", "v1", "nodes", None)
}

/// Runs the pod GC until `cancel`.
pub async fn run(client: Arc<dyn Client>, config: Config, cancel: CancellationToken) {
    let mut gc = PodGc {
        client,
        config,
        missing_since: HashMap::new(),
    };
    let mut tick = tokio::time::interval(gc.config.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = gc.pass().await {
            tracing::warn!(error = %e, "pod gc pass failed");
        }
    }
}

struct PodGc {
    client: Arc<dyn Client>,
    config: Config,
    /// Node name → when it was first seen missing while pods were bound to it.
    missing_since: HashMap<String, Timestamp>,
}

fn is_terminated(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// Upstream's `byEvictionAndCreationTimestamp`: evicted first, then oldest, then by name.
fn gc_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    let evicted = |p: &Value| p["status"]["reason"] != "Evicted";
    let created = |p: &Value| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    evicted(a)
        .cmp(&evicted(b))
        .then(created(a).cmp(&created(b)))
        .then(key::name(a).cmp(key::name(b)))
}

/// The terminated pods to delete to get down to `threshold`.
pub fn terminated_over_threshold(all: &[Value], threshold: usize) -> Vec<&Value> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<&Value> = all.iter().filter(|p| is_terminated(p)).collect();
    if terminated.len() <= threshold {
        return Vec::new();
    }
    terminated.sort_by(|a, b| gc_order(a, b));
    let n = terminated.len() - threshold;
    terminated.truncate(n);
    terminated
}

impl PodGc {
    /// One pass over every pod.
    async fn pass(&mut self) -> Result<(), ClientError> {
        let all = self
            .client
            .list(&all_pods(), &ListParams::default())
            .await?
            .items;
        let node_list = self
            .client
            .list(&nodes(), &ListParams::default())
            .await?
            .items;
        let node_names: HashSet<&str> = node_list.iter().map(key::name).collect();
        let now = self.config.clock.now();

        for pod in terminated_over_threshold(&all, self.config.terminated_threshold) {
            self.fail_and_delete(pod, None).await;
        }

        // Terminating pods on out-of-service nodes.
        for pod in all.iter().filter(|p| key::is_deleting(p)) {
            let Some(node) = node_list
                .iter()
                .find(|n| Some(key::name(n)) == pod["spec"]["nodeName"].as_str())
            else {
                continue;
            };
            let not_ready = node["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .is_none_or(|c| c["status"] != "True");
            let out_of_service = node["spec"]["taints"].as_array().is_some_and(|ts| {
                ts.iter()
                    .any(|t| t["key"] == OUT_OF_SERVICE && t["effect"] == "NoExecute")
            });
            if not_ready && out_of_service {
                self.fail_and_delete(pod, None).await;
            }
        }

        // Orphans: bound to a node missing for the quarantine and confirmed gone.
        let mut missing: HashSet<String> = HashSet::new();
        for pod in &all {
            if let Some(n) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())
                && !node_names.contains(n)
            {
                missing.insert(n.to_owned());
            }
        }
        self.missing_since.retain(|n, _| missing.contains(n));
        let mut gone: HashSet<String> = HashSet::new();
        for n in &missing {
            let since = *self.missing_since.entry(n.clone()).or_insert(now);
            if now < since + self.config.quarantine {
                continue;
            }
            match self.client.get(&nodes(), n).await {
                Err(e) if e.is_not_found() => {
                    gone.insert(n.clone());
                }
                Err(e) => return Err(e),
                Ok(_) => {
                    self.missing_since.remove(n);
                }
            }
        }
        for pod in &all {
            if pod["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| gone.contains(n))
            {
                tracing::info!(pod = %key::name(pod), node = %pod["spec"]["nodeName"], "deleting orphaned pod");
                self.fail_and_delete(
                    pod,
                    Some(("DeletionByPodGC", "PodGC: node no longer exists")),
                )
                .await;
            }
        }

        // Terminating pods never scheduled.
        for pod in &all {
            let unscheduled = pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
            if key::is_deleting(pod) && unscheduled {
                self.fail_and_delete(pod, None).await;
            }
        }
        Ok(())
    }

    /// Upstream's `markFailedAndDeletePodWithCondition`: a pod not yet terminal gets phase
    /// Failed (and `condition`), then it is deleted with grace period 0.
    async fn fail_and_delete(&self, pod: &Value, condition: Option<(&str, &str)>) {
        let ns = key::namespace(pod).unwrap_or("default").to_owned();
        let name = key::name(pod);
        if !is_terminated(pod) {
            let mut p = pod.clone();
            p["status"]["phase"] = json!("Failed");
            if let Some((reason, message)) = condition {
                set_disruption_target(
                    &mut p,
                    reason,
                    message,
                    &clock::format(self.config.clock.now()),
                );
            }
            match self
                .client
                .update(&pods(&ns), p, Some("status"), &WriteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return,
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "pod gc: marking failed");
                    return;
                }
            }
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            precondition_uid: Some(key::uid(pod).to_owned()),
            ..Default::default()
        };
        match self.client.delete(&pods(&ns), name, &params).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() || e.is_conflict() => {}
            Err(e) => tracing::warn!(pod = %name, error = %e, "pod gc: deleting"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminated_pods_over_threshold_go_evicted_then_oldest_first() {
        let pod = |n: &str, phase: &str, created: &str, reason: Option<&str>| {
            let mut p = json!({"metadata": {"name": n, "creationTimestamp": created}, "status": {"phase": phase}});
            if let Some(r) = reason {
                p["status"]["reason"] = json!(r);
            }
            p
        };
        let all = vec![
            pod("running", "Running", "2019-01-01T00:00:00Z", None),
            pod("old", "Succeeded", "2020-01-01T00:00:00Z", None),
            pod("new", "Failed", "2022-01-01T00:00:00Z", None),
            pod("evicted", "Failed", "2023-01-01T00:00:00Z", Some("Evicted")),
            pod("mid", "Succeeded", "2021-01-01T00:00:00Z", None),
        ];
        let names = |v: Vec<&Value>| {
            v.into_iter()
                .map(|p| key::name(p).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(terminated_over_threshold(&all, 2)),
            vec!["evicted", "old"]
        );
        assert!(terminated_over_threshold(&all, 4).is_empty());
        assert!(terminated_over_threshold(&all, 0).is_empty());
    }
}

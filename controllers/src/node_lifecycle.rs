//! The node lifecycle controller, as upstream's `pkg/controller/nodelifecycle` with taint-based
//! eviction (`pkg/controller/tainteviction`).
//!
//! - Health: a node is probed when its Lease in `kube-node-lease` is renewed or its Ready
//!   condition's heartbeat changes, by *this controller's* clock (so clock skew with the kubelet
//!   does not matter). A node not probed for [`Config::grace_period`] (40 s; a node that never
//!   posted Ready: [`Config::startup_grace_period`] from its creation) gets Ready,
//!   MemoryPressure, DiskPressure and PIDPressure `Unknown` with reason `NodeStatusUnknown`
//!   ("Kubelet stopped posting node status."), or `NodeStatusNeverUpdated` for conditions it
//!   never posted.
//! - Taints: `NoSchedule` taints from conditions (`not-ready`, `unreachable`, `memory-pressure`,
//!   `disk-pressure`, `pid-pressure`, `network-unavailable`; `unschedulable` from the spec) and
//!   the `NoExecute` `not-ready`/`unreachable` taints (with `timeAdded`), added and removed as
//!   the Ready condition changes.
//! - Pods on a node whose Ready is not True get their Ready condition set False.
//! - Taint eviction: a pod on a node with `NoExecute` taints it does not tolerate is deleted at
//!   once (with a `DisruptionTarget` condition, reason `DeletionByTaintManager`); one that
//!   tolerates them for `tolerationSeconds` is deleted that long after the taint was first seen
//!   on its node.
//!
//! It writes node status conditions, node taints and pod status, and deletes pods; it never
//! touches anything else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use k1s_api::events::{self, Involved, Source};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::clock::{self, Clock, SystemClock};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::store::node_name_index;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Conditions whose status maps to a `NoSchedule` taint, as upstream's
/// `nodeConditionToTaintKeyStatusMap`.
const NO_SCHEDULE: &[(&str, &str, &str)] = &[
    ("Ready", "False", TAINT_NOT_READY),
    ("Ready", "Unknown", TAINT_UNREACHABLE),
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
];

/// The conditions set Unknown when a node stops reporting.
const MONITORED: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// Settings (upstream's flags and constants).
#[derive(Clone)]
pub struct Config {
    /// `--node-monitor-grace-period` (40 s).
    pub grace_period: Duration,
    /// How long a node that never posted Ready has from its creation (60 s).
    pub startup_grace_period: Duration,
    /// How often each node is checked (`--node-monitor-period`, 5 s).
    pub monitor_period: Duration,
    pub clock: Arc<dyn Clock>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            grace_period: Duration::from_secs(40),
            startup_grace_period: Duration::from_secs(60),
            monitor_period: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeLifecycleError {
    #[error("node {node}: {source}")]
    Api {
        node: String,
        #[source]
        source: ClientError,
    },
}

fn nodes() -> ResourceRef {
    ResourceRef::new("", "v1", "nodes", None)
}

fn pods(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some(ns))
}

/// Runs the node lifecycle controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, config: Config, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "node-lifecycle",
        client.clone(),
        nodes(),
        Default::default(),
    );
    let node_store = ctrl.store();
    let leases = ctrl.watches(
        ResourceRef::new("coordination.k8s.io", "v1", "leases", Some(LEASE_NAMESPACE)),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|l: &Value, _| vec![ObjectKey::cluster(key::name(l))]),
    );
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        vec![node_name_index()],
        Arc::new(|p: &Value, _| {
            p["spec"]["nodeName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(ObjectKey::cluster)
                .into_iter()
                .collect()
        }),
    );
    let reconciler = Arc::new(NodeLifecycle {
        client,
        nodes: node_store,
        leases,
        pods: pod_store,
        config,
        health: Mutex::new(HashMap::new()),
        evictions: Mutex::new(HashMap::new()),
    });
    ctrl.workers(2).run(reconciler, cancel).await;
}

/// What was last observed of a node's liveness (upstream's `nodeHealthData`).
#[derive(Debug, Clone)]
struct Health {
    /// When this controller last saw the node alive.
    probe: Timestamp,
    /// The Ready condition's `lastHeartbeatTime` then.
    heartbeat: Value,
    /// The Lease's `renewTime` then.
    renew: Option<Timestamp>,
}

struct NodeLifecycle {
    client: Arc<dyn Client>,
    nodes: Store,
    leases: Store,
    pods: Store,
    config: Config,
    health: Mutex<HashMap<String, Health>>,
    /// Pod UID → when its eviction clock started (a tolerated NoExecute taint was first seen).
    evictions: Mutex<HashMap<String, Timestamp>>,
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn ready_status(node: &Value) -> &str {
    condition(node, "Ready")
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
}

/// Node conditions after `now` passes the grace period: the monitored ones Unknown. Returns
/// `None` when nothing changes.
pub fn conditions_unknown(node: &Value, now: &str) -> Option<Value> {
    let mut conds = node["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut changed = false;
    for t in MONITORED {
        match conds.iter_mut().find(|c| c["type"] == *t) {
            Some(c) if c["status"] != "Unknown" => {
                c["status"] = json!("Unknown");
                c["reason"] = json!("NodeStatusUnknown");
                c["message"] = json!("Kubelet stopped posting node status.");
                c["lastTransitionTime"] = json!(now);
                changed = true;
            }
            Some(_) => {}
            None => {
                conds.push(json!({"type": t, "status": "Unknown",
                    "reason": "NodeStatusNeverUpdated",
                    "message": "Kubelet never posted node status.",
                    "lastHeartbeatTime": node["metadata"]["creationTimestamp"],
                    "lastTransitionTime": now}));
                changed = true;
            }
        }
    }
    changed.then(|| json!(conds))
}

/// The node's taints as the conditions and spec want them, or `None` when they already are.
pub fn desired_taints(node: &Value, now: &str) -> Option<Vec<Value>> {
    let taints: Vec<Value> = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut want_no_schedule: Vec<&str> = NO_SCHEDULE
        .iter()
        .filter(|(t, s, _)| condition(node, t).is_some_and(|c| c["status"] == *s))
        .map(|(_, _, k)| *k)
        .collect();
    if node["spec"]["unschedulable"] == true {
        want_no_schedule.push(TAINT_UNSCHEDULABLE);
    }
    let want_no_execute: Vec<&str> = match ready_status(node) {
        "False" => vec![TAINT_NOT_READY],
        "Unknown" => vec![TAINT_UNREACHABLE],
        _ => Vec::new(),
    };
    let managed_no_schedule =
        |k: &str| k == TAINT_UNSCHEDULABLE || NO_SCHEDULE.iter().any(|(_, _, key)| *key == k);
    let managed_no_execute = |k: &str| k == TAINT_NOT_READY || k == TAINT_UNREACHABLE;
    let mut out: Vec<Value> = taints
        .iter()
        .filter(|t| {
            let k = t["key"].as_str().unwrap_or("");
            match t["effect"].as_str() {
                Some("NoSchedule") if managed_no_schedule(k) => want_no_schedule.contains(&k),
                Some("NoExecute") if managed_no_execute(k) => want_no_execute.contains(&k),
                _ => true,
            }
        })
        .cloned()
        .collect();
    let has =
        |out: &[Value], k: &str, e: &str| out.iter().any(|t| t["key"] == k && t["effect"] == e);
    for k in want_no_schedule {
        if !has(&out, k, "NoSchedule") {
            out.push(json!({"key": k, "effect": "NoSchedule"}));
        }
    }
    for k in want_no_execute {
        if !has(&out, k, "NoExecute") {
            out.push(json!({"key": k, "effect": "NoExecute", "timeAdded": now}));
        }
    }
    (out != taints).then_some(out)
}

/// Whether `toleration` tolerates `taint` (upstream's `ToleratesTaint`).
pub fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = toleration["effect"].as_str().unwrap_or("");
    if !effect.is_empty() && Some(effect) != taint["effect"].as_str() {
        return false;
    }
    let key = toleration["key"].as_str().unwrap_or("");
    let op = toleration["operator"].as_str().unwrap_or("Equal");
    if !key.is_empty() && Some(key) != taint["key"].as_str() {
        return false;
    }
    match op {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty()
                && toleration["value"].as_str().unwrap_or("")
                    == taint["value"].as_str().unwrap_or("")
        }
        _ => false,
    }
}

/// How long `pod` may stay on a node with `taints` (its NoExecute ones): `None` forever,
/// `Some(ZERO)` not at all.
pub fn toleration_time(pod: &Value, taints: &[&Value]) -> Option<Duration> {
    let tolerations = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut min: Option<Duration> = None;
    for taint in taints {
        let matching: Vec<&Value> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Some(Duration::ZERO);
        }
        for t in matching {
            if let Some(s) = t["tolerationSeconds"].as_i64() {
                let d = Duration::from_secs(u64::try_from(s).unwrap_or(0));
                min = Some(min.map_or(d, |m| m.min(d)));
            }
        }
    }
    min
}

fn node_involved(node: &Value) -> Involved {
    Involved {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: key::name(node).into(),
        uid: key::uid(node).into(),
        resource_version: key::resource_version(node).unwrap_or("").into(),
        ..Default::default()
    }
}

fn pod_involved(pod: &Value) -> Involved {
    Involved {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: key::namespace(pod).unwrap_or("").into(),
        name: key::name(pod).into(),
        uid: key::uid(pod).into(),
        resource_version: key::resource_version(pod).unwrap_or("").into(),
        field_path: None,
    }
}

fn source() -> Source {
    Source {
        component: "node-controller".into(),
        host: None,
    }
}

#[async_trait::async_trait]
impl Reconcile for NodeLifecycle {
    type Error = NodeLifecycleError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, NodeLifecycleError> {
        let api = |source| NodeLifecycleError::Api {
            node: k.name.clone(),
            source,
        };
        let Some(cached) = self.nodes.get(k) else {
            self.health
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&k.name);
            return Ok(Action::await_change());
        };
        let mut node = (*cached).clone();
        let now = self.config.clock.now();
        let now_text = clock::format(now);
        if self.timed_out(&node, now)
            && let Some(conds) = conditions_unknown(&node, &now_text)
        {
            let was_ready = ready_status(&node) == "True";
            node["status"]["conditions"] = conds;
            node = match self
                .client
                .update(&nodes(), node, Some("status"), &WriteParams::default())
                .await
            {
                Ok(n) => n,
                Err(e) if e.is_not_found() => return Ok(Action::await_change()),
                Err(e) => return Err(api(e)),
            };
            tracing::info!(node = %k.name, "node stopped posting status; marked Unknown");
            if was_ready {
                let msg = format!("Node {} status is now: NodeNotReady", k.name);
                events::record(
                    &*self.client,
                    &source(),
                    &node_involved(&node),
                    "Normal",
                    "NodeNotReady",
                    "NodeNotReady",
                    &msg,
                )
                .await;
            }
        }
        if let Some(taints) = desired_taints(&node, &now_text) {
            node["spec"]["taints"] = json!(taints);
            if taints.is_empty()
                && let Some(spec) = node["spec"].as_object_mut()
            {
                spec.remove("taints");
            }
            node = match self
                .client
                .update(&nodes(), node, None, &WriteParams::default())
                .await
            {
                Ok(n) => n,
                Err(e) if e.is_not_found() => return Ok(Action::await_change()),
                Err(e) => return Err(api(e)),
            };
        }
        let on_node = self.pods.by_index("node-name", &k.name);
        if ready_status(&node) != "True" {
            self.mark_pods_not_ready(&on_node, &now_text)
                .await
                .map_err(api)?;
        }
        self.evict(&node, &on_node, now).await.map_err(api)?;
        Ok(Action::requeue(self.config.monitor_period))
    }
}

impl NodeLifecycle {
    /// Records what the node and its Lease show now; whether it has gone unprobed too long.
    fn timed_out(&self, node: &Value, now: Timestamp) -> bool {
        let name = key::name(node);
        let ready = condition(node, "Ready");
        let heartbeat = ready
            .map(|c| c["lastHeartbeatTime"].clone())
            .unwrap_or(Value::Null);
        let renew = self
            .leases
            .get(&ObjectKey::new(Some(LEASE_NAMESPACE), name))
            .and_then(|l| clock::parse(&l["spec"]["renewTime"]));
        let mut health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        let h = health.entry(name.to_owned()).or_insert_with(|| Health {
            // A node that never posted Ready counts from its creation, as upstream.
            probe: if ready.is_none() {
                clock::parse(&node["metadata"]["creationTimestamp"]).unwrap_or(now)
            } else {
                now
            },
            heartbeat: heartbeat.clone(),
            renew,
        });
        if h.heartbeat != heartbeat {
            h.heartbeat = heartbeat;
            h.probe = now;
        }
        if let Some(r) = renew
            && h.renew.is_none_or(|old| old < r)
        {
            h.renew = Some(r);
            h.probe = now;
        }
        let grace = if ready.is_none() {
            self.config.startup_grace_period
        } else {
            self.config.grace_period
        };
        now > h.probe + grace
    }

    /// Sets the Ready condition of the node's pods False (upstream's `MarkPodsNotReady`).
    async fn mark_pods_not_ready(
        &self,
        on_node: &[Arc<Value>],
        now: &str,
    ) -> Result<(), ClientError> {
        for pod in on_node {
            let Some(i) = pod["status"]["conditions"].as_array().and_then(|cs| {
                cs.iter()
                    .position(|c| c["type"] == "Ready" && c["status"] != "False")
            }) else {
                continue;
            };
            let mut p = (**pod).clone();
            p["status"]["conditions"][i]["status"] = json!("False");
            p["status"]["conditions"][i]["lastTransitionTime"] = json!(now);
            let ns = key::namespace(&p).unwrap_or("default").to_owned();
            match self
                .client
                .update(&pods(&ns), p, Some("status"), &WriteParams::default())
                .await
            {
                Ok(_) => {
                    events::record(
                        &*self.client,
                        &source(),
                        &pod_involved(pod),
                        "Warning",
                        "NodeNotReady",
                        "NodeNotReady",
                        "Node is not ready",
                    )
                    .await;
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Taint eviction of the node's pods.
    async fn evict(
        &self,
        node: &Value,
        on_node: &[Arc<Value>],
        now: Timestamp,
    ) -> Result<(), ClientError> {
        let taints: Vec<Value> = node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let no_execute: Vec<&Value> = taints
            .iter()
            .filter(|t| t["effect"] == "NoExecute")
            .collect();
        let mut due = Vec::new();
        {
            let mut started = self.evictions.lock().unwrap_or_else(|e| e.into_inner());
            for pod in on_node {
                let uid = key::uid(pod);
                if no_execute.is_empty() || key::is_deleting(pod) {
                    started.remove(uid);
                    continue;
                }
                let Some(allowed) = toleration_time(pod, &no_execute) else {
                    started.remove(uid);
                    continue;
                };
                let start = *started.entry(uid.to_owned()).or_insert(now);
                if now >= start + allowed {
                    due.push(pod.clone());
                }
            }
        }
        for pod in due {
            self.delete_pod(&pod, &clock::format(now)).await?;
            self.evictions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(key::uid(&pod));
        }
        Ok(())
    }

    async fn delete_pod(&self, pod: &Value, now: &str) -> Result<(), ClientError> {
        let ns = key::namespace(pod).unwrap_or("default").to_owned();
        tracing::info!(pod = %format!("{ns}/{}", key::name(pod)), "taint eviction");
        events::record(
            &*self.client,
            &source(),
            &pod_involved(pod),
            "Normal",
            "TaintManagerEviction",
            "Delete",
            &format!("Marking for deletion Pod {ns}/{}", key::name(pod)),
        )
        .await;
        let mut p = pod.clone();
        set_disruption_target(
            &mut p,
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
            now,
        );
        match self
            .client
            .update(&pods(&ns), p, Some("status"), &WriteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            // A stale cache: the delete below still goes ahead, as upstream's does.
            Err(e) => tracing::debug!(error = %e, "setting DisruptionTarget"),
        }
        let params = DeleteParams {
            precondition_uid: Some(key::uid(pod).to_owned()),
            ..Default::default()
        };
        match self
            .client
            .delete(&pods(&ns), key::name(pod), &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Adds (or replaces) the pod's `DisruptionTarget` condition.
pub fn set_disruption_target(pod: &mut Value, reason: &str, message: &str, now: &str) {
    let cond = json!({"type": "DisruptionTarget", "status": "True", "reason": reason,
        "message": message, "lastTransitionTime": now});
    let mut conds = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conds.retain(|c| c["type"] != "DisruptionTarget");
    conds.push(cond);
    pod["status"]["conditions"] = json!(conds);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready: &str, taints: Value) -> Value {
        json!({"metadata": {"name": "n", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    #[test]
    fn unknown_marks_monitored_conditions_and_keeps_others() {
        let mut n = node("True", json!([]));
        n["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "NetworkUnavailable", "status": "False"}));
        let conds = conditions_unknown(&n, "T").unwrap();
        let get = |t: &str| {
            conds
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == t)
                .unwrap()
                .clone()
        };
        assert_eq!(get("Ready")["reason"], "NodeStatusUnknown");
        assert_eq!(
            get("Ready")["message"],
            "Kubelet stopped posting node status."
        );
        assert_eq!(get("Ready")["lastTransitionTime"], "T");
        assert_eq!(get("MemoryPressure")["reason"], "NodeStatusNeverUpdated");
        assert_eq!(get("PIDPressure")["status"], "Unknown");
        assert_eq!(get("NetworkUnavailable")["status"], "False");
        n["status"]["conditions"] = conds;
        assert!(conditions_unknown(&n, "T2").is_none());
    }

    #[test]
    fn taints_follow_ready() {
        let t = desired_taints(
            &node("Unknown", json!([{"key": "x", "effect": "NoSchedule"}])),
            "T",
        )
        .unwrap();
        assert_eq!(
            t,
            vec![
                json!({"key": "x", "effect": "NoSchedule"}),
                json!({"key": TAINT_UNREACHABLE, "effect": "NoSchedule"}),
                json!({"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": "T"}),
            ]
        );
        // Unknown → False swaps the keys; the NoExecute gets a new timeAdded.
        let t = desired_taints(&node("False", json!(t.clone())), "T2").unwrap();
        let keys: Vec<(&str, &str)> = t
            .iter()
            .map(|t| (t["key"].as_str().unwrap(), t["effect"].as_str().unwrap()))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("x", "NoSchedule"),
                (TAINT_NOT_READY, "NoSchedule"),
                (TAINT_NOT_READY, "NoExecute")
            ]
        );
        assert!(desired_taints(&node("False", json!(t.clone())), "T3").is_none());
        // Ready again: only the foreign taint stays.
        assert_eq!(
            desired_taints(&node("True", json!(t)), "T4").unwrap(),
            vec![json!({"key": "x", "effect": "NoSchedule"})]
        );
        let mut cordoned = node("True", json!([]));
        cordoned["spec"]["unschedulable"] = json!(true);
        assert_eq!(
            desired_taints(&cordoned, "T").unwrap()[0]["key"],
            TAINT_UNSCHEDULABLE
        );
    }

    #[test]
    fn toleration_matching_and_times() {
        let taint = json!({"key": TAINT_UNREACHABLE, "effect": "NoExecute"});
        let tol = |v: Value| json!({"spec": {"tolerations": v}});
        assert_eq!(
            toleration_time(&tol(json!([])), &[&taint]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            toleration_time(&tol(json!([{"operator": "Exists"}])), &[&taint]),
            None
        );
        let p = tol(json!([
            {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": TAINT_UNREACHABLE, "operator": "Exists", "tolerationSeconds": 30},
            {"key": "other", "operator": "Exists", "tolerationSeconds": 1},
        ]));
        assert_eq!(
            toleration_time(&p, &[&taint]),
            Some(Duration::from_secs(30))
        );
        // Wrong effect or value does not tolerate.
        assert!(!tolerates(
            &json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}),
            &taint
        ));
        let valued = json!({"key": "k", "value": "v", "effect": "NoExecute"});
        assert!(tolerates(
            &json!({"key": "k", "operator": "Equal", "value": "v"}),
            &valued
        ));
        assert!(!tolerates(&json!({"key": "k", "value": "w"}), &valued));
        assert_eq!(
            toleration_time(
                &tol(json!([{"key": "k", "value": "v", "tolerationSeconds": -5}])),
                &[&valued]
            ),
            Some(Duration::ZERO)
        );
    }
}

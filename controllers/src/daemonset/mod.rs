//! The DaemonSet controller, as upstream's `daemon` package: one pod per eligible node
//! ([`eligibility`]), each pinned to its node by a required node affinity on `metadata.name`
//! (the scheduler binds it) and carrying the tolerations upstream adds to daemon pods;
//! RollingUpdate within maxUnavailable, or maxSurge (the new pod starts before the old one
//! goes), and OnDelete; ControllerRevisions ([`crate::history`]) labelled
//! `controller-revision-hash`; the status `kubectl rollout status ds` and `kubectl get ds` read.
//! Node additions and label or taint changes bring every DaemonSet up for a pass.
//!
//! It owns the pods it controls, its ControllerRevisions and DaemonSet status; never the spec
//! or nodes. [`Expectations`] keep a pass from acting on a cache that has not yet seen the
//! previous pass's creations and deletions (pod names are generated).

pub mod eligibility;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use k1s_api::events::{self, Involved, Source};
use k1s_api::selector::LabelSelector;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::expectations::Expectations;
use crate::history::{self, HistoryError, REVISION_LABEL};
use crate::owned_pods::{self, spec_selector};
use eligibility::{Eligibility, add_daemon_tolerations, node_should_run, pin_to_node, target_node};
use k1s_runtime::clock::Clock;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::store::owner_uid_index;
use k1s_runtime::{Action, Controller, Reconcile, Seen, Store, watcher};

#[derive(Debug, thiserror::Error)]
pub enum DaemonSetError {
    #[error("daemonset {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
    #[error("daemonset {key}: invalid selector: {source}")]
    Selector {
        key: String,
        #[source]
        source: k1s_api::selector::SelectorError,
    },
    #[error("daemonset {key}: {source}")]
    History {
        key: String,
        #[source]
        source: HistoryError,
    },
}

pub(crate) fn daemonsets(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("apps", "v1", "daemonsets", ns)
}

fn pods(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some(ns))
}

/// Runs the DaemonSet controller until `cancel`; `clock` dates availability.
pub async fn run(client: Arc<dyn Client>, clock: Arc<dyn Clock>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "daemonset",
        client.clone(),
        daemonsets(None),
        watcher::Config::default(),
    )
    .workers(2);
    let sets = ctrl.store();
    let expectations = Arc::new(Expectations::default());
    let (exp, sets_for_pods) = (expectations.clone(), sets.clone());
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |pod: &Value, seen| {
            owned_pods::owner_keys("DaemonSet", pod, seen, &sets_for_pods, Some(&exp), |_| true)
        }),
    );
    let sets_for_nodes = sets.clone();
    let nodes = ctrl.watches(
        ResourceRef::new("", "v1", "nodes", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |_: &Value, seen| {
            if seen == Seen::Listed {
                return Vec::new();
            }
            sets_for_nodes.keys()
        }),
    );
    let revs = ctrl.owns(
        ResourceRef::new("apps", "v1", "controllerrevisions", None),
        watcher::Config::default(),
        vec![owner_uid_index()],
        "apps",
        "DaemonSet",
    );
    let reconciler = Arc::new(DaemonSets {
        client,
        sets,
        pods: pod_store,
        nodes,
        revisions: revs,
        expectations,
        clock,
    });
    ctrl.run(reconciler, cancel).await;
}

/// An int-or-percent of `total`, rounded up.
fn scaled(v: &Value, total: i64, default: i64) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(default),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) => (p * total + 99) / 100,
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

/// (maxSurge, maxUnavailable) of a rolling DaemonSet over `desired` nodes; both zero
/// becomes unavailable 1, as upstream.
pub fn surge_and_unavailable(ds: &Value, desired: i64) -> (i64, i64) {
    let ru = &ds["spec"]["updateStrategy"]["rollingUpdate"];
    let surge = scaled(&ru["maxSurge"], desired, 0).max(0);
    let unavailable = scaled(&ru["maxUnavailable"], desired, 1).max(0);
    if surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn is_available(pod: &Value, min_ready: i64, now: jiff::Timestamp) -> bool {
    let Some(c) = pod["status"]["conditions"].as_array().and_then(|cs| {
        cs.iter()
            .find(|c| c["type"] == "Ready" && c["status"] == "True")
    }) else {
        return false;
    };
    if min_ready <= 0 {
        return true;
    }
    c["lastTransitionTime"]
        .as_str()
        .and_then(k1s_api::time::parse)
        .is_some_and(|t| t + jiff::SignedDuration::from_secs(min_ready) <= now)
}

fn created_at(p: &Value) -> String {
    p["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// The updated and the outdated non-terminating pod on a node; `None` when there are more
/// than one of either (the pass that removes extras comes first).
fn updated_and_old<'a>(
    pods: &'a [Value],
    hash: &str,
) -> Option<(Option<&'a Value>, Option<&'a Value>)> {
    let (mut new, mut old) = (None, None);
    for p in pods.iter().filter(|p| !key::is_deleting(p)) {
        let slot = if p["metadata"]["labels"][REVISION_LABEL] == hash {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(p);
    }
    Some((new, old))
}

struct DaemonSets {
    client: Arc<dyn Client>,
    sets: Store,
    pods: Store,
    nodes: Store,
    revisions: Store,
    expectations: Arc<Expectations>,
    clock: Arc<dyn Clock>,
}

/// What one pass decided: pods to create (by node) and to delete.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub create_on: Vec<String>,
    pub delete: Vec<Value>,
}

/// The nodes the set's pods are for, with each node's eligibility.
struct View {
    /// Node name → eligibility, for every node that exists.
    nodes: BTreeMap<String, Eligibility>,
    /// Node name → the set's pods for it (by target node), oldest first.
    pods: BTreeMap<String, Vec<Value>>,
    /// Pods that name no node.
    unplaced: Vec<Value>,
}

impl View {
    fn build(ds: &Value, nodes: &[Arc<Value>], owned: Vec<Value>) -> View {
        let mut spec = ds["spec"]["template"]["spec"].clone();
        add_daemon_tolerations(&mut spec);
        let nodes = nodes
            .iter()
            .map(|n| (key::name(n).to_owned(), node_should_run(&spec, n)))
            .collect();
        let mut by_node: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut unplaced = Vec::new();
        for p in owned {
            match target_node(&p).map(str::to_owned) {
                Some(n) => by_node.entry(n).or_default().push(p),
                None => unplaced.push(p),
            }
        }
        for pods in by_node.values_mut() {
            pods.sort_by_key(created_at);
        }
        View {
            nodes,
            pods: by_node,
            unplaced,
        }
    }

    /// Upstream's `manage`: create where missing, delete where not wanted, extras, failed
    /// pods, and pods of nodes that are gone.
    fn manage(&self) -> Plan {
        let mut plan = Plan::default();
        for (node, e) in &self.nodes {
            let pods = self.pods.get(node).map(Vec::as_slice).unwrap_or_default();
            if e.should_run && pods.is_empty() {
                plan.create_on.push(node.clone());
            } else if e.should_continue_running {
                let mut running = Vec::new();
                for p in pods.iter().filter(|p| !key::is_deleting(p)) {
                    if p["status"]["phase"] == "Failed" {
                        plan.delete.push(p.clone());
                    } else {
                        running.push(p);
                    }
                }
                // More than one (outside a surge): keep the oldest.
                if running.len() > 1 && !self.surging(running.as_slice()) {
                    plan.delete
                        .extend(running[1..].iter().map(|p| (*p).clone()));
                }
            } else {
                plan.delete
                    .extend(pods.iter().filter(|p| !key::is_deleting(p)).cloned());
            }
        }
        for (node, pods) in &self.pods {
            if !self.nodes.contains_key(node) {
                plan.delete
                    .extend(pods.iter().filter(|p| !key::is_deleting(p)).cloned());
            }
        }
        plan.delete.extend(
            self.unplaced
                .iter()
                .filter(|p| !key::is_deleting(p))
                .cloned(),
        );
        plan
    }

    /// Two pods of different revisions on a node are a surge in progress, not an extra.
    fn surging(&self, running: &[&Value]) -> bool {
        running.len() == 2
            && running[0]["metadata"]["labels"][REVISION_LABEL]
                != running[1]["metadata"]["labels"][REVISION_LABEL]
    }

    /// Upstream's `rollingUpdate`: replace outdated pods within the budgets.
    fn rolling(&self, ds: &Value, hash: &str, now: jiff::Timestamp) -> Plan {
        let min_ready = ds["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        let desired = self.nodes.values().filter(|e| e.should_run).count() as i64;
        let (max_surge, max_unavailable) = surge_and_unavailable(ds, desired);
        let mut plan = Plan::default();
        let avail = |p: &Value| is_available(p, min_ready, now);
        if max_surge == 0 {
            let mut unavailable = 0;
            let mut candidates = Vec::new();
            for (node, e) in &self.nodes {
                if !e.should_run {
                    continue;
                }
                let pods = self.pods.get(node).map(Vec::as_slice).unwrap_or_default();
                let Some((new, old)) = updated_and_old(pods, hash) else {
                    continue;
                };
                match (new, old) {
                    (None, None) => unavailable += 1,
                    (Some(n), _) => {
                        if !avail(n) {
                            unavailable += 1;
                        }
                    }
                    (None, Some(o)) if !avail(o) => {
                        // Already unavailable: replacing it costs nothing.
                        plan.delete.push(o.clone());
                    }
                    (None, Some(o)) => candidates.push(o.clone()),
                }
            }
            let budget = usize::try_from((max_unavailable - unavailable).max(0)).unwrap_or(0);
            plan.delete.extend(candidates.into_iter().take(budget));
        } else {
            let mut surging = 0;
            let mut allowed = Vec::new();
            let mut candidates = Vec::new();
            for (node, e) in &self.nodes {
                if !e.should_run {
                    continue;
                }
                let pods = self.pods.get(node).map(Vec::as_slice).unwrap_or_default();
                let Some((new, old)) = updated_and_old(pods, hash) else {
                    continue;
                };
                match (new, old) {
                    (_, None) => {}
                    (None, Some(o)) if !avail(o) => allowed.push(node.clone()),
                    (None, Some(_)) => candidates.push(node.clone()),
                    (Some(n), Some(o)) if avail(n) => plan.delete.push(o.clone()),
                    (Some(_), Some(_)) => surging += 1,
                }
            }
            let budget = usize::try_from((max_surge - surging).max(0)).unwrap_or(0);
            plan.create_on = allowed;
            plan.create_on.extend(candidates.into_iter().take(budget));
        }
        plan
    }

    fn status(&self, ds: &Value, hash: &str, now: jiff::Timestamp) -> Value {
        let min_ready = ds["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        let (mut desired, mut current, mut mis, mut ready, mut available, mut updated) =
            (0, 0, 0, 0, 0, 0);
        for (node, e) in &self.nodes {
            let pods = self.pods.get(node).map(Vec::as_slice).unwrap_or_default();
            let scheduled = !pods.is_empty();
            if e.should_run {
                desired += 1;
                if scheduled {
                    current += 1;
                    let p = &pods[0];
                    if is_ready(p) {
                        ready += 1;
                        if is_available(p, min_ready, now) {
                            available += 1;
                        }
                    }
                    if pods
                        .iter()
                        .any(|p| p["metadata"]["labels"][REVISION_LABEL] == hash)
                    {
                        updated += 1;
                    }
                }
            } else if scheduled {
                mis += 1;
            }
        }
        let mut status = json!({
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": current,
            "numberMisscheduled": mis,
            "numberReady": ready,
            "observedGeneration": ds["metadata"]["generation"].as_i64().unwrap_or(0),
        });
        for (f, v) in [
            ("updatedNumberScheduled", updated),
            ("numberAvailable", available),
            ("numberUnavailable", desired - available),
            (
                "collisionCount",
                ds["status"]["collisionCount"].as_i64().unwrap_or(0),
            ),
        ] {
            if v != 0 {
                status[f] = json!(v);
            }
        }
        if let Some(c) = ds["status"]["conditions"].as_array() {
            status["conditions"] = json!(c);
        }
        status
    }
}

#[async_trait::async_trait]
impl Reconcile for DaemonSets {
    type Error = DaemonSetError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, DaemonSetError> {
        let Some(ds) = self.sets.get(k) else {
            self.expectations.forget(k);
            return Ok(Action::await_change());
        };
        let ns = k.namespace.clone().unwrap_or_default();
        let api = |source| DaemonSetError::Api {
            key: k.to_string(),
            source,
        };
        let needs_sync = self.expectations.satisfied(k);
        let sel = spec_selector(&ds).map_err(|source| DaemonSetError::Selector {
            key: k.to_string(),
            source,
        })?;
        let owned = self.claim(&ds, sel.as_ref(), &ns).await.map_err(api)?;

        let ensured = match history::sync(
            self.client.as_ref(),
            &self.revisions,
            &ds,
            "DaemonSet",
            REVISION_LABEL,
        )
        .await
        {
            Ok(e) => e,
            Err(HistoryError::Collision(name)) => {
                let mut s = (*ds).clone();
                let collisions = ds["status"]["collisionCount"].as_i64().unwrap_or(0);
                s["status"]["collisionCount"] = json!(collisions + 1);
                self.write_status(&ns, s).await.map_err(api)?;
                return Err(DaemonSetError::History {
                    key: k.to_string(),
                    source: HistoryError::Collision(name),
                });
            }
            Err(source) => {
                return Err(DaemonSetError::History {
                    key: k.to_string(),
                    source,
                });
            }
        };
        let hash = ensured.revision["metadata"]["labels"][REVISION_LABEL]
            .as_str()
            .unwrap_or("")
            .to_owned();

        let nodes = self.nodes.list();
        let now = self.clock.now();
        let mut view = View::build(&ds, &nodes, owned);
        if needs_sync && !key::is_deleting(&ds) {
            let mut plan = view.manage();
            if ds["spec"]["updateStrategy"]["type"] != "OnDelete" && plan == Plan::default() {
                plan = view.rolling(&ds, &hash, now);
            }
            if plan != Plan::default() {
                self.execute(&ds, k, &ns, &hash, &plan).await.map_err(api)?;
                let owned = self.claim(&ds, sel.as_ref(), &ns).await.map_err(api)?;
                view = View::build(&ds, &nodes, owned);
            }
        }
        let status = view.status(&ds, &hash, now);
        if status != ds["status"] {
            let mut s = (*ds).clone();
            s["status"] = status.clone();
            self.write_status(&ns, s).await.map_err(api)?;
        }

        let live_hashes: Vec<&str> = view
            .pods
            .values()
            .flatten()
            .filter_map(|p| p["metadata"]["labels"][REVISION_LABEL].as_str())
            .collect();
        let live: Vec<&str> = ensured
            .all
            .iter()
            .filter(|r| {
                key::uid(r) == key::uid(&ensured.revision)
                    || r["metadata"]["labels"][REVISION_LABEL]
                        .as_str()
                        .is_some_and(|h| live_hashes.contains(&h))
            })
            .map(key::name)
            .collect();
        let limit = ds["spec"]["revisionHistoryLimit"].as_i64().unwrap_or(10);
        history::truncate(self.client.as_ref(), &ns, &ensured.all, &live, limit)
            .await
            .map_err(api)?;

        let min_ready = ds["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        if min_ready > 0 && status["numberReady"] != status["numberAvailable"].as_i64().unwrap_or(0)
        {
            return Ok(Action::requeue(Duration::from_secs(
                u64::try_from(min_ready).unwrap_or(1),
            )));
        }
        Ok(Action::await_change())
    }
}

impl DaemonSets {
    async fn write_status(&self, ns: &str, ds: Value) -> Result<(), ClientError> {
        k1s_runtime::write::update_status(&*self.client, &daemonsets(Some(ns)), ds)
            .await
            .map(drop)
    }

    async fn event(&self, ds: &Value, type_: &str, reason: &str, message: &str) {
        let about = Involved {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            namespace: key::namespace(ds).unwrap_or("").into(),
            name: key::name(ds).into(),
            uid: key::uid(ds).into(),
            resource_version: key::resource_version(ds).unwrap_or("").into(),
            field_path: None,
        };
        let source = Source {
            component: "daemonset-controller".into(),
            host: None,
        };
        events::record(
            self.client.as_ref(),
            &source,
            &about,
            type_,
            reason,
            "",
            message,
        )
        .await;
    }

    /// Creates and deletes as planned, under expectations.
    async fn execute(
        &self,
        ds: &Value,
        k: &ObjectKey,
        ns: &str,
        hash: &str,
        plan: &Plan,
    ) -> Result<(), ClientError> {
        let mut first_error = None;
        if !plan.create_on.is_empty() {
            self.expectations.expect_creations(k, plan.create_on.len());
            let r = pods(ns);
            let results = join_all(plan.create_on.iter().map(|node| {
                let pod = pod_for_node(ds, hash, node);
                let r = r.clone();
                async move { self.client.create(&r, pod, &WriteParams::default()).await }
            }))
            .await;
            for res in results {
                match res {
                    Ok(p) => {
                        self.event(
                            ds,
                            "Normal",
                            "SuccessfulCreate",
                            &format!("Created pod: {}", key::name(&p)),
                        )
                        .await;
                    }
                    Err(e) => {
                        self.expectations.lower_creations(k, 1);
                        self.event(
                            ds,
                            "Warning",
                            "FailedCreate",
                            &format!("Error creating: {}", e.message),
                        )
                        .await;
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        if !plan.delete.is_empty() {
            // Added to (not replacing) creations still expected.
            let uids: Vec<String> = plan.delete.iter().map(|p| key::uid(p).to_owned()).collect();
            if plan.create_on.is_empty() {
                self.expectations.expect_deletions(k, uids);
            }
            let results = join_all(plan.delete.iter().map(|p| async move {
                let params = DeleteParams {
                    precondition_uid: Some(key::uid(p).to_owned()),
                    ..Default::default()
                };
                (
                    p,
                    self.client.delete(&pods(ns), key::name(p), &params).await,
                )
            }))
            .await;
            for (p, res) in results {
                match res {
                    Ok(_) => {
                        self.event(
                            ds,
                            "Normal",
                            "SuccessfulDelete",
                            &format!("Deleted pod: {}", key::name(p)),
                        )
                        .await;
                    }
                    Err(e) => {
                        self.expectations.deletion_observed(k, key::uid(p));
                        if !e.is_not_found() && !e.is_conflict() {
                            self.event(
                                ds,
                                "Warning",
                                "FailedDelete",
                                &format!("Error deleting: {}", e.message),
                            )
                            .await;
                            first_error.get_or_insert(e);
                        }
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The pods this DaemonSet controls ([`owned_pods::claim`]).
    async fn claim(
        &self,
        ds: &Value,
        sel: Option<&LabelSelector>,
        ns: &str,
    ) -> Result<Vec<Value>, ClientError> {
        let claimant = owned_pods::Claimant {
            client: self.client.as_ref(),
            owner: ds,
            resource: daemonsets(Some(ns)),
            kind: "DaemonSet",
            finalizer: None,
        };
        owned_pods::claim(&claimant, &self.pods, sel, ns, |_| true).await
    }
}

/// The daemon pod for `node`: the template with the revision hash label, the daemon
/// tolerations and the node affinity pinning it.
pub fn pod_for_node(ds: &Value, hash: &str, node: &str) -> Value {
    let t = &ds["spec"]["template"];
    let mut labels = t["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), json!(hash));
    let mut meta = json!({
        "generateName": format!("{}-", key::name(ds)),
        "namespace": ds["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [owned_pods::controller_ref_to("DaemonSet", ds)],
    });
    for f in ["annotations", "finalizers"] {
        if !t["metadata"][f].is_null() {
            meta[f] = t["metadata"][f].clone();
        }
    }
    let mut spec = t["spec"].clone();
    add_daemon_tolerations(&mut spec);
    pin_to_node(&mut spec, node);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(strategy: Value) -> Value {
        json!({"metadata": {"name": "agent", "namespace": "d", "uid": "u", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "updateStrategy": strategy,
                "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"nodeSelector": {"role": "worker"}, "containers": [{"name": "c", "image": "i"}]}}}})
    }

    fn node(name: &str, role: &str) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": name, "labels": {"role": role}}, "spec": {}}))
    }

    fn pod(name: &str, node: &str, hash: &str, ready: bool) -> Value {
        let mut p = json!({"metadata": {"name": name, "uid": name, "labels": {REVISION_LABEL: hash},
            "creationTimestamp": "2020-01-01T00:00:00Z"}, "spec": {}, "status": {"phase": "Running"}});
        pin_to_node(&mut p["spec"], node);
        if ready {
            p["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        }
        p
    }

    fn names(plan: &Plan) -> (Vec<String>, Vec<String>) {
        (
            plan.create_on.clone(),
            plan.delete
                .iter()
                .map(|p| key::name(p).to_owned())
                .collect(),
        )
    }

    #[test]
    fn manage_creates_on_eligible_nodes_and_removes_strays() {
        let d = ds(json!({"type": "RollingUpdate"}));
        let nodes = [node("a", "worker"), node("b", "worker"), node("c", "infra")];
        let owned = vec![
            pod("pa", "a", "h1", true),
            pod("pa2", "a", "h1", true),
            pod("pc", "c", "h1", true),
            pod("pz", "gone", "h1", true),
        ];
        let v = View::build(&d, &nodes, owned);
        let (create, delete) = names(&v.manage());
        assert_eq!(create, ["b"]);
        assert_eq!(delete, ["pa2", "pc", "pz"]);
        let now = jiff::Timestamp::now();
        let s = v.status(&d, "h1", now);
        assert_eq!(s["desiredNumberScheduled"], 2);
        assert_eq!(s["currentNumberScheduled"], 1);
        // Upstream counts misscheduled daemon pods per existing node only:
        // `pc` on the infra node counts, `pz` on a vanished node does not.
        assert_eq!(s["numberMisscheduled"], 1);
        assert_eq!(s["numberReady"], 1);
        assert_eq!(s["numberAvailable"], 1);
        assert_eq!(s["numberUnavailable"], 1);
        assert_eq!(s["updatedNumberScheduled"], 1);
        assert_eq!(s["observedGeneration"], 2);
    }

    #[test]
    fn rolling_within_max_unavailable() {
        let d = ds(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}));
        let nodes = [
            node("a", "worker"),
            node("b", "worker"),
            node("c", "worker"),
        ];
        let now = jiff::Timestamp::now();
        // All old and available: one goes.
        let v = View::build(
            &d,
            &nodes,
            vec![
                pod("pa", "a", "old", true),
                pod("pb", "b", "old", true),
                pod("pc", "c", "old", true),
            ],
        );
        assert_eq!(
            names(&v.rolling(&d, "new", now)),
            (vec![], vec!["pa".into()])
        );
        // A new pod not yet ready uses the budget; an unready old pod goes anyway.
        let v = View::build(
            &d,
            &nodes,
            vec![
                pod("pa", "a", "new", false),
                pod("pb", "b", "old", false),
                pod("pc", "c", "old", true),
            ],
        );
        assert_eq!(
            names(&v.rolling(&d, "new", now)),
            (vec![], vec!["pb".into()])
        );
    }

    #[test]
    fn rolling_with_surge_starts_new_before_old_goes() {
        let d = ds(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        );
        let nodes = [node("a", "worker"), node("b", "worker")];
        let now = jiff::Timestamp::now();
        let v = View::build(
            &d,
            &nodes,
            vec![pod("pa", "a", "old", true), pod("pb", "b", "old", true)],
        );
        assert_eq!(
            names(&v.rolling(&d, "new", now)),
            (vec!["a".into()], vec![])
        );
        // The surge pod is not ready yet: nothing more.
        let v = View::build(
            &d,
            &nodes,
            vec![
                pod("pa", "a", "old", true),
                pod("na", "a", "new", false),
                pod("pb", "b", "old", true),
            ],
        );
        assert_eq!(v.manage(), Plan::default());
        assert_eq!(names(&v.rolling(&d, "new", now)), (vec![], vec![]));
        // It is ready: the old one goes.
        let v = View::build(
            &d,
            &nodes,
            vec![
                pod("pa", "a", "old", true),
                pod("na", "a", "new", true),
                pod("pb", "b", "old", true),
            ],
        );
        assert_eq!(
            names(&v.rolling(&d, "new", now)),
            (vec!["b".into()], vec!["pa".into()])
        );
    }

    #[test]
    fn budgets_resolve_percentages() {
        let d = ds(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}),
        );
        assert_eq!(surge_and_unavailable(&d, 5), (2, 0));
        let d = ds(json!({"type": "RollingUpdate"}));
        assert_eq!(surge_and_unavailable(&d, 5), (0, 1));
        let d = ds(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
        );
        assert_eq!(surge_and_unavailable(&d, 5), (0, 1));
    }

    #[test]
    fn pods_are_pinned_and_tolerant() {
        let d = ds(json!({}));
        let p = pod_for_node(&d, "h", "n1");
        assert_eq!(target_node(&p), Some("n1"));
        assert_eq!(p["metadata"]["generateName"], "agent-");
        assert_eq!(p["metadata"]["labels"][REVISION_LABEL], "h");
        assert_eq!(p["metadata"]["labels"]["app"], "agent");
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 6);
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
    }
}

//! The policy controller of one node: Pods, Namespaces and NetworkPolicies in (the shared
//! runtime's typed informers), one nftables transaction per burst of changes out.
//!
//! Every change that matters to policies (a pod's address, labels, node or named ports; a
//! namespace's labels; any policy) marks the picture dirty and wakes the sync loop; changes
//! that do not (a pod's conditions, say) are dropped at the door. Once every list is
//! complete, a sync computes the whole [`Plan`] (cheap: selectors over the cached pods) and
//! applies the difference from what the kernel holds as one transaction; the first sync (and
//! the one after an error) replaces the table whole, which also takes over whatever an earlier
//! k1s left, so a restart never opens a window without policies. Syncs are at least
//! `min_sync_interval` apart, which coalesces bursts. On return the table stays, so policies
//! hold while k1s restarts; [`remove_table`] takes it away (`--disable-network-policy`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k1s_api::client::Client;
use k1s_nft::ruleset::{Ruleset, Table, Tx};
use k1s_nft::{Nft, NftError};
use k1s_runtime::backoff::Backoff;
use k1s_runtime::reflector::{self, Change};
use k1s_runtime::watcher;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::model::{Cluster, Plan, PodInfo};
use crate::rules;

/// The policy table: `ip k1s-policy`.
pub const TABLE: &str = "k1s-policy";

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// This node's name (its pods are the ones it isolates).
    pub node_name: String,
    /// The nftables table (`k1s-policy`; tests give each node its own).
    pub table: String,
    /// The least time between two syncs.
    pub min_sync_interval: Duration,
}

impl PolicyConfig {
    pub fn new(node_name: &str) -> Self {
        Self {
            node_name: node_name.to_string(),
            table: TABLE.to_string(),
            min_sync_interval: Duration::from_millis(20),
        }
    }
}

/// The informers' picture and whether it changed since the last sync.
#[derive(Default)]
struct State {
    cluster: Cluster,
    dirty: bool,
    pods_synced: bool,
    namespaces_synced: bool,
    policies_synced: bool,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl State {
    fn on_pod(&mut self, c: Change<Pod>) {
        let key = name_of(&c.object().metadata);
        let info = match &c {
            Change::Added(p) | Change::Modified(p) => PodInfo::of(p),
            Change::Deleted(_) => None,
        };
        // Dirty only when the picture changed: a pod policies ignore (no address yet, host
        // network) that was not in it before changes nothing.
        let changed = match info {
            Some(i) if self.cluster.pods.get(&key) == Some(&i) => false,
            Some(i) => {
                self.cluster.pods.insert(key, i);
                true
            }
            None => self.cluster.pods.remove(&key).is_some(),
        };
        self.dirty |= changed;
    }

    fn on_namespace(&mut self, c: Change<Namespace>) {
        let name = c.object().metadata.name.clone().unwrap_or_default();
        match c {
            Change::Added(n) | Change::Modified(n) => {
                let labels = n.metadata.labels.unwrap_or_default();
                if self.cluster.namespaces.get(&name) == Some(&labels) {
                    return;
                }
                self.cluster.namespaces.insert(name, labels);
            }
            Change::Deleted(_) => {
                self.cluster.namespaces.remove(&name);
            }
        }
        self.dirty = true;
    }

    fn on_policy(&mut self, c: Change<NetworkPolicy>) {
        let key = name_of(&c.object().metadata);
        match c {
            Change::Added(p) | Change::Modified(p) => {
                if self
                    .cluster
                    .policies
                    .get(&key)
                    .is_some_and(|o| o.spec == p.spec)
                {
                    return;
                }
                self.cluster.policies.insert(key, p);
            }
            Change::Deleted(_) => {
                self.cluster.policies.remove(&key);
            }
        }
        self.dirty = true;
    }
}

/// What one sync did.
#[derive(Debug, Clone, Copy)]
pub struct SyncReport {
    pub full: bool,
    /// Policy chains (a policy in one direction) and isolated pod chains on this node.
    pub policies: usize,
    pub pods: usize,
    /// How long planning and programming took, and the `nft` part of it.
    pub took: Duration,
    pub nft: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One node's policy enforcement.
pub struct PolicyController {
    cfg: PolicyConfig,
    nft: Arc<dyn Nft>,
    state: Arc<Mutex<State>>,
    wake: Arc<Notify>,
    /// What the kernel holds (valid while `need_full` is false), and the plan it came from
    /// (a change that plans the same needs no rules built).
    applied: Ruleset,
    planned: Option<Plan>,
    need_full: bool,
}

impl PolicyController {
    pub fn new(cfg: PolicyConfig, nft: Arc<dyn Nft>) -> Self {
        Self {
            cfg,
            nft,
            state: Arc::default(),
            wake: Arc::new(Notify::new()),
            applied: Ruleset::default(),
            planned: None,
            need_full: true,
        }
    }

    fn table(&self) -> Table {
        Table {
            family: "ip",
            name: self.cfg.table.clone(),
        }
    }

    /// Feeds a Pod change (the informer's callback; also tests and the benchmark).
    pub fn on_pod(&self, c: Change<Pod>) {
        lock(&self.state).on_pod(c);
        self.wake.notify_one();
    }

    /// Feeds a Namespace change.
    pub fn on_namespace(&self, c: Change<Namespace>) {
        lock(&self.state).on_namespace(c);
        self.wake.notify_one();
    }

    /// Feeds a NetworkPolicy change.
    pub fn on_policy(&self, c: Change<NetworkPolicy>) {
        lock(&self.state).on_policy(c);
        self.wake.notify_one();
    }

    /// Marks every list complete (tests and the benchmark, which feed changes themselves).
    pub fn mark_synced(&self) {
        let mut s = lock(&self.state);
        s.pods_synced = true;
        s.namespaces_synced = true;
        s.policies_synced = true;
        s.dirty = true;
        drop(s);
        self.wake.notify_one();
    }

    fn ready(&self) -> bool {
        let s = lock(&self.state);
        s.pods_synced && s.namespaces_synced && s.policies_synced
    }

    /// Programs the current picture (the whole table after a start or an error, else the
    /// difference from what was applied). `None` when nothing changed.
    pub async fn sync(&mut self) -> Result<Option<SyncReport>, NftError> {
        let started = Instant::now();
        let plan = {
            let mut s = lock(&self.state);
            if !s.dirty && !self.need_full {
                return Ok(None);
            }
            s.dirty = false;
            s.cluster.plan(&self.cfg.node_name)
        };
        let full = self.need_full;
        if !full && self.planned.as_ref() == Some(&plan) {
            return Ok(None);
        }
        let new = rules::ruleset(&plan);
        let table = self.table();
        let tx = if full {
            Tx::full(&table, "k1s network policy", &new)
        } else {
            // Declarations never change under one name, so a diff is always possible; a
            // `None` would still be handled by a full replacement.
            Tx::diff(&table, &self.applied, &new)
                .unwrap_or_else(|| Tx::full(&table, "k1s network policy", &new))
        };
        let nft_started = Instant::now();
        if !tx.is_empty()
            && let Err(e) = self.nft.apply(&tx.render()).await
        {
            self.need_full = true;
            lock(&self.state).dirty = true;
            return Err(e);
        }
        let nft = nft_started.elapsed();
        self.applied = new;
        self.need_full = false;
        let report = SyncReport {
            full,
            policies: plan.policies.len(),
            pods: plan.ingress.len() + plan.egress.len(),
            took: started.elapsed(),
            nft,
        };
        self.planned = Some(plan);
        Ok(Some(report))
    }

    /// Watches Pods, Namespaces and NetworkPolicies on `client` and keeps the table in step
    /// until `cancel`.
    pub async fn run(mut self, client: Arc<dyn Client>, cancel: CancellationToken) {
        let tasks = TaskTracker::new();
        let (s, w, all) = (&self.state, &self.wake, watcher::Config::default);
        // A list's completion marks the picture dirty too: the first sync waits for all three.
        reflector::feed::<Pod, _>(
            &tasks,
            &client,
            all(),
            s,
            w,
            State::on_pod,
            |s| (s.pods_synced, s.dirty) = (true, true),
            &cancel,
        );
        reflector::feed::<Namespace, _>(
            &tasks,
            &client,
            all(),
            s,
            w,
            State::on_namespace,
            |s| (s.namespaces_synced, s.dirty) = (true, true),
            &cancel,
        );
        reflector::feed::<NetworkPolicy, _>(
            &tasks,
            &client,
            all(),
            s,
            w,
            State::on_policy,
            |s| (s.policies_synced, s.dirty) = (true, true),
            &cancel,
        );
        tasks.close();
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut last: Option<Instant> = None;
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = self.wake.notified() => {}
            }
            if !self.ready() {
                continue;
            }
            if let Some(l) = last {
                let next = l + self.cfg.min_sync_interval;
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep_until(next.into()) => {}
                }
            }
            last = Some(Instant::now());
            match self.sync().await {
                Ok(None) => {}
                Ok(Some(r)) => {
                    backoff.reset();
                    if r.full {
                        tracing::info!(policies = r.policies, isolated_pods = r.pods, took_ms = r.took.as_millis() as u64, table = %self.cfg.table, "network policy: programmed the nftables table");
                    } else {
                        tracing::debug!(
                            policies = r.policies,
                            isolated_pods = r.pods,
                            took_us = r.took.as_micros() as u64,
                            "network policy: partial sync"
                        );
                    }
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::error!(error = %e, retry_in_ms = delay.as_millis() as u64, "network policy: programming nftables failed");
                    tokio::select! {
                        () = cancel.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                    self.wake.notify_one();
                }
            }
        }
        tasks.wait().await;
    }
}

/// Deletes the policy table (`--disable-network-policy`: enforcement that no longer runs
/// must not leave rules behind).
pub async fn remove_table(nft: &dyn Nft, table: &str) -> Result<(), NftError> {
    nft.delete_table("ip", table).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_nft::FakeNft;
    use serde_json::json;

    fn pod(ns: &str, name: &str, ip: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": ip}
        }))
        .unwrap()
    }

    fn deny_all(ns: &str) -> NetworkPolicy {
        serde_json::from_value(json!({
            "metadata": {"name": "deny", "namespace": ns},
            "spec": {"podSelector": {}}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn first_sync_replaces_the_table_then_changes_go_as_differences() {
        let nft = Arc::new(FakeNft::default());
        let mut c = PolicyController::new(PolicyConfig::new("n1"), nft.clone());
        c.on_pod(Change::Added(pod(
            "x",
            "a",
            "10.42.0.5",
            json!({"app": "a"}),
        )));
        c.on_namespace(Change::Added(
            serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
        ));
        c.mark_synced();
        let r = c.sync().await.unwrap().unwrap();
        assert!(r.full);
        assert_eq!(r.pods, 0);
        let first = nft.transactions().pop().unwrap();
        assert!(first.contains("delete table ip k1s-policy"), "{first}");

        // Nothing changed: nothing applied.
        assert!(c.sync().await.unwrap().is_none());
        // A status-only change of the pod is no change to policies.
        c.on_pod(Change::Modified(pod(
            "x",
            "a",
            "10.42.0.5",
            json!({"app": "a"}),
        )));
        assert!(c.sync().await.unwrap().is_none());

        c.on_policy(Change::Added(deny_all("x")));
        let r = c.sync().await.unwrap().unwrap();
        assert!(!r.full);
        assert_eq!(r.pods, 1);
        let tx = nft.transactions().pop().unwrap();
        assert!(!tx.contains("delete table"), "{tx}");
        assert!(
            tx.contains(
                "add element ip k1s-policy ingress-pods { 10.42.0.5 : goto pod-in-10-42-0-5 }"
            ),
            "{tx}"
        );

        // A failed transaction makes the next one a full one.
        *nft.fail.lock().unwrap() = Some("boom".into());
        c.on_policy(Change::Deleted(deny_all("x")));
        assert!(c.sync().await.is_err());
        *nft.fail.lock().unwrap() = None;
        let r = c.sync().await.unwrap().unwrap();
        assert!(r.full);
        assert_eq!(r.pods, 0);
    }

    #[tokio::test]
    async fn nothing_is_programmed_before_every_list_is_complete() {
        let nft = Arc::new(FakeNft::default());
        let c = PolicyController::new(PolicyConfig::new("n1"), nft);
        assert!(!c.ready());
        c.mark_synced();
        assert!(c.ready());
    }
}

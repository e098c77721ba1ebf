//! The in-process cluster one benchmark shape runs against: a scratch embedded store in a
//! temp directory, the API state as `k1s server` builds it (bootstrap, RBAC, admission less
//! the plugins the caller turns off), the in-process client, the scheduler as the server
//! wires it, and either the whole controller manager or only the ServiceAccount controller
//! (each namespace's `default` account, which ServiceAccount admission needs when it runs).
//! No HTTPS, no kubelet: nodes are hollow Node objects, and a hollow kubelet finishes the
//! deletion of pods that wait for one (grace period), as a kubelet's final delete would.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use k1s_api::client::{Client, DeleteParams, ResourceRef, WriteParams};
use k1s_apiserver::admission::config::AdmissionConfig;
use k1s_apiserver::admission::plugins::Plugin;
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::pki::{Pki, PkiConfig};
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_runtime::watcher::{self, Event};
use k1s_store::compactor::{self, CompactionPolicy};
use k1s_store::etcd::EtcdTls;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::{components, datastore};

/// Zones the hollow nodes are spread over, round robin.
pub const ZONES: [&str; 3] = ["zone-0", "zone-1", "zone-2"];
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The name of hollow node `i`.
pub fn node_name(i: usize) -> String {
    format!("hollow-{i:05}")
}

/// Hollow node `i`: upstream scheduler_perf's default node (4 cpu, 32Gi, 110 pods), Ready.
pub fn hollow_node(i: usize) -> Value {
    let name = node_name(i);
    let zone = ZONES[i % ZONES.len()];
    let resources = json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", ZONE_LABEL: zone}},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "hollow node"}],
            "phase": "Running"}
    })
}

pub struct Cluster {
    pub client: Arc<dyn Client>,
    cancel: CancellationToken,
    /// Stops the tasks if the cluster is dropped without [`Cluster::stop`].
    _stop_on_drop: DropGuard,
    tasks: TaskTracker,
    /// Removed (also when dropped) after the tasks stopped.
    dir: tempfile::TempDir,
    /// The admission plugins turned off.
    disabled: BTreeSet<Plugin>,
}

impl Cluster {
    /// Starts a fresh cluster in a new directory under `parent`, its API server without the
    /// admission plugins `disabled`.
    pub async fn start(
        parent: &Path,
        controller_manager: bool,
        disabled: BTreeSet<Plugin>,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let dir = tempfile::Builder::new()
            .prefix("k1s-bench-sched-")
            .tempdir_in(parent)
            .with_context(|| format!("creating a scratch directory in {}", parent.display()))?;
        let store = datastore::open(dir.path(), None, &EtcdTls::default()).await?;
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        // `k1s server`'s default compaction policy.
        let policy = CompactionPolicy {
            keep_revisions: 10_000,
            keep_for: Duration::from_secs(300),
            interval: Duration::from_secs(60),
        };
        tasks.spawn(compactor::run(store.clone(), policy, cancel.clone()));
        let config = ApiConfig {
            admission: AdmissionConfig {
                disabled: disabled.clone(),
                ..Default::default()
            },
            ..Default::default()
        };
        let state = ApiState::new(store, &config)?;
        k1s_apiserver::bootstrap::run(&state.rest, IpAddr::V4(Ipv4Addr::LOCALHOST), 6443)
            .await
            .map_err(|e| anyhow::anyhow!("creating the system namespaces: {}", e.message))?;
        state
            .start(&tasks, &cancel)
            .await
            .map_err(|e| anyhow::anyhow!("reconciling the bootstrap RBAC policy: {}", e.message))?;
        let client: Arc<dyn Client> = Arc::new(
            LocalClient::new(state.rest.clone(), "k1s-bench-scheduler", cancel.clone())
                .with_tokens(state.tokens.clone()),
        );
        if controller_manager {
            let pki = Pki::load_or_create(&PkiConfig {
                dir: dir.path().join("tls"),
                hostname: "k1s-bench".into(),
                node_ips: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
                tls_sans: vec![],
            })?;
            tasks.spawn(components::controllers(
                client.clone(),
                state.registry.clone(),
                pki.ca.cert_pem.clone(),
                Some(format!("k1s-bench_{}", uuid::Uuid::new_v4())),
                // Hollow nodes renew no Lease: node lifecycle must not taint them mid-run.
                k1s_controllers::Options {
                    node_monitor_grace_period: std::time::Duration::from_secs(24 * 3600),
                    ..Default::default()
                },
                cancel.clone(),
            ));
        } else {
            // Admission wants each namespace's default ServiceAccount.
            tasks.spawn(k1s_controllers::serviceaccount::run(
                client.clone(),
                cancel.clone(),
            ));
        }
        let (c, k) = (client.clone(), cancel.clone());
        tasks.spawn(async move {
            if let Err(e) =
                k1s_scheduler::informers::run(c, k1s_scheduler::Config::default(), k).await
            {
                tracing::error!(error = %e, "the scheduler stopped");
            }
        });
        tasks.spawn(hollow_kubelet(client.clone(), cancel.clone()));
        tasks.close();
        Ok(Self {
            client,
            _stop_on_drop: cancel.clone().drop_guard(),
            cancel,
            tasks,
            dir,
            disabled,
        })
    }

    /// Whether the API server runs admission plugin `p`.
    pub fn admits_with(&self, p: Plugin) -> bool {
        !self.disabled.contains(&p)
    }

    /// Stops every task, then removes the scratch directory.
    pub async fn stop(self) {
        let Self {
            client,
            cancel,
            _stop_on_drop,
            tasks,
            dir,
            disabled: _,
        } = self;
        cancel.cancel();
        if tokio::time::timeout(Duration::from_secs(30), tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("some benchmark tasks did not stop within 30 s");
        }
        // The last handle on the store: close it before its directory goes.
        drop(client);
        let path = dir.path().to_path_buf();
        if let Err(e) = dir.close() {
            eprintln!("warning: could not remove {}: {e}", path.display());
        }
    }

    /// Creates hollow nodes `0..n` with `creators` concurrent clients.
    pub async fn create_nodes(&self, n: usize, creators: usize) -> anyhow::Result<()> {
        let next = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for _ in 0..creators.max(1) {
            let (client, next) = (self.client.clone(), next.clone());
            handles.push(tokio::spawn(async move {
                let nodes = ResourceRef::new("", "v1", "nodes", None);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<_, anyhow::Error>(());
                    }
                    client
                        .create(&nodes, hollow_node(i), &WriteParams::default())
                        .await
                        .map_err(|e| anyhow::anyhow!("creating node {}: {e}", node_name(i)))?;
                }
            }));
        }
        for h in handles {
            h.await??;
        }
        Ok(())
    }

    /// Creates a namespace and waits for its default ServiceAccount (admission needs it).
    pub async fn create_namespace(&self, name: &str) -> anyhow::Result<()> {
        let nss = ResourceRef::new("", "v1", "namespaces", None);
        self.client
            .create(
                &nss,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                &WriteParams::default(),
            )
            .await
            .map_err(|e| anyhow::anyhow!("creating namespace {name}: {e}"))?;
        let sas = ResourceRef::new("", "v1", "serviceaccounts", Some(name));
        for _ in 0..300 {
            if self.client.get(&sas, "default").await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("namespace {name} got no default ServiceAccount within 30 s")
    }

    /// Creates a cluster-scoped or namespaced object.
    pub async fn create(&self, r: &ResourceRef, obj: Value) -> anyhow::Result<Value> {
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        self.client
            .create(r, obj, &WriteParams::default())
            .await
            .map_err(|e| anyhow::anyhow!("creating {} {name}: {e}", r.resource))
    }

    /// Every object of a resource (all namespaces), in one list.
    pub async fn list(&self, r: &ResourceRef) -> anyhow::Result<Vec<Value>> {
        Ok(self
            .client
            .list(r, &Default::default())
            .await
            .map_err(|e| anyhow::anyhow!("listing {}: {e}", r.resource))?
            .items)
    }
}

/// Whether a pod is bound and marked for deletion: with a kubelet gone, it would stay so for
/// its grace period and then forever.
fn awaits_kubelet(pod: &Value) -> bool {
    !pod["metadata"]["deletionTimestamp"].is_null()
        && pod["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
}

/// Stands in for the nodes' kubelets where the benchmark needs one: a bound pod marked for
/// deletion (a preemption victim with a grace period) is deleted with grace 0, as the kubelet
/// does once the containers stopped.
async fn hollow_kubelet(client: Arc<dyn Client>, cancel: CancellationToken) {
    let pods = ResourceRef::new("", "v1", "pods", None);
    let stream = watcher::watcher(client.clone(), pods, watcher::Config::default());
    futures::pin_mut!(stream);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    loop {
        let ev = tokio::select! {
            () = cancel.cancelled() => return,
            ev = stream.next() => match ev { Some(ev) => ev, None => return },
        };
        let (Event::InitApply(pod) | Event::Apply(pod)) = ev else {
            continue;
        };
        if !awaits_kubelet(&pod) {
            continue;
        }
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or("");
        let name = pod["metadata"]["name"].as_str().unwrap_or("");
        let r = ResourceRef::new("", "v1", "pods", Some(ns));
        if let Err(e) = client.delete(&r, name, &now).await
            && e.code != 404
        {
            tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "hollow kubelet: delete failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hollow_nodes_spread_over_three_zones() {
        let zones: Vec<String> = (0..6)
            .map(|i| {
                hollow_node(i)["metadata"]["labels"][ZONE_LABEL]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            zones,
            ["zone-0", "zone-1", "zone-2", "zone-0", "zone-1", "zone-2"]
        );
        let n = hollow_node(7);
        assert_eq!(
            n["metadata"]["labels"]["kubernetes.io/hostname"],
            "hollow-00007"
        );
        assert_eq!(n["status"]["allocatable"]["cpu"], "4");
        assert_eq!(n["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn only_bound_terminating_pods_await_a_kubelet() {
        let bound = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                           "spec": {"nodeName": "n"}});
        assert!(awaits_kubelet(&bound));
        assert!(!awaits_kubelet(
            &json!({"metadata": {}, "spec": {"nodeName": "n"}})
        ));
        assert!(!awaits_kubelet(
            &json!({"metadata": {"deletionTimestamp": "x"}, "spec": {}})
        ));
    }
}

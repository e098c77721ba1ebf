//! The ReplicaSet controller: keeps `spec.replicas` active pods matching the selector, as
//! upstream's `replica_set.go`.
//!
//! - Pods are created from the template (labels — `pod-template-hash` included — copied as
//!   they are) with a controller reference, in slow-start batches of 1, 2, 4, … that stop at
//!   the first failure; at most 500 per pass (upstream's burst).
//! - Surplus pods are deleted in upstream's order (unscheduled, pending, not ready, newer
//!   first).
//! - [`Expectations`] keep a pass from acting on a cache that has not yet seen the previous
//!   pass's creations and deletions.
//! - Orphan pods that match are adopted (after a live check that the ReplicaSet is still
//!   there and not being deleted); owned pods that no longer match are released.
//! - Status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (ready for
//!   `minReadySeconds`), observedGeneration and the `ReplicaFailure` condition.
//!
//! It owns the pods it controls and ReplicaSet status; it never touches the spec.
//!
//! The same code is the ReplicationController manager ([`run_replication_controllers`],
//! [`Flavor`]), as upstream's `replication` controller wraps its ReplicaSet controller.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use k1s_api::selector::LabelSelector;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::expectations::Expectations;
use crate::owned_pods::{self, spec_selector};
use k1s_runtime::clock::Clock;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// Upstream's `BurstReplicas`: the most pods created or deleted in one pass.
const BURST: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum ReplicaSetError {
    #[error("replicaset {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
    #[error("replicaset {key}: invalid selector: {source}")]
    Selector {
        key: String,
        #[source]
        source: k1s_api::selector::SelectorError,
    },
}

fn pods(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some(ns))
}

/// What differs between the ReplicaSet controller and the ReplicationController manager,
/// which upstream runs on the same code: the resource, its kind, and (handled by
/// [`spec_selector`]) a selector that is a plain label map for ReplicationControllers.
pub struct Flavor {
    /// The controller's name (its work queue, its logs).
    pub name: &'static str,
    pub kind: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
}

impl Flavor {
    fn resource(&self, ns: Option<&str>) -> ResourceRef {
        ResourceRef::new(self.group, self.version, self.plural, ns)
    }
}

pub const REPLICA_SET: Flavor = Flavor {
    name: "replicaset",
    kind: "ReplicaSet",
    group: "apps",
    version: "v1",
    plural: "replicasets",
};

pub const REPLICATION_CONTROLLER: Flavor = Flavor {
    name: "replicationcontroller",
    kind: "ReplicationController",
    group: "",
    version: "v1",
    plural: "replicationcontrollers",
};

/// Runs the ReplicaSet controller until `cancel`; `clock` dates availability.
pub async fn run(client: Arc<dyn Client>, clock: Arc<dyn Clock>, cancel: CancellationToken) {
    run_flavor(client, &REPLICA_SET, clock, cancel).await;
}

/// Runs the ReplicationController manager until `cancel`.
pub async fn run_replication_controllers(
    client: Arc<dyn Client>,
    clock: Arc<dyn Clock>,
    cancel: CancellationToken,
) {
    run_flavor(client, &REPLICATION_CONTROLLER, clock, cancel).await;
}

async fn run_flavor(
    client: Arc<dyn Client>,
    flavor: &'static Flavor,
    clock: Arc<dyn Clock>,
    cancel: CancellationToken,
) {
    let mut ctrl = Controller::new(
        flavor.name,
        client.clone(),
        flavor.resource(None),
        watcher::Config::default(),
    )
    .workers(5);
    let sets = ctrl.store();
    let expectations = Arc::new(Expectations::default());
    let exp = expectations.clone();
    let sets_for_pods = sets.clone();
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |pod: &Value, seen| {
            owned_pods::owner_keys(flavor.kind, pod, seen, &sets_for_pods, Some(&exp), |_| true)
        }),
    );
    let reconciler = Arc::new(ReplicaSets {
        flavor,
        client,
        sets,
        pods: pod_store,
        expectations,
        clock,
    });
    ctrl.run(reconciler, cancel).await;
}

struct ReplicaSets {
    flavor: &'static Flavor,
    client: Arc<dyn Client>,
    sets: Store,
    pods: Store,
    expectations: Arc<Expectations>,
    clock: Arc<dyn Clock>,
}

fn is_active(pod: &Value) -> bool {
    !key::is_deleting(pod)
        && !matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
}

fn ready_condition(pod: &Value) -> Option<&Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn parse_time(t: &Value) -> Option<jiff::Timestamp> {
    k1s_api::time::parse(t.as_str()?)
}

fn is_available(pod: &Value, min_ready_seconds: i64, now: jiff::Timestamp) -> bool {
    let Some(ready) = ready_condition(pod) else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    parse_time(&ready["lastTransitionTime"])
        .is_some_and(|t| t + jiff::SignedDuration::from_secs(min_ready_seconds) <= now)
}

/// Upstream's ranking of pods to delete first: unscheduled, then pending/unknown before
/// running, not ready before ready, more restarts, then newer.
fn deletion_order(a: &Value, b: &Value) -> Ordering {
    let scheduled = |p: &Value| {
        p["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
    };
    let phase = |p: &Value| match p["status"]["phase"].as_str() {
        Some("Pending") => 0,
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    };
    let ready = |p: &Value| ready_condition(p).is_some();
    let restarts = |p: &Value| -> i64 {
        p["status"]["containerStatuses"]
            .as_array()
            .map(|cs| cs.iter().filter_map(|c| c["restartCount"].as_i64()).sum())
            .unwrap_or(0)
    };
    let created = |p: &Value| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    scheduled(a)
        .cmp(&scheduled(b))
        .then(phase(a).cmp(&phase(b)))
        .then(ready(a).cmp(&ready(b)))
        .then(restarts(b).cmp(&restarts(a)))
        .then(created(b).cmp(&created(a)))
}

/// A pod from the ReplicaSet's (or ReplicationController's, `kind`) template.
fn pod_from_template(kind: &str, rs: &Value) -> Value {
    let t = &rs["spec"]["template"];
    let mut meta = json!({
        "generateName": format!("{}-", key::name(rs)),
        "ownerReferences": [owned_pods::controller_ref_to(kind, rs)],
    });
    for f in ["labels", "annotations", "finalizers"] {
        if !t["metadata"][f].is_null() {
            meta[f] = t["metadata"][f].clone();
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]})
}

#[async_trait::async_trait]
impl Reconcile for ReplicaSets {
    type Error = ReplicaSetError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, ReplicaSetError> {
        let Some(rs) = self.sets.get(k) else {
            self.expectations.forget(k);
            return Ok(Action::await_change());
        };
        let ns = k.namespace.clone().unwrap_or_default();
        let api = |source| ReplicaSetError::Api {
            key: k.to_string(),
            source,
        };
        let needs_sync = self.expectations.satisfied(k);
        let sel = spec_selector(&rs).map_err(|source| ReplicaSetError::Selector {
            key: k.to_string(),
            source,
        })?;
        let owned = self.claim(&rs, sel.as_ref(), &ns).await.map_err(api)?;
        let active: Vec<Value> = owned.into_iter().filter(is_active).collect();
        let mut failure = None;
        if needs_sync && !key::is_deleting(&rs) {
            failure = self.manage(&rs, k, &ns, &active).await;
        }
        let min_ready = rs["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        let status = self.status(&rs, &active, failure.as_ref(), min_ready);
        if status != rs["status"] {
            let mut updated = (*rs).clone();
            updated["status"] = status.clone();
            match self
                .client
                .update(
                    &self.flavor.resource(Some(&ns)),
                    updated,
                    Some("status"),
                    &WriteParams::default(),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Ok(Action::await_change()),
                Err(e) => return Err(api(e)),
            }
        }
        if let Some((_, e)) = failure {
            return Err(api(e));
        }
        let replicas = status["replicas"].as_i64().unwrap_or(0);
        if min_ready > 0
            && status["readyReplicas"].as_i64() == Some(replicas)
            && status["availableReplicas"].as_i64() != Some(replicas)
        {
            return Ok(Action::requeue(Duration::from_secs(
                u64::try_from(min_ready).unwrap_or(1),
            )));
        }
        Ok(Action::await_change())
    }
}

impl ReplicaSets {
    /// The pods this ReplicaSet controls ([`owned_pods::claim`]).
    async fn claim(
        &self,
        rs: &Value,
        sel: Option<&LabelSelector>,
        ns: &str,
    ) -> Result<Vec<Value>, ClientError> {
        let claimant = owned_pods::Claimant {
            client: self.client.as_ref(),
            owner: rs,
            resource: self.flavor.resource(Some(ns)),
            kind: self.flavor.kind,
            finalizer: None,
        };
        owned_pods::claim(&claimant, &self.pods, sel, ns, |_| true).await
    }

    /// Creates or deletes pods towards `spec.replicas`; returns the failure, if any, as the
    /// `ReplicaFailure` reason and error.
    async fn manage(
        &self,
        rs: &Value,
        k: &ObjectKey,
        ns: &str,
        active: &[Value],
    ) -> Option<(&'static str, ClientError)> {
        let want = usize::try_from(rs["spec"]["replicas"].as_i64().unwrap_or(1)).unwrap_or(0);
        let have = active.len();
        if have < want {
            let n = (want - have).min(BURST);
            self.expectations.expect_creations(k, n);
            let template = pod_from_template(self.flavor.kind, rs);
            let (r, params) = (pods(ns), WriteParams::default());
            let mut created = 0;
            let mut batch = 1;
            while created < n {
                let size = batch.min(n - created);
                let results =
                    join_all((0..size).map(|_| self.client.create(&r, template.clone(), &params)))
                        .await;
                created += size;
                let mut error = None;
                for r in results {
                    match r {
                        Ok(_) => {}
                        Err(e) => {
                            self.expectations.lower_creations(k, 1);
                            error = Some(e);
                        }
                    }
                }
                if let Some(e) = error {
                    // The rest of this pass is skipped, as upstream's slow start does.
                    self.expectations.lower_creations(k, n - created);
                    return Some(("FailedCreate", e));
                }
                batch *= 2;
            }
        } else if have > want {
            let n = (have - want).min(BURST);
            let mut victims: Vec<&Value> = active.iter().collect();
            victims.sort_by(|a, b| deletion_order(a, b));
            victims.truncate(n);
            self.expectations
                .expect_deletions(k, victims.iter().map(|p| key::uid(p).to_owned()));
            let results = join_all(victims.iter().map(|p| async move {
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
            let mut error = None;
            for (p, r) in results {
                match r {
                    Ok(_) => {}
                    Err(e) => {
                        self.expectations.deletion_observed(k, key::uid(p));
                        if !e.is_not_found() {
                            error = Some(e);
                        }
                    }
                }
            }
            if let Some(e) = error {
                return Some(("FailedDelete", e));
            }
        }
        None
    }

    fn status(
        &self,
        rs: &Value,
        active: &[Value],
        failure: Option<&(&'static str, ClientError)>,
        min_ready: i64,
    ) -> Value {
        let template_labels = rs["spec"]["template"]["metadata"]["labels"].as_object();
        let fully_labeled = active
            .iter()
            .filter(|p| {
                template_labels.is_none_or(|tl| {
                    tl.iter()
                        .all(|(k, v)| p["metadata"]["labels"][k.as_str()] == *v)
                })
            })
            .count();
        let ready = active
            .iter()
            .filter(|p| ready_condition(p).is_some())
            .count();
        let now = self.clock.now();
        let available = active
            .iter()
            .filter(|p| is_available(p, min_ready, now))
            .count();
        let mut status = json!({
            "replicas": active.len(),
            "fullyLabeledReplicas": fully_labeled,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": rs["metadata"]["generation"].as_i64().unwrap_or(0),
        });
        let mut conditions: Vec<Value> = rs["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c["type"] != "ReplicaFailure")
            .collect();
        if let Some((reason, e)) = failure {
            let old = rs["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "ReplicaFailure").cloned());
            conditions.push(old.unwrap_or_else(|| {
                json!({"type": "ReplicaFailure", "status": "True", "reason": reason,
                       "message": e.message, "lastTransitionTime": k1s_runtime::clock::now()})
            }));
        }
        if !conditions.is_empty() {
            status["conditions"] = json!(conditions);
        }
        // Upstream omits zero counts (omitempty) except replicas.
        for f in [
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ] {
            if status[f] == 0
                && let Some(m) = status.as_object_mut()
            {
                m.remove(f);
            }
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_prefers_unscheduled_unready_newer() {
        let unscheduled = json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}, "spec": {}, "status": {"phase": "Pending"}});
        let ready_old = json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}, "spec": {"nodeName": "n"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let ready_new = json!({"metadata": {"creationTimestamp": "2021-01-01T00:00:00Z"}, "spec": {"nodeName": "n"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let running_unready = json!({"metadata": {"creationTimestamp": "2019-01-01T00:00:00Z"}, "spec": {"nodeName": "n"},
            "status": {"phase": "Running"}});
        let mut pods = vec![&ready_old, &ready_new, &running_unready, &unscheduled];
        pods.sort_by(|a, b| deletion_order(a, b));
        assert_eq!(
            pods,
            vec![&unscheduled, &running_unready, &ready_new, &ready_old]
        );
    }

    #[test]
    fn template_pods_keep_labels_and_point_at_their_owner() {
        let rs = json!({"metadata": {"name": "web-5d4f", "uid": "u1"},
            "spec": {"template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "5d4f"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let pod = pod_from_template("ReplicaSet", &rs);
        assert_eq!(pod["metadata"]["generateName"], "web-5d4f-");
        assert_eq!(pod["metadata"]["labels"]["pod-template-hash"], "5d4f");
        let r = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(
            (r["uid"].as_str(), r["controller"].as_bool()),
            (Some("u1"), Some(true))
        );
    }
}

//! The StatefulSet controller, as upstream's `statefulset` package: pods `<set>-<ordinal>`
//! with stable identity ([`identity`]), claims from `volumeClaimTemplates` with their
//! retention policy, `OrderedReady` (one pod at a time, each Running and Ready before the
//! next; scale down from the highest ordinal) and `Parallel` management, RollingUpdate (from
//! the highest ordinal down to the partition, within maxUnavailable) and OnDelete, and
//! ControllerRevisions ([`crate::history`]) so `kubectl rollout history/undo` work.
//!
//! It owns the set's pods, claims it creates (and their owner references), its
//! ControllerRevisions and its status; never the spec. No expectations are needed: pod names
//! are fixed, so a stale cache yields AlreadyExists (ignored) and deletions carry a UID
//! precondition.

pub mod identity;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use k1s_api::events::{self, Involved, Source};
use k1s_api::selector::LabelSelector;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::history::{self, HistoryError, STATEFULSET_HASH_LABEL};
use crate::owned_pods::{self, spec_selector};
use identity::{
    in_range, is_available, is_finished, is_healthy, is_running_and_ready, is_terminating,
    ordinal_of, revision_of,
};
use k1s_runtime::clock::Clock;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::store::owner_uid_index;
use k1s_runtime::{Action, Controller, Reconcile, Seen, Store, watcher};

#[derive(Debug, thiserror::Error)]
pub enum StatefulSetError {
    #[error("statefulset {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
    #[error("statefulset {key}: invalid selector: {source}")]
    Selector {
        key: String,
        #[source]
        source: k1s_api::selector::SelectorError,
    },
    #[error("statefulset {key}: {source}")]
    History {
        key: String,
        #[source]
        source: HistoryError,
    },
    #[error("statefulset {key}: claim {claim} is being deleted")]
    ClaimDeleting { key: String, claim: String },
}

pub(crate) fn statefulsets(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("apps", "v1", "statefulsets", ns)
}

fn pods(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some(ns))
}

fn claims(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", Some(ns))
}

/// Runs the StatefulSet controller until `cancel`; `clock` dates availability.
pub async fn run(client: Arc<dyn Client>, clock: Arc<dyn Clock>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "statefulset",
        client.clone(),
        statefulsets(None),
        watcher::Config::default(),
    )
    .workers(5);
    let sets = ctrl.store();
    let sets_for_pods = sets.clone();
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |pod: &Value, _| pod_keys(pod, &sets_for_pods)),
    );
    let revs = ctrl.owns(
        ResourceRef::new("apps", "v1", "controllerrevisions", None),
        watcher::Config::default(),
        vec![owner_uid_index()],
        "apps",
        "StatefulSet",
    );
    let claim_store = ctrl.watches(
        ResourceRef::new("", "v1", "persistentvolumeclaims", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|_: &Value, _| Vec::new()),
    );
    let reconciler = Arc::new(StatefulSets {
        client,
        sets,
        pods: pod_store,
        revisions: revs,
        claims: claim_store,
        clock,
    });
    ctrl.run(reconciler, cancel).await;
}

/// The sets a pod event concerns: its controller, or every set that might adopt it (one
/// whose name and an ordinal make the pod's).
fn pod_keys(pod: &Value, sets: &Store) -> Vec<ObjectKey> {
    owned_pods::owner_keys("StatefulSet", pod, Seen::Listed, sets, None, |s| {
        ordinal_of(key::name(s), key::name(pod)).is_some()
    })
}

struct StatefulSets {
    client: Arc<dyn Client>,
    sets: Store,
    pods: Store,
    revisions: Store,
    claims: Store,
    clock: Arc<dyn Clock>,
}

/// The outcome of one pass's pod management: why it stopped, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Everything is as wanted.
    Done,
    /// Waiting for a pod (created, terminating or not yet ready) before going on.
    Waiting,
}

struct Pass<'a> {
    ctl: &'a StatefulSets,
    set: &'a Value,
    ns: &'a str,
    key: &'a ObjectKey,
    current: &'a Value,
    update: &'a Value,
    /// Replica pods by ordinal, kept up to date with this pass's writes.
    replicas: BTreeMap<i64, Value>,
    /// Owned pods outside the ordinal range, highest ordinal first.
    condemned: Vec<Value>,
}

#[async_trait::async_trait]
impl Reconcile for StatefulSets {
    type Error = StatefulSetError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, StatefulSetError> {
        let Some(set) = self.sets.get(k) else {
            return Ok(Action::await_change());
        };
        let ns = k.namespace.clone().unwrap_or_default();
        let api = |source| StatefulSetError::Api {
            key: k.to_string(),
            source,
        };
        let sel = spec_selector(&set).map_err(|source| StatefulSetError::Selector {
            key: k.to_string(),
            source,
        })?;
        let owned = self.claim(&set, sel.as_ref(), &ns).await.map_err(api)?;

        // Revisions: the current template's (update) and the one the pods came from (current).
        let ensured = match history::sync(
            self.client.as_ref(),
            &self.revisions,
            &set,
            "StatefulSet",
            STATEFULSET_HASH_LABEL,
        )
        .await
        {
            Ok(e) => e,
            Err(HistoryError::Collision(name)) => {
                let mut s = (*set).clone();
                let collisions = set["status"]["collisionCount"].as_i64().unwrap_or(0);
                s["status"]["collisionCount"] = json!(collisions + 1);
                self.write_status(&ns, s).await.map_err(api)?;
                return Err(StatefulSetError::History {
                    key: k.to_string(),
                    source: HistoryError::Collision(name),
                });
            }
            Err(source) => {
                return Err(StatefulSetError::History {
                    key: k.to_string(),
                    source,
                });
            }
        };
        let update = ensured.revision.clone();
        let current = set["status"]["currentRevision"]
            .as_str()
            .and_then(|n| ensured.all.iter().find(|r| key::name(r) == n))
            .cloned()
            .unwrap_or_else(|| update.clone());

        let mut replicas = BTreeMap::new();
        let mut condemned = Vec::new();
        for p in owned {
            match ordinal_of(key::name(&set), key::name(&p)) {
                Some(o) if in_range(&set, o) => {
                    replicas.insert(o, p);
                }
                _ => condemned.push(p),
            }
        }
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of(key::name(&set), key::name(p))));
        let mut pass = Pass {
            ctl: self,
            set: &set,
            ns: &ns,
            key: k,
            current: &current,
            update: &update,
            replicas,
            condemned,
        };
        if !key::is_deleting(&set) {
            pass.manage().await?;
        }
        let status = pass.status();
        if status != set["status"] {
            let mut s = (*set).clone();
            s["status"] = status.clone();
            self.write_status(&ns, s).await.map_err(api)?;
        }

        // History beyond the limit, keeping revisions still in use.
        let mut live: Vec<&str> = vec![key::name(&current), key::name(&update)];
        live.extend(
            pass.replicas
                .values()
                .chain(pass.condemned.iter())
                .map(revision_of),
        );
        let limit = set["spec"]["revisionHistoryLimit"].as_i64().unwrap_or(10);
        history::truncate(self.client.as_ref(), &ns, &ensured.all, &live, limit)
            .await
            .map_err(api)?;

        let min_ready = set["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        if min_ready > 0 && status["readyReplicas"] != status["availableReplicas"] {
            return Ok(Action::requeue(Duration::from_secs(
                u64::try_from(min_ready).unwrap_or(1),
            )));
        }
        Ok(Action::await_change())
    }
}

impl StatefulSets {
    async fn write_status(&self, ns: &str, set: Value) -> Result<(), ClientError> {
        k1s_runtime::write::update_status(&*self.client, &statefulsets(Some(ns)), set)
            .await
            .map(drop)
    }

    /// The pods this StatefulSet controls ([`owned_pods::claim`]).
    async fn claim(
        &self,
        set: &Value,
        sel: Option<&LabelSelector>,
        ns: &str,
    ) -> Result<Vec<Value>, ClientError> {
        let claimant = owned_pods::Claimant {
            client: self.client.as_ref(),
            owner: set,
            resource: statefulsets(Some(ns)),
            kind: "StatefulSet",
            finalizer: None,
        };
        owned_pods::claim(&claimant, &self.pods, sel, ns, |pod| {
            ordinal_of(key::name(set), key::name(pod)).is_some()
        })
        .await
    }
}

impl Pass<'_> {
    fn api(&self, source: ClientError) -> StatefulSetError {
        StatefulSetError::Api {
            key: self.key.to_string(),
            source,
        }
    }

    async fn event(&self, type_: &str, reason: &str, message: &str) {
        let about = Involved {
            api_version: "apps/v1".into(),
            kind: "StatefulSet".into(),
            namespace: self.ns.into(),
            name: key::name(self.set).into(),
            uid: key::uid(self.set).into(),
            resource_version: key::resource_version(self.set).unwrap_or("").into(),
            field_path: None,
        };
        let source = Source {
            component: "statefulset-controller".into(),
            host: None,
        };
        events::record(
            self.ctl.client.as_ref(),
            &source,
            &about,
            type_,
            reason,
            "",
            message,
        )
        .await;
    }

    /// Upstream's `updateStatefulSet`: create, replace, scale down, then roll, stopping where
    /// `OrderedReady` has to wait.
    async fn manage(&mut self) -> Result<Step, StatefulSetError> {
        let ordered = identity::is_ordered(self.set);
        let first = identity::start(self.set);
        let last = first + identity::replicas(self.set);
        let min_ready = self.set["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        let now = self.ctl.clock.now();
        let mut waiting = false;
        for ord in first..last {
            let Some(pod) = self.replicas.get(&ord).cloned() else {
                self.create_pod(ord).await?;
                if ordered {
                    return Ok(Step::Waiting);
                }
                waiting = true;
                continue;
            };
            if is_finished(&pod) && !is_terminating(&pod) {
                // A failed or succeeded pod is replaced: deleted now, created next pass.
                self.delete_pod(&pod).await?;
                if ordered {
                    return Ok(Step::Waiting);
                }
                waiting = true;
                continue;
            }
            if ordered
                && (is_terminating(&pod)
                    || !is_running_and_ready(&pod)
                    || !is_available(&pod, min_ready, now))
            {
                return Ok(Step::Waiting);
            }
            self.sync_claim_refs(&pod, false).await?;
        }
        // Scale down, highest ordinal first; in order, an unhealthy pod blocks unless it is
        // the first unhealthy one (here all replicas are healthy: the lowest unhealthy
        // condemned pod).
        let first_unhealthy = self
            .condemned
            .iter()
            .rev()
            .find(|p| !is_healthy(p))
            .map(|p| key::name(p).to_owned());
        for pod in self.condemned.clone() {
            if is_terminating(&pod) {
                if ordered {
                    return Ok(Step::Waiting);
                }
                continue;
            }
            if ordered
                && !is_running_and_ready(&pod)
                && first_unhealthy.as_deref() != Some(key::name(&pod))
            {
                return Ok(Step::Waiting);
            }
            self.sync_claim_refs(&pod, true).await?;
            self.delete_pod(&pod).await?;
            if ordered {
                return Ok(Step::Waiting);
            }
            waiting = true;
        }
        if !identity::is_rolling(self.set) {
            return Ok(if waiting { Step::Waiting } else { Step::Done });
        }
        // RollingUpdate: replace outdated pods from the highest ordinal down to the partition,
        // with at most maxUnavailable replicas unavailable at once.
        let max_unavailable = identity::max_unavailable(self.set);
        let mut unavailable = (first..last)
            .filter(|o| {
                self.replicas
                    .get(o)
                    .is_none_or(|p| is_terminating(p) || !is_available(p, min_ready, now))
            })
            .count() as i64;
        let update_name = key::name(self.update).to_owned();
        let floor = identity::partition(self.set).max(first);
        for ord in (floor..last).rev() {
            let Some(pod) = self.replicas.get(&ord).cloned() else {
                continue;
            };
            if revision_of(&pod) == update_name || is_terminating(&pod) {
                continue;
            }
            if unavailable >= max_unavailable {
                return Ok(Step::Waiting);
            }
            let was_available = is_available(&pod, min_ready, now);
            tracing::debug!(set = %self.key, pod = key::name(&pod), "replacing outdated pod");
            self.delete_pod(&pod).await?;
            if was_available {
                unavailable += 1;
            }
            waiting = true;
        }
        Ok(if waiting { Step::Waiting } else { Step::Done })
    }

    /// Creates the claims (if missing), then the pod of `ord` from the revision its ordinal
    /// gets (the current one below the partition, else the update revision).
    async fn create_pod(&mut self, ord: i64) -> Result<(), StatefulSetError> {
        let set_name = key::name(self.set).to_owned();
        let pod_name = identity::pod_name(self.set, ord);
        for claim in identity::new_claims(self.set, ord) {
            let name = key::name(&claim).to_owned();
            let existing = match self.ctl.claims.get(&ObjectKey::new(Some(self.ns), &name)) {
                Some(c) => Some((*c).clone()),
                None => match self.ctl.client.get(&claims(self.ns), &name).await {
                    Ok(c) => Some(c),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => return Err(self.api(e)),
                },
            };
            match existing {
                Some(c) if key::is_deleting(&c) => {
                    return Err(StatefulSetError::ClaimDeleting {
                        key: self.key.to_string(),
                        claim: name,
                    });
                }
                Some(_) => {}
                None => match self
                    .ctl
                    .client
                    .create(&claims(self.ns), claim, &WriteParams::default())
                    .await
                {
                    Ok(_) => {
                        self.event(
                            "Normal",
                            "SuccessfulCreate",
                            &format!(
                                "create Claim {name} Pod {pod_name} in StatefulSet {set_name} success"
                            ),
                        )
                        .await;
                    }
                    Err(e) if e.is_already_exists() => {}
                    Err(e) => {
                        self.event(
                            "Warning",
                            "FailedCreate",
                            &format!(
                                "create Claim {name} for Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                                e.message
                            ),
                        )
                        .await;
                        return Err(self.api(e));
                    }
                },
            }
        }
        let use_current = identity::is_rolling(self.set) && ord < identity::partition(self.set);
        let rev = if use_current {
            self.current
        } else {
            self.update
        };
        let pod = identity::new_pod(self.set, &history::template_of(rev), key::name(rev), ord);
        match self
            .ctl
            .client
            .create(&pods(self.ns), pod, &WriteParams::default())
            .await
        {
            Ok(p) => {
                self.event(
                    "Normal",
                    "SuccessfulCreate",
                    &format!("create Pod {pod_name} in StatefulSet {set_name} successful"),
                )
                .await;
                self.replicas.insert(ord, p);
                Ok(())
            }
            // The cache has not seen it yet; its event brings the next pass.
            Err(e) if e.is_already_exists() => Ok(()),
            Err(e) => {
                self.event(
                    "Warning",
                    "FailedCreate",
                    &format!(
                        "create Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                        e.message
                    ),
                )
                .await;
                Err(self.api(e))
            }
        }
    }

    async fn delete_pod(&mut self, pod: &Value) -> Result<(), StatefulSetError> {
        let name = key::name(pod).to_owned();
        let params = DeleteParams {
            precondition_uid: Some(key::uid(pod).to_owned()),
            ..Default::default()
        };
        let set_name = key::name(self.set).to_owned();
        match self.ctl.client.delete(&pods(self.ns), &name, &params).await {
            Ok(after) => {
                self.event(
                    "Normal",
                    "SuccessfulDelete",
                    &format!("delete Pod {name} in StatefulSet {set_name} successful"),
                )
                .await;
                self.forget(
                    &name,
                    (!after.is_null() && key::uid(&after) == key::uid(pod)).then_some(after),
                );
                Ok(())
            }
            Err(e) if e.is_not_found() || e.is_conflict() => {
                self.forget(&name, None);
                Ok(())
            }
            Err(e) => {
                self.event(
                    "Warning",
                    "FailedDelete",
                    &format!(
                        "delete Pod {name} in StatefulSet {set_name} failed error: {}",
                        e.message
                    ),
                )
                .await;
                Err(self.api(e))
            }
        }
    }

    /// Records a deleted pod (or its terminating state) in this pass's view.
    fn forget(&mut self, name: &str, terminating: Option<Value>) {
        let terminating = terminating.filter(key::is_deleting);
        if let Some(o) = ordinal_of(key::name(self.set), name) {
            match (&terminating, self.replicas.contains_key(&o)) {
                (Some(t), true) => {
                    self.replicas.insert(o, t.clone());
                }
                (None, true) => {
                    self.replicas.remove(&o);
                }
                _ => {}
            }
        }
        match terminating {
            Some(t) => self
                .condemned
                .iter_mut()
                .filter(|p| key::name(p) == name)
                .for_each(|p| *p = t.clone()),
            None => self.condemned.retain(|p| key::name(p) != name),
        }
    }

    /// Brings the owner references of `pod`'s claims in line with the retention policy.
    async fn sync_claim_refs(&self, pod: &Value, condemned: bool) -> Result<(), StatefulSetError> {
        for t in identity::claim_templates(self.set) {
            let name = identity::claim_name(key::name(t), key::name(pod));
            let Some(claim) = self.ctl.claims.get(&ObjectKey::new(Some(self.ns), &name)) else {
                continue;
            };
            let Some(refs) = identity::retention_refs(self.set, pod, &claim, condemned) else {
                continue;
            };
            let mut c = (*claim).clone();
            c["metadata"]["ownerReferences"] = refs;
            match self
                .ctl
                .client
                .update(&claims(self.ns), c, None, &WriteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => {}
                Err(e) => return Err(self.api(e)),
            }
        }
        Ok(())
    }

    /// The status upstream reports, with the rolling update completed when every replica is
    /// updated and ready.
    fn status(&self) -> Value {
        let min_ready = self.set["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
        let now = self.ctl.clock.now();
        let (current, update) = (key::name(self.current), key::name(self.update));
        let (mut replicas, mut ready, mut available, mut cur, mut upd) = (0, 0, 0, 0, 0);
        for p in self.replicas.values().chain(self.condemned.iter()) {
            replicas += 1;
            if is_running_and_ready(p) {
                ready += 1;
                if is_available(p, min_ready, now) {
                    available += 1;
                }
            }
            if !is_terminating(p) {
                if revision_of(p) == current {
                    cur += 1;
                }
                if revision_of(p) == update {
                    upd += 1;
                }
            }
        }
        let want = identity::replicas(self.set);
        let (mut current_name, mut current_count) = (current, cur);
        if identity::is_rolling(self.set) && upd == want && ready == want && replicas == want {
            current_name = update;
            current_count = upd;
        }
        let mut status = json!({
            "replicas": replicas,
            "availableReplicas": available,
            "currentRevision": current_name,
            "updateRevision": update,
            "observedGeneration": self.set["metadata"]["generation"].as_i64().unwrap_or(0),
            "collisionCount": self.set["status"]["collisionCount"].as_i64().unwrap_or(0),
        });
        for (f, v) in [
            ("readyReplicas", ready),
            ("currentReplicas", current_count),
            ("updatedReplicas", upd),
        ] {
            if v != 0 {
                status[f] = json!(v);
            }
        }
        if let Some(c) = self.set["status"]["conditions"].as_array() {
            status["conditions"] = json!(c);
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphans_map_to_sets_whose_members_they_are() {
        let w = k1s_runtime::store::Writer::new(Vec::new());
        let s = w.store();
        let mut w = w;
        let set = json!({"metadata": {"name": "web", "namespace": "d", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}});
        w.apply(&watcher::Event::Apply(Arc::new(set)));
        let member =
            json!({"metadata": {"name": "web-1", "namespace": "d", "labels": {"app": "web"}}});
        let stranger =
            json!({"metadata": {"name": "webby", "namespace": "d", "labels": {"app": "web"}}});
        assert_eq!(
            pod_keys(&member, &s),
            vec![ObjectKey::new(Some("d"), "web")]
        );
        assert!(pod_keys(&stranger, &s).is_empty());
        let owned = json!({"metadata": {"name": "x", "namespace": "d", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "v", "controller": true}]}});
        assert_eq!(pod_keys(&owned, &s), vec![ObjectKey::new(Some("d"), "db")]);
    }
}

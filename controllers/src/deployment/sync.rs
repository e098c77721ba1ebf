//! One pass over a Deployment: find or create the new ReplicaSet, scale new and old ones as
//! the strategy allows, clean up old revisions, and write the status — upstream's `sync.go`,
//! `rolling.go`, `recreate.go` and `progress.go`. Each pass stops after the first scaling
//! step; the resulting ReplicaSet events bring the next pass.

use std::time::Duration;

use k1s_api::client::{ClientError, DeleteParams, WriteParams};
use serde_json::{Value, json};

use super::rollout::{
    self, DESIRED_REPLICAS, HASH_LABEL, MAX_REPLICAS, REVISION, equal_ignore_hash, revision,
    spec_replicas, status_i64, status_sum,
};
use super::{DeploymentError, Deployments, controller_ref_to, deployments, replicasets};
use k1s_runtime::Action;
use k1s_runtime::key::{self, ObjectKey};

pub(crate) struct Pass<'a> {
    pub(crate) ctl: &'a Deployments,
    pub(crate) d: &'a Value,
    pub(crate) ns: &'a str,
    pub(crate) key: &'a ObjectKey,
    /// The name of the ReplicaSet this pass created, if any (upstream then sets Progressing
    /// to `NewReplicaSetCreated`, which starts the progress deadline).
    pub(crate) created: std::sync::Mutex<Option<String>>,
    /// The Deployment as this pass last wrote it: the status written at the end of the pass
    /// goes over its resourceVersion. (Over the cached one, the write that records the new
    /// revision would make it conflict, losing `NewReplicaSetCreated`, and with it the start
    /// of the progress deadline.)
    pub(crate) written: std::sync::Mutex<Option<Value>>,
}

type Result<T> = std::result::Result<T, DeploymentError>;

/// The Progressing condition's reasons, as upstream.
const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
const RS_UPDATED: &str = "ReplicaSetUpdated";
const TIMED_OUT: &str = "ProgressDeadlineExceeded";
const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
const PAUSED: &str = "DeploymentPaused";
const RESUMED: &str = "DeploymentResumed";

impl Pass<'_> {
    fn api(&self, source: ClientError) -> DeploymentError {
        DeploymentError::Api {
            key: self.key.to_string(),
            source,
        }
    }

    fn replicas(&self) -> i64 {
        spec_replicas(self.d)
    }

    /// Splits into the new ReplicaSet (the oldest whose template matches) and the old ones;
    /// brings the new one's revision up to date, and creates it if asked.
    async fn new_and_old(
        &self,
        rss: Vec<Value>,
        create: bool,
    ) -> Result<(Option<Value>, Vec<Value>)> {
        let template = &self.d["spec"]["template"];
        let pos = rss
            .iter()
            .position(|rs| equal_ignore_hash(&rs["spec"]["template"], template));
        let mut old = rss;
        let new = pos.map(|i| old.remove(i));
        let next_revision = old.iter().map(revision).max().unwrap_or(0) + 1;
        let new = match new {
            Some(rs) => {
                let min_ready = self.d["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
                let stale_revision = revision(&rs) < next_revision;
                let stale_min_ready =
                    rs["spec"]["minReadySeconds"].as_i64().unwrap_or(0) != min_ready;
                let mut rs = rs;
                let copied = copy_annotations(self.d, &mut rs);
                if stale_revision || stale_min_ready || copied {
                    if stale_revision {
                        rs["metadata"]["annotations"][REVISION] = json!(next_revision.to_string());
                    }
                    rs["spec"]["minReadySeconds"] = json!(min_ready);
                    Some(self.write_rs(rs).await?)
                } else {
                    Some(rs)
                }
            }
            None if create => Some(self.create_new(&old, next_revision).await?),
            None => None,
        };
        if let Some(n) = &new {
            self.sync_deployment_revision(revision(n)).await?;
        }
        Ok((new, old))
    }

    /// The Deployment's own revision annotation follows its new ReplicaSet.
    async fn sync_deployment_revision(&self, rev: i64) -> Result<()> {
        let want = rev.to_string();
        if self.d["metadata"]["annotations"][REVISION].as_str() == Some(want.as_str()) {
            return Ok(());
        }
        let mut d = self.d.clone();
        if !d["metadata"]["annotations"].is_object() {
            d["metadata"]["annotations"] = json!({});
        }
        d["metadata"]["annotations"][REVISION] = json!(want);
        match self
            .ctl
            .client
            .update(
                &deployments(Some(self.ns)),
                d,
                None,
                &WriteParams::default(),
            )
            .await
        {
            Ok(d) => {
                *self
                    .written
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(d);
                Ok(())
            }
            Err(e) => Err(self.api(e)),
        }
    }

    async fn create_new(&self, old: &[Value], rev: i64) -> Result<Value> {
        let collisions = status_i64(self.d, "collisionCount");
        let hash = rollout::template_hash(&self.d["spec"]["template"], collisions);
        let name = format!("{}-{}", key::name(self.d), hash);
        let mut template = self.d["spec"]["template"].clone();
        template["metadata"]["labels"][HASH_LABEL] = json!(hash);
        let mut selector = self.d["spec"]["selector"].clone();
        selector["matchLabels"][HASH_LABEL] = json!(hash);
        let mut rs = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": self.ns,
                "labels": template["metadata"]["labels"].clone(),
                "annotations": {REVISION: rev.to_string()},
                "ownerReferences": [controller_ref_to(self.d)]},
            "spec": {"replicas": 0, "selector": selector, "template": template,
                     "minReadySeconds": self.d["spec"]["minReadySeconds"].as_i64().unwrap_or(0)},
        });
        let replicas = if self.d["spec"]["strategy"]["type"] == "Recreate" {
            self.replicas()
        } else {
            let mut all = old.to_vec();
            all.push(rs.clone());
            rollout::new_rs_new_replicas(self.d, &all, &rs)
        };
        rs["spec"]["replicas"] = json!(replicas);
        copy_annotations(self.d, &mut rs);
        self.annotate_replicas(&mut rs);
        let r = replicasets(Some(self.ns));
        match self
            .ctl
            .client
            .create(&r, rs, &WriteParams::default())
            .await
        {
            Ok(created) => {
                *self
                    .created
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(key::name(&created).to_owned());
                Ok(created)
            }
            Err(e) if e.is_already_exists() => {
                let existing = self
                    .ctl
                    .client
                    .get(&r, &name)
                    .await
                    .map_err(|e| self.api(e))?;
                let ours = key::controller_ref(&existing)
                    .is_some_and(|r| r["uid"].as_str() == Some(key::uid(self.d)));
                if ours
                    && equal_ignore_hash(&existing["spec"]["template"], &self.d["spec"]["template"])
                {
                    return Ok(existing);
                }
                // Another template has this hash: count the collision and try another name.
                let mut d = self.d.clone();
                d["status"]["collisionCount"] = json!(collisions + 1);
                self.ctl
                    .client
                    .update(
                        &deployments(Some(self.ns)),
                        d,
                        Some("status"),
                        &WriteParams::default(),
                    )
                    .await
                    .map_err(|e| self.api(e))?;
                Err(DeploymentError::Collision {
                    key: self.key.to_string(),
                    name,
                })
            }
            Err(e) => Err(self.api(e)),
        }
    }

    fn annotate_replicas(&self, rs: &mut Value) {
        if !rs["metadata"]["annotations"].is_object() {
            rs["metadata"]["annotations"] = json!({});
        }
        let a = &mut rs["metadata"]["annotations"];
        a[DESIRED_REPLICAS] = json!(self.replicas().to_string());
        a[MAX_REPLICAS] = json!((self.replicas() + rollout::max_surge(self.d)).to_string());
    }

    async fn write_rs(&self, rs: Value) -> Result<Value> {
        self.ctl
            .client
            .update(
                &replicasets(Some(self.ns)),
                rs,
                None,
                &WriteParams::default(),
            )
            .await
            .map_err(|e| self.api(e))
    }

    /// Sets a ReplicaSet's replicas (and the replica annotations); the updated set.
    async fn scale(&self, rs: &Value, replicas: i64) -> Result<Value> {
        let mut rs = rs.clone();
        rs["spec"]["replicas"] = json!(replicas.max(0));
        self.annotate_replicas(&mut rs);
        self.write_rs(rs).await
    }

    /// Whether a ReplicaSet's replica annotations differ from what this Deployment sets.
    fn annotations_stale(&self, rs: &Value) -> bool {
        let a = &rs["metadata"]["annotations"];
        a[DESIRED_REPLICAS].as_str() != Some(self.replicas().to_string().as_str())
            || a[MAX_REPLICAS].as_str()
                != Some(
                    (self.replicas() + rollout::max_surge(self.d))
                        .to_string()
                        .as_str(),
                )
    }

    /// Whether the Deployment's replicas changed since its active ReplicaSets were sized.
    pub(crate) fn is_scaling_event(&self, rss: &[Value]) -> bool {
        let want = self.replicas().to_string();
        rss.iter().filter(|rs| spec_replicas(rs) > 0).any(|rs| {
            rs["metadata"]["annotations"][DESIRED_REPLICAS]
                .as_str()
                .is_some_and(|d| d != want)
        })
    }

    /// RollingUpdate: grow the new set within maxSurge, shrink old ones within
    /// maxUnavailable.
    pub(crate) async fn rolling(&self, rss: Vec<Value>) -> Result<Action> {
        let (new, old) = self.new_and_old(rss, true).await?;
        let Some(mut new) = new else {
            return Ok(Action::await_change());
        };
        let all: Vec<Value> = old.iter().cloned().chain([new.clone()]).collect();
        // The new ReplicaSet.
        let current = spec_replicas(&new);
        let target = if current > self.replicas() {
            self.replicas()
        } else {
            rollout::new_rs_new_replicas(self.d, &all, &new)
        };
        if target != current {
            new = self.scale(&new, target).await?;
            let all: Vec<Value> = old.iter().cloned().chain([new.clone()]).collect();
            return self.sync_rollout_status(&all, Some(&new)).await;
        }
        // The old ones.
        if rollout::replica_count(&old) > 0 {
            let scaled = self.scale_down_old(&old, &new).await?;
            if scaled {
                return self.sync_rollout_status(&all, Some(&new)).await;
            }
        }
        let all: Vec<Value> = old.iter().cloned().chain([new.clone()]).collect();
        if self.complete(&all, Some(&new)) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(&all, Some(&new)).await
    }

    /// Upstream's `reconcileOldReplicaSets`: first the unhealthy old replicas, then available
    /// ones down to `replicas - maxUnavailable`. True if anything was scaled.
    async fn scale_down_old(&self, old: &[Value], new: &Value) -> Result<bool> {
        let all: Vec<Value> = old.iter().cloned().chain([new.clone()]).collect();
        let max_down = rollout::max_scaled_down(self.d, &all, Some(new));
        if max_down <= 0 {
            return Ok(false);
        }
        let mut old: Vec<Value> = old.to_vec();
        let mut total = 0;
        // Unhealthy first.
        for rs in old.iter_mut() {
            if total >= max_down {
                break;
            }
            let spec = spec_replicas(rs);
            let unhealthy = spec - status_i64(rs, "availableReplicas");
            if spec == 0 || unhealthy <= 0 {
                continue;
            }
            let down = unhealthy.min(max_down - total);
            *rs = self.scale(rs, spec - down).await?;
            total += down;
        }
        // Then available ones, keeping the minimum available.
        let all: Vec<Value> = old.iter().cloned().chain([new.clone()]).collect();
        let min_available = self.replicas() - rollout::max_unavailable(self.d);
        let available = status_sum(&all, "availableReplicas");
        if available > min_available {
            let budget = available - min_available;
            let mut done = 0;
            for rs in &old {
                if done >= budget {
                    break;
                }
                let spec = spec_replicas(rs);
                if spec == 0 {
                    continue;
                }
                let down = spec.min(budget - done);
                self.scale(rs, spec - down).await?;
                done += down;
            }
            total += done;
        }
        Ok(total > 0)
    }

    /// Recreate: all old pods gone before the new ReplicaSet is scaled up.
    pub(crate) async fn recreate(&self, rss: Vec<Value>) -> Result<Action> {
        let (new, old) = self.new_and_old(rss, false).await?;
        let mut scaled = false;
        for rs in old.iter().filter(|rs| spec_replicas(rs) > 0) {
            self.scale(rs, 0).await?;
            scaled = true;
        }
        let all: Vec<Value> = old.iter().cloned().chain(new.clone()).collect();
        if scaled {
            return self.sync_rollout_status(&all, new.as_ref()).await;
        }
        if self.old_pods_running(&old) {
            return self.sync_rollout_status(&all, new.as_ref()).await;
        }
        let new = match new {
            Some(n) => n,
            None => self
                .new_and_old(old.clone(), true)
                .await?
                .0
                .ok_or_else(|| {
                    self.api(ClientError::transport(
                        "the new replica set was not created",
                    ))
                })?,
        };
        let new = if spec_replicas(&new) != self.replicas() {
            self.scale(&new, self.replicas()).await?
        } else {
            new
        };
        let all: Vec<Value> = old.iter().cloned().chain([new.clone()]).collect();
        if self.complete(&all, Some(&new)) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(&all, Some(&new)).await
    }

    /// Whether any pod of an old ReplicaSet has not terminated.
    fn old_pods_running(&self, old: &[Value]) -> bool {
        old.iter().any(|rs| {
            self.ctl
                .pods
                .by_index("owner-uid", key::uid(rs))
                .iter()
                .any(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        })
    }

    /// Paused or scaled: resize without rolling out (proportionally across active sets).
    pub(crate) async fn sync(&self, rss: Vec<Value>) -> Result<Action> {
        let (new, old) = self.new_and_old(rss, false).await?;
        let mut all: Vec<Value> = old.iter().cloned().chain(new.clone()).collect();
        let active: Vec<usize> = (0..all.len())
            .filter(|&i| spec_replicas(&all[i]) > 0)
            .collect();
        let replicas = self.replicas();
        if active.len() <= 1 {
            // One active set (or none: the newest) takes all replicas.
            let i = active
                .first()
                .copied()
                .or_else(|| (!all.is_empty()).then(|| all.len() - 1));
            if let Some(i) = i
                && spec_replicas(&all[i]) != replicas
            {
                all[i] = self.scale(&all[i], replicas).await?;
            }
        } else if let Some(n) = new.as_ref().filter(|n| {
            spec_replicas(n) == replicas && status_i64(n, "availableReplicas") >= replicas
        }) {
            // The new set is saturated: old ones go.
            let uid = key::uid(n).to_owned();
            for rs in all
                .iter_mut()
                .filter(|r| key::uid(r) != uid && spec_replicas(r) > 0)
            {
                *rs = self.scale(rs, 0).await?;
            }
        } else {
            // Proportional scaling (upstream's `scale`): every active set is written, its
            // annotations too, so the next pass no longer sees a scaling event.
            let sets: Vec<Value> = active.iter().map(|&i| all[i].clone()).collect();
            let sizes = rollout::proportional_sizes(self.d, &sets);
            for (&i, want) in active.iter().zip(sizes) {
                if want != spec_replicas(&all[i]) || self.annotations_stale(&all[i]) {
                    all[i] = self.scale(&all[i], want).await?;
                }
            }
        }
        if self.d["spec"]["paused"] == true && new.is_some() {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(&all, new.as_ref()).await
    }

    /// Being deleted: status only.
    pub(crate) async fn sync_status_only(&self, rss: Vec<Value>) -> Result<Action> {
        let (new, old) = self.new_and_old(rss, false).await?;
        let all: Vec<Value> = old.into_iter().chain(new.clone()).collect();
        let conditions = self.d["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        self.write_status(self.status(&all, new.as_ref(), &conditions, None))
            .await?;
        Ok(Action::await_change())
    }

    /// Upstream's `DeploymentComplete` for the status these sets give.
    fn complete(&self, all: &[Value], new: Option<&Value>) -> bool {
        let r = self.replicas();
        new.is_some_and(|n| status_i64(n, "replicas") == r)
            && status_sum(all, "replicas") == r
            && status_sum(all, "availableReplicas") == r
    }

    /// Deletes old ReplicaSets beyond `revisionHistoryLimit` that have no pods left.
    async fn cleanup(&self, old: &[Value]) -> Result<()> {
        let limit = self.d["spec"]["revisionHistoryLimit"]
            .as_i64()
            .unwrap_or(10)
            .max(0);
        let mut cleanable: Vec<&Value> = old
            .iter()
            .filter(|rs| {
                spec_replicas(rs) == 0 && status_i64(rs, "replicas") == 0 && !key::is_deleting(rs)
            })
            .collect();
        let excess = i64::try_from(cleanable.len()).unwrap_or(0) - limit;
        if excess <= 0 {
            return Ok(());
        }
        cleanable.sort_by_key(|rs| revision(rs));
        for rs in cleanable
            .into_iter()
            .take(usize::try_from(excess).unwrap_or(0))
        {
            let params = DeleteParams {
                precondition_uid: Some(key::uid(rs).to_owned()),
                ..Default::default()
            };
            match self
                .ctl
                .client
                .delete(&replicasets(Some(self.ns)), key::name(rs), &params)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => {}
                Err(e) => return Err(self.api(e)),
            }
        }
        Ok(())
    }

    /// Upstream's `calculateStatus`, with `progressing` as the new Progressing condition.
    fn status(
        &self,
        all: &[Value],
        new: Option<&Value>,
        old_conditions: &[Value],
        progressing: Option<Value>,
    ) -> Value {
        let available = status_sum(all, "availableReplicas");
        let total = rollout::replica_count(all);
        let mut status = json!({
            "observedGeneration": self.d["metadata"]["generation"].as_i64().unwrap_or(0),
            "replicas": status_sum(all, "replicas"),
            "updatedReplicas": new.map_or(0, |n| status_i64(n, "replicas")),
            "readyReplicas": status_sum(all, "readyReplicas"),
            "availableReplicas": available,
            "unavailableReplicas": (total - available).max(0),
        });
        if let Some(c) = self.d["status"]["collisionCount"].as_i64() {
            status["collisionCount"] = json!(c);
        }
        let old_conditions = old_conditions.to_vec();
        let minimum = self.replicas() - rollout::max_unavailable(self.d);
        let (st, reason, message) = if available >= minimum {
            (
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        } else {
            (
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        };
        let mut conditions = Vec::new();
        conditions.push(condition(
            &old_conditions,
            "Available",
            st,
            reason,
            message,
            false,
        ));
        match progressing {
            Some(p) => conditions.push(p),
            None => conditions.extend(
                old_conditions
                    .iter()
                    .find(|c| c["type"] == "Progressing")
                    .cloned(),
            ),
        }
        conditions.extend(
            old_conditions
                .iter()
                .filter(|c| c["type"] != "Available" && c["type"] != "Progressing")
                .cloned(),
        );
        status["conditions"] = json!(conditions);
        // Upstream omits zero counts (omitempty).
        for f in [
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
        ] {
            if status[f] == 0
                && let Some(m) = status.as_object_mut()
            {
                m.remove(f);
            }
        }
        status
    }

    /// Writes the status with the Progressing condition upstream's `syncRolloutStatus`
    /// would set; requeues to notice a missed progress deadline.
    async fn sync_rollout_status(&self, all: &[Value], new: Option<&Value>) -> Result<Action> {
        let mut old_conditions: Vec<Value> = self.d["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let created = self
            .created
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(name) = created.filter(|_| self.d["spec"]["progressDeadlineSeconds"].is_i64()) {
            let c = condition(
                &old_conditions,
                "Progressing",
                "True",
                NEW_RS_CREATED,
                &format!("Created new replica set \"{name}\""),
                true,
            );
            old_conditions.retain(|c| c["type"] != "Progressing");
            old_conditions.push(c);
        }
        let current = old_conditions.iter().find(|c| c["type"] == "Progressing");
        let deadline = self.d["spec"]["progressDeadlineSeconds"].as_i64();
        let paused = self.d["spec"]["paused"] == true;
        let new_name = new.map(|n| key::name(n).to_owned()).unwrap_or_default();
        let mut requeue = None;
        let progressing = if paused {
            Some(condition(
                &old_conditions,
                "Progressing",
                "Unknown",
                PAUSED,
                "Deployment is paused",
                false,
            ))
        } else if current.is_some_and(|c| c["reason"] == PAUSED) {
            Some(condition(
                &old_conditions,
                "Progressing",
                "Unknown",
                RESUMED,
                "Deployment is resumed",
                false,
            ))
        } else if deadline.is_none() {
            None
        } else if new.is_some() && self.complete(all, new) {
            Some(condition(
                &old_conditions,
                "Progressing",
                "True",
                NEW_RS_AVAILABLE,
                &format!("ReplicaSet \"{new_name}\" has successfully progressed."),
                false,
            ))
        } else if new.is_some() && self.progressed(all, new) {
            Some(condition(
                &old_conditions,
                "Progressing",
                "True",
                RS_UPDATED,
                &format!("ReplicaSet \"{new_name}\" is progressing."),
                true,
            ))
        } else if let Some(c) =
            current.filter(|c| c["reason"] != NEW_RS_AVAILABLE && c["reason"] != TIMED_OUT)
        {
            let since = c["lastUpdateTime"].as_str().and_then(k1s_api::time::parse);
            let secs = deadline.unwrap_or(600);
            let now = self.ctl.clock.now();
            match since {
                Some(t) if t + jiff::SignedDuration::from_secs(secs) <= now => Some(condition(
                    &old_conditions,
                    "Progressing",
                    "False",
                    TIMED_OUT,
                    &format!("ReplicaSet \"{new_name}\" has timed out progressing."),
                    false,
                )),
                Some(t) => {
                    let left = (t + jiff::SignedDuration::from_secs(secs)).duration_since(now);
                    requeue = Some(Duration::from_secs(
                        u64::try_from(left.as_secs()).unwrap_or(0) + 1,
                    ));
                    None
                }
                None => None,
            }
        } else if current.is_none() && new.is_some() {
            Some(condition(
                &old_conditions,
                "Progressing",
                "True",
                FOUND_NEW_RS,
                &format!("Found new replica set \"{new_name}\""),
                false,
            ))
        } else {
            None
        };
        self.write_status(self.status(all, new, &old_conditions, progressing))
            .await?;
        Ok(requeue.map_or_else(Action::await_change, Action::requeue))
    }

    /// Upstream's `DeploymentProgressing`: more updated, ready or available replicas, or
    /// fewer old ones, than the last status says.
    fn progressed(&self, all: &[Value], new: Option<&Value>) -> bool {
        let s = &self.d["status"];
        let old = |f: &str| s[f].as_i64().unwrap_or(0);
        let updated = new.map_or(0, |n| status_i64(n, "replicas"));
        let replicas = status_sum(all, "replicas");
        updated > old("updatedReplicas")
            || (replicas - updated) < (old("replicas") - old("updatedReplicas"))
            || status_sum(all, "readyReplicas") > old("readyReplicas")
            || status_sum(all, "availableReplicas") > old("availableReplicas")
    }

    async fn write_status(&self, status: Value) -> Result<()> {
        let written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let mut d = written.unwrap_or_else(|| self.d.clone());
        if status == d["status"] {
            return Ok(());
        }
        d["status"] = status;
        match self
            .ctl
            .client
            .update(
                &deployments(Some(self.ns)),
                d,
                Some("status"),
                &WriteParams::default(),
            )
            .await
        {
            Ok(_) => Ok(()),
            // A newer Deployment is on its way through the watch.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err(self.api(e)),
        }
    }
}

/// Annotations a Deployment does not pass on to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS,
    MAX_REPLICAS,
];

/// Copies the Deployment's annotations (e.g. `kubernetes.io/change-cause`, which
/// `kubectl rollout history` shows) onto the ReplicaSet; true if any changed.
fn copy_annotations(d: &Value, rs: &mut Value) -> bool {
    let Some(from) = d["metadata"]["annotations"].as_object() else {
        return false;
    };
    let mut changed = false;
    for (k, v) in from {
        if NOT_COPIED.contains(&k.as_str()) || rs["metadata"]["annotations"][k] == *v {
            continue;
        }
        rs["metadata"]["annotations"][k] = v.clone();
        changed = true;
    }
    changed
}

/// A Deployment condition; `lastTransitionTime` is kept while the status is unchanged, and
/// `lastUpdateTime` too unless `touch` (or the reason or message changed).
fn condition(
    old: &[Value],
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    touch: bool,
) -> Value {
    let now = k1s_runtime::clock::now();
    let prev = old.iter().find(|c| c["type"] == kind);
    let same_status = prev.is_some_and(|c| c["status"] == status);
    let same =
        same_status && prev.is_some_and(|c| c["reason"] == reason && c["message"] == message);
    let transition = match prev {
        Some(c) if same_status => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let update = match prev {
        Some(c) if same && !touch => c["lastUpdateTime"].clone(),
        _ => json!(now),
    };
    json!({"type": kind, "status": status, "lastUpdateTime": update,
           "lastTransitionTime": transition, "reason": reason, "message": message})
}

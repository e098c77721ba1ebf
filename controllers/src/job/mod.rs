//! The Job controller, as upstream's `pkg/controller/job`: runs pods to `spec.completions`
//! with at most `spec.parallelism` at a time, and reports in Job status.
//!
//! - NonIndexed and Indexed completion modes ([`indexes`]: the completion index annotation and
//!   label, hostname, `JOB_COMPLETION_INDEX`, `status.completedIndexes`).
//! - Counting never loses a pod: every pod carries the `batch.kubernetes.io/job-tracking`
//!   finalizer; a finished pod's UID is first written to `status.uncountedTerminatedPods`,
//!   then its finalizer is removed, then it moves into `succeeded`/`failed` (Indexed jobs count
//!   through `completedIndexes` instead). Removals this controller has asked for and not yet
//!   seen are remembered, so a stale cache never counts a pod twice.
//! - Failure: `backoffLimit` (failed pods, or container restarts under `OnFailure`), the
//!   exponential pod-recreation delay (10 s doubling to 6 min), `activeDeadlineSeconds`, and
//!   `podFailurePolicy` ([`policy`]). A failing job first gets `FailureTarget`, its active pods
//!   are deleted, and `Failed` follows once no pod is terminating and all are counted, as
//!   upstream; success likewise goes `SuccessCriteriaMet` then `Complete` (with
//!   `completionTime`). `successPolicy` rules are honoured.
//! - `suspend` deletes active pods and sets `Suspended`; resuming resets `startTime`.
//! - Status: active, ready, terminating, succeeded, failed, startTime, completionTime,
//!   completedIndexes, failedIndexes, uncountedTerminatedPods, conditions.
//!
//! The selector and the `job-name`/`controller-uid` labels are the apiserver's (as upstream's
//! job strategy). This controller owns the pods of its jobs and Job status, never the spec.

pub mod indexes;
pub mod policy;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use jiff::Timestamp;
use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use k1s_api::events::{self, Involved, Source};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::expectations::Expectations;
use crate::owned_pods;
use k1s_runtime::clock::{self, Clock, SystemClock};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Seen, Store, watcher};
use policy::Verdict;

/// The finalizer that keeps a pod until the controller has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Upstream's most pods created or deleted in one pass.
const BURST: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("job {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

/// Tunables (upstream's constants by default).
#[derive(Debug, Clone)]
pub struct Options {
    /// The delay before replacing the first failed pod (`DefaultJobPodFailureBackOff`).
    pub pod_failure_backoff: Duration,
    /// The longest such delay (`MaxJobPodFailureBackOff`).
    pub max_pod_failure_backoff: Duration,
    /// Dates starts, completions, deadlines and back-offs.
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            pod_failure_backoff: Duration::from_secs(10),
            max_pod_failure_backoff: Duration::from_secs(360),
            clock: Arc::new(SystemClock),
        }
    }
}

pub(crate) fn jobs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("batch", "v1", "jobs", ns)
}

fn pods(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some(ns))
}

/// Runs the Job controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    run_with(client, Options::default(), cancel).await;
}

/// Runs the Job controller with `options` until `cancel`.
pub async fn run_with(client: Arc<dyn Client>, options: Options, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "job",
        client.clone(),
        jobs(None),
        watcher::Config::default(),
    )
    .workers(5);
    let store = ctrl.store();
    let expectations = Arc::new(Expectations::default());
    let removals = Arc::new(Removals::default());
    let (exp, rm, job_store) = (expectations.clone(), removals.clone(), store.clone());
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |pod: &Value, seen| pod_keys(pod, seen, &exp, &rm, &job_store)),
    );
    let reconciler = Arc::new(Jobs {
        client,
        jobs: store,
        pods: pod_store,
        expectations,
        removals,
        backoff: Mutex::default(),
        options,
    });
    ctrl.run(reconciler, cancel).await;
}

/// The Job a pod event concerns (for an orphan, the unfinished Jobs that select it and may
/// adopt it); records the expectations it meets.
fn pod_keys(
    pod: &Value,
    seen: Seen,
    exp: &Expectations,
    rm: &Removals,
    jobs: &Store,
) -> Vec<ObjectKey> {
    let Some(r) = key::controller_ref(pod) else {
        if seen == Seen::Deleted || key::is_deleting(pod) {
            return Vec::new();
        }
        return owned_pods::owner_keys("Job", pod, seen, jobs, None, |j| !is_finished(j));
    };
    if r["kind"] != "Job" || key::group_of(r["apiVersion"].as_str().unwrap_or("")) != "batch" {
        return Vec::new();
    }
    let k = ObjectKey::new(key::namespace(pod), r["name"].as_str().unwrap_or(""));
    exp.observe(&k, pod, seen);
    if seen == Seen::Deleted || !has_finalizer(pod) {
        rm.observed(&k, key::uid(pod));
    }
    vec![k]
}

/// Finalizer removals asked for and not yet seen in the cache, per job (upstream's
/// `finalizerExpectations`): such pods are not counted again.
#[derive(Debug, Default)]
struct Removals(Mutex<HashMap<ObjectKey, HashSet<String>>>);

impl Removals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, HashSet<String>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
    fn expect(&self, k: &ObjectKey, uid: &str) {
        self.lock().entry(k.clone()).or_default().insert(uid.into());
    }
    fn observed(&self, k: &ObjectKey, uid: &str) {
        let mut m = self.lock();
        if let Some(s) = m.get_mut(k) {
            s.remove(uid);
            if s.is_empty() {
                m.remove(k);
            }
        }
    }
    fn pending(&self, k: &ObjectKey) -> HashSet<String> {
        self.lock().get(k).cloned().unwrap_or_default()
    }
}

/// Failures since the last success, for the pod-recreation delay (upstream's
/// `backoffRecord`).
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    last_failure: Timestamp,
}

impl Backoff {
    /// How long to wait before creating pods again.
    fn remaining(&self, base: Duration, max: Duration, now: Timestamp) -> Duration {
        if self.failures == 0 {
            return Duration::ZERO;
        }
        let delay = base
            .checked_mul(2u32.saturating_pow(self.failures - 1))
            .unwrap_or(max)
            .min(max);
        let elapsed = now
            .duration_since(self.last_failure)
            .max(jiff::SignedDuration::ZERO);
        delay.saturating_sub(Duration::try_from(elapsed).unwrap_or(Duration::ZERO))
    }
}

struct Jobs {
    client: Arc<dyn Client>,
    jobs: Store,
    pods: Store,
    expectations: Arc<Expectations>,
    removals: Arc<Removals>,
    /// By job UID.
    backoff: Mutex<HashMap<String, Backoff>>,
    options: Options,
}

pub(crate) fn has_finalizer(pod: &Value) -> bool {
    key::finalizers(pod).iter().any(|f| f == TRACKING_FINALIZER)
}

fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

fn is_terminal(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

fn is_active(pod: &Value) -> bool {
    !is_terminal(pod) && !key::is_deleting(pod)
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The condition of `type_` if its status is True.
pub(crate) fn true_condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
}

/// Whether a Job has finished (a True `Complete` or `Failed` condition).
pub fn is_finished(job: &Value) -> bool {
    true_condition(job, "Complete").is_some() || true_condition(job, "Failed").is_some()
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": type_, "status": status, "lastProbeTime": now, "lastTransitionTime": now,
           "reason": reason, "message": message})
}

/// Sets a condition, keeping lastTransitionTime when the status does not change.
fn set_condition(conds: &mut Vec<Value>, c: Value) {
    match conds.iter_mut().find(|x| x["type"] == c["type"]) {
        Some(old) if old["status"] == c["status"] => {
            let t = old["lastTransitionTime"].clone();
            *old = c;
            old["lastTransitionTime"] = t;
        }
        Some(old) => *old = c,
        None => conds.push(c),
    }
}

/// When a pod finished: its containers' last finishedAt, else now.
fn finish_time(pod: &Value, now: Timestamp) -> Timestamp {
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|f| pod["status"][f].as_array().into_iter().flatten())
        .filter_map(|c| clock::parse(&c["state"]["terminated"]["finishedAt"]))
        .max()
        .unwrap_or(now)
}

/// Records an event about `obj` (a Job or CronJob) from `component`.
pub(crate) async fn record_event(
    client: &dyn Client,
    component: &str,
    obj: &Value,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let about = Involved {
        api_version: obj["apiVersion"].as_str().unwrap_or("batch/v1").into(),
        kind: obj["kind"].as_str().unwrap_or("Job").into(),
        namespace: key::namespace(obj).unwrap_or("").into(),
        name: key::name(obj).into(),
        uid: key::uid(obj).into(),
        resource_version: key::resource_version(obj).unwrap_or("").into(),
        field_path: None,
    };
    let source = Source {
        component: component.into(),
        host: None,
    };
    events::record(client, &source, &about, type_, reason, "", message).await;
}

/// A pod from the job's template, controlled by the job and carrying the tracking finalizer.
fn pod_from_template(job: &Value, index: Option<i64>) -> Value {
    let t = &job["spec"]["template"];
    let name = key::name(job);
    let mut meta = json!({
        "generateName": format!("{name}-"),
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
            "uid": key::uid(job), "controller": true, "blockOwnerDeletion": true}],
    });
    for f in ["labels", "annotations"] {
        if !t["metadata"][f].is_null() {
            meta[f] = t["metadata"][f].clone();
        }
    }
    let mut finalizers = t["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    finalizers.push(json!(TRACKING_FINALIZER));
    meta["finalizers"] = json!(finalizers);
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]});
    if let Some(ix) = index {
        indexes::make_indexed(&mut pod, name, ix);
    }
    pod
}

/// Upstream's `successPolicy`: the index of the first rule the succeeded indexes meet.
fn success_policy_match(job: &Value, completed: &BTreeSet<i64>, completions: i64) -> Option<usize> {
    let rules = job["spec"]["successPolicy"]["rules"].as_array()?;
    rules.iter().position(|r| {
        let count = r["succeededCount"].as_i64();
        match r["succeededIndexes"].as_str() {
            Some(text) => {
                let want = indexes::parse(text, completions);
                let have = want.intersection(completed).count();
                match count {
                    Some(n) => i64::try_from(have).unwrap_or(i64::MAX) >= n,
                    None => have == want.len(),
                }
            }
            None => count.is_some_and(|n| i64::try_from(completed.len()).unwrap_or(0) >= n),
        }
    })
}

/// What one pass saw of the job's pods.
#[derive(Default)]
struct Tally {
    uncounted_succeeded: Vec<String>,
    uncounted_failed: Vec<String>,
    completed: BTreeSet<i64>,
    failed_indexes: BTreeSet<i64>,
    /// Pods whose finalizer this pass removes.
    release: Vec<Arc<Value>>,
    fail_job: Option<String>,
    new_failures: Vec<Timestamp>,
    new_success: bool,
}

fn uid_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[async_trait::async_trait]
impl Reconcile for Jobs {
    type Error = JobError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, JobError> {
        let api = |source| JobError::Api {
            key: k.to_string(),
            source,
        };
        let ns = k.namespace.clone().unwrap_or_default();
        let Some(job) = self.jobs.get(k) else {
            self.expectations.forget(k);
            // The job is gone: its pods must not stay behind their finalizer.
            let stale: Vec<Arc<Value>> = self
                .controlled(&ns, &k.name, None)
                .into_iter()
                .filter(|p| has_finalizer(p))
                .collect();
            self.remove_finalizers(k, &ns, &stale).await.map_err(api)?;
            return Ok(Action::await_change());
        };
        let managed_by = job["spec"]["managedBy"].as_str();
        if managed_by.is_some_and(|m| m != "kubernetes.io/job-controller") {
            return Ok(Action::await_change());
        }
        // Pods of an earlier job of the same name lose their finalizer.
        let others: Vec<Arc<Value>> = self
            .controlled(&ns, &k.name, None)
            .into_iter()
            .filter(|p| has_finalizer(p) && owner_uid(p) != key::uid(&job))
            .collect();
        if !others.is_empty() {
            self.remove_finalizers(k, &ns, &others).await.map_err(api)?;
        }
        if !is_finished(&job) {
            let owned = self.claim(&job, &ns).await.map_err(api)?;
            return self.sync(k, &ns, &job, owned).await.map_err(api);
        }
        let left: Vec<Arc<Value>> = self
            .controlled(&ns, &k.name, Some(key::uid(&job)))
            .into_iter()
            .filter(|p| has_finalizer(p))
            .collect();
        self.remove_finalizers(k, &ns, &left).await.map_err(api)?;
        self.lock_backoff().remove(key::uid(&job));
        Ok(Action::await_change())
    }
}

fn owner_uid(pod: &Value) -> &str {
    key::controller_ref(pod)
        .and_then(|r| r["uid"].as_str())
        .unwrap_or("")
}

impl Jobs {
    fn lock_backoff(&self) -> std::sync::MutexGuard<'_, HashMap<String, Backoff>> {
        self.backoff.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pods an unfinished Job controls, after adopting matching orphans (with the tracking
    /// finalizer) and releasing pods its selector no longer matches, as upstream's
    /// `getPodsForJob`.
    async fn claim(&self, job: &Value, ns: &str) -> Result<Vec<Arc<Value>>, ClientError> {
        // A selector that does not parse selects nothing: the Job keeps what it controls.
        let sel = owned_pods::spec_selector(job).ok().flatten();
        let claimant = owned_pods::Claimant {
            client: self.client.as_ref(),
            owner: job,
            resource: jobs(Some(ns)),
            kind: "Job",
            finalizer: Some(TRACKING_FINALIZER),
        };
        let owned = owned_pods::claim(&claimant, &self.pods, sel.as_ref(), ns, |_| true).await?;
        Ok(owned.into_iter().map(Arc::new).collect())
    }

    /// Pods in `ns` controlled by a Job named `name` (of `uid`, if given).
    fn controlled(&self, ns: &str, name: &str, uid: Option<&str>) -> Vec<Arc<Value>> {
        self.pods
            .list_namespace(ns)
            .into_iter()
            .filter(|p| {
                key::controller_ref(p).is_some_and(|r| {
                    r["kind"] == "Job"
                        && r["name"].as_str() == Some(name)
                        && uid.is_none_or(|u| r["uid"].as_str() == Some(u))
                })
            })
            .collect()
    }

    /// Removes the tracking finalizer from `pods`; the UIDs of those that succeeded (or are
    /// gone).
    async fn remove_finalizers(
        &self,
        k: &ObjectKey,
        ns: &str,
        list: &[Arc<Value>],
    ) -> Result<HashSet<String>, ClientError> {
        let results = join_all(list.iter().map(|p| async move {
            let uid = key::uid(p).to_owned();
            let Some(patch) = key::remove_finalizer_patch(p, TRACKING_FINALIZER) else {
                return (uid, Ok(()));
            };
            self.removals.expect(k, &uid);
            let r = self
                .client
                .patch(
                    &pods(ns),
                    key::name(p),
                    &patch,
                    None,
                    &WriteParams::default(),
                )
                .await;
            match r {
                Ok(_) => (uid, Ok(())),
                Err(e) if e.is_not_found() => {
                    self.removals.observed(k, &uid);
                    (uid, Ok(()))
                }
                Err(e) => {
                    self.removals.observed(k, &uid);
                    (uid, Err(e))
                }
            }
        }))
        .await;
        let mut done = HashSet::new();
        let mut error = None;
        for (uid, r) in results {
            match r {
                Ok(()) => {
                    done.insert(uid);
                }
                Err(e) => error = Some(e),
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// Counts what finished since the last pass.
    fn tally(&self, k: &ObjectKey, job: &Value, owned: &[Arc<Value>], now: Timestamp) -> Tally {
        let spec = &job["spec"];
        let status = &job["status"];
        let indexed = spec["completionMode"] == "Indexed";
        let completions = spec["completions"].as_i64().unwrap_or(1);
        let replace_failed_only = spec["podReplacementPolicy"] == "Failed"
            || (spec["podReplacementPolicy"].is_null() && !spec["podFailurePolicy"].is_null());
        let mut t = Tally {
            uncounted_succeeded: uid_list(&status["uncountedTerminatedPods"]["succeeded"]),
            uncounted_failed: uid_list(&status["uncountedTerminatedPods"]["failed"]),
            ..Tally::default()
        };
        if indexed {
            t.completed = indexes::parse(
                status["completedIndexes"].as_str().unwrap_or(""),
                completions,
            );
            t.failed_indexes =
                indexes::parse(status["failedIndexes"].as_str().unwrap_or(""), completions);
        }
        let pending = self.removals.pending(k);
        let job_deleting = key::is_deleting(job);
        for pod in owned.iter().filter(|p| has_finalizer(p)) {
            let uid = key::uid(pod).to_owned();
            if pending.contains(&uid) {
                continue;
            }
            let counted = t.uncounted_succeeded.contains(&uid) || t.uncounted_failed.contains(&uid);
            let failed = phase(pod) == "Failed"
                || (!replace_failed_only && key::is_deleting(pod) && phase(pod) != "Succeeded");
            if phase(pod) == "Succeeded" {
                t.release.push(pod.clone());
                if indexed {
                    if let Some(ix) = indexes::of_pod(pod).filter(|i| *i < completions)
                        && !t.failed_indexes.contains(&ix)
                        && t.completed.insert(ix)
                    {
                        t.new_success = true;
                    }
                } else if !counted {
                    t.uncounted_succeeded.push(uid);
                    t.new_success = true;
                }
            } else if failed {
                t.release.push(pod.clone());
                if counted {
                    continue;
                }
                let verdict = if phase(pod) == "Failed" {
                    policy::judge(job, pod)
                } else {
                    Verdict::Count
                };
                match verdict {
                    Verdict::Ignore => {}
                    Verdict::FailJob(message) => {
                        t.fail_job.get_or_insert(message);
                        t.uncounted_failed.push(uid);
                    }
                    Verdict::FailIndex => {
                        if let Some(ix) = indexes::of_pod(pod).filter(|_| indexed) {
                            t.failed_indexes.insert(ix);
                        }
                        t.uncounted_failed.push(uid);
                    }
                    Verdict::Count => {
                        t.new_failures.push(finish_time(pod, now));
                        t.uncounted_failed.push(uid);
                    }
                }
            } else if job_deleting {
                t.release.push(pod.clone());
            }
        }
        t
    }

    async fn sync(
        &self,
        k: &ObjectKey,
        ns: &str,
        job: &Value,
        owned: Vec<Arc<Value>>,
    ) -> Result<Action, ClientError> {
        let now = self.options.clock.now();
        let now_s = clock::format(now);
        let spec = &job["spec"];
        let indexed = spec["completionMode"] == "Indexed";
        let completions = spec["completions"].as_i64();
        let parallelism = spec["parallelism"].as_i64().unwrap_or(1).max(0);
        let backoff_limit = spec["backoffLimit"].as_i64().unwrap_or(6);
        let suspended = spec["suspend"] == true;
        let satisfied = self.expectations.satisfied(k);
        let mut t = self.tally(k, job, &owned, now);

        // The pod-recreation delay follows failures since the last success.
        let backoff = {
            let mut all = self.lock_backoff();
            let b = all.entry(key::uid(job).to_owned()).or_insert(Backoff {
                failures: 0,
                last_failure: now,
            });
            if t.new_success {
                b.failures = 0;
            }
            for f in &t.new_failures {
                b.failures = b.failures.saturating_add(1);
                b.last_failure = b.last_failure.max(*f);
                if b.failures == 1 {
                    b.last_failure = *f;
                }
            }
            *b
        };

        let status0 = &job["status"];
        let mut conds: Vec<Value> = status0["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut active: Vec<Arc<Value>> = owned.iter().filter(|p| is_active(p)).cloned().collect();
        let terminating = owned
            .iter()
            .filter(|p| key::is_deleting(p) && !is_terminal(p))
            .count();
        let succeeded = |t: &Tally| -> i64 {
            if indexed {
                i64::try_from(t.completed.len()).unwrap_or(0)
            } else {
                status0["succeeded"].as_i64().unwrap_or(0)
                    + i64::try_from(t.uncounted_succeeded.len()).unwrap_or(0)
            }
        };
        let failed = status0["failed"].as_i64().unwrap_or(0)
            + i64::try_from(t.uncounted_failed.len()).unwrap_or(0);
        let mut start_time = status0["startTime"].clone();
        if start_time.is_null() && !suspended {
            start_time = json!(now_s);
        }
        let mut requeue: Option<Duration> = None;

        // Is the job finishing?
        let mut finishing: Option<(&str, String, String)> = None;
        for (interim, terminal) in [
            ("FailureTarget", "Failed"),
            ("SuccessCriteriaMet", "Complete"),
        ] {
            if let Some(c) = true_condition(job, interim) {
                finishing = Some((
                    terminal,
                    c["reason"].as_str().unwrap_or("").into(),
                    c["message"].as_str().unwrap_or("").into(),
                ));
                break;
            }
        }
        if finishing.is_none() {
            let restarts: i64 = active
                .iter()
                .filter(|p| matches!(phase(p), "Running" | "Pending"))
                .flat_map(|p| {
                    ["initContainerStatuses", "containerStatuses"]
                        .into_iter()
                        .flat_map(|f| p["status"][f].as_array().cloned().unwrap_or_default())
                })
                .filter_map(|c| c["restartCount"].as_i64())
                .sum();
            let on_failure = spec["template"]["spec"]["restartPolicy"] == "OnFailure";
            let past_on_failure = on_failure
                && if backoff_limit == 0 {
                    restarts > 0
                } else {
                    restarts >= backoff_limit
                };
            let deadline = spec["activeDeadlineSeconds"]
                .as_i64()
                .filter(|_| !suspended);
            let elapsed = clock::parse(&start_time).map(|s| now.duration_since(s));
            let max_failed_indexes = spec["maxFailedIndexes"].as_i64();
            if let Some(m) = t.fail_job.clone() {
                finishing = Some(("Failed", "PodFailurePolicy".into(), m));
            } else if failed > backoff_limit || past_on_failure {
                finishing = Some((
                    "Failed",
                    "BackoffLimitExceeded".into(),
                    "Job has reached the specified backoff limit".into(),
                ));
            } else if let (Some(d), Some(e)) = (deadline, elapsed)
                && e >= jiff::SignedDuration::from_secs(d)
            {
                finishing = Some((
                    "Failed",
                    "DeadlineExceeded".into(),
                    "Job was active longer than specified deadline".into(),
                ));
            } else if max_failed_indexes
                .is_some_and(|m| i64::try_from(t.failed_indexes.len()).unwrap_or(0) > m)
            {
                finishing = Some((
                    "Failed",
                    "MaxFailedIndexesExceeded".into(),
                    "Job has exceeded the specified maximal number of failed indexes".into(),
                ));
            } else if let (Some(d), Some(e)) = (deadline, elapsed) {
                let left = jiff::SignedDuration::from_secs(d) - e;
                requeue = Duration::try_from(left).ok();
            }
            if let Some((_, reason, message)) = &finishing {
                set_condition(
                    &mut conds,
                    condition("FailureTarget", "True", reason, message, &now_s),
                );
            }
        }

        let mut deleted_now = 0usize;
        let mut created_failure = None;
        if finishing.as_ref().is_some_and(|f| f.0 == "Failed") {
            // A failing job's active pods go.
            deleted_now = self.delete_pods(k, ns, job, &active).await;
            active.clear();
        } else if finishing.is_none() && satisfied && !key::is_deleting(job) {
            if suspended {
                deleted_now = self.delete_pods(k, ns, job, &active).await;
                active.clear();
            } else {
                let (kept, deleted, wait, err) = self
                    .manage(
                        k,
                        ns,
                        job,
                        &t,
                        active,
                        succeeded(&t),
                        parallelism,
                        &backoff,
                        now,
                    )
                    .await;
                active = kept;
                deleted_now = deleted;
                created_failure = err;
                requeue = match (requeue, wait) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let n_active = i64::try_from(active.len()).unwrap_or(0);

        // Success?
        if finishing.is_none() {
            let done = succeeded(&t);
            let per_index_done = indexed
                && spec["backoffLimitPerIndex"].is_i64()
                && !t.failed_indexes.is_empty()
                && completions.is_some_and(|c| {
                    i64::try_from(t.completed.len() + t.failed_indexes.len()).unwrap_or(0) >= c
                })
                && n_active == 0;
            if per_index_done {
                finishing = Some((
                    "Failed",
                    "FailedIndexes".into(),
                    "Job has failed indexes".into(),
                ));
                set_condition(
                    &mut conds,
                    condition(
                        "FailureTarget",
                        "True",
                        "FailedIndexes",
                        "Job has failed indexes",
                        &now_s,
                    ),
                );
            } else if let Some(i) = indexed
                .then(|| success_policy_match(job, &t.completed, completions.unwrap_or(1)))
                .flatten()
            {
                let msg = format!("Matched rules at index {i}");
                set_condition(
                    &mut conds,
                    condition("SuccessCriteriaMet", "True", "SuccessPolicy", &msg, &now_s),
                );
                deleted_now += self.delete_pods(k, ns, job, &active).await;
                active.clear();
                finishing = Some(("Complete", "SuccessPolicy".into(), msg));
            } else if n_active == 0
                && match completions {
                    None => done > 0,
                    Some(c) => done >= c,
                }
            {
                let msg = "Reached expected number of succeeded pods";
                set_condition(
                    &mut conds,
                    condition(
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        msg,
                        &now_s,
                    ),
                );
                finishing = Some(("Complete", "CompletionsReached".into(), msg.into()));
            }
        }
        // Suspension (only while not finishing).
        let mut suspend_event = None;
        if finishing.is_none() && satisfied {
            let was = true_condition(job, "Suspended").is_some();
            if suspended && !was {
                set_condition(
                    &mut conds,
                    condition("Suspended", "True", "JobSuspended", "Job suspended", &now_s),
                );
                suspend_event = Some(("Suspended", "Job suspended"));
            } else if !suspended && was {
                set_condition(
                    &mut conds,
                    condition("Suspended", "False", "JobResumed", "Job resumed", &now_s),
                );
                suspend_event = Some(("Resumed", "Job resumed"));
                start_time = json!(now_s);
            }
        }

        // Phase one: record what finished (uncounted UIDs, indexes) before finalizers go.
        let n_active = i64::try_from(active.len()).unwrap_or(0);
        let ready = active.iter().filter(|p| is_ready(p)).count();
        let status_with = |t: &Tally, conds: &[Value], extra: Option<(&str, &str)>| -> Value {
            let mut s = json!({
                "active": n_active,
                "ready": ready,
                "terminating": terminating + deleted_now,
                "succeeded": if indexed { succeeded(t) } else { status0["succeeded"].as_i64().unwrap_or(0) },
                "failed": status0["failed"].as_i64().unwrap_or(0),
                "startTime": start_time,
                "uncountedTerminatedPods": {},
            });
            if !t.uncounted_succeeded.is_empty() && !indexed {
                s["uncountedTerminatedPods"]["succeeded"] = json!(t.uncounted_succeeded);
            }
            if !t.uncounted_failed.is_empty() {
                s["uncountedTerminatedPods"]["failed"] = json!(t.uncounted_failed);
            }
            if indexed && !t.completed.is_empty() {
                s["completedIndexes"] = json!(indexes::format(&t.completed));
            }
            if spec["backoffLimitPerIndex"].is_i64() {
                s["failedIndexes"] = json!(indexes::format(&t.failed_indexes));
            }
            if !conds.is_empty() {
                s["conditions"] = json!(conds);
            }
            if let Some((f, v)) = extra {
                s[f] = json!(v);
            }
            for f in ["active", "succeeded", "failed"] {
                if s[f] == 0 {
                    s.as_object_mut().map(|m| m.remove(f));
                }
            }
            if s["startTime"].is_null() {
                s.as_object_mut().map(|m| m.remove("startTime"));
            }
            s
        };
        let mut current = job.clone();
        let first = status_with(&t, &conds, None);
        if first != current["status"] {
            current = self.write_status(ns, &current, first).await?;
        }
        // Phase two: finalizers off.
        let released = self.remove_finalizers(k, ns, &t.release).await;
        let released = released?;
        // Phase three: move counted UIDs into succeeded/failed.
        let present: HashMap<&str, &Arc<Value>> = owned.iter().map(|p| (key::uid(p), p)).collect();
        let gone = |uid: &String| {
            released.contains(uid) || present.get(uid.as_str()).is_none_or(|p| !has_finalizer(p))
        };
        let (moved_s, kept_s): (Vec<String>, Vec<String>) =
            t.uncounted_succeeded.drain(..).partition(|u| gone(u));
        let (moved_f, kept_f): (Vec<String>, Vec<String>) =
            t.uncounted_failed.drain(..).partition(|u| gone(u));
        t.uncounted_succeeded = kept_s;
        t.uncounted_failed = kept_f;
        let mut status = status_with(&t, &conds, None);
        let add = |s: &mut Value, f: &str, n: usize| {
            let v = status0[f].as_i64().unwrap_or(0) + i64::try_from(n).unwrap_or(0);
            if v > 0 {
                s[f] = json!(v);
            }
        };
        if !indexed {
            add(&mut status, "succeeded", moved_s.len());
        }
        add(&mut status, "failed", moved_f.len());
        let all_counted = t.uncounted_succeeded.is_empty() && t.uncounted_failed.is_empty();
        let mut finished_event = None;
        if let Some((terminal, reason, message)) = &finishing
            && all_counted
            && terminating == 0
            && deleted_now == 0
            && satisfied
        {
            conds.push(condition(terminal, "True", reason, message, &now_s));
            status["conditions"] = json!(conds);
            if *terminal == "Complete" {
                status["completionTime"] = json!(now_s);
                finished_event =
                    Some(("Normal", "Completed".to_owned(), "Job completed".to_owned()));
            } else {
                finished_event = Some(("Warning", reason.clone(), message.clone()));
            }
        }
        if status != current["status"] {
            self.write_status(ns, &current, status).await?;
        }
        if let Some((reason, message)) = suspend_event {
            record_event(
                &*self.client,
                "job-controller",
                job,
                "Normal",
                reason,
                message,
            )
            .await;
        }
        if let Some((type_, reason, message)) = finished_event {
            record_event(
                &*self.client,
                "job-controller",
                job,
                type_,
                &reason,
                &message,
            )
            .await;
            self.lock_backoff().remove(key::uid(job));
        }
        if let Some(e) = created_failure {
            return Err(e);
        }
        Ok(requeue.map_or_else(Action::await_change, |d| {
            Action::requeue(d + Duration::from_millis(100))
        }))
    }

    async fn write_status(
        &self,
        ns: &str,
        job: &Value,
        status: Value,
    ) -> Result<Value, ClientError> {
        let mut updated = job.clone();
        updated["status"] = status;
        self.client
            .update(
                &jobs(Some(ns)),
                updated,
                Some("status"),
                &WriteParams::default(),
            )
            .await
    }

    /// Deletes `victims`; returns how many went.
    async fn delete_pods(
        &self,
        k: &ObjectKey,
        ns: &str,
        job: &Value,
        victims: &[Arc<Value>],
    ) -> usize {
        if victims.is_empty() {
            return 0;
        }
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
        let mut n = 0;
        for (p, r) in results {
            match r {
                Ok(_) => {
                    n += 1;
                    let msg = format!("Deleted pod: {}", key::name(p));
                    record_event(
                        &*self.client,
                        "job-controller",
                        job,
                        "Normal",
                        "SuccessfulDelete",
                        &msg,
                    )
                    .await;
                }
                Err(e) => {
                    self.expectations.deletion_observed(k, key::uid(p));
                    if !e.is_not_found() {
                        tracing::warn!(job = %k, pod = key::name(p), error = %e, "deleting pod");
                    }
                }
            }
        }
        n
    }

    /// Creates or deletes pods towards the wanted number of active pods. Returns the pods now
    /// active (the created ones included, as upstream's `active += diff`), how many were
    /// deleted, the pod-recreation delay still to wait, and a creation error.
    #[allow(clippy::too_many_arguments)]
    async fn manage(
        &self,
        k: &ObjectKey,
        ns: &str,
        job: &Value,
        t: &Tally,
        active: Vec<Arc<Value>>,
        succeeded: i64,
        parallelism: i64,
        backoff: &Backoff,
        now: Timestamp,
    ) -> (
        Vec<Arc<Value>>,
        usize,
        Option<Duration>,
        Option<ClientError>,
    ) {
        let spec = &job["spec"];
        let indexed = spec["completionMode"] == "Indexed";
        let completions = spec["completions"].as_i64();
        let n_active = i64::try_from(active.len()).unwrap_or(0);
        let want = match completions {
            None if succeeded > 0 => n_active,
            None => parallelism,
            Some(c) => (c - succeeded).min(parallelism).max(0),
        };
        // Pods to remove: for Indexed jobs, out-of-range, duplicate or completed indexes first.
        let mut keep: Vec<Arc<Value>> = Vec::new();
        let mut remove: Vec<Arc<Value>> = Vec::new();
        if indexed {
            let c = completions.unwrap_or(1);
            let mut seen = BTreeSet::new();
            let mut sorted = active.clone();
            sorted.sort_by_key(|p| !is_ready(p));
            for p in sorted {
                match indexes::of_pod(&p) {
                    Some(ix)
                        if ix < c
                            && !t.completed.contains(&ix)
                            && !t.failed_indexes.contains(&ix)
                            && seen.insert(ix) =>
                    {
                        keep.push(p);
                    }
                    _ => remove.push(p),
                }
            }
        } else {
            keep = active;
        }
        let excess = usize::try_from(i64::try_from(keep.len()).unwrap_or(0) - want).unwrap_or(0);
        if excess > 0 {
            // Not ready first, then the newest.
            keep.sort_by(|a, b| {
                is_ready(b).cmp(&is_ready(a)).then_with(|| {
                    a["metadata"]["creationTimestamp"]
                        .as_str()
                        .cmp(&b["metadata"]["creationTimestamp"].as_str())
                })
            });
            let cut = keep.len() - excess;
            remove.extend(keep.split_off(cut));
        }
        remove.truncate(BURST);
        let deleted = self.delete_pods(k, ns, job, &remove).await;
        if deleted > 0 || !remove.is_empty() {
            return (keep, deleted, None, None);
        }
        let have = i64::try_from(keep.len()).unwrap_or(0);
        if have >= want {
            return (keep, 0, None, None);
        }
        let wait = backoff.remaining(
            self.options.pod_failure_backoff,
            self.options.max_pod_failure_backoff,
            now,
        );
        if !wait.is_zero() {
            return (keep, 0, Some(wait), None);
        }
        let n = usize::try_from(want - have).unwrap_or(0).min(BURST);
        let index_list: Vec<Option<i64>> = if indexed {
            let taken: BTreeSet<i64> = keep.iter().filter_map(|p| indexes::of_pod(p)).collect();
            let done: BTreeSet<i64> = t.completed.union(&t.failed_indexes).copied().collect();
            indexes::missing(completions.unwrap_or(1), &done, &taken, n)
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None; n]
        };
        let n = index_list.len();
        if n == 0 {
            return (keep, 0, None, None);
        }
        self.expectations.expect_creations(k, n);
        let (r, params) = (pods(ns), WriteParams::default());
        let mut created = 0;
        let mut batch = 1;
        let mut error = None;
        while created < n && error.is_none() {
            let size = batch.min(n - created);
            let results = join_all(
                index_list[created..created + size]
                    .iter()
                    .map(|ix| self.client.create(&r, pod_from_template(job, *ix), &params)),
            )
            .await;
            created += size;
            for res in results {
                match res {
                    Ok(pod) => {
                        let msg = format!("Created pod: {}", key::name(&pod));
                        record_event(
                            &*self.client,
                            "job-controller",
                            job,
                            "Normal",
                            "SuccessfulCreate",
                            &msg,
                        )
                        .await;
                        keep.push(Arc::new(pod));
                    }
                    Err(e) => {
                        self.expectations.lower_creations(k, 1);
                        let msg = format!("Error creating: {}", e.message);
                        record_event(
                            &*self.client,
                            "job-controller",
                            job,
                            "Warning",
                            "FailedCreate",
                            &msg,
                        )
                        .await;
                        error = Some(e);
                    }
                }
            }
            batch *= 2;
        }
        if error.is_some() {
            self.expectations.lower_creations(k, n - created);
        }
        (keep, 0, None, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let now = Timestamp::now();
        let base = Duration::from_secs(10);
        let max = Duration::from_secs(360);
        let b = |failures, ago| Backoff {
            failures,
            last_failure: now - jiff::SignedDuration::from_secs(ago),
        };
        assert_eq!(b(0, 0).remaining(base, max, now), Duration::ZERO);
        assert_eq!(b(1, 0).remaining(base, max, now), Duration::from_secs(10));
        assert_eq!(b(1, 4).remaining(base, max, now), Duration::from_secs(6));
        assert_eq!(b(3, 0).remaining(base, max, now), Duration::from_secs(40));
        assert_eq!(b(30, 0).remaining(base, max, now), max);
        assert_eq!(b(2, 100).remaining(base, max, now), Duration::ZERO);
    }

    #[test]
    fn template_pods_are_tracked_and_owned() {
        let job = json!({"metadata": {"name": "pi", "uid": "u"}, "spec": {"template": {
            "metadata": {"labels": {"job-name": "pi"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let pod = pod_from_template(&job, None);
        assert_eq!(pod["metadata"]["finalizers"], json!([TRACKING_FINALIZER]));
        assert_eq!(pod["metadata"]["generateName"], "pi-");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "Job");
        let pod = pod_from_template(&job, Some(2));
        assert_eq!(pod["metadata"]["generateName"], "pi-2-");
        assert_eq!(pod["spec"]["hostname"], "pi-2");
    }

    #[test]
    fn success_policy_rules() {
        let job = json!({"spec": {"successPolicy": {"rules": [
            {"succeededIndexes": "0-2", "succeededCount": 2},
            {"succeededIndexes": "4"},
        ]}}});
        let set = |v: &[i64]| v.iter().copied().collect::<BTreeSet<i64>>();
        assert_eq!(success_policy_match(&job, &set(&[0]), 5), None);
        assert_eq!(success_policy_match(&job, &set(&[0, 2]), 5), Some(0));
        assert_eq!(success_policy_match(&job, &set(&[4]), 5), Some(1));
        let count_only = json!({"spec": {"successPolicy": {"rules": [{"succeededCount": 3}]}}});
        assert_eq!(success_policy_match(&count_only, &set(&[1, 3]), 5), None);
        assert_eq!(
            success_policy_match(&count_only, &set(&[1, 3, 4]), 5),
            Some(0)
        );
    }
}

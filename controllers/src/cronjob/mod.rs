//! The CronJob controller, as upstream's `cronjob_controllerv2.go`: creates a Job per
//! scheduled time ([`schedule`]), named `<cronjob>-<scheduled time in unix minutes>` so a
//! time is never run twice, and reports in CronJob status.
//!
//! - The most recent unmet time since `status.lastScheduleTime` (else creation) is run; more
//!   than 100 missed times raise a `TooManyMissedTimes` warning; a time older than
//!   `startingDeadlineSeconds` is skipped with `MissSchedule`.
//! - `timeZone` (IANA, system tz database; unknown → `UnknownTimeZone`), `suspend`,
//!   `concurrencyPolicy` Allow/Forbid/Replace, `successfulJobsHistoryLimit` and
//!   `failedJobsHistoryLimit` (oldest finished Jobs deleted first).
//! - Status: `active` (references to running Jobs), `lastScheduleTime`,
//!   `lastSuccessfulTime`.
//! - Jobs get the template's labels and annotations plus
//!   `batch.kubernetes.io/cronjob-scheduled-timestamp`, and a controller reference.
//!
//! The clock is injectable ([`Options::clock`]); with a fake clock, [`Options::resync`] makes
//! the controller look again without waiting for a real-time requeue.

pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::job::{self, jobs, record_event, true_condition};
use jiff::tz::TimeZone;
use k1s_runtime::clock::{self, Clock, SystemClock};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};
use schedule::{Schedule, load_zone};

/// The annotation with a Job's scheduled time (RFC 3339 in the CronJob's zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Past this many missed times a warning is raised (upstream's 100).
const TOO_MANY_MISSED: i64 = 100;
/// Requeues land just after the scheduled time.
const NEXT_DELTA: Duration = Duration::from_millis(100);
const COMPONENT: &str = "cronjob-controller";

#[derive(Debug, thiserror::Error)]
pub enum CronJobError {
    #[error("cronjob {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
    #[error("cronjob {key}: could not replace job {job}")]
    Replace { key: String, job: String },
}

fn cronjobs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("batch", "v1", "cronjobs", ns)
}

/// How the controller runs.
#[derive(Clone)]
pub struct Options {
    pub clock: Arc<dyn Clock>,
    /// Reconcile every CronJob this often as well (for fake clocks in tests).
    pub resync: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            resync: None,
        }
    }
}

/// Runs the CronJob controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    run_with(client, Options::default(), cancel).await;
}

/// Runs the CronJob controller with `options` until `cancel`.
pub async fn run_with(client: Arc<dyn Client>, options: Options, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "cronjob",
        client.clone(),
        cronjobs(None),
        watcher::Config::default(),
    )
    .workers(5);
    if let Some(period) = options.resync {
        ctrl = ctrl.resync(period);
    }
    let store = ctrl.store();
    let job_store = ctrl.owns(
        jobs(None),
        watcher::Config::default(),
        Vec::new(),
        "batch",
        "CronJob",
    );
    let reconciler = Arc::new(CronJobs {
        client,
        cronjobs: store,
        jobs: job_store,
        clock: options.clock,
    });
    ctrl.run(reconciler, cancel).await;
}

struct CronJobs {
    client: Arc<dyn Client>,
    cronjobs: Store,
    jobs: Store,
    clock: Arc<dyn Clock>,
}

/// The name of the Job for `scheduled`: `<cronjob>-<unix minutes>`.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// Upstream's `mostRecentScheduleTime`: the latest activation in (earliest, now] and how many
/// were missed, where earliest is the last schedule time (else creation), raised to
/// `now - startingDeadlineSeconds` when `with_deadline`.
pub fn most_recent(
    cj: &Value,
    sched: &Schedule,
    tz: &TimeZone,
    now: Timestamp,
    with_deadline: bool,
) -> (Timestamp, Option<Timestamp>, i64) {
    let mut earliest = clock::parse(&cj["status"]["lastScheduleTime"])
        .or_else(|| clock::parse(&cj["metadata"]["creationTimestamp"]))
        .unwrap_or(now);
    if with_deadline && let Some(d) = cj["spec"]["startingDeadlineSeconds"].as_i64() {
        earliest = earliest.max(now - SignedDuration::from_secs(d));
    }
    let Some(t1) = sched.next(earliest, tz) else {
        return (earliest, None, 0);
    };
    if now < t1 {
        return (earliest, None, 0);
    }
    let Some(t2) = sched.next(t1, tz) else {
        return (earliest, Some(t1), 1);
    };
    if now < t2 {
        return (earliest, Some(t1), 1);
    }
    // Estimate by the interval of the first two, then walk the real schedule to now (exact
    // for irregular schedules too).
    let interval = t2.duration_since(t1).as_secs().max(1);
    let missed = now.duration_since(t1).as_secs() / interval + 1;
    let mut t = t1 + SignedDuration::from_secs((missed - 2).max(0) * interval);
    let mut recent = t1;
    while let Some(n) = sched.next(t, tz) {
        if n > now {
            break;
        }
        recent = n;
        t = n;
    }
    (earliest, Some(recent), missed)
}

fn job_ref(job: &Value) -> Value {
    json!({"kind": "Job", "namespace": job["metadata"]["namespace"], "name": job["metadata"]["name"],
           "uid": job["metadata"]["uid"], "apiVersion": "batch/v1",
           "resourceVersion": job["metadata"]["resourceVersion"]})
}

/// The Job for `scheduled` from the CronJob's template.
fn job_from_template(cj: &Value, scheduled: Timestamp, tz: &TimeZone) -> Value {
    let t = &cj["spec"]["jobTemplate"];
    let mut meta = json!({
        "name": job_name(key::name(cj), scheduled),
        "labels": t["metadata"]["labels"].as_object().cloned().unwrap_or_default(),
        "annotations": t["metadata"]["annotations"].as_object().cloned().unwrap_or_default(),
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": key::name(cj),
            "uid": key::uid(cj), "controller": true, "blockOwnerDeletion": true}],
    });
    meta["annotations"][SCHEDULED_TIMESTAMP] = json!(rfc3339_in(scheduled, tz));
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": t["spec"]})
}

/// `t` in RFC 3339 on the zone's wall clock (`Z` for UTC), as Go formats it.
fn rfc3339_in(t: Timestamp, tz: &TimeZone) -> String {
    let offset = tz.to_offset(t);
    if offset.seconds() == 0 {
        return clock::format(t);
    }
    let local = offset.to_datetime(t);
    let secs = offset.seconds();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}{:02}:{:02}",
        local.year(),
        local.month(),
        local.day(),
        local.hour(),
        local.minute(),
        local.second(),
        if secs < 0 { '-' } else { '+' },
        secs.abs() / 3600,
        secs.abs() / 60 % 60,
    )
}

/// A Go `time.RFC1123Z` rendering (for the MissSchedule message).
fn rfc1123z(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string()
}

#[async_trait::async_trait]
impl Reconcile for CronJobs {
    type Error = CronJobError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, CronJobError> {
        let Some(cj) = self.cronjobs.get(k) else {
            return Ok(Action::await_change());
        };
        let api = |source| CronJobError::Api {
            key: k.to_string(),
            source,
        };
        let ns = k.namespace.clone().unwrap_or_default();
        let children: Vec<Arc<Value>> = self
            .jobs
            .list_namespace(&ns)
            .into_iter()
            .filter(|j| {
                key::controller_ref(j).is_some_and(|r| r["uid"].as_str() == Some(key::uid(&cj)))
            })
            .collect();
        let mut cj = (*cj).clone();
        let original_status = cj["status"].clone();
        let outcome = self.sync(&mut cj, &ns, &children).await;
        let mut cj_now = cj.clone();
        if cj["status"] != original_status {
            match self
                .client
                .update(
                    &cronjobs(Some(&ns)),
                    cj.clone(),
                    Some("status"),
                    &WriteParams::default(),
                )
                .await
            {
                Ok(updated) => cj_now = updated,
                Err(e) if e.is_not_found() => return Ok(Action::await_change()),
                Err(e) => return Err(api(e)),
            }
        }
        let requeue = outcome?;
        if !key::is_deleting(&cj_now) {
            self.cleanup_history(&cj_now, &ns, &children).await;
        }
        Ok(requeue.map_or_else(Action::await_change, Action::requeue))
    }
}

impl CronJobs {
    async fn event(&self, cj: &Value, type_: &str, reason: &str, message: &str) {
        record_event(&*self.client, COMPONENT, cj, type_, reason, message).await;
    }

    /// One pass of upstream's `syncCronJob`; changes `cj.status` in place and says when to
    /// look again.
    async fn sync(
        &self,
        cj: &mut Value,
        ns: &str,
        children: &[Arc<Value>],
    ) -> Result<Option<Duration>, CronJobError> {
        let cj_key = format!("{ns}/{}", key::name(cj));
        let api = |source| CronJobError::Api {
            key: cj_key.clone(),
            source,
        };
        let now = self.clock.now();
        if !cj["status"].is_object() {
            cj["status"] = json!({});
        }
        let mut active: Vec<Value> = cj["status"]["active"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let in_active = |active: &[Value], uid: &str| active.iter().any(|r| r["uid"] == uid);
        for j in children {
            let uid = key::uid(j);
            let finished = job::is_finished(j);
            if !in_active(&active, uid) && !finished {
                let msg = format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    key::name(j)
                );
                self.event(cj, "Warning", "UnexpectedJob", &msg).await;
            } else if in_active(&active, uid) && finished {
                active.retain(|r| r["uid"] != uid);
                let cond = if true_condition(j, "Complete").is_some() {
                    "Complete"
                } else {
                    "Failed"
                };
                let msg = format!("Saw completed job: {}, condition: {cond}", key::name(j));
                self.event(cj, "Normal", "SawCompletedJob", &msg).await;
            }
            if true_condition(j, "Complete").is_some()
                && let Some(done) = clock::parse(&j["status"]["completionTime"])
                && clock::parse(&cj["status"]["lastSuccessfulTime"]).is_none_or(|last| done > last)
            {
                cj["status"]["lastSuccessfulTime"] = json!(clock::format(done));
            }
        }
        // References to Jobs that are gone (checked live: the cache may lag).
        let mut kept = Vec::new();
        for r in active {
            let uid = r["uid"].as_str().unwrap_or("");
            if children.iter().any(|j| key::uid(j) == uid) {
                kept.push(r);
                continue;
            }
            let name = r["name"].as_str().unwrap_or("");
            match self.client.get(&jobs(Some(ns)), name).await {
                Err(e) if e.is_not_found() => {
                    self.event(
                        cj,
                        "Normal",
                        "MissingJob",
                        &format!("Active job went missing: {name}"),
                    )
                    .await;
                }
                Err(e) => return Err(api(e)),
                Ok(_) => kept.push(r),
            }
        }
        set_active(cj, kept);
        if key::is_deleting(cj) {
            return Ok(None);
        }
        let zone = cj["spec"]["timeZone"].as_str().map(str::to_owned);
        let tz = match zone.as_deref().map(load_zone) {
            None => TimeZone::UTC,
            Some(Ok(tz)) => tz,
            Some(Err(e)) => {
                let msg = format!("invalid timeZone: {:?}: {e}", zone.unwrap_or_default());
                self.event(cj, "Warning", "UnknownTimeZone", &msg).await;
                return Ok(None);
            }
        };
        if cj["spec"]["suspend"] == true {
            return Ok(None);
        }
        let text = cj["spec"]["schedule"].as_str().unwrap_or("").to_owned();
        let sched = match Schedule::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!("unparseable schedule: {text:?} : {e}");
                self.event(cj, "Warning", "UnparseableSchedule", &msg).await;
                return Ok(None);
            }
        };
        let tz = match sched.zone() {
            Some(z) if zone.is_none() => {
                let msg = format!(
                    "CRON_TZ or TZ used in schedule {text:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
                );
                self.event(cj, "Warning", "UnsupportedSchedule", &msg).await;
                load_zone(z).unwrap_or(tz)
            }
            _ => tz,
        };
        let next_in = |cj: &Value| -> Option<Duration> {
            let (earliest, recent, _) = most_recent(cj, &sched, &tz, now, false);
            let next = sched.next(recent.unwrap_or(earliest).max(now), &tz)?;
            Some(
                Duration::try_from(next.duration_since(now)).unwrap_or(Duration::ZERO) + NEXT_DELTA,
            )
        };
        let (_, scheduled, missed) = most_recent(cj, &sched, &tz, now, true);
        let Some(scheduled) = scheduled.filter(|t| *t <= now) else {
            return Ok(next_in(cj));
        };
        if missed > TOO_MANY_MISSED {
            let msg = format!(
                "too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
            );
            self.event(cj, "Warning", "TooManyMissedTimes", &msg).await;
        }
        if let Some(d) = cj["spec"]["startingDeadlineSeconds"].as_i64()
            && scheduled
                .checked_add(SignedDuration::from_secs(d))
                .is_ok_and(|deadline| deadline < now)
        {
            let msg = format!(
                "Missed scheduled time to start a job: {}",
                rfc1123z(scheduled)
            );
            self.event(cj, "Warning", "MissSchedule", &msg).await;
            return Ok(next_in(cj));
        }
        let name = job_name(key::name(cj), scheduled);
        let active = cj["status"]["active"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if active.iter().any(|r| r["name"] == name.as_str())
            || clock::parse(&cj["status"]["lastScheduleTime"]) == Some(scheduled)
        {
            return Ok(next_in(cj));
        }
        let policy = cj["spec"]["concurrencyPolicy"].as_str().unwrap_or("Allow");
        if policy == "Forbid" && !active.is_empty() {
            let msg = "Not starting job because prior execution is running and concurrency policy is Forbid";
            self.event(cj, "Normal", "JobAlreadyActive", msg).await;
            return Ok(next_in(cj));
        }
        if policy == "Replace" {
            for r in &active {
                let jname = r["name"].as_str().unwrap_or("");
                match self.client.get(&jobs(Some(ns)), jname).await {
                    Ok(j) => {
                        if !self.delete_job(cj, ns, &j).await {
                            return Err(CronJobError::Replace {
                                key: cj_key.clone(),
                                job: jname.into(),
                            });
                        }
                    }
                    Err(e) if e.is_not_found() => {
                        let uid = r["uid"].clone();
                        let left: Vec<Value> = cj["status"]["active"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default();
                        set_active(cj, left.into_iter().filter(|x| x["uid"] != uid).collect());
                    }
                    Err(e) => return Err(api(e)),
                }
            }
        }
        let req = job_from_template(cj, scheduled, &tz);
        let created = match self
            .client
            .create(&jobs(Some(ns)), req, &WriteParams::default())
            .await
        {
            Ok(j) => {
                self.event(
                    cj,
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created job {}", key::name(&j)),
                )
                .await;
                j
            }
            Err(e) if e.is_already_exists() => {
                let j = self.client.get(&jobs(Some(ns)), &name).await.map_err(api)?;
                let ours = key::controller_ref(&j)
                    .is_some_and(|r| r["uid"].as_str() == Some(key::uid(cj)));
                let listed = cj["status"]["active"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|r| r["uid"].as_str() == Some(key::uid(&j))));
                if !ours || listed {
                    return Ok(None);
                }
                j
            }
            Err(e) => {
                let msg = format!("Error creating job: {}", e.message);
                self.event(cj, "Warning", "FailedCreate", &msg).await;
                return Err(api(e));
            }
        };
        let mut active = cj["status"]["active"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        active.push(job_ref(&created));
        set_active(cj, active);
        cj["status"]["lastScheduleTime"] = json!(clock::format(scheduled));
        Ok(next_in(cj))
    }

    /// Deletes a Job (Background) and drops it from `status.active`; false on failure.
    async fn delete_job(&self, cj: &mut Value, ns: &str, j: &Value) -> bool {
        let params = DeleteParams {
            propagation_policy: Some("Background".into()),
            ..Default::default()
        };
        match self
            .client
            .delete(&jobs(Some(ns)), key::name(j), &params)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                let msg = format!("Error deleting job: {}", e.message);
                self.event(cj, "Warning", "FailedDelete", &msg).await;
                return false;
            }
        }
        let uid = key::uid(j).to_owned();
        let left: Vec<Value> = cj["status"]["active"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        set_active(
            cj,
            left.into_iter()
                .filter(|r| r["uid"] != uid.as_str())
                .collect(),
        );
        self.event(
            cj,
            "Normal",
            "SuccessfulDelete",
            &format!("Deleted job {}", key::name(j)),
        )
        .await;
        true
    }

    /// Deletes the oldest finished Jobs beyond the history limits.
    async fn cleanup_history(&self, cj: &Value, ns: &str, children: &[Arc<Value>]) {
        let mut cj = cj.clone();
        for (cond, limit) in [
            ("Complete", "successfulJobsHistoryLimit"),
            ("Failed", "failedJobsHistoryLimit"),
        ] {
            let Some(limit) = cj["spec"][limit].as_i64() else {
                continue;
            };
            let mut done: Vec<&Arc<Value>> = children
                .iter()
                .filter(|j| true_condition(j, cond).is_some() && !key::is_deleting(j))
                .collect();
            let extra = done
                .len()
                .saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
            if extra == 0 {
                continue;
            }
            // Oldest first by start time (those without one last), then by name.
            done.sort_by(|a, b| {
                let st = |j: &Value| j["status"]["startTime"].as_str().map(str::to_owned);
                match (st(a), st(b)) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                }
                .then_with(|| key::name(a).cmp(key::name(b)))
            });
            for j in done.into_iter().take(extra) {
                self.delete_job(&mut cj, ns, j).await;
            }
        }
    }
}

fn set_active(cj: &mut Value, active: Vec<Value>) {
    if active.is_empty() {
        if let Some(s) = cj["status"].as_object_mut() {
            s.remove("active");
        }
    } else {
        cj["status"]["active"] = json!(active);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        k1s_api::time::parse(text).unwrap()
    }

    #[test]
    fn job_names_are_unix_minutes() {
        assert_eq!(
            job_name("hello", at("2024-01-01T00:01:00Z")),
            "hello-28401121"
        );
    }

    #[test]
    fn most_recent_counts_missed_times() {
        let sched = Schedule::parse("*/5 * * * *").unwrap();
        let utc = TimeZone::UTC;
        let cj = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": {}});
        let (_, recent, missed) = most_recent(&cj, &sched, &utc, at("2024-01-01T00:03:00Z"), true);
        assert_eq!((recent, missed), (None, 0));
        let (_, recent, missed) = most_recent(&cj, &sched, &utc, at("2024-01-01T00:07:00Z"), true);
        assert_eq!((recent, missed), (Some(at("2024-01-01T00:05:00Z")), 1));
        let (_, recent, missed) = most_recent(&cj, &sched, &utc, at("2024-01-01T10:02:00Z"), true);
        assert_eq!(recent, Some(at("2024-01-01T10:00:00Z")));
        assert_eq!(missed, 120);
        // The deadline moves the earliest time up.
        let cj = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"startingDeadlineSeconds": 200}});
        let (_, recent, missed) = most_recent(&cj, &sched, &utc, at("2024-01-01T10:02:00Z"), true);
        assert_eq!((recent, missed), (Some(at("2024-01-01T10:00:00Z")), 1));
        // Irregular schedules are walked exactly.
        let sched = Schedule::parse("30 6-16/4 * * 1-5").unwrap();
        let cj = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": {}});
        let (_, recent, _) = most_recent(&cj, &sched, &utc, at("2024-01-03T12:00:00Z"), false);
        assert_eq!(recent, Some(at("2024-01-03T10:30:00Z")));
    }

    #[test]
    fn jobs_from_the_template() {
        let cj = json!({"metadata": {"name": "hello", "uid": "u"}, "spec": {"jobTemplate": {
            "metadata": {"labels": {"a": "b"}}, "spec": {"template": {"spec": {}}}}}});
        let ny = load_zone("America/New_York").unwrap();
        let j = job_from_template(&cj, at("2024-01-01T14:00:00Z"), &ny);
        assert_eq!(j["metadata"]["name"], "hello-28401960");
        assert_eq!(j["metadata"]["labels"]["a"], "b");
        assert_eq!(
            j["metadata"]["annotations"][SCHEDULED_TIMESTAMP],
            "2024-01-01T09:00:00-05:00"
        );
        assert_eq!(j["metadata"]["ownerReferences"][0]["kind"], "CronJob");
        let j = job_from_template(&cj, at("2024-01-01T14:00:00Z"), &TimeZone::UTC);
        assert_eq!(
            j["metadata"]["annotations"][SCHEDULED_TIMESTAMP],
            "2024-01-01T14:00:00Z"
        );
        assert_eq!(
            rfc1123z(at("2024-01-01T14:00:00Z")),
            "Mon, 01 Jan 2024 14:00:00 +0000"
        );
    }
}

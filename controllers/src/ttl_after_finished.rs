//! The TTL-after-finished controller, as upstream's `ttlafterfinished`: a finished Job
//! (`Complete` or `Failed`) with `spec.ttlSecondsAfterFinished` is deleted that many seconds
//! after it finished (the terminal condition's lastTransitionTime). Before deleting it reads
//! the Job afresh (the TTL may have been changed) and deletes with the UID as precondition and
//! Foreground propagation, as upstream does, so the Job goes after its pods.
//!
//! It owns nothing but those deletions.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k1s_api::client::{Client, ClientError, DeleteParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::job::{jobs, true_condition};
use k1s_runtime::clock::{self, Clock, SystemClock};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

#[derive(Debug, thiserror::Error)]
pub enum TtlError {
    #[error("job {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

/// Runs the controller on the system clock until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    run_with_clock(client, Arc::new(SystemClock), cancel).await;
}

/// Runs the controller on `clock` until `cancel`.
pub async fn run_with_clock(
    client: Arc<dyn Client>,
    clock: Arc<dyn Clock>,
    cancel: CancellationToken,
) {
    let ctrl = Controller::new(
        "ttl-after-finished",
        client.clone(),
        jobs(None),
        watcher::Config::default(),
    )
    .workers(2);
    let reconciler = Arc::new(Ttl {
        client,
        jobs: ctrl.store(),
        clock,
    });
    ctrl.run(reconciler, cancel).await;
}

/// When a job's TTL expires: `None` if it has none or has not finished.
pub fn expires_at(job: &Value) -> Option<Timestamp> {
    let ttl = job["spec"]["ttlSecondsAfterFinished"].as_i64()?;
    let done = true_condition(job, "Complete").or_else(|| true_condition(job, "Failed"))?;
    let finished = clock::parse(&done["lastTransitionTime"])
        .or_else(|| clock::parse(&job["status"]["completionTime"]))?;
    Some(finished + jiff::SignedDuration::from_secs(ttl))
}

struct Ttl {
    client: Arc<dyn Client>,
    jobs: Store,
    clock: Arc<dyn Clock>,
}

impl Ttl {
    /// How long until `job` expires; `None` if it never does, zero if it has.
    fn left(&self, job: &Value) -> Option<Duration> {
        if key::is_deleting(job) {
            return None;
        }
        let at = expires_at(job)?;
        Some(Duration::try_from(at.duration_since(self.clock.now())).unwrap_or(Duration::ZERO))
    }
}

#[async_trait::async_trait]
impl Reconcile for Ttl {
    type Error = TtlError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, TtlError> {
        let Some(job) = self.jobs.get(k) else {
            return Ok(Action::await_change());
        };
        match self.left(&job) {
            None => return Ok(Action::await_change()),
            Some(d) if !d.is_zero() => return Ok(Action::requeue(d)),
            Some(_) => {}
        }
        let api = |source| TtlError::Api {
            key: k.to_string(),
            source,
        };
        let r = jobs(k.namespace.as_deref());
        // The cache may be stale: the TTL may have been raised or removed since.
        let fresh = match self.client.get(&r, &k.name).await {
            Ok(j) => j,
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(api(e)),
        };
        match self.left(&fresh) {
            None => return Ok(Action::await_change()),
            Some(d) if !d.is_zero() => return Ok(Action::requeue(d)),
            Some(_) => {}
        }
        tracing::info!(job = %k, "ttl expired; deleting finished job");
        let params = DeleteParams {
            propagation_policy: Some("Foreground".into()),
            precondition_uid: Some(key::uid(&fresh).to_owned()),
            ..Default::default()
        };
        match self.client.delete(&r, &k.name, &params).await {
            Ok(_) => Ok(Action::await_change()),
            Err(e) if e.is_not_found() || e.code == 409 => Ok(Action::await_change()),
            Err(e) => Err(api(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expiry_follows_the_terminal_condition() {
        let job = |ttl: Value, cond: &str| {
            json!({"spec": {"ttlSecondsAfterFinished": ttl}, "status": {"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                {"type": cond, "status": "True", "lastTransitionTime": "2024-01-01T00:00:05Z"}]}})
        };
        let at = expires_at(&job(json!(10), "Complete")).unwrap();
        assert_eq!(clock::format(at), "2024-01-01T00:00:15Z");
        let at = expires_at(&job(json!(0), "Failed")).unwrap();
        assert_eq!(clock::format(at), "2024-01-01T00:00:05Z");
        assert_eq!(expires_at(&job(Value::Null, "Complete")), None);
        assert_eq!(expires_at(&job(json!(10), "Suspended")), None);
    }
}

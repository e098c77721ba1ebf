//! Leader election through a coordination.k8s.io/v1 Lease, as client-go's `leaderelection`
//! with a `LeaseLock`: acquire when the lease is free or its holder let it expire, renew
//! every retry period, and give up leadership when a renewal has not succeeded within the
//! renew deadline.
//!
//! Expiry is judged by the local clock from when this candidate last saw the lease record
//! change (never by comparing the holder's timestamps with the local clock), so clock skew
//! between servers does not matter.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Timing of the election (upstream's kube-controller-manager defaults).
#[derive(Debug, Clone)]
pub struct Config {
    /// The Lease's namespace and name.
    pub namespace: String,
    pub name: String,
    /// This candidate's identity (`holderIdentity`).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Config {
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// How a term of leadership ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lost the lease {namespace}/{name}: not renewed within the renew deadline")]
    Lost { namespace: String, name: String },
    #[error("the leader's work ended by itself")]
    WorkEnded,
}

/// One candidate.
pub struct Elector {
    client: Arc<dyn Client>,
    config: Config,
    leases: ResourceRef,
    /// The last record seen and when (local clock) it was first seen.
    observed: Option<(Value, Instant)>,
}

use k1s_api::time::now_micro_text as now_micro;

impl Elector {
    pub fn new(client: Arc<dyn Client>, config: Config) -> Self {
        let leases = ResourceRef::new(
            "coordination.k8s.io",
            "v1",
            "leases",
            Some(&config.namespace),
        );
        Self {
            client,
            config,
            leases,
            observed: None,
        }
    }

    /// Waits to become leader, then runs `work` with a token that is cancelled when
    /// leadership is lost or `cancel` fires. Returns `Ok` when `cancel` ended the term (the
    /// lease is then released so another candidate need not wait for it to expire).
    pub async fn run<F, Fut>(
        mut self,
        cancel: CancellationToken,
        work: F,
    ) -> Result<(), LeaderError>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Acquire.
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "leader election: acquire failed"),
            }
            tokio::select! {
                () = tokio::time::sleep(self.config.retry_period) => {}
                () = cancel.cancelled() => return Ok(()),
            }
        }
        tracing::info!(identity = %self.config.identity, lease = %self.config.name, "became leader");
        let term = cancel.child_token();
        // Dropping this future ends the term too.
        let _end_on_drop = term.clone().drop_guard();
        let handle = tokio::spawn(work(term.clone()));
        tokio::pin!(handle);
        let mut last_renew = Instant::now();
        let result = loop {
            tokio::select! {
                () = tokio::time::sleep(self.config.retry_period) => {}
                () = cancel.cancelled() => break Ok(()),
                _ = &mut handle => break if cancel.is_cancelled() {
                    Ok(())
                } else {
                    Err(LeaderError::WorkEnded)
                },
            }
            // A renewal that hangs counts as failed once the renew deadline has passed.
            let attempt =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew());
            match attempt
                .await
                .unwrap_or_else(|_| Err(ClientError::transport("lease renewal timed out")))
            {
                Ok(true) => last_renew = Instant::now(),
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "leader election: renew failed"),
            }
            if last_renew.elapsed() > self.config.renew_deadline {
                tracing::warn!(identity = %self.config.identity, "leader election lost");
                break Err(LeaderError::Lost {
                    namespace: self.config.namespace.clone(),
                    name: self.config.name.clone(),
                });
            }
        };
        term.cancel();
        if !handle.is_finished() {
            let _ = (&mut handle).await;
        }
        if result.is_ok() {
            self.release().await;
        }
        result
    }

    /// One attempt: creates the lease, renews it if held, or takes it over if expired.
    /// `Ok(true)` when this candidate holds the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, ClientError> {
        let now = now_micro();
        let secs = self.config.lease_duration.as_secs();
        let current = match self.client.get(&self.leases, &self.config.name).await {
            Ok(l) => l,
            Err(e) if e.is_not_found() => {
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                    "spec": {"holderIdentity": self.config.identity, "leaseDurationSeconds": secs,
                             "acquireTime": now, "renewTime": now, "leaseTransitions": 0}});
                let created = self
                    .client
                    .create(&self.leases, lease, &WriteParams::default())
                    .await?;
                self.observe(&created);
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        self.observe(&current);
        let spec = &current["spec"];
        let holder = spec["holderIdentity"].as_str().unwrap_or("");
        let held_by_me = holder == self.config.identity;
        if !held_by_me && !holder.is_empty() {
            let duration = spec["leaseDurationSeconds"]
                .as_u64()
                .map_or(self.config.lease_duration, Duration::from_secs);
            let seen_at = self
                .observed
                .as_ref()
                .map_or_else(Instant::now, |(_, t)| *t);
            if seen_at.elapsed() < duration {
                return Ok(false);
            }
        }
        let mut lease = current.clone();
        lease["spec"]["holderIdentity"] = json!(self.config.identity);
        lease["spec"]["leaseDurationSeconds"] = json!(secs);
        lease["spec"]["renewTime"] = json!(now);
        if !held_by_me {
            lease["spec"]["acquireTime"] = json!(now);
            let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);
            lease["spec"]["leaseTransitions"] = json!(transitions + 1);
        }
        let updated = self
            .client
            .update(&self.leases, lease, None, &WriteParams::default())
            .await?;
        self.observe(&updated);
        Ok(true)
    }

    /// Remembers the record; a changed record restarts the expiry clock.
    fn observe(&mut self, lease: &Value) {
        let spec = lease["spec"].clone();
        let changed = self.observed.as_ref().is_none_or(|(s, _)| *s != spec);
        if changed {
            self.observed = Some((spec, Instant::now()));
        }
    }

    /// Gives the lease up (empty holder, 1 s duration) if this candidate still holds it.
    async fn release(&mut self) {
        let Ok(mut lease) = self.client.get(&self.leases, &self.config.name).await else {
            return;
        };
        if lease["spec"]["holderIdentity"].as_str() != Some(self.config.identity.as_str()) {
            return;
        }
        lease["spec"]["holderIdentity"] = json!("");
        lease["spec"]["leaseDurationSeconds"] = json!(1);
        lease["spec"]["renewTime"] = json!(now_micro());
        if let Err(e) = self
            .client
            .update(&self.leases, lease, None, &WriteParams::default())
            .await
        {
            tracing::debug!(error = %e, "leader election: release failed");
        }
    }
}

//! Background compaction by policy, for any [`Store`].
//!
//! Every `interval` the compactor samples the current revision. It then compacts away the
//! history that is both older than `keep_for` (judged by the samples, as kube-apiserver's
//! compactor does) and more than `keep_revisions` revisions behind the head. A criterion set to
//! zero is ignored. History inside either window is kept, so a watcher that was briefly
//! disconnected can resume without relisting, while disk use stays bounded under steady churn.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{Revision, Store, StoreError};

/// How much history to keep.
#[derive(Clone, Debug)]
pub struct CompactionPolicy {
    /// Keep at least this many revisions behind the head (0: no count criterion).
    pub keep_revisions: i64,
    /// Keep at least this much time of history (zero: no time criterion).
    pub keep_for: Duration,
    /// How often to sample the head and compact.
    pub interval: Duration,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            keep_revisions: 10_000,
            keep_for: Duration::from_secs(300),
            interval: Duration::from_secs(60),
        }
    }
}

/// The revision to compact to, given the head now and earlier samples of it (oldest first), or
/// `None` if nothing new can be compacted.
pub fn target(
    policy: &CompactionPolicy,
    samples: &VecDeque<(Instant, Revision)>,
    now: Instant,
    head: Revision,
    compacted: Revision,
) -> Option<Revision> {
    let by_count = if policy.keep_revisions > 0 {
        head - policy.keep_revisions
    } else {
        head
    };
    let by_time = if policy.keep_for.is_zero() {
        head
    } else {
        let cutoff = now.checked_sub(policy.keep_for)?;
        samples
            .iter()
            .take_while(|(t, _)| *t <= cutoff)
            .last()
            .map(|&(_, rev)| rev)?
    };
    let target = by_count.min(by_time);
    (target > compacted && target > 1).then_some(target)
}

/// Runs the policy until `cancel` fires.
pub async fn run(store: Arc<dyn Store>, policy: CompactionPolicy, cancel: CancellationToken) {
    let mut samples: VecDeque<(Instant, Revision)> = VecDeque::new();
    let mut compacted: Revision = 0;
    let mut ticker = tokio::time::interval(policy.interval.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let head = match store.current_revision().await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "compactor: cannot read the current revision");
                continue;
            }
        };
        let now = Instant::now();
        samples.push_back((now, head));
        let Some(to) = target(&policy, &samples, now, head, compacted) else {
            continue;
        };
        match store.compact(to).await {
            Ok(()) => {
                tracing::debug!(revision = to, head, "compacted store history");
                compacted = to;
            }
            // Someone (another server) compacted further already.
            Err(StoreError::Compacted { compacted: c, .. }) => compacted = c.max(to),
            Err(e) => tracing::warn!(error = %e, revision = to, "compaction failed"),
        }
        // Samples at or below the compacted revision can no longer move the target.
        while samples.len() > 1 && samples.get(1).is_some_and(|&(_, r)| r <= compacted) {
            samples.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(keep_revisions: i64, keep_secs: u64) -> CompactionPolicy {
        CompactionPolicy {
            keep_revisions,
            keep_for: Duration::from_secs(keep_secs),
            interval: Duration::from_secs(1),
        }
    }

    #[test]
    fn keeps_the_union_of_both_windows() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let samples: VecDeque<_> = [(at(0), 100), (at(60), 5_000), (at(120), 40_000)].into();
        let cases = [
            // (policy, now, head, compacted, expected)
            (policy(10_000, 300), at(120), 40_000, 0, None), // nothing is 5 minutes old yet
            (policy(10_000, 100), at(170), 40_000, 0, Some(5_000)), // time window is larger
            (policy(100, 60), at(190), 40_000, 0, Some(39_900)), // keep the last 100
            (policy(38_000, 60), at(190), 40_000, 0, Some(2_000)), // count window is larger
            (policy(10_000, 0), at(0), 40_000, 0, Some(30_000)), // count only
            (policy(0, 60), at(125), 40_000, 0, Some(5_000)), // time only
            (policy(10_000, 0), at(0), 40_000, 30_000, None), // already there
            (policy(10_000, 0), at(0), 500, 0, None),        // young store
        ];
        for (i, (p, now, head, compacted, want)) in cases.into_iter().enumerate() {
            assert_eq!(target(&p, &samples, now, head, compacted), want, "case {i}");
        }
    }
}

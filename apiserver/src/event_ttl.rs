//! Event expiry: kube-apiserver stores events with a lease of `--event-ttl` (default 1 h) so
//! they vanish on their own. The store has no leases, so a sweeper deletes events (core/v1
//! and events.k8s.io/v1, one storage) whose last activity is older than the TTL.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::rest::{DeleteOptions, ListOptions, Rest, meta};

/// How often the sweeper runs.
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// The last time an event was touched: the newest of its timestamps.
pub fn last_activity(ev: &Value) -> Option<jiff::Timestamp> {
    [
        &ev["lastTimestamp"],
        &ev["deprecatedLastTimestamp"],
        &ev["series"]["lastObservedTime"],
        &ev["eventTime"],
        &ev["metadata"]["creationTimestamp"],
    ]
    .iter()
    .filter_map(|v| v.as_str())
    .filter_map(k1s_api::time::parse)
    .max()
}

/// Deletes the events that expired by `now`; returns how many went.
pub async fn sweep(rest: &Rest, ttl: Duration, now: jiff::Timestamp) -> usize {
    let mut deleted = 0;
    // One sweep covers both groups: events.k8s.io Events share the core storage.
    if let Some(res) = rest.registry.builtin_kind("", "Event") {
        let mut opts = ListOptions {
            limit: 500,
            ..Default::default()
        };
        loop {
            let Ok(page) = rest.list(&res, None, &opts).await else {
                break;
            };
            for ev in &page.items {
                let expired = last_activity(ev).is_some_and(|t| {
                    Duration::try_from(now.duration_since(t)).is_ok_and(|d| d > ttl)
                });
                if expired
                    && rest
                        .delete(
                            &res,
                            meta::namespace(ev),
                            meta::name(ev),
                            &DeleteOptions::default(),
                        )
                        .await
                        .is_ok()
                {
                    deleted += 1;
                }
            }
            match page.continue_token {
                Some(c) => opts.continue_token = Some(c),
                None => break,
            }
        }
    }
    deleted
}

/// Sweeps every minute until cancelled.
pub async fn run(rest: Arc<Rest>, ttl: Duration, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
        let n = sweep(&rest, ttl, jiff::Timestamp::now()).await;
        if n > 0 {
            tracing::debug!(deleted = n, "expired events deleted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_newest_timestamp_counts() {
        let ev = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "lastTimestamp": "2026-01-01T02:00:00Z", "eventTime": null});
        let t = last_activity(&ev).unwrap();
        assert_eq!(jiff::tz::Offset::UTC.to_datetime(t).hour(), 2);
        assert!(last_activity(&json!({})).is_none());
    }
}

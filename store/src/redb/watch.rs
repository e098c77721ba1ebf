//! One watcher's stream: catch up from the on-disk log, then follow the hub.
//!
//! A watch that starts behind reads the log in chunks without holding a hub slot, so a long
//! catch-up cannot overflow a live buffer. When it is within one chunk of the head it subscribes
//! to the hub (which tells it the exact revision the subscription starts after), reads the
//! remaining gap from disk, and from then on takes events from its channel. `seen` is the
//! revision up to which every event has been examined, so nothing is delivered twice or skipped.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::Shared;
use super::hub::Subscription;
use super::read;
use crate::{Event, Result, Revision, StoreError, WatchItem, WatchOptions, WatchStream};

/// Revisions read from disk per step while catching up.
const CATCH_UP_CHUNK: Revision = 1024;

struct WatchState {
    shared: Arc<Shared>,
    prefix: String,
    /// Every revision up to this one has been examined.
    seen: Revision,
    pending: VecDeque<Event>,
    live: Option<Subscription>,
    progress: Option<Interval>,
    done: bool,
}

pub fn stream(
    shared: Arc<Shared>,
    prefix: String,
    after: Revision,
    opts: WatchOptions,
) -> WatchStream {
    let progress = opts.progress_interval.map(|d| {
        let mut iv = tokio::time::interval_at(Instant::now() + d, d);
        iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
        iv
    });
    let state = WatchState {
        shared,
        prefix,
        seen: after,
        pending: VecDeque::new(),
        live: None,
        progress,
        done: false,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        let item = st.next().await?;
        Some((item, st))
    }))
}

impl WatchState {
    async fn next(&mut self) -> Option<Result<WatchItem>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(Ok(WatchItem::Event(ev)));
            }
            if self.done {
                return None;
            }
            let step = if self.live.is_some() {
                self.follow().await
            } else {
                self.catch_up().await.map(|()| None)
            };
            match step {
                Ok(Some(item)) => return Some(Ok(item)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    self.live = None;
                    return Some(Err(e));
                }
            }
        }
    }

    /// Reads the next chunk of history; subscribes once the head is within reach.
    async fn catch_up(&mut self) -> Result<()> {
        let head = self.shared.hub.published();
        let (upto, subscription) = if head - self.seen <= CATCH_UP_CHUNK {
            let (sub, start) = self.shared.hub.subscribe(&self.prefix);
            (start, Some(sub))
        } else {
            (self.seen + CATCH_UP_CHUNK, None)
        };
        if upto > self.seen {
            let (prefix, after) = (self.prefix.clone(), self.seen);
            let events = read::blocking(&self.shared, move |s| {
                read::log_range(s, &prefix, after, upto)
            })
            .await?;
            self.pending.extend(events);
            self.seen = upto;
        }
        if subscription.is_some() {
            self.live = subscription;
        }
        Ok(())
    }

    /// Waits for the next live batch or progress tick.
    async fn follow(&mut self) -> Result<Option<WatchItem>> {
        let Some(live) = self.live.as_mut() else {
            return Ok(None);
        };
        tokio::select! {
            biased;
            batch = live.rx.recv() => match batch {
                Some(batch) => {
                    let seen = self.seen;
                    self.pending.extend(
                        batch
                            .events
                            .iter()
                            .filter(|e| e.revision() > seen && e.kv.key.starts_with(&self.prefix))
                            .cloned(),
                    );
                    self.seen = self.seen.max(batch.revision);
                    Ok(None)
                }
                None if live.lagged() => Err(StoreError::WatcherTooSlow {
                    buffered: self.shared.hub.buffer(),
                }),
                None => Err(StoreError::Closed),
            },
            () = tick(&mut self.progress) => {
                // Read the published revision before checking the channel: every batch up to
                // it was queued before it was stored, so an empty channel means all delivered.
                let published = self.shared.hub.published();
                if live.rx.is_empty() && published >= self.seen {
                    self.seen = published;
                    return Ok(Some(WatchItem::Progress(published)));
                }
                Ok(None)
            }
        }
    }
}

async fn tick(progress: &mut Option<Interval>) {
    match progress {
        Some(iv) => {
            iv.tick().await;
        }
        None => std::future::pending().await,
    }
}

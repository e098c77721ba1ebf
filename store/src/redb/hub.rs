//! In-process fan-out of committed events to live watchers.
//!
//! The committer publishes each committed batch once; the hub hands an `Arc` of it to every
//! watcher whose prefix matches one of its events, through that watcher's bounded channel. The
//! hub never waits: a watcher whose channel is full is dropped and flagged as lagged, and its
//! stream ends with `WatcherTooSlow` after the batches already queued for it. Writers are never
//! blocked by readers.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use crate::{Event, Revision};

/// The events of one write transaction, in revision order.
#[derive(Debug)]
pub struct Batch {
    pub events: Vec<Event>,
    /// The revision of the last event; every revision up to it is committed.
    pub revision: Revision,
}

/// A live watcher's end of the hub.
pub struct Subscription {
    pub rx: mpsc::Receiver<Arc<Batch>>,
    lagged: Arc<AtomicBool>,
}

impl Subscription {
    /// True if the hub dropped this watcher because its channel was full.
    pub fn lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }
}

struct Slot {
    prefix: String,
    tx: mpsc::Sender<Arc<Batch>>,
    lagged: Arc<AtomicBool>,
}

pub struct Hub {
    slots: Mutex<Vec<Slot>>,
    /// The revision of the last published batch: every committed event up to it has been handed
    /// to the watchers that were subscribed when it was published.
    published: AtomicI64,
    buffer: usize,
}

impl Hub {
    pub fn new(head: Revision, buffer: usize) -> Self {
        Self {
            slots: Mutex::new(Vec::new()),
            published: AtomicI64::new(head),
            buffer: buffer.max(1),
        }
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        // A panic while holding this lock leaves the Vec consistent; keep serving.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The revision of the last published batch.
    pub fn published(&self) -> Revision {
        self.published.load(Ordering::Acquire)
    }

    /// Hands `batch` to every matching watcher. Called by the committer after the commit, in
    /// revision order.
    pub fn publish(&self, batch: Batch) {
        let batch = Arc::new(batch);
        let mut slots = self.slots();
        slots.retain(|slot| {
            if !batch.events.iter().any(|e| e.kv.key.starts_with(&slot.prefix)) {
                return !slot.tx.is_closed();
            }
            match slot.tx.try_send(batch.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    slot.lagged.store(true, Ordering::Release);
                    tracing::warn!(prefix = %slot.prefix, buffer = self.buffer, "watcher fell behind; ending it so it relists");
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        // Stored under the lock, so `subscribe` sees the revision and the slots agree.
        self.published.store(batch.revision, Ordering::Release);
    }

    /// Registers a live watcher. Returns its subscription and the revision it starts after: it
    /// will receive every batch with a revision greater than that one.
    pub fn subscribe(&self, prefix: &str) -> (Subscription, Revision) {
        let (tx, rx) = mpsc::channel(self.buffer);
        let lagged = Arc::new(AtomicBool::new(false));
        let mut slots = self.slots();
        slots.push(Slot {
            prefix: prefix.to_owned(),
            tx,
            lagged: lagged.clone(),
        });
        (Subscription { rx, lagged }, self.published())
    }

    /// Ends every watcher (their streams end with `Closed`). Used on shutdown.
    pub fn close(&self) {
        self.slots().clear();
    }

    /// The number of live watchers (dropped streams are not counted).
    pub fn watchers(&self) -> usize {
        self.slots().iter().filter(|s| !s.tx.is_closed()).count()
    }

    /// The configured per-watcher buffer, in batches.
    pub fn buffer(&self) -> usize {
        self.buffer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, KeyValue};

    fn batch(rev: Revision, key: &str) -> Batch {
        Batch {
            events: vec![Event {
                kind: EventKind::Put,
                kv: KeyValue {
                    key: key.into(),
                    value: Default::default(),
                    create_revision: rev,
                    mod_revision: rev,
                },
                prev: None,
            }],
            revision: rev,
        }
    }

    #[test]
    fn routes_by_prefix_and_drops_full_watchers() {
        let hub = Hub::new(1, 2);
        let (mut a, start) = hub.subscribe("/a/");
        let (mut b, _) = hub.subscribe("/b/");
        assert_eq!(start, 1);
        hub.publish(batch(2, "/a/x"));
        hub.publish(batch(3, "/a/y"));
        assert_eq!(hub.published(), 3);
        assert!(
            b.rx.try_recv().is_err(),
            "b saw an event outside its prefix"
        );
        // a's buffer of 2 is full now: the next matching batch drops it, flagged as lagged.
        hub.publish(batch(4, "/a/z"));
        assert!(a.lagged());
        assert_eq!(a.rx.try_recv().unwrap().revision, 2);
        assert_eq!(a.rx.try_recv().unwrap().revision, 3);
        assert!(matches!(
            a.rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        assert!(!b.lagged());
        assert_eq!(hub.watchers(), 1);
    }
}

//! The controller builder: a primary resource and related resources watched into caches, a
//! work queue of primary keys, and N workers running a [`Reconcile`].
//!
//! Keys come from the primary's own events, from related objects through a mapper (e.g. an
//! owned object's controller reference), from a periodic resync, and from every relist (all
//! keys before and after it, so deletions missed while disconnected are reconciled too).
//! Workers start once every cache has listed. Stopping (the token) lets in-flight reconciles
//! finish, then returns.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k1s_api::client::{Client, ResourceRef};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::key::{self, ObjectKey};
use crate::queue::{RateLimit, WorkQueue};
use crate::store::{IndexFn, Store, Writer};
use crate::watcher::{self, Event};

/// What to do with a key after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile again after `after` (unless a change comes first).
    pub fn requeue(after: Duration) -> Self {
        Self {
            requeue_after: Some(after),
        }
    }

    /// Nothing more until something changes.
    pub fn await_change() -> Self {
        Self {
            requeue_after: None,
        }
    }

    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// A reconciler: brings the world in line with the object under `key`, whether it exists or
/// not. An error requeues the key with backoff.
#[async_trait::async_trait]
pub trait Reconcile: Send + Sync + 'static {
    type Error: std::fmt::Display + Send;
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Self::Error>;
}

/// How a related object was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Present in a relist and in the cache before it.
    Listed,
    /// New to the cache: added (or found by a relist). Client-go's `OnAdd`.
    Added,
    /// Changed while in the cache. Client-go's `OnUpdate`: not a creation, so expectations of
    /// creations must not count it.
    Updated,
    /// Deleted (its last state; or gone from the cache in a relist).
    Deleted,
}

/// Maps a related object to the primary keys it concerns.
pub type Mapper = Arc<dyn Fn(&Value, Seen) -> Vec<ObjectKey> + Send + Sync>;

/// A mapper to every object of `primary` (a controller's own cache) in the watched object's
/// namespace: for controllers whose objects sum up a namespace (PDBs, quotas).
pub fn all_in_namespace(primary: crate::Store) -> Mapper {
    Arc::new(move |o: &Value, _| {
        key::namespace(o)
            .map(|ns| {
                primary
                    .list_namespace(ns)
                    .iter()
                    .filter_map(|p| ObjectKey::of(p))
                    .collect()
            })
            .unwrap_or_default()
    })
}

struct Watch {
    resource: ResourceRef,
    config: watcher::Config,
    writer: Writer,
    mapper: Mapper,
}

/// Builds and runs one controller.
pub struct Controller {
    name: String,
    client: Arc<dyn Client>,
    /// The primary watch is `watches[0]`; its mapper is the object's own key.
    watches: Vec<Watch>,
    workers: usize,
    resync: Option<Duration>,
    queue: WorkQueue<ObjectKey>,
}

impl Controller {
    /// A controller of `primary` (a namespace or all namespaces) named `name` (for logs).
    pub fn new(
        name: &str,
        client: Arc<dyn Client>,
        primary: ResourceRef,
        config: watcher::Config,
    ) -> Self {
        Self::with_indexes(name, client, primary, config, Vec::new())
    }

    /// As [`Controller::new`], with indexes on the primary cache.
    pub fn with_indexes(
        name: &str,
        client: Arc<dyn Client>,
        primary: ResourceRef,
        config: watcher::Config,
        indexers: Vec<(String, IndexFn)>,
    ) -> Self {
        Self {
            name: name.into(),
            client,
            watches: vec![Watch {
                resource: primary,
                config,
                writer: Writer::new(indexers),
                mapper: Arc::new(|o: &Value, _| ObjectKey::of(o).into_iter().collect()),
            }],
            workers: 1,
            resync: None,
            queue: WorkQueue::new(RateLimit::default()),
        }
    }

    /// The cache of the primary resource.
    pub fn store(&self) -> Store {
        self.watches[0].writer.store()
    }

    /// The queue (to add keys from outside, e.g. in tests or from other signals).
    pub fn queue(&self) -> WorkQueue<ObjectKey> {
        self.queue.clone()
    }

    /// Also watches `resource`; each of its objects maps to the primary keys `mapper` returns.
    /// Returns the cache of `resource`.
    pub fn watches(
        &mut self,
        resource: ResourceRef,
        config: watcher::Config,
        indexers: Vec<(String, IndexFn)>,
        mapper: Mapper,
    ) -> Store {
        let writer = Writer::new(indexers);
        let store = writer.store();
        self.watches.push(Watch {
            resource,
            config,
            writer,
            mapper,
        });
        store
    }

    /// Watches `resource`, whose objects map to their controlling owner of kind `owner_kind`
    /// in group `owner_group` (in the same namespace).
    pub fn owns(
        &mut self,
        resource: ResourceRef,
        config: watcher::Config,
        indexers: Vec<(String, IndexFn)>,
        owner_group: &str,
        owner_kind: &str,
    ) -> Store {
        let (group, kind) = (owner_group.to_owned(), owner_kind.to_owned());
        let mapper: Mapper = Arc::new(move |o: &Value, _| {
            key::controller_ref(o)
                .filter(|r| {
                    r["kind"].as_str() == Some(kind.as_str())
                        && key::group_of(r["apiVersion"].as_str().unwrap_or("")) == group
                })
                .and_then(|r| r["name"].as_str())
                .map(|n| ObjectKey::new(key::namespace(o), n))
                .into_iter()
                .collect()
        });
        self.watches(resource, config, indexers, mapper)
    }

    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Every `period`, every cached primary key is reconciled again.
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// The per-key backoff of failed reconciles (call before [`Controller::queue`]).
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.queue = WorkQueue::new(limit);
        self
    }

    /// Runs until `cancel`; returns when every task has stopped.
    pub async fn run<R: Reconcile>(self, reconciler: Arc<R>, cancel: CancellationToken) {
        let Controller {
            name,
            client,
            watches,
            workers,
            resync,
            queue,
        } = self;
        // Dropping this future stops its tasks too.
        let cancel = cancel.child_token();
        let _stop_on_drop = cancel.clone().drop_guard();
        let tracker = TaskTracker::new();
        let stores: Vec<Store> = watches.iter().map(|w| w.writer.store()).collect();
        let primary = stores[0].clone();
        for w in watches {
            tracker.spawn(feed(client.clone(), w, queue.clone(), cancel.clone()));
        }
        for s in &stores {
            if !s.wait_ready(&cancel).await {
                break;
            }
        }
        if !cancel.is_cancelled() {
            tracing::debug!(controller = %name, "caches synced; starting workers");
            if let Some(period) = resync {
                let (queue, primary, cancel) = (queue.clone(), primary.clone(), cancel.clone());
                tracker.spawn(async move {
                    let mut tick = tokio::time::interval(period);
                    tick.tick().await;
                    loop {
                        tokio::select! {
                            _ = tick.tick() => primary.keys().into_iter().for_each(|k| queue.add(k)),
                            () = cancel.cancelled() => return,
                        }
                    }
                });
            }
            for _ in 0..workers {
                tracker.spawn(work(
                    name.clone(),
                    reconciler.clone(),
                    queue.clone(),
                    cancel.clone(),
                ));
            }
        }
        cancel.cancelled().await;
        queue.shut_down();
        tracker.close();
        tracker.wait().await;
    }
}

/// Runs one watch into its cache and turns its events into keys.
async fn feed(
    client: Arc<dyn Client>,
    w: Watch,
    queue: WorkQueue<ObjectKey>,
    cancel: CancellationToken,
) {
    let Watch {
        resource,
        config,
        mut writer,
        mapper,
    } = w;
    let store = writer.store();
    let events = watcher::watcher(client, resource, config);
    tokio::pin!(events);
    // The objects cached when a relist started: their keys are reconciled when it ends.
    let mut before: Vec<Arc<Value>> = Vec::new();
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            () = cancel.cancelled() => return,
        };
        let Some(ev) = ev else { return };
        if matches!(ev, Event::Init) {
            before = store.list();
        }
        // Client-go's OnAdd or OnUpdate: whether an applied object was cached before.
        let applied = match &ev {
            Event::Apply(o)
                if ObjectKey::of(o)
                    .and_then(|k| store.get(&k))
                    .is_some_and(|c| key::uid(&c) == key::uid(o)) =>
            {
                Seen::Updated
            }
            _ => Seen::Added,
        };
        writer.apply(&ev);
        match &ev {
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => {
                let now = store.list();
                for (o, seen) in relisted(&std::mem::take(&mut before), &now) {
                    mapper(&o, seen).into_iter().for_each(|k| queue.add(k));
                }
            }
            Event::Apply(o) => mapper(o, applied).into_iter().for_each(|k| queue.add(k)),
            Event::Delete(o) => mapper(o, Seen::Deleted)
                .into_iter()
                .for_each(|k| queue.add(k)),
        }
    }
}

/// What a relist says about each object: new to the cache (applied), gone from it
/// (deleted), or listed again — as client-go's DeltaFIFO `Replace` reports it.
fn relisted(before: &[Arc<Value>], now: &[Arc<Value>]) -> Vec<(Arc<Value>, Seen)> {
    let uids = |objs: &[Arc<Value>]| -> HashSet<String> {
        objs.iter().map(|o| key::uid(o).to_owned()).collect()
    };
    let (was, is) = (uids(before), uids(now));
    let gone = before
        .iter()
        .filter(|o| !is.contains(key::uid(o)))
        .map(|o| (o.clone(), Seen::Deleted));
    let present = now.iter().map(|o| {
        let seen = if was.contains(key::uid(o)) {
            Seen::Listed
        } else {
            Seen::Added
        };
        (o.clone(), seen)
    });
    gone.chain(present).collect()
}

async fn work<R: Reconcile>(
    name: String,
    reconciler: Arc<R>,
    queue: WorkQueue<ObjectKey>,
    cancel: CancellationToken,
) {
    while let Some(key) = queue.get(&cancel).await {
        match reconciler.reconcile(&key).await {
            Ok(action) => {
                queue.forget(&key);
                if let Some(after) = action.requeue_after() {
                    queue.add_after(key.clone(), after);
                }
            }
            Err(e) => {
                tracing::warn!(controller = %name, key = %key, error = %e, "reconcile failed");
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_relist_reports_additions_and_deletions() {
        let o = |n: &str, uid: &str| Arc::new(json!({"metadata": {"name": n, "uid": uid}}));
        let before = [o("a", "1"), o("b", "2")];
        // b was deleted and re-created under a new UID; c is new.
        let now = [o("a", "1"), o("b", "3"), o("c", "4")];
        let got: Vec<(String, String, Seen)> = relisted(&before, &now)
            .into_iter()
            .map(|(o, s)| (key::name(&o).to_owned(), key::uid(&o).to_owned(), s))
            .collect();
        let want = [
            ("b", "2", Seen::Deleted),
            ("a", "1", Seen::Listed),
            ("b", "3", Seen::Added),
            ("c", "4", Seen::Added),
        ];
        assert_eq!(got.len(), want.len());
        for (n, u, s) in want {
            assert!(
                got.contains(&(n.into(), u.into(), s)),
                "{n} {u} {s:?}: {got:?}"
            );
        }
    }
}

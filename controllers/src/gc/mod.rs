//! The garbage collector: deletes objects whose owners are gone and carries out the
//! Foreground and Orphan propagation policies, as upstream's garbage collector does.
//!
//! - [`graph`]: the ownership graph built from watches of every resource in the
//!   [`ResourceCatalog`] (namespaced and cluster-scoped), kept by one builder task.
//! - [`worker`]: the decisions, each on live GETs with UID checks.
//!
//! Background: when an owner goes, its dependents whose owners are all gone are deleted.
//! Foreground: an owner with the `foregroundDeletion` finalizer waits until its dependents
//! with `blockOwnerDeletion` are gone (they are deleted first), then loses the finalizer.
//! Orphan: an owner with the `orphan` finalizer has its references removed from its
//! dependents, then loses the finalizer. The collector owns those two finalizers and the
//! ownerReferences it removes; it changes nothing else.

pub mod graph;
pub mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k1s_api::client::{Client, ClientError};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::catalog::{CatalogEntry, ResourceCatalog};
use graph::{Change, Graph, Work};
use k1s_runtime::queue::WorkQueue;
use k1s_runtime::watcher::{self, Event};
use worker::Workers;

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("{kind} {namespace}/{name}: {source}")]
    Api {
        kind: String,
        namespace: String,
        name: String,
        #[source]
        source: Box<ClientError>,
    },
    #[error("no served resource has apiVersion {api_version} and kind {kind}")]
    UnknownKind { api_version: String, kind: String },
}

/// Tuning of the collector.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workers of the attempt-to-delete queue (upstream's `--concurrent-gc-syncs`, 20).
    pub workers: usize,
    /// How often the catalog is read again to watch new resources (custom resources).
    pub catalog_refresh: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 4,
            catalog_refresh: Duration::from_secs(30),
        }
    }
}

/// Runs the garbage collector until `cancel`.
pub async fn run(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    cancel: CancellationToken,
) {
    run_with(client, catalog, Config::default(), cancel).await;
}

type KindKey = (String, String);

fn kind_key(e: &CatalogEntry) -> KindKey {
    (e.group.clone(), e.resource.clone())
}

/// As [`run`], tuned.
pub async fn run_with(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    config: Config,
    cancel: CancellationToken,
) {
    // Dropping this future stops its tasks too.
    let cancel = cancel.child_token();
    let _stop_on_drop = cancel.clone().drop_guard();
    let tracker = TaskTracker::new();
    let graph = Arc::new(Mutex::new(Graph::default()));
    let delete_queue: WorkQueue<String> = WorkQueue::default();
    let orphan_queue: WorkQueue<String> = WorkQueue::default();
    let (changes_tx, changes_rx) = mpsc::channel::<Change>(1024);
    let (synced_tx, mut synced_rx) = watch::channel(HashSet::<KindKey>::new());

    tracker.spawn(build(
        graph.clone(),
        changes_rx,
        delete_queue.clone(),
        orphan_queue.clone(),
        synced_tx,
        cancel.clone(),
    ));

    // Monitors: one watch per resource of the catalog, refreshed as the catalog changes.
    let mut monitors: HashMap<KindKey, CancellationToken> = HashMap::new();
    let refresh = |monitors: &mut HashMap<KindKey, CancellationToken>| {
        let entries = catalog.resources();
        let keys: HashSet<KindKey> = entries.iter().map(kind_key).collect();
        monitors.retain(|k, token| {
            let keep = keys.contains(k);
            if !keep {
                token.cancel();
            }
            keep
        });
        for e in entries {
            let k = kind_key(&e);
            if monitors.contains_key(&k) {
                continue;
            }
            let token = cancel.child_token();
            monitors.insert(k, token.clone());
            tracker.spawn(monitor(client.clone(), e, changes_tx.clone(), token));
        }
    };
    refresh(&mut monitors);
    let initial: HashSet<KindKey> = monitors.keys().cloned().collect();

    // Workers start once every resource has been listed, so that no decision rests on a
    // partial graph (e.g. an owner losing foregroundDeletion before its dependents are known).
    let synced = tokio::select! {
        r = synced_rx.wait_for(|s| initial.is_subset(s)) => r.is_ok(),
        () = cancel.cancelled() => false,
    };
    if synced {
        tracing::debug!(resources = initial.len(), "garbage collector synced");
        let workers = Arc::new(Workers {
            client: client.clone(),
            catalog: catalog.clone(),
            graph: graph.clone(),
            changes: changes_tx.clone(),
            delete_queue: delete_queue.clone(),
        });
        for _ in 0..config.workers.max(1) {
            let (w, q, c) = (workers.clone(), delete_queue.clone(), cancel.clone());
            tracker.spawn(async move {
                while let Some(uid) = q.get(&c).await {
                    match w.attempt_to_delete(&uid).await {
                        Ok(()) => q.forget(&uid),
                        Err(e) => {
                            tracing::debug!(uid = %uid, error = %e, "garbage collector: retrying");
                            q.add_rate_limited(uid.clone());
                        }
                    }
                    q.done(&uid);
                }
            });
        }
        let (w, q, c) = (workers, orphan_queue.clone(), cancel.clone());
        tracker.spawn(async move {
            while let Some(uid) = q.get(&c).await {
                match w.attempt_to_orphan(&uid).await {
                    Ok(()) => q.forget(&uid),
                    Err(e) => {
                        tracing::debug!(uid = %uid, error = %e, "orphaning: retrying");
                        q.add_rate_limited(uid.clone());
                    }
                }
                q.done(&uid);
            }
        });
        let mut tick = tokio::time::interval(config.catalog_refresh);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => refresh(&mut monitors),
                () = cancel.cancelled() => break,
            }
        }
    }
    cancel.cancelled().await;
    delete_queue.shut_down();
    orphan_queue.shut_down();
    drop(changes_tx);
    tracker.close();
    tracker.wait().await;
}

/// Watches one resource into the graph builder.
async fn monitor(
    client: Arc<dyn Client>,
    entry: CatalogEntry,
    changes: mpsc::Sender<Change>,
    cancel: CancellationToken,
) {
    let events = watcher::watcher(client, entry.at(None), watcher::Config::default());
    tokio::pin!(events);
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            () = cancel.cancelled() => return,
        };
        let Some(ev) = ev else { return };
        let sent = tokio::select! {
            r = changes.send(Change::Watch(entry.clone(), ev)) => r.is_ok(),
            () = cancel.cancelled() => false,
        };
        if !sent {
            return;
        }
    }
}

/// The graph builder: the only writer of the graph.
async fn build(
    graph: Arc<Mutex<Graph>>,
    mut changes: mpsc::Receiver<Change>,
    delete_queue: WorkQueue<String>,
    orphan_queue: WorkQueue<String>,
    synced: watch::Sender<HashSet<KindKey>>,
    cancel: CancellationToken,
) {
    loop {
        let change = tokio::select! {
            c = changes.recv() => c,
            () = cancel.cancelled() => return,
        };
        let Some(change) = change else { return };
        if let Change::Watch(e, Event::InitDone) = &change {
            let k = kind_key(e);
            synced.send_if_modified(|s| s.insert(k));
        }
        let work = graph
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .process(change);
        for w in work {
            match w {
                Work::AttemptToDelete(uid) => delete_queue.add(uid),
                Work::AttemptToOrphan(uid) => orphan_queue.add(uid),
            }
        }
    }
}

//! The pod feed: a list/watch of the pods bound to this node (`spec.nodeName=NAME`, the only
//! pods the Node authorizer lets a kubelet see) and the static pods of the manifests directory
//! ([`crate::pod::static_pods`]), fanned out to one [`PodWorker`] per pod UID. Mirror pods are
//! not run (their static pod is); they are kept in step with the static pods here. After the
//! first complete list, pod directories of pods that no longer exist are cleaned up (their
//! containers killed), which is how a kubelet that was down catches up on deletions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use k1s_api::client::ResourceRef;
use k1s_runtime::watcher::{self, Event};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Deps;
use crate::eviction::Eviction;
use crate::pod::static_pods::{self, Mirror};
use crate::pod::worker::PodWorker;

/// On the copy of a static pod handed to its worker: the UID of its mirror pod, where its
/// status goes (a new mirror pod makes the worker report again). Never sent to the API.
pub const MIRROR_UID_ANNOTATION: &str = "k1s.io/mirror-uid";

struct Worker {
    tx: watch::Sender<Option<Arc<Pod>>>,
    /// Evictions from the eviction manager.
    evict: mpsc::UnboundedSender<Eviction>,
}

fn decode(v: &Value) -> Option<(String, Arc<Pod>)> {
    let pod: Pod = serde_json::from_value(v.clone()).ok()?;
    let uid = pod.metadata.uid.clone()?;
    Some((uid, Arc::new(pod)))
}

/// Static pods and their mirror pods, as the feed sees them.
#[derive(Default)]
struct Statics {
    /// By UID (the manifest hash).
    pods: BTreeMap<String, Arc<Pod>>,
    /// Mirror pods in the API, by namespace/name.
    mirrors: BTreeMap<String, Mirror>,
    /// The mirror pods of a relist under way.
    relisting: Option<BTreeMap<String, Mirror>>,
    /// Whether `mirrors` is complete (after the first list).
    listed: bool,
    /// The mirror UID each static pod's worker was last given.
    fed: HashMap<String, Option<String>>,
}

impl Statics {
    fn mirror_uid(&self, pod: &Pod) -> Option<String> {
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        self.mirrors
            .get(&key)
            .filter(|m| pod.metadata.uid.as_deref() == Some(m.hash.as_str()) && !m.deleting)
            .map(|m| m.uid.clone())
    }

    /// Hands each static pod to its worker when it is new or its mirror pod changed.
    fn feed_all(
        &mut self,
        deps: &Arc<Deps>,
        workers: &mut HashMap<String, Worker>,
        life: &Lifetime,
    ) {
        for (uid, pod) in &self.pods {
            let mirror = self.mirror_uid(pod);
            if self.fed.get(uid) == Some(&mirror) && workers.contains_key(uid) {
                continue;
            }
            let mut copy = (**pod).clone();
            if let Some(m) = &mirror {
                copy.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(MIRROR_UID_ANNOTATION.into(), m.clone());
            }
            self.fed.insert(uid.clone(), mirror);
            feed(deps, workers, uid.clone(), Some(Arc::new(copy)), life);
        }
    }

    /// Reads the manifests again: the workers of removed (or edited) static pods are told to
    /// delete them gracefully; new ones start with [`Statics::feed_all`].
    fn rescan(&mut self, deps: &Arc<Deps>, workers: &mut HashMap<String, Worker>) {
        let Some(dir) = deps.config.static_pod_path.as_deref() else {
            return;
        };
        let now = static_pods::scan(dir, &deps.config.node_name);
        for (uid, pod) in &self.pods {
            if !now.contains_key(uid) {
                tracing::info!(pod = %crate::pod::worker::pod_name(pod), "static pod removed");
                if let Some(w) = workers.get(uid) {
                    w.tx.send_replace(Some(deleting(pod)));
                }
                self.fed.remove(uid);
            }
        }
        self.pods = now;
    }

    /// After a change: every static pod's worker up to date, then the mirror pods.
    async fn settle(
        &mut self,
        deps: &Arc<Deps>,
        workers: &mut HashMap<String, Worker>,
        life: &Lifetime,
    ) {
        self.feed_all(deps, workers, life);
        self.reconcile(deps).await;
    }

    /// Brings the API's mirror pods in step with the static pods.
    async fn reconcile(&mut self, deps: &Arc<Deps>) {
        if !self.listed {
            return;
        }
        let plan = static_pods::plan(&self.pods, &self.mirrors);
        if plan != static_pods::Plan::default() {
            static_pods::apply(
                deps.client.as_ref(),
                &deps.config.node_name,
                &self.pods,
                &plan,
            )
            .await;
        }
    }

    /// Records a mirror pod event (`gone`: deleted); false if `v` is not a mirror pod.
    fn on_mirror(&mut self, v: &Value, gone: bool) -> bool {
        if !static_pods::is_mirror(v) {
            return false;
        }
        if let Some((key, m)) = Mirror::of(v) {
            let map = self.relisting.as_mut().unwrap_or(&mut self.mirrors);
            if gone {
                map.remove(&key);
            } else {
                map.insert(key, m);
            }
        }
        true
    }
}

/// A static pod whose manifest is gone, as a pod being deleted with its grace period.
fn deleting(pod: &Pod) -> Arc<Pod> {
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(crate::pod::worker::DEFAULT_GRACE_SECONDS);
    let mut v = serde_json::to_value(pod).unwrap_or(Value::Null);
    v["metadata"]["deletionTimestamp"] = serde_json::json!(k1s_api::events::now_rfc3339());
    v["metadata"]["deletionGracePeriodSeconds"] = serde_json::json!(grace);
    Arc::new(serde_json::from_value(v).unwrap_or_else(|_| pod.clone()))
}

/// What the pod workers' lifetime hangs on: the kubelet's token (each worker gets a child)
/// and the tracker the kubelet's shutdown waits on.
struct Lifetime {
    cancel: CancellationToken,
    workers: TaskTracker,
}

/// Feeds the workers until `cancel` fires; hands each eviction to its pod's worker. Returns
/// once every pod worker has returned too.
pub async fn run(deps: Arc<Deps>, evictions: mpsc::Receiver<Eviction>, cancel: CancellationToken) {
    let life = Lifetime {
        cancel,
        workers: TaskTracker::new(),
    };
    feed_workers(deps, evictions, &life).await;
    // Workers return on `cancel` or once the feed (dropped now) is gone; one in the middle of
    // stopping a pod finishes that first.
    life.workers.close();
    life.workers.wait().await;
}

async fn feed_workers(deps: Arc<Deps>, mut evictions: mpsc::Receiver<Eviction>, life: &Lifetime) {
    let cancel = &life.cancel;
    let r = ResourceRef::new("", "v1", "pods", None);
    let cfg =
        watcher::Config::default().fields(&format!("spec.nodeName={}", deps.config.node_name));
    let stream = watcher::watcher(deps.client.clone(), r, cfg);
    tokio::pin!(stream);
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut listing: Option<Vec<String>> = None;
    let mut cleaned = false;
    // Static pods are read before the first API list, so that their containers are never
    // taken for orphans.
    let mut statics = Statics::default();
    statics.rescan(&deps, &mut workers);
    statics.feed_all(&deps, &mut workers, life);
    let mut check = tokio::time::interval(deps.config.file_check_frequency);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ev = tokio::select! {
            _ = cancel.cancelled() => return,
            _ = check.tick() => {
                statics.rescan(&deps, &mut workers);
                statics.settle(&deps, &mut workers, life).await;
                workers.retain(|_, w| !w.tx.is_closed());
                continue;
            }
            Some(e) = evictions.recv() => {
                if let Some(w) = workers.get(&e.uid) {
                    let _ = w.evict.send(e);
                }
                continue;
            }
            ev = stream.next() => match ev { Some(ev) => ev, None => return },
        };
        // Mirror pods are never run: they only say what the API shows of static pods.
        let mirror = match &ev {
            Event::Apply(v) => statics.on_mirror(v, false),
            Event::Delete(v) => statics.on_mirror(v, true),
            _ => false,
        };
        if mirror {
            statics.settle(&deps, &mut workers, life).await;
            continue;
        }
        match ev {
            Event::Init => {
                listing = Some(Vec::new());
                statics.relisting = Some(BTreeMap::new());
            }
            Event::InitApply(v) => {
                if statics.on_mirror(&v, false) {
                    continue;
                }
                if let Some((uid, pod)) = decode(&v) {
                    if let Some(l) = listing.as_mut() {
                        l.push(uid.clone());
                    }
                    feed(&deps, &mut workers, uid, Some(pod), life);
                }
            }
            Event::InitDone => {
                let mut seen = listing.take().unwrap_or_default();
                seen.extend(statics.pods.keys().cloned());
                let gone: Vec<String> = workers
                    .keys()
                    .filter(|u| !seen.contains(u))
                    .cloned()
                    .collect();
                for uid in gone {
                    feed(&deps, &mut workers, uid, None, life);
                }
                if !cleaned {
                    cleaned = true;
                    deps.devices.retain(&seen);
                    cleanup_orphans(&deps, &seen).await;
                }
                if let Some(m) = statics.relisting.take() {
                    statics.mirrors = m;
                    statics.listed = true;
                }
                statics.settle(&deps, &mut workers, life).await;
            }
            Event::Apply(v) => {
                if let Some((uid, pod)) = decode(&v) {
                    feed(&deps, &mut workers, uid, Some(pod), life);
                }
            }
            Event::Delete(v) => {
                if let Some((uid, _)) = decode(&v) {
                    feed(&deps, &mut workers, uid, None, life);
                }
            }
        }
        workers.retain(|_, w| !w.tx.is_closed());
    }
}

fn feed(
    deps: &Arc<Deps>,
    workers: &mut HashMap<String, Worker>,
    uid: String,
    pod: Option<Arc<Pod>>,
    life: &Lifetime,
) {
    if let Some(w) = workers.get(&uid) {
        w.tx.send_replace(pod);
        return;
    }
    let Some(pod) = pod else { return };
    let (tx, rx) = watch::channel(Some(pod));
    let (evict, evict_rx) = mpsc::unbounded_channel();
    let worker = PodWorker::new(
        deps.clone(),
        uid.clone(),
        rx,
        evict_rx,
        life.cancel.child_token(),
    );
    life.workers.spawn(worker.run());
    workers.insert(uid, Worker { tx, evict });
}

/// Kills the containers of pods this node no longer has and removes their sandboxes.
async fn cleanup_orphans(deps: &Arc<Deps>, live: &[String]) {
    let (pods_dir, live) = (deps.config.pods_dir(), live.to_vec());
    // The orphans' UIDs with their container bundles, read off the async threads.
    let orphans = crate::pod::blocking::run(move || {
        let Ok(dir) = std::fs::read_dir(pods_dir) else {
            return Vec::new();
        };
        let entries = dir.flatten();
        let orphans = entries.filter_map(|entry| {
            let uid = entry.file_name().to_string_lossy().to_string();
            if live.contains(&uid) {
                return None;
            }
            let containers = std::fs::read_dir(entry.path().join("containers"));
            let bundles: Vec<std::path::PathBuf> = (containers.into_iter().flatten().flatten())
                .flat_map(|c| std::fs::read_dir(c.path()).into_iter().flatten().flatten())
                .map(|attempt| attempt.path())
                .collect();
            Some((uid, bundles))
        });
        orphans.collect::<Vec<_>>()
    })
    .await;
    for (uid, bundles) in orphans {
        tracing::info!(pod_uid = %uid, "cleaning up a pod that no longer exists");
        for bundle in bundles {
            if deps.runtime.state(&bundle).is_some() {
                let _ = deps.runtime.kill(&bundle, libc::SIGKILL);
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    deps.runtime.wait(&bundle),
                )
                .await;
            }
        }
        crate::pod::sandbox::Sandbox::destroy_by_uid(deps, &uid).await;
    }
}

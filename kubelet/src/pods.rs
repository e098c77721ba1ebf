//! The pod feed: a list/watch of the pods bound to this node (`spec.nodeName=NAME`, the only
//! pods the Node authorizer lets a kubelet see), fanned out to one [`PodWorker`] per pod UID.
//! After the first complete list, pod directories of pods that no longer exist are cleaned up
//! (their containers killed), which is how a kubelet that was down catches up on deletions.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k1s_api::client::ResourceRef;
use k1s_controllers::runtime::watcher::{self, Event};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Deps;
use crate::pod_worker::PodWorker;

struct Worker {
    tx: watch::Sender<Option<Arc<Pod>>>,
}

fn decode(v: &Value) -> Option<(String, Arc<Pod>)> {
    let pod: Pod = serde_json::from_value(v.clone()).ok()?;
    let uid = pod.metadata.uid.clone()?;
    Some((uid, Arc::new(pod)))
}

/// Feeds the workers until `cancel` fires.
pub async fn run(deps: Arc<Deps>, cancel: CancellationToken) {
    let r = ResourceRef::new("", "v1", "pods", None);
    let cfg =
        watcher::Config::default().fields(&format!("spec.nodeName={}", deps.config.node_name));
    let stream = watcher::watcher(deps.client.clone(), r, cfg);
    tokio::pin!(stream);
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut listing: Option<Vec<String>> = None;
    let mut cleaned = false;
    loop {
        let ev = tokio::select! {
            _ = cancel.cancelled() => return,
            ev = stream.next() => match ev { Some(ev) => ev, None => return },
        };
        match ev {
            Event::Init => listing = Some(Vec::new()),
            Event::InitApply(v) => {
                if let Some((uid, pod)) = decode(&v) {
                    if let Some(l) = listing.as_mut() {
                        l.push(uid.clone());
                    }
                    feed(&deps, &mut workers, uid, Some(pod), &cancel);
                }
            }
            Event::InitDone => {
                let seen = listing.take().unwrap_or_default();
                let gone: Vec<String> = workers
                    .keys()
                    .filter(|u| !seen.contains(u))
                    .cloned()
                    .collect();
                for uid in gone {
                    feed(&deps, &mut workers, uid, None, &cancel);
                }
                if !cleaned {
                    cleaned = true;
                    deps.devices.retain(&seen);
                    cleanup_orphans(&deps, &seen).await;
                }
            }
            Event::Apply(v) => {
                if let Some((uid, pod)) = decode(&v) {
                    feed(&deps, &mut workers, uid, Some(pod), &cancel);
                }
            }
            Event::Delete(v) => {
                if let Some((uid, _)) = decode(&v) {
                    feed(&deps, &mut workers, uid, None, &cancel);
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
    cancel: &CancellationToken,
) {
    if let Some(w) = workers.get(&uid) {
        w.tx.send_replace(pod);
        return;
    }
    let Some(pod) = pod else { return };
    let (tx, rx) = watch::channel(Some(pod));
    let worker = PodWorker::new(deps.clone(), uid.clone(), rx, cancel.child_token());
    tokio::spawn(worker.run());
    workers.insert(uid, Worker { tx });
}

/// Kills the containers of pods this node no longer has and removes their sandboxes.
async fn cleanup_orphans(deps: &Arc<Deps>, live: &[String]) {
    let Ok(dir) = std::fs::read_dir(deps.config.pods_dir()) else {
        return;
    };
    for entry in dir.flatten() {
        let uid = entry.file_name().to_string_lossy().to_string();
        if live.contains(&uid) {
            continue;
        }
        tracing::info!(pod_uid = %uid, "cleaning up a pod that no longer exists");
        let containers = entry.path().join("containers");
        for c in std::fs::read_dir(&containers)
            .into_iter()
            .flatten()
            .flatten()
        {
            for attempt in std::fs::read_dir(c.path()).into_iter().flatten().flatten() {
                let bundle = attempt.path();
                if deps.runtime.state(&bundle).is_some() {
                    let _ = deps.runtime.kill(&bundle, libc::SIGKILL);
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        deps.runtime.wait(&bundle),
                    )
                    .await;
                }
            }
        }
        crate::sandbox::Sandbox::destroy_by_uid(deps, &uid).await;
    }
}

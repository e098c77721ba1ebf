//! The control-plane components `k1s server` runs in process on the in-process client: the
//! controller manager (under leader election, as upstream's) and the scheduler, fed by
//! watches of what it reads.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k1s_api::client::{Client, ResourceRef};
use k1s_api::trimmed;
use k1s_apiserver::registry::Registry;
use k1s_controllers::runtime::watcher::{self, Event};
use k1s_controllers::{CatalogEntry, ResourceCatalog};
use k1s_scheduler::framework::interface::{ActionType, EventResource};
use k1s_scheduler::framework::listers::StaticLister;
use k1s_scheduler::{Change, Scheduler};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The served resources, as the controllers need them (the client has no discovery).
struct RegistryCatalog(Arc<Registry>);

impl ResourceCatalog for RegistryCatalog {
    fn resources(&self) -> Vec<CatalogEntry> {
        self.0
            .collectable()
            .iter()
            .map(|r| CatalogEntry::new(&r.group, &r.version, &r.plural, &r.kind, r.namespaced))
            .collect()
    }
}

/// Runs the controllers while this server holds the controller-manager Lease; after losing
/// it, campaigns again.
pub async fn controllers(
    client: Arc<dyn Client>,
    registry: Arc<Registry>,
    ca_pem: String,
    identity: String,
    options: k1s_controllers::Options,
    cancel: CancellationToken,
) {
    let catalog: Arc<dyn ResourceCatalog> = Arc::new(RegistryCatalog(registry));
    while !cancel.is_cancelled() {
        let result = k1s_controllers::run_elected_with(
            client.clone(),
            catalog.clone(),
            ca_pem.clone(),
            &identity,
            options.clone(),
            cancel.clone(),
        )
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "controller manager lost its lease; campaigning again");
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
    }
}

/// Feeds one watched kind to `apply` as scheduler changes; a relist reports what vanished
/// meanwhile as deleted.
async fn feed<K, F>(
    client: Arc<dyn Client>,
    r: ResourceRef,
    mut apply: F,
    cancel: CancellationToken,
) where
    K: DeserializeOwned + Send + 'static,
    F: FnMut(Change<K>) + Send,
{
    // The last state of each object, kept as the watch delivered it (a shared pointer):
    // decoded again only for what a relist finds gone.
    let mut known: HashMap<String, Arc<Value>> = HashMap::new();
    let mut listed: HashSet<String> = HashSet::new();
    // As kube-scheduler's informers, without managedFields: the scheduler never reads them.
    let decode = |obj: &Value| match trimmed::decode_without_managed_fields::<K>(obj) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(
                namespace = obj["metadata"]["namespace"].as_str().unwrap_or(""),
                name = obj["metadata"]["name"].as_str().unwrap_or(""),
                error = %e,
                "scheduler: cannot decode a watched object"
            );
            None
        }
    };
    let stream = watcher::watcher(client, r, watcher::Config::default());
    futures::pin_mut!(stream);
    loop {
        let ev = tokio::select! {
            () = cancel.cancelled() => return,
            ev = stream.next() => match ev { Some(ev) => ev, None => return },
        };
        let (obj, deleted) = match ev {
            Event::Init => {
                listed.clear();
                continue;
            }
            Event::InitDone => {
                let gone: Vec<String> = known
                    .keys()
                    .filter(|k| !listed.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    if let Some(o) = known.remove(&k).and_then(|o| decode(&o)) {
                        apply(Change::Deleted(o));
                    }
                }
                continue;
            }
            Event::InitApply(o) | Event::Apply(o) => (o, false),
            Event::Delete(o) => (o, true),
        };
        let Some(typed) = decode(&obj) else {
            continue;
        };
        let key = format!(
            "{}/{}",
            obj["metadata"]["namespace"].as_str().unwrap_or(""),
            obj["metadata"]["name"].as_str().unwrap_or("")
        );
        listed.insert(key.clone());
        if deleted {
            known.remove(&key);
            apply(Change::Deleted(typed));
        } else if known.insert(key, obj).is_some() {
            apply(Change::Modified(typed));
        } else {
            apply(Change::Added(typed));
        }
    }
}

fn action<T>(c: &Change<T>) -> ActionType {
    match c {
        Change::Added(_) => ActionType::Add,
        Change::Modified(_) => ActionType::Update,
        Change::Deleted(_) => ActionType::Delete,
    }
}

/// Feeds a volume-related kind into the lister, then tells the scheduler.
fn volume_feed<K>(
    tasks: &TaskTracker,
    client: &Arc<dyn Client>,
    sched: &Arc<Scheduler>,
    resource: EventResource,
    update: impl Fn(Change<K>) + Send + 'static,
    cancel: &CancellationToken,
) where
    K: DeserializeOwned + Clone + Send + k8s_openapi::Resource + 'static,
{
    let sched = sched.clone();
    tasks.spawn(feed::<K, _>(
        client.clone(),
        ResourceRef::of::<K>(None),
        move |c| {
            let a = action(&c);
            update(c);
            sched.on_volume_event(resource, a);
        },
        cancel.clone(),
    ));
}

/// Runs the default scheduler until `cancel`.
pub async fn scheduler(
    client: Arc<dyn Client>,
    config: k1s_scheduler::Config,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let lister = Arc::new(StaticLister::new());
    let sched = Scheduler::new(client.clone(), config, lister.clone())?;
    let tasks = TaskTracker::new();
    let s = sched.clone();
    tasks.spawn(feed::<Node, _>(
        client.clone(),
        ResourceRef::of::<Node>(None),
        move |c| s.on_node(c),
        cancel.clone(),
    ));
    let s = sched.clone();
    tasks.spawn(feed::<Pod, _>(
        client.clone(),
        ResourceRef::of::<Pod>(None),
        move |c| s.on_pod(c),
        cancel.clone(),
    ));
    let s = sched.clone();
    tasks.spawn(feed::<Namespace, _>(
        client.clone(),
        ResourceRef::of::<Namespace>(None),
        move |c| s.on_namespace(c),
        cancel.clone(),
    ));
    let s = sched.clone();
    tasks.spawn(feed::<PodDisruptionBudget, _>(
        client.clone(),
        ResourceRef::of::<PodDisruptionBudget>(None),
        move |c| s.on_pdb(c),
        cancel.clone(),
    ));
    let l = lister.clone();
    volume_feed::<PersistentVolumeClaim>(
        &tasks,
        &client,
        &sched,
        EventResource::PersistentVolumeClaim,
        move |c| match c {
            Change::Added(o) | Change::Modified(o) => l.upsert_pvc(o),
            Change::Deleted(o) => l.remove_pvc(
                o.metadata.namespace.as_deref().unwrap_or(""),
                o.metadata.name.as_deref().unwrap_or(""),
            ),
        },
        &cancel,
    );
    let l = lister.clone();
    volume_feed::<PersistentVolume>(
        &tasks,
        &client,
        &sched,
        EventResource::PersistentVolume,
        move |c| match c {
            Change::Added(o) | Change::Modified(o) => l.upsert_pv(o),
            Change::Deleted(o) => l.remove_pv(o.metadata.name.as_deref().unwrap_or("")),
        },
        &cancel,
    );
    let l = lister.clone();
    volume_feed::<StorageClass>(
        &tasks,
        &client,
        &sched,
        EventResource::StorageClass,
        move |c| match c {
            Change::Added(o) | Change::Modified(o) => l.upsert_storage_class(o),
            Change::Deleted(o) => l.remove_storage_class(o.metadata.name.as_deref().unwrap_or("")),
        },
        &cancel,
    );
    let l = lister.clone();
    volume_feed::<CSINode>(
        &tasks,
        &client,
        &sched,
        EventResource::CsiNode,
        move |c| match c {
            Change::Added(o) | Change::Modified(o) => l.upsert_csi_node(o),
            Change::Deleted(o) => l.remove_csi_node(o.metadata.name.as_deref().unwrap_or("")),
        },
        &cancel,
    );
    tasks.close();
    sched.run(cancel).await;
    tasks.wait().await;
    Ok(())
}

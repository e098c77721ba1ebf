//! The scheduler's informers: what kube-scheduler watches (Nodes, Pods, Namespaces,
//! PodDisruptionBudgets, and for volume binding PVCs, PVs, StorageClasses, CSINodes), fed to
//! [`Scheduler`]'s `on_*` methods as typed changes by the shared runtime's
//! [`k1s_runtime::reflector`], and [`run`], which runs them with the scheduler until cancelled.

use std::sync::Arc;

use k1s_api::client::{Client, ResourceRef};
use k1s_runtime::reflector;
use k1s_runtime::watcher;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::framework::interface::{ActionType, EventResource};
use crate::framework::listers::StaticLister;
use crate::scheduler::{Change, Scheduler, SchedulerError};

/// Feeds one watched kind to `apply` as scheduler changes until `cancel`.
fn feed<K, F>(tasks: &TaskTracker, client: &Arc<dyn Client>, apply: F, cancel: &CancellationToken)
where
    K: DeserializeOwned + k8s_openapi::Resource + Send + 'static,
    F: FnMut(Change<K>) + Send + 'static,
{
    tasks.spawn(reflector::run::<K, _>(
        client.clone(),
        ResourceRef::of::<K>(None),
        watcher::Config::default(),
        apply,
        || {},
        cancel.clone(),
    ));
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
    K: DeserializeOwned + Send + k8s_openapi::Resource + 'static,
{
    let sched = sched.clone();
    feed::<K, _>(
        tasks,
        client,
        move |c| {
            let a = action(&c);
            update(c);
            sched.on_volume_event(resource, a);
        },
        cancel,
    );
}

/// Runs the default scheduler with its informers until `cancel`; returns once every informer
/// has stopped.
pub async fn run(
    client: Arc<dyn Client>,
    config: crate::Config,
    cancel: CancellationToken,
) -> Result<(), SchedulerError> {
    let lister = Arc::new(StaticLister::new());
    let sched = Scheduler::new(client.clone(), config, lister.clone())?;
    let tasks = TaskTracker::new();
    let s = sched.clone();
    feed::<Node, _>(&tasks, &client, move |c| s.on_node(c), &cancel);
    let s = sched.clone();
    feed::<Pod, _>(&tasks, &client, move |c| s.on_pod(c), &cancel);
    let s = sched.clone();
    feed::<Namespace, _>(&tasks, &client, move |c| s.on_namespace(c), &cancel);
    let s = sched.clone();
    feed::<PodDisruptionBudget, _>(&tasks, &client, move |c| s.on_pdb(c), &cancel);
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

//! The PersistentVolume controller (upstream's `pkg/controller/volume/persistentvolume`):
//! binds claims to volumes and drives both through their phases.
//!
//! - [`claim`]: the claim sync — static binding to the smallest matching volume (the matching
//!   itself is [`k1s_api::volume`], shared with the scheduler), `spec.volumeName` and
//!   `claimRef` pre-binding, `WaitForFirstConsumer`, handing a claim to its class's
//!   provisioner, and `Lost` claims.
//! - [`volume`]: the volume sync — `Available`, `Bound`, `Released`, and the reclaim policy
//!   (`Retain`, `Delete` through the volume's provisioner, `Recycle` unsupported).
//! - [`bind`]: the writes of a binding (PV `claimRef`, PVC `volumeName`, their annotations and
//!   phases), each through the status subresource where the field lives there.
//!
//! Two controllers run, as upstream's two queues: one keyed by claims, one by volumes, each
//! resynced every 15 s and woken by the other kind's changes. Each has one worker, so two
//! claims never race for the same volume inside this process; a stale cache costs a 409 and a
//! retry, never a double binding (every write is a PUT with the object's resourceVersion).
//!
//! It never deletes volumes' storage: that is the provisioner's ([`crate::provisioner`]).

pub mod bind;
pub mod claim;
pub mod volume;

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, ResourceRef};
use k1s_api::events::{self, Involved, Source};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::queue::WorkQueue;
use k1s_runtime::store::IndexFn;
use k1s_runtime::{Controller, Store, watcher};

/// Upstream's `--pvclaimbinder-sync-period`.
pub const RESYNC: Duration = Duration::from_secs(15);

/// The event source of this controller.
pub const COMPONENT: &str = "persistentvolume-controller";

/// The index of the volume cache by `claimRef` (`namespace/name`).
const CLAIM_REF_INDEX: &str = "claimRef";

#[derive(Debug, thiserror::Error)]
pub enum PvError {
    #[error("{key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
    #[error("{key}: cannot decode the object: {message}")]
    Decode { key: String, message: String },
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

pub fn pvcs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", ns)
}

pub fn pvs() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumes", None)
}

pub fn storage_classes() -> ResourceRef {
    ResourceRef::new("storage.k8s.io", "v1", "storageclasses", None)
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", None)
}

/// A cached PVC as the typed object the matching functions take.
pub fn typed_claim(v: &Value) -> Result<PersistentVolumeClaim, PvError> {
    serde_json::from_value(v.clone()).map_err(|e| PvError::Decode {
        key: format!("persistentvolumeclaim {}", key::name(v)),
        message: e.to_string(),
    })
}

/// A cached PV as the typed object the matching functions take.
pub fn typed_volume(v: &Value) -> Result<PersistentVolume, PvError> {
    serde_json::from_value(v.clone()).map_err(|e| PvError::Decode {
        key: format!("persistentvolume {}", key::name(v)),
        message: e.to_string(),
    })
}

/// `namespace/name` of the claim a PV's `claimRef` names, if any.
pub fn claim_ref_key(pv: &Value) -> Option<ObjectKey> {
    let r = &pv["spec"]["claimRef"];
    let name = r["name"].as_str().filter(|n| !n.is_empty())?;
    Some(ObjectKey::new(r["namespace"].as_str(), name))
}

/// Whether an annotation is present on an object.
pub fn has_annotation(obj: &Value, key: &str) -> bool {
    obj["metadata"]["annotations"].get(key).is_some()
}

/// Records an event about a PV or PVC (`kind`) from `component`.
pub async fn record(
    client: &dyn Client,
    component: &str,
    kind: &str,
    obj: &Value,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let about = Involved {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: key::namespace(obj).unwrap_or("").into(),
        name: key::name(obj).into(),
        uid: key::uid(obj).into(),
        resource_version: key::resource_version(obj).unwrap_or("").into(),
        field_path: None,
    };
    let source = Source {
        component: component.into(),
        host: None,
    };
    events::record(client, &source, &about, type_, reason, "", message).await;
}

/// The caches both syncs read.
#[derive(Clone)]
pub struct Caches {
    pub claims: Store,
    pub volumes: Store,
    pub classes: Store,
    pub pods: Store,
}

fn claim_ref_index() -> (String, IndexFn) {
    (
        CLAIM_REF_INDEX.into(),
        Arc::new(|pv: &Value| {
            claim_ref_key(pv)
                .map(|k| vec![k.to_string()])
                .unwrap_or_default()
        }),
    )
}

/// Every claim not bound yet: woken when a free volume or a class appears or changes, since
/// it may now match (upstream waits for the periodic resync instead).
fn unbound_claims(claims: &Store) -> Vec<ObjectKey> {
    claims
        .list()
        .iter()
        .filter(|c| c["spec"]["volumeName"].as_str().unwrap_or("").is_empty())
        .filter_map(|c| ObjectKey::of(c))
        .collect()
}

/// Runs the PV controller (claim and volume syncs) until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    // The claim side: primary PVCs; volumes, classes and pods wake claims.
    let mut claims_ctrl = Controller::new(
        "persistentvolume-claims",
        client.clone(),
        pvcs(None),
        watcher::Config::default(),
    )
    .resync(RESYNC);
    let claims = claims_ctrl.store();
    let for_volumes = claims.clone();
    let volumes_c = claims_ctrl.watches(
        pvs(),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |pv: &Value, _| {
            // A free or merely pre-bound volume may serve any unbound claim; a bound one
            // concerns only its claim.
            let free = pv["spec"]["claimRef"]["uid"]
                .as_str()
                .unwrap_or("")
                .is_empty();
            let mut keys = if free {
                unbound_claims(&for_volumes)
            } else {
                Vec::new()
            };
            keys.extend(claim_ref_key(pv));
            keys
        }),
    );
    let for_classes = claims.clone();
    let classes_c = claims_ctrl.watches(
        storage_classes(),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |_, _| unbound_claims(&for_classes)),
    );
    let pods_c = claims_ctrl.watches(
        pods(),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|pod: &Value, _| {
            let ns = key::namespace(pod);
            crate::volume_protection::claims_of(pod)
                .iter()
                .map(|c| ObjectKey::new(ns, c))
                .collect()
        }),
    );
    let claim_queue = claims_ctrl.queue();

    // The volume side: primary PVs; a claim wakes the volumes that point at it.
    let mut volumes_ctrl = Controller::with_indexes(
        "persistentvolume-volumes",
        client.clone(),
        pvs(),
        watcher::Config::default(),
        vec![claim_ref_index()],
    )
    .resync(RESYNC);
    let volumes = volumes_ctrl.store();
    let for_claims = volumes.clone();
    let claims_v = volumes_ctrl.watches(
        pvcs(None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |pvc: &Value, _| {
            let Some(k) = ObjectKey::of(pvc) else {
                return Vec::new();
            };
            let mut keys: Vec<ObjectKey> = for_claims
                .by_index(CLAIM_REF_INDEX, &k.to_string())
                .iter()
                .filter_map(|pv| ObjectKey::of(pv))
                .collect();
            if let Some(v) = pvc["spec"]["volumeName"].as_str().filter(|v| !v.is_empty()) {
                keys.push(ObjectKey::cluster(v));
            }
            keys
        }),
    );

    let claim_sync = Arc::new(claim::ClaimSync {
        client: client.clone(),
        caches: Caches {
            claims,
            volumes: volumes_c,
            classes: classes_c,
            pods: pods_c,
        },
    });
    let volume_sync = Arc::new(volume::VolumeSync {
        client,
        volumes,
        claims: claims_v,
        claim_queue,
    });
    let tracker = TaskTracker::new();
    tracker.spawn(claims_ctrl.run(claim_sync, cancel.clone()));
    tracker.spawn(volumes_ctrl.run(volume_sync, cancel));
    tracker.close();
    tracker.wait().await;
}

/// A queue handle the volume sync uses to wake a claim (upstream's `claimQueue.Add`).
pub type ClaimQueue = WorkQueue<ObjectKey>;

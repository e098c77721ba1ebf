//! The attach/detach controller's CSI half: which VolumeAttachments should exist.
//!
//! Desired state: for every pod bound to a node and not terminal, every PVC volume bound to
//! a CSI PV whose driver requires attaching. Actual state: the VolumeAttachments whose
//! `spec.source.persistentVolumeName` is set. Missing ones are created (named as upstream
//! names them, see `k1s_api::volume::attachment_name`); ones no pod needs any more are
//! deleted. The whole picture is recomputed on a short period and on pod, PV and
//! attachment changes: it is small, and a full recompute cannot drift.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::attachments;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// The single key the controller reconciles: the whole cluster.
const ALL: &str = "all";

#[derive(Debug, thiserror::Error)]
#[error("attach/detach: {0}")]
pub struct AttachError(#[from] ClientError);

/// Runs the controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let all: k1s_runtime::controller::Mapper =
        Arc::new(|_: &Value, _| vec![ObjectKey::cluster(ALL)]);
    let mut ctrl = Controller::new(
        "attachdetach",
        client.clone(),
        attachments(),
        watcher::Config::default(),
    )
    .resync(Duration::from_secs(30));
    let vas = ctrl.store();
    let pods = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        all.clone(),
    );
    let pvcs = ctrl.watches(
        ResourceRef::new("", "v1", "persistentvolumeclaims", None),
        watcher::Config::default(),
        Vec::new(),
        all.clone(),
    );
    let pvs = ctrl.watches(
        ResourceRef::new("", "v1", "persistentvolumes", None),
        watcher::Config::default(),
        Vec::new(),
        all.clone(),
    );
    let drivers = ctrl.watches(
        ResourceRef::new("storage.k8s.io", "v1", "csidrivers", None),
        watcher::Config::default(),
        Vec::new(),
        all,
    );
    let reconciler = Arc::new(Desired {
        client,
        vas,
        pods,
        pvcs,
        pvs,
        drivers,
    });
    ctrl.run(reconciler, cancel).await;
}

struct Desired {
    client: Arc<dyn Client>,
    vas: Store,
    pods: Store,
    pvcs: Store,
    pvs: Store,
    drivers: Store,
}

/// Whether `driver` needs attaching: its CSIDriver's `attachRequired`, true when the object
/// or the field is missing.
fn attach_required(drivers: &Store, driver: &str) -> bool {
    drivers
        .get(&ObjectKey::cluster(driver))
        .is_none_or(|d| d["spec"]["attachRequired"].as_bool().unwrap_or(true))
}

/// A VolumeAttachment to have: (name, driver, node, pv).
type Wanted = BTreeMap<String, (String, String, String)>;

impl Desired {
    fn wanted(&self) -> Wanted {
        let mut out = Wanted::new();
        for pod in self.pods.list() {
            let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
            let phase = pod["status"]["phase"].as_str().unwrap_or("");
            if node.is_empty() || phase == "Succeeded" || phase == "Failed" {
                continue;
            }
            let ns = key::namespace(&pod).unwrap_or("");
            for claim in crate::volume_protection::claims_of(&pod) {
                let Some(pvc) = self.pvcs.get(&ObjectKey::new(Some(ns), &claim)) else {
                    continue;
                };
                let Some(volume) = pvc["spec"]["volumeName"].as_str().filter(|v| !v.is_empty())
                else {
                    continue;
                };
                let Some(pv) = self.pvs.get(&ObjectKey::cluster(volume)) else {
                    continue;
                };
                let csi = &pv["spec"]["csi"];
                let (Some(driver), Some(handle)) =
                    (csi["driver"].as_str(), csi["volumeHandle"].as_str())
                else {
                    continue;
                };
                if !attach_required(&self.drivers, driver) {
                    continue;
                }
                out.insert(
                    k1s_api::volume::attachment_name(handle, driver, node),
                    (driver.to_owned(), node.to_owned(), volume.to_owned()),
                );
            }
        }
        out
    }
}

#[async_trait::async_trait]
impl Reconcile for Desired {
    type Error = AttachError;

    async fn reconcile(&self, _: &ObjectKey) -> Result<Action, AttachError> {
        for s in [&self.vas, &self.pods, &self.pvcs, &self.pvs, &self.drivers] {
            if !s.is_ready() {
                return Ok(Action::requeue(Duration::from_secs(1)));
            }
        }
        let wanted = self.wanted();
        let have: BTreeSet<String> = self
            .vas
            .list()
            .iter()
            .filter(|va| va["spec"]["source"]["persistentVolumeName"].is_string())
            .map(|va| key::name(va).to_owned())
            .collect();
        for (name, (driver, node, pv)) in &wanted {
            if have.contains(name) {
                continue;
            }
            let va = json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                "metadata": {"name": name},
                "spec": {"attacher": driver, "nodeName": node,
                    "source": {"persistentVolumeName": pv}},
            });
            match self
                .client
                .create(&attachments(), va, &WriteParams::default())
                .await
            {
                Ok(_) => tracing::info!(attachment = %name, %node, %pv, "attaching volume"),
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(e.into()),
            }
        }
        for name in have.difference(&wanted.keys().cloned().collect()) {
            let deleting = self
                .vas
                .get(&ObjectKey::cluster(name))
                .is_some_and(|va| key::is_deleting(&va));
            if deleting {
                continue;
            }
            match self
                .client
                .delete(&attachments(), name, &Default::default())
                .await
            {
                Ok(_) => tracing::info!(attachment = %name, "detaching volume"),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Action::await_change())
    }
}

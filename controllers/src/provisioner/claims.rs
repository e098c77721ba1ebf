//! Provisioning: claims the PV controller annotated with a registered provisioner's name
//! (`volume.kubernetes.io/storage-provisioner`) get a volume and a PV.
//!
//! A claim is provisioned when it is not bound, not being deleted, its class names the same
//! provisioner, and — for `WaitForFirstConsumer` classes — the scheduler has set
//! `volume.kubernetes.io/selected-node`. If the PV `pvc-<uid>` already exists there is nothing
//! to do (the PV controller binds it). Otherwise: `Provisioning`, `CreateVolume` (named
//! `pvc-<uid>`, so a retry or a restart mid-provision gets the same volume from the driver),
//! the PV, `ProvisioningSucceeded`. Any failure records `ProvisioningFailed` and retries with
//! backoff (1 s doubling to 5 min, external-provisioner's defaults). A selected node that no
//! longer exists is removed from the claim, so the scheduler picks another.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k1s_api::volume::{
    self as shared, ANN_BETA_STORAGE_PROVISIONER, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::request::{self, FSTYPE, PROVISIONER_SECRET, PV_SECRETS, RequestError};
use super::topology::{self, TopologyError};
use super::volume::{self, Provisioned};
use super::{ProvisionRequest, ProvisionerSet, VolumeProvisioner};
use crate::pv::{PvError, pvcs, pvs, record, storage_classes, typed_claim};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::queue::RateLimit;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub use super::DriverError as ProvisioningError;

/// Why the `CreateVolume` request for a claim cannot be prepared (the text goes into the
/// `ProvisioningFailed` event).
#[derive(Debug, thiserror::Error)]
enum PrepareError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Claim(#[from] PvError),
}

/// external-provisioner's `--retry-interval-start` and `--retry-interval-max`.
pub fn retry_limit() -> RateLimit {
    RateLimit {
        base: Duration::from_secs(1),
        max: Duration::from_secs(300),
    }
}

/// Runs the provisioning controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "csi-provisioner",
        client.clone(),
        pvcs(None),
        watcher::Config::default(),
    )
    .workers(4)
    .rate_limit(retry_limit());
    let classes = ctrl.watches(
        storage_classes(),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|_, _| Vec::new()),
    );
    crate::volume_driver::run_with_set(ctrl, set.clone(), cancel, |claims| Provisioning {
        client,
        set,
        claims,
        classes,
    })
    .await;
}

struct Provisioning {
    client: Arc<dyn Client>,
    set: ProvisionerSet,
    claims: Store,
    classes: Store,
}

#[async_trait::async_trait]
impl Reconcile for Provisioning {
    type Error = ProvisioningError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, ProvisioningError> {
        let Some(pvc) = self.claims.get(k) else {
            return Ok(Action::await_change());
        };
        let Some((provisioner, class)) = self.should_provision(&pvc) else {
            return Ok(Action::await_change());
        };
        self.provision(k, &pvc, provisioner.as_ref(), &class)
            .await?;
        Ok(Action::await_change())
    }
}

/// The string map of a JSON object (non-string values skipped).
fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
        .collect()
}

impl Provisioning {
    /// The provisioner and class of a claim this controller should provision now.
    fn should_provision(&self, pvc: &Value) -> Option<(Arc<dyn VolumeProvisioner>, Arc<Value>)> {
        if !pvc["spec"]["volumeName"].as_str().unwrap_or("").is_empty() || key::is_deleting(pvc) {
            return None;
        }
        let ann = &pvc["metadata"]["annotations"];
        let name = ann[ANN_STORAGE_PROVISIONER]
            .as_str()
            .or_else(|| ann[ANN_BETA_STORAGE_PROVISIONER].as_str())?;
        let provisioner = self.set.get(name)?;
        let class_name = shared::claim_class(&typed_claim(pvc).ok()?);
        let class = self.classes.get(&ObjectKey::cluster(&class_name))?;
        if class["provisioner"] != name {
            return None;
        }
        if class["volumeBindingMode"] == "WaitForFirstConsumer"
            && ann[ANN_SELECTED_NODE].as_str().unwrap_or("").is_empty()
        {
            return None;
        }
        Some((provisioner, class))
    }

    async fn provision(
        &self,
        k: &ObjectKey,
        pvc: &Value,
        provisioner: &dyn VolumeProvisioner,
        class: &Value,
    ) -> Result<(), ProvisioningError> {
        let api = |source| ProvisioningError::Api {
            key: format!("persistentvolumeclaim {k}"),
            source,
        };
        let driver = provisioner.name();
        let pv_name = volume::pv_name(pvc);
        match self.client.get(&pvs(), &pv_name).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(api(e)),
        }
        let selected = pvc["metadata"]["annotations"][ANN_SELECTED_NODE]
            .as_str()
            .filter(|n| !n.is_empty());
        if let Some(node) = selected {
            match self
                .client
                .get(&ResourceRef::new("", "v1", "nodes", None), node)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {
                    // Let the scheduler choose again.
                    let patch = Patch::Merge(
                        json!({"metadata": {"annotations": {ANN_SELECTED_NODE: null}}}),
                    );
                    self.client
                        .patch(
                            &pvcs(key::namespace(pvc)),
                            key::name(pvc),
                            &patch,
                            None,
                            &WriteParams::default(),
                        )
                        .await
                        .map_err(api)?;
                    let msg = format!("failed to get target node: node {node:?} not found");
                    self.event(driver, pvc, "Warning", "ProvisioningFailed", &msg)
                        .await;
                    return Ok(());
                }
                Err(e) => return Err(api(e)),
            }
        }
        let msg = format!(
            "External provisioner is provisioning volume for claim \"{}/{}\"",
            key::namespace(pvc).unwrap_or(""),
            key::name(pvc)
        );
        self.event(driver, pvc, "Normal", "Provisioning", &msg)
            .await;
        let class_name = class["metadata"]["name"].as_str().unwrap_or("");
        let fail = |message: String| ProvisioningError::Failed {
            key: format!("persistentvolumeclaim {k}"),
            message: format!(
                "failed to provision volume with StorageClass {class_name:?}: {message}"
            ),
        };
        let prepared = match self.prepare(pvc, class, driver, &pv_name, selected).await {
            Ok(p) => p,
            Err(e) => return Err(self.failed(driver, pvc, fail(e.to_string())).await),
        };
        let (req, fs_type, secret_refs, deletion_secret) = prepared;
        let requested_bytes = req.required_bytes;
        tracing::info!(pvc = %k, volume = %pv_name, driver, "provisioning");
        let created = match provisioner.create(req).await {
            Ok(v) => v,
            Err(e) => return Err(self.failed(driver, pvc, fail(e.to_string())).await),
        };
        let pv = volume::build(
            pvc,
            class,
            &Provisioned {
                driver,
                volume: &created,
                requested_bytes,
                fs_type: &fs_type,
                secret_refs,
                deletion_secret,
            },
        );
        match self
            .client
            .create(&pvs(), pv, &WriteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => {}
            Err(e) => {
                let message = format!(
                    "error creating provisioned PV object for claim {k}: {}",
                    e.message
                );
                return Err(self.failed(driver, pvc, fail(message)).await);
            }
        }
        let msg = format!("Successfully provisioned volume {pv_name}");
        self.event(driver, pvc, "Normal", "ProvisioningSucceeded", &msg)
            .await;
        Ok(())
    }

    /// The request, the file system, the PV's secret references and the deletion secret.
    #[allow(clippy::type_complexity)]
    async fn prepare(
        &self,
        pvc: &Value,
        class: &Value,
        driver: &str,
        pv_name: &str,
        selected: Option<&str>,
    ) -> Result<
        (
            ProvisionRequest,
            String,
            Vec<(&'static str, String, String)>,
            Option<(String, String)>,
        ),
        PrepareError,
    > {
        let client = self.client.as_ref();
        let params = string_map(&class["parameters"]);
        let parameters = request::driver_parameters(&params)?;
        let fs_type = if pvc["spec"]["volumeMode"] == "Block" {
            String::new()
        } else {
            params
                .get(FSTYPE)
                .cloned()
                .unwrap_or_else(|| request::DEFAULT_FSTYPE.to_owned())
        };
        let mount_options: Vec<String> = class["mountOptions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(str::to_owned))
            .collect();
        let capabilities = request::capabilities(pvc, &fs_type, &mount_options)?;
        let typed = typed_claim(pvc)?;
        let required_bytes = shared::storage_request(&typed);
        let limit_bytes = shared::storage_limit(&typed).unwrap_or(0);
        let deletion_secret = request::secret_ref(&params, &PROVISIONER_SECRET, pv_name, pvc)?;
        let secrets = match &deletion_secret {
            Some((ns, name)) => request::secret_data(client, ns, name).await?,
            None => BTreeMap::new(),
        };
        let mut secret_refs = Vec::new();
        for sp in &PV_SECRETS {
            if let (Some(field), Some((ns, name))) =
                (sp.pv_field, request::secret_ref(&params, sp, pv_name, pvc)?)
            {
                secret_refs.push((field, ns, name));
            }
        }
        let accessibility =
            topology::accessibility(client, driver, class, selected, key::name(pvc)).await?;
        let content_source = request::content_source(client, pvc, driver, required_bytes).await?;
        let req = ProvisionRequest {
            name: pv_name.to_owned(),
            required_bytes,
            limit_bytes,
            capabilities,
            parameters,
            secrets,
            accessibility,
            content_source,
        };
        Ok((req, fs_type, secret_refs, deletion_secret))
    }

    /// Records `ProvisioningFailed` for `e` and returns it.
    async fn failed(&self, driver: &str, pvc: &Value, e: ProvisioningError) -> ProvisioningError {
        if let ProvisioningError::Failed { message, .. } = &e {
            self.event(driver, pvc, "Warning", "ProvisioningFailed", message)
                .await;
        }
        e
    }

    async fn event(&self, driver: &str, pvc: &Value, type_: &str, reason: &str, msg: &str) {
        record(
            self.client.as_ref(),
            driver,
            "PersistentVolumeClaim",
            pvc,
            type_,
            reason,
            msg,
        )
        .await;
    }
}

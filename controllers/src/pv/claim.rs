//! The claim sync (upstream's `syncClaim`, `syncUnboundClaim`, `syncBoundClaim`).
//!
//! An unbound claim (no `bind-completed` annotation):
//! - with `spec.volumeName`: binds to that volume if it is free and satisfies the claim
//!   (`VolumeMismatch` otherwise), finishes a binding the volume already points at, and waits
//!   (`FailedBinding`) while the volume belongs to another claim;
//! - without: binds to the best match ([`k1s_api::volume::find_matching_volume`]); failing
//!   that, waits for its first consumer (`WaitForFirstConsumer` / `WaitForPodScheduled`),
//!   hands it to its class's provisioner (`ExternalProvisioning`), or reports that nothing
//!   can serve it (`FailedBinding`, `ProvisioningFailed`). It stays `Pending`.
//!
//! A bound claim becomes `Lost` when its volume is gone or belongs to another claim.
//!
//! It writes claims (annotations, `volumeName`, status) and, through [`super::bind`], the
//! `claimRef` of the volume it binds; it never creates or deletes volumes.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, WriteParams};
use k1s_api::volume::{
    self, ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
};
use serde_json::{Value, json};

use super::bind::{self, is_bound_to};
use super::{COMPONENT, Caches, PvError, has_annotation, pvcs, record, typed_claim, typed_volume};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Reconcile};

pub const MSG_WAIT_FIRST_CONSUMER: &str = "waiting for first consumer to be created before binding";
pub const MSG_NO_CLASS: &str =
    "no persistent volumes available for this claim and no storage class is set";

/// Upstream's `ExternalProvisioning` message.
pub fn external_provisioning_message(provisioner: &str) -> String {
    format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
         or manually by the system administrator. If volume creation is delayed, please verify \
         that the provisioner is running and correctly registered."
    )
}

pub struct ClaimSync {
    pub client: Arc<dyn Client>,
    pub caches: Caches,
}

#[async_trait::async_trait]
impl Reconcile for ClaimSync {
    type Error = PvError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, PvError> {
        let Some(pvc) = self.caches.claims.get(k) else {
            return Ok(Action::await_change());
        };
        let api = |source: ClientError| PvError::Api {
            key: format!("persistentvolumeclaim {k}"),
            source,
        };
        if has_annotation(&pvc, ANN_BIND_COMPLETED) {
            self.sync_bound(&pvc).await.map_err(api)?;
        } else {
            self.sync_unbound(&pvc).await?;
        }
        Ok(Action::await_change())
    }
}

impl ClaimSync {
    fn client(&self) -> &dyn Client {
        self.client.as_ref()
    }

    /// The cached volumes, typed, with their JSON (for writes).
    fn volumes(
        &self,
    ) -> Result<Vec<(Arc<Value>, k8s_openapi::api::core::v1::PersistentVolume)>, PvError> {
        self.caches
            .volumes
            .list()
            .into_iter()
            .map(|v| typed_volume(&v).map(|t| (v, t)))
            .collect()
    }

    /// Whether the claim's class binds on first consumer (a missing class: no).
    fn delay_binding(&self, class: &str) -> bool {
        !class.is_empty()
            && self
                .caches
                .classes
                .get(&ObjectKey::cluster(class))
                .is_some_and(|c| c["volumeBindingMode"] == "WaitForFirstConsumer")
    }

    async fn sync_unbound(&self, pvc: &Value) -> Result<(), PvError> {
        let api = |source: ClientError| PvError::Api {
            key: format!("persistentvolumeclaim {}", key::name(pvc)),
            source,
        };
        let claim = typed_claim(pvc)?;
        let requested = pvc["spec"]["volumeName"].as_str().unwrap_or("");
        if !requested.is_empty() {
            return self.sync_requested(pvc, requested).await.map_err(api);
        }
        let class = volume::claim_class(&claim);
        let delay = self.delay_binding(&class);
        let volumes = self.volumes()?;
        let found = volume::find_matching_volume(
            &claim,
            volumes.iter().map(|(_, t)| t),
            None,
            delay,
            |_| true,
        )
        .and_then(|t| volumes.iter().find(|(_, v)| std::ptr::eq(v, t)))
        .map(|(j, _)| j.clone());
        if let Some(pv) = found {
            return bind::bind(self.client(), &pv, pvc).await.map_err(api);
        }
        if delay && !has_annotation(pvc, ANN_SELECTED_NODE) {
            self.wait_for_consumer(pvc).await;
        } else if !class.is_empty() {
            return self.provision(pvc, &class).await.map_err(api);
        } else {
            record(
                self.client(),
                COMPONENT,
                "PersistentVolumeClaim",
                pvc,
                "Normal",
                "FailedBinding",
                MSG_NO_CLASS,
            )
            .await;
        }
        bind::update_claim_status(self.client(), pvc, "Pending", None)
            .await
            .map_err(api)?;
        Ok(())
    }

    /// A claim that names its volume (`spec.volumeName`).
    async fn sync_requested(&self, pvc: &Value, name: &str) -> Result<(), ClientError> {
        let Some(pv) = self.caches.volumes.get(&ObjectKey::cluster(name)) else {
            // The user asked for a volume that does not exist (yet).
            bind::update_claim_status(self.client(), pvc, "Pending", None).await?;
            return Ok(());
        };
        if pv["spec"]["claimRef"].is_null() {
            let fits: Result<(), Box<dyn std::error::Error + Send + Sync>> =
                match (typed_volume(&pv), typed_claim(pvc)) {
                    (Ok(v), Ok(c)) => {
                        volume::check_volume_satisfies_claim(&v, &c).map_err(Into::into)
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e.into()),
                };
            if let Err(why) = fits {
                let msg = format!("Cannot bind to requested volume {name:?}: {why}");
                self.event(pvc, "Warning", "VolumeMismatch", &msg).await;
                bind::update_claim_status(self.client(), pvc, "Pending", None).await?;
                return Ok(());
            }
            return bind::bind(self.client(), &pv, pvc).await;
        }
        if is_bound_to(&pv, pvc) {
            return bind::bind(self.client(), &pv, pvc).await;
        }
        let msg = format!("volume {name:?} already bound to a different claim.");
        self.event(pvc, "Warning", "FailedBinding", &msg).await;
        if has_annotation(pvc, ANN_BOUND_BY_CONTROLLER) {
            // Someone removed bind-completed from a claim this controller bound.
            return Err(ClientError {
                code: 0,
                reason: "InvalidBinding".into(),
                message: format!("volume {name:?} is already claimed by another claim"),
            });
        }
        bind::update_claim_status(self.client(), pvc, "Pending", None).await?;
        Ok(())
    }

    async fn sync_bound(&self, pvc: &Value) -> Result<(), ClientError> {
        let name = pvc["spec"]["volumeName"].as_str().unwrap_or("");
        if name.is_empty() {
            let msg =
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
            return self.lose(pvc, "ClaimLost", msg).await;
        }
        let cached = self.caches.volumes.get(&ObjectKey::cluster(name));
        let pv = match cached {
            Some(pv) => (*pv).clone(),
            // The cache may lag a volume created a moment ago: ask before declaring it lost.
            None => match self.client.get(&super::pvs(), name).await {
                Ok(pv) => pv,
                Err(e) if e.is_not_found() => {
                    let msg =
                        "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
                    return self.lose(pvc, "ClaimLost", msg).await;
                }
                Err(e) => return Err(e),
            },
        };
        if pv["spec"]["claimRef"].is_null() || pv["spec"]["claimRef"]["uid"] == key::uid(pvc) {
            // Unbound volume (or a binding not finished): bind again; a no-op when all is set.
            return bind::bind(self.client(), &pv, pvc).await;
        }
        let msg = "Two claims are bound to the same volume, this one is bound incorrectly";
        self.lose(pvc, "ClaimMisbound", msg).await
    }

    /// Sets the claim `Lost` and, on the change only, records `reason`.
    async fn lose(&self, pvc: &Value, reason: &str, msg: &str) -> Result<(), ClientError> {
        if pvc["status"]["phase"] == "Lost" {
            return Ok(());
        }
        let updated = bind::update_claim_status(self.client(), pvc, "Lost", None).await?;
        self.event(&updated, "Warning", reason, msg).await;
        Ok(())
    }

    async fn event(&self, pvc: &Value, type_: &str, reason: &str, msg: &str) {
        record(
            self.client(),
            COMPONENT,
            "PersistentVolumeClaim",
            pvc,
            type_,
            reason,
            msg,
        )
        .await;
    }

    /// Upstream's `emitEventForUnboundDelayBindingClaim`.
    async fn wait_for_consumer(&self, pvc: &Value) {
        let ns = key::namespace(pvc).unwrap_or("");
        let name = key::name(pvc);
        let mut waiting: Vec<String> = self
            .caches
            .pods
            .list_namespace(ns)
            .iter()
            .filter(|p| {
                !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
                    && p["spec"]["nodeName"].as_str().unwrap_or("").is_empty()
                    && crate::volume_protection::claims_of(p)
                        .iter()
                        .any(|c| c == name)
            })
            .map(|p| key::name(p).to_owned())
            .collect();
        waiting.sort();
        let (reason, msg) = match waiting.len() {
            0 => ("WaitForFirstConsumer", MSG_WAIT_FIRST_CONSUMER.to_owned()),
            1 => (
                "WaitForPodScheduled",
                format!("waiting for pod {} to be scheduled", waiting[0]),
            ),
            _ => (
                "WaitForPodScheduled",
                format!("waiting for pods {} to be scheduled", waiting.join(",")),
            ),
        };
        self.event(pvc, "Normal", reason, &msg).await;
    }

    /// Upstream's `provisionClaim` for a claim of `class`: k1s has no in-tree provisioners, so
    /// a `kubernetes.io/` one fails; any other is external — the claim is annotated with it.
    async fn provision(&self, pvc: &Value, class: &str) -> Result<(), ClientError> {
        let Some(sc) = self.caches.classes.get(&ObjectKey::cluster(class)) else {
            let msg = format!("storageclass.storage.k8s.io {class:?} not found");
            self.event(pvc, "Warning", "ProvisioningFailed", &msg).await;
            return Ok(());
        };
        let provisioner = sc["provisioner"].as_str().unwrap_or("");
        if provisioner.starts_with("kubernetes.io/") || provisioner.is_empty() {
            let msg = format!("no volume plugin matched name: {provisioner}");
            self.event(pvc, "Warning", "ProvisioningFailed", &msg).await;
            return Ok(());
        }
        let annotations = &pvc["metadata"]["annotations"];
        let pvc = if annotations[ANN_STORAGE_PROVISIONER] != provisioner
            || annotations[ANN_BETA_STORAGE_PROVISIONER] != provisioner
        {
            let mut clone = pvc.clone();
            if !clone["metadata"]["annotations"].is_object() {
                clone["metadata"]["annotations"] = json!({});
            }
            clone["metadata"]["annotations"][ANN_STORAGE_PROVISIONER] = json!(provisioner);
            clone["metadata"]["annotations"][ANN_BETA_STORAGE_PROVISIONER] = json!(provisioner);
            self.client
                .update(
                    &pvcs(key::namespace(pvc)),
                    clone,
                    None,
                    &WriteParams::default(),
                )
                .await?
        } else {
            pvc.clone()
        };
        let msg = external_provisioning_message(provisioner);
        self.event(&pvc, "Normal", "ExternalProvisioning", &msg)
            .await;
        Ok(())
    }
}

//! The per-kind rules of the API server (upstream's registry strategies), as one trait: what a
//! create resets and starts with, defaults, what an update may not change, validation beyond
//! typing, and how a delete waits. Each kind with rules has its own file under this folder,
//! by API group as upstream lays out `pkg/registry` (`core/pod.rs`, `apps/deployment.rs`,
//! ...); [`for_kind`] attaches them to the resource types ([`super::ResourceType::strategy`]).
//! The generic create/update/delete path ([`crate::rest`]) calls them through
//! `crate::rest::strategy`.

use serde_json::Value;

use super::ResourceType;
use super::side_effects::SideEffects;
use super::{admissionregistration, apps, batch, certificates, core, networking, node};
use crate::user::UserInfo;

/// Field errors: `(path, message)`, as [`crate::status::ApiError::invalid`] takes them.
pub type Causes = Vec<(String, String)>;

/// The rules of one kind. Every method has the generic behaviour as its default.
pub trait Strategy: Sync {
    /// The status a new object starts with; `None`: none (what a client sent is dropped).
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        None
    }

    /// Resets and generated fields of a create, before defaulting.
    fn prepare_create(&self, _obj: &mut Value) {}

    /// Upstream's defaulting (`SetDefaults_*`) of the fields components rely on; runs on every
    /// create and update, as decoding does upstream, and after mutating webhooks.
    fn defaults(&self, _obj: &mut Value) {}

    /// What a create derives from the defaulted object.
    fn finish_create(&self, _obj: &mut Value) {}

    /// What a create takes from the requesting user (`None`: the server itself).
    fn set_requestor(&self, _obj: &mut Value, _user: Option<&UserInfo>) {}

    /// The object an update starts from: what the client sent, less what a write through
    /// `subresource` (`None`: the object itself) may not change. Server-owned metadata is
    /// restored after it, by the write path.
    fn update_base(
        &self,
        res: &ResourceType,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Value {
        update_base(res, old, new, subresource)
    }

    /// Keeps what an update may not change; `new` is already defaulted. `subresource` is the
    /// write path (`status`, `approval`, ...; `None` for the object itself).
    fn prepare_update(&self, _old: &Value, _new: &mut Value, _subresource: Option<&str>) {}

    /// Validation that typing does not cover, with upstream's messages; `old` is the stored
    /// object on update.
    fn validate(&self, _obj: &Value, _old: Option<&Value>, _causes: &mut Causes) {}

    /// The grace period (seconds) a delete waits; 0 deletes at once.
    fn grace_period(&self, _obj: &Value, _requested: Option<i64>) -> i64 {
        0
    }

    /// Changes a delete makes besides the deletion timestamp.
    fn prepare_delete(&self, _obj: &mut Value) {}

    /// Whether something other than `metadata.finalizers` keeps a deleted object.
    fn blocks_deletion(&self, _obj: &Value) -> bool {
        false
    }

    /// What writes of the kind change besides the object (allocations, the catalog).
    fn side_effects(&self) -> Option<&dyn SideEffects> {
        None
    }
}

/// Kinds without rules of their own.
struct Generic;

impl Strategy for Generic {}

/// The rules of the kind `group`/`kind`.
pub fn for_kind(group: &str, kind: &str) -> &'static dyn Strategy {
    match (group, kind) {
        ("", "Pod") => &core::pod::Pod,
        ("", "PodTemplate") => &core::pod_template::PodTemplate,
        ("", "ReplicationController") => &core::replication_controller::ReplicationController,
        ("", "Service") => &core::service::Service,
        ("", "Secret") => &core::config_data::Secret,
        ("", "ConfigMap") => &core::config_data::ConfigMap,
        ("", "Namespace") => &core::namespace::Namespace,
        ("", "Node") => &core::node::Node,
        ("", "PersistentVolumeClaim") => &core::persistent_volume::PersistentVolumeClaim,
        ("", "PersistentVolume") => &core::persistent_volume::PersistentVolume,
        ("apps", "Deployment") => &apps::deployment::Deployment,
        ("apps", "ReplicaSet") => &apps::replica_set::ReplicaSet,
        ("apps", "StatefulSet") => &apps::stateful_set::StatefulSet,
        ("apps", "DaemonSet") => &apps::daemon_set::DaemonSet,
        ("batch", "Job") => &batch::job::Job,
        ("batch", "CronJob") => &batch::cron_job::CronJob,
        ("storage.k8s.io", "StorageClass") => &super::storage::StorageClass,
        ("storage.k8s.io", "CSIDriver") => &super::storage::CsiDriver,
        ("storage.k8s.io", "VolumeAttachment") => &super::storage::VolumeAttachment,
        ("scheduling.k8s.io", "PriorityClass") => &super::scheduling::PriorityClass,
        ("networking.k8s.io", "NetworkPolicy") => &networking::network_policy::NetworkPolicy,
        ("node.k8s.io", "RuntimeClass") => &node::runtime_class::RuntimeClass,
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            &admissionregistration::webhook_config::MUTATING
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            &admissionregistration::webhook_config::VALIDATING
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            &certificates::certificate_signing_request::CertificateSigningRequest
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            &super::apiextensions::CustomResourceDefinition
        }
        ("apiregistration.k8s.io", "APIService") => &super::apiregistration::ApiService,
        _ => &Generic,
    }
}

/// Sets `obj[key]` when it is absent or null.
pub fn set_default(obj: &mut Value, key: &str, value: Value) {
    if obj[key].is_null() {
        obj[key] = value;
    }
}

/// `obj.spec` when it is an object: the kinds that default inside `spec` leave an object
/// without one alone (indexing would add `"spec": null`).
pub fn spec_mut(obj: &mut Value) -> Option<&mut Value> {
    obj.get_mut("spec").filter(|s| s.is_object())
}

/// The generic [`Strategy::update_base`]: a status write changes `status` (and, for built-in
/// kinds, the metadata written with it), a write of the object itself everything but
/// `status`.
pub fn update_base(
    res: &ResourceType,
    old: &Value,
    new: Value,
    subresource: Option<&str>,
) -> Value {
    match subresource {
        Some("status") if res.custom.is_some() => {
            // A custom resource's status write changes status only (upstream's
            // customresource status strategy).
            let mut o = old.clone();
            o["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            if o["status"].is_null() {
                o.as_object_mut().map(|m| m.remove("status"));
            }
            o
        }
        Some("status") => {
            // A built-in kind's status write keeps everything but status and metadata
            // (upstream's status strategies reset spec: labels and annotations written
            // with the status are kept; server-owned metadata is restored after).
            let mut o = new;
            let status = o.get("status").cloned();
            if let (Some(m), Some(old_m)) = (o.as_object_mut(), old.as_object()) {
                m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
                for (k, v) in old_m {
                    if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                        m.insert(k.clone(), v.clone());
                    }
                }
                if let Some(s) = status.filter(|s| !s.is_null()) {
                    m.insert("status".into(), s);
                }
            }
            o
        }
        _ => {
            let mut o = new;
            if res.has_status() {
                match old.get("status") {
                    Some(s) => o["status"] = s.clone(),
                    None => {
                        o.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
            o
        }
    }
}

/// Sets `obj.metadata[key]` to what `old` has there, or removes it if `old` has none: for
/// metadata a write may not change.
pub fn keep_metadata(old: &Value, obj: &mut Value, key: &str) {
    let m = crate::rest::meta::metadata_mut(obj);
    match old["metadata"].get(key) {
        Some(v) => m.insert(key.to_owned(), v.clone()),
        None => m.remove(key),
    };
}

//! Generic ephemeral volumes (upstream's `ephemeral-volume` controller): for every pod
//! volume with an `ephemeral.volumeClaimTemplate`, a PVC named `<pod>-<volume>` is created
//! from the template, owned by the pod (controller, blockOwnerDeletion), so it is
//! provisioned like any claim and garbage-collected with the pod. A claim of that name that
//! the pod does not own is left alone, with a warning event, as upstream does (the kubelet
//! then refuses to use it).

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

#[derive(Debug, thiserror::Error)]
#[error("ephemeral volumes of pod {key}: {source}")]
pub struct EphemeralError {
    key: String,
    #[source]
    source: ClientError,
}

fn pvcs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", ns)
}

/// Runs the controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "ephemeral-volume",
        client.clone(),
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
    );
    let pods = ctrl.store();
    // A claim that goes away (or appears) re-examines its pod.
    let claims = ctrl.watches(
        pvcs(None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|pvc: &Value, _| {
            key::controller_ref(pvc)
                .filter(|r| r["kind"] == "Pod")
                .and_then(|r| r["name"].as_str())
                .map(|pod| vec![ObjectKey::new(key::namespace(pvc), pod)])
                .unwrap_or_default()
        }),
    );
    ctrl.run(
        Arc::new(Ephemeral {
            client,
            pods,
            claims,
        }),
        cancel,
    )
    .await;
}

struct Ephemeral {
    client: Arc<dyn Client>,
    pods: Store,
    claims: Store,
}

/// The claim for volume `volume` of `pod`, from its template.
pub fn claim_for(pod: &Value, volume: &Value) -> Value {
    let template = &volume["ephemeral"]["volumeClaimTemplate"];
    let mut meta = json!({
        "name": format!("{}-{}", key::name(pod), volume["name"].as_str().unwrap_or("")),
        "namespace": key::namespace(pod).unwrap_or(""),
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": key::name(pod),
            "uid": key::uid(pod), "controller": true, "blockOwnerDeletion": true}],
    });
    for field in ["labels", "annotations"] {
        if template["metadata"][field].is_object() {
            meta[field] = template["metadata"][field].clone();
        }
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
        "spec": template["spec"].clone()})
}

#[async_trait::async_trait]
impl Reconcile for Ephemeral {
    type Error = EphemeralError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, EphemeralError> {
        let Some(pod) = self.pods.get(k) else {
            return Ok(Action::await_change());
        };
        if key::is_deleting(&pod) {
            return Ok(Action::await_change());
        }
        let ns = key::namespace(&pod);
        for volume in pod["spec"]["volumes"].as_array().into_iter().flatten() {
            if !volume["ephemeral"]["volumeClaimTemplate"].is_object() {
                continue;
            }
            let claim = claim_for(&pod, volume);
            let name = key::name(&claim).to_owned();
            if let Some(existing) = self.claims.get(&ObjectKey::new(ns, &name)) {
                let owned =
                    key::controller_ref(&existing).is_some_and(|r| r["uid"] == key::uid(&pod));
                if !owned {
                    tracing::warn!(pod = %k, claim = %name, "an existing claim is not owned by the pod");
                }
                continue;
            }
            match self
                .client
                .create(&pvcs(ns), claim, &WriteParams::default())
                .await
            {
                Ok(_) => tracing::debug!(pod = %k, claim = %name, "created ephemeral claim"),
                Err(e) if e.is_already_exists() => {}
                Err(source) => {
                    return Err(EphemeralError {
                        key: k.to_string(),
                        source,
                    });
                }
            }
        }
        Ok(Action::await_change())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_come_from_the_template_and_belong_to_the_pod() {
        let pod = json!({"metadata": {"name": "web", "namespace": "n", "uid": "u"}});
        let vol = json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}});
        let c = claim_for(&pod, &vol);
        assert_eq!(c["metadata"]["name"], "web-scratch");
        assert_eq!(c["metadata"]["namespace"], "n");
        assert_eq!(c["metadata"]["labels"]["a"], "b");
        assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], "u");
        assert_eq!(c["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(c["spec"]["resources"]["requests"]["storage"], "1Gi");
    }
}

//! The ResourceQuota controller, as upstream's `pkg/controller/resourcequota`: keeps every
//! quota's `status.hard` (a copy of `spec.hard`) and `status.used` (recomputed from the objects
//! of its namespace with [`k1s_api::quota::recompute`], the arithmetic admission uses too).
//!
//! Admission charges a write to `status.used` with a compare-and-swap on the quota, so usage
//! only goes up there; this controller brings it back down:
//! - **replenishment**: a change to a pod, service or PVC (deleted, or a pod turned terminal),
//!   and the deletion of a ConfigMap, Secret, ReplicationController or ReplicaSet (the kinds
//!   upstream's evaluators count besides those), requeues every quota of its namespace at
//!   once;
//! - **resync**: every quota is recomputed every [`RESYNC`] (upstream: 5 minutes), which also
//!   catches `count/<resource>` of other kinds and charges of writes that failed after
//!   admission.
//!
//! A recount lower than `status.used` is written only once the quota has not changed for
//! [`SETTLE`]: admission charges a quota *before* the object is stored, so for a moment a
//! charged object is missing from any list; lowering usage then would hand its room to
//! another create. Charges move the quota's resourceVersion, which restarts the wait.
//!
//! Pods, services, PVCs, ConfigMaps, Secrets and ReplicationControllers come from watch
//! caches; other counted kinds are listed when a quota that counts them is reconciled. It writes quota status only, through the `status`
//! subresource with the quota's resourceVersion (a concurrent admission charge makes it retry).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k1s_api::client::{Client, ClientError, ListParams, ResourceRef};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::catalog::ResourceCatalog;
use k1s_runtime::controller::{Seen, all_in_namespace};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// How often every quota is recomputed without a triggering change.
pub const RESYNC: Duration = Duration::from_secs(60);
/// How long a quota must stay unchanged before a lower recount is written.
pub const SETTLE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error("resourcequota {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

fn quotas(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "resourcequotas", ns)
}

/// Runs the ResourceQuota controller until `cancel`.
pub async fn run(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    cancel: CancellationToken,
) {
    let mut ctrl = Controller::new(
        "resourcequota",
        client.clone(),
        quotas(None),
        watcher::Config::default(),
    )
    .workers(2);
    let quota_store = ctrl.store();
    // Only a deletion of these lowers usage (admission charges creates).
    let on_delete = |primary: Store| -> k1s_runtime::controller::Mapper {
        let all = all_in_namespace(primary);
        Arc::new(move |o: &Value, seen| {
            if seen == Seen::Deleted {
                all(o, seen)
            } else {
                Vec::new()
            }
        })
    };
    let mut deletions = |group: &str, version: &str, resource: &str| {
        ctrl.watches(
            ResourceRef::new(group, version, resource, None),
            watcher::Config::default(),
            Vec::new(),
            on_delete(quota_store.clone()),
        )
    };
    let config_maps = deletions("", "v1", "configmaps");
    let secrets = deletions("", "v1", "secrets");
    let rcs = deletions("", "v1", "replicationcontrollers");
    let _ = deletions("apps", "v1", "replicasets");
    let mut watch = |resource: &str| {
        ctrl.watches(
            ResourceRef::new("", "v1", resource, None),
            watcher::Config::default(),
            Vec::new(),
            all_in_namespace(quota_store.clone()),
        )
    };
    let cached = vec![
        ("pods", watch("pods")),
        ("services", watch("services")),
        ("persistentvolumeclaims", watch("persistentvolumeclaims")),
        ("configmaps", config_maps),
        ("secrets", secrets),
        ("replicationcontrollers", rcs),
    ];
    let reconciler = Arc::new(Quotas {
        client,
        catalog,
        quotas: quota_store,
        cached,
        lower: Mutex::default(),
    });
    ctrl.run(reconciler, cancel).await;
}

struct Quotas {
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    quotas: Store,
    /// Core resources kept in watch caches.
    cached: Vec<(&'static str, Store)>,
    /// Quotas whose recount came out lower: the resourceVersion then, and since when.
    lower: Mutex<HashMap<ObjectKey, (String, Instant)>>,
}

impl Quotas {
    /// The objects of `group`/`resource` in `ns`: from a cache, or listed.
    async fn objects(
        &self,
        group: &str,
        resource: &str,
        ns: &str,
    ) -> Result<Vec<Value>, ClientError> {
        if group.is_empty()
            && let Some((_, store)) = self.cached.iter().find(|(r, _)| *r == resource)
        {
            return Ok(store
                .list_namespace(ns)
                .iter()
                .map(|o| (**o).clone())
                .collect());
        }
        let Some(entry) = self
            .catalog
            .resources()
            .into_iter()
            .find(|e| e.group == group && e.resource == resource)
        else {
            return Ok(Vec::new());
        };
        match self
            .client
            .list(&entry.at(Some(ns)), &ListParams::default())
            .await
        {
            Ok(list) => Ok(list.items),
            // A kind the server stopped serving (its CRD went away) counts nothing.
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

#[async_trait::async_trait]
impl Reconcile for Quotas {
    type Error = QuotaError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, QuotaError> {
        let Some(quota) = self.quotas.get(k) else {
            return Ok(Action::await_change());
        };
        if key::is_deleting(&quota) {
            return Ok(Action::await_change());
        }
        let ns = k.namespace.clone().unwrap_or_default();
        let err = |source| QuotaError::Api {
            key: k.to_string(),
            source,
        };
        let mut lists = Vec::new();
        for (group, resource) in k1s_api::quota::needed_resources(&quota) {
            let items = self.objects(&group, &resource, &ns).await.map_err(err)?;
            lists.push((resource, group, items));
        }
        let objects: Vec<(&str, &str, &[Value])> = lists
            .iter()
            .map(|(r, g, items)| (r.as_str(), g.as_str(), items.as_slice()))
            .collect();
        let used = k1s_api::quota::recompute(&quota, &objects).to_json();
        let hard = quota["spec"]["hard"].clone();
        let status = json!({"hard": hard, "used": used});
        if lowers(&quota["status"]["used"], &status["used"]) {
            let rv = key::resource_version(&quota).unwrap_or("").to_owned();
            let mut lower = self.lower.lock().unwrap_or_else(|p| p.into_inner());
            let since = match lower.get(k) {
                Some((seen, since)) if *seen == rv => *since,
                _ => {
                    lower.insert(k.clone(), (rv, Instant::now()));
                    return Ok(Action::requeue(SETTLE));
                }
            };
            if since.elapsed() < SETTLE {
                return Ok(Action::requeue(SETTLE - since.elapsed()));
            }
            lower.remove(k);
        }
        if !same_status(&quota["status"], &status) {
            let mut next = (*quota).clone();
            next["status"] = status;
            match k1s_runtime::write::update_status(&*self.client, &quotas(Some(&ns)), next).await {
                Ok(true) => {}
                Ok(false) => return Ok(Action::await_change()),
                // Admission charged the quota meanwhile: recompute from the newer object.
                Err(e) if e.is_conflict() => return Ok(Action::requeue(Duration::ZERO)),
                Err(e) => return Err(err(e)),
            }
        }
        Ok(Action::requeue(RESYNC))
    }
}

/// Whether `next` uses less of some resource than `now` (or drops one).
fn lowers(now: &Value, next: &Value) -> bool {
    let list = |v: &Value| k1s_api::quantity::ResourceList::from_json_lenient(v);
    let (now, next) = (list(now), list(next));
    now.0
        .iter()
        .any(|(name, q)| next.get(name).is_none_or(|n| n < q))
}

/// Whether two quota statuses say the same, comparing quantities by value (`1000m` is `1`).
fn same_status(a: &Value, b: &Value) -> bool {
    let list = |v: &Value| k1s_api::quantity::ResourceList::from_json(v).ok();
    ["hard", "used"]
        .iter()
        .all(|f| match (list(&a[f]), list(&b[f])) {
            (Some(x), Some(y)) => x == y && a[f].is_null() == b[f].is_null(),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_recounts_are_told_apart() {
        let now = json!({"secrets": "3", "pods": "1"});
        assert!(lowers(&now, &json!({"secrets": "2", "pods": "1"})));
        assert!(lowers(&now, &json!({"secrets": "3"})));
        assert!(!lowers(&now, &json!({"secrets": "3", "pods": "2"})));
        assert!(!lowers(&json!(null), &now));
    }

    #[test]
    fn statuses_compare_by_quantity() {
        let a = json!({"hard": {"cpu": "1"}, "used": {"cpu": "500m"}});
        let b = json!({"hard": {"cpu": "1000m"}, "used": {"cpu": "0.5"}});
        assert!(same_status(&a, &b));
        let c = json!({"hard": {"cpu": "1"}, "used": {"cpu": "1"}});
        assert!(!same_status(&a, &c));
        assert!(!same_status(&json!({}), &b));
    }
}

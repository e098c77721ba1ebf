//! The namespace controller: empties a namespace that is being deleted, then lets it go.
//!
//! For a namespace with a deletionTimestamp and the `kubernetes` finalizer in `spec.finalizers`
//! it deletes every object of every namespaced resource of the [`ResourceCatalog`] (propagation
//! Background), reports progress in the upstream status conditions
//! (`NamespaceDeletionDiscoveryFailure`, `NamespaceDeletionContentFailure`,
//! `NamespaceContentRemaining`, `NamespaceFinalizersRemaining`, plus the always-ok
//! `NamespaceDeletionGroupVersionParsingFailure`), waits for the content to be gone (requeueing
//! after an estimate, as upstream), and finally removes `kubernetes` through the `finalize`
//! subresource, after which the API server removes the namespace.
//!
//! It owns the namespace's `status.conditions` during deletion and its `spec.finalizers`
//! entry `kubernetes`; it never touches other finalizers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, DeleteParams, ListParams, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::catalog::ResourceCatalog;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// The finalizer this controller owns.
pub const FINALIZER: &str = "kubernetes";
/// Upstream's estimate when remaining content waits for finalizers.
const FINALIZER_ESTIMATE_SECONDS: i64 = 15;
const DEFAULT_POD_GRACE: i64 = 30;

/// Why a namespace could not be finished yet.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("namespace {namespace}: {source}")]
    Api {
        namespace: String,
        #[source]
        source: ClientError,
    },
    #[error("namespace {namespace}: discovery failed for {groups}")]
    Discovery { namespace: String, groups: String },
    #[error("namespace {namespace}: failed to delete content: {message}")]
    Content { namespace: String, message: String },
}

/// Runs the namespace controller until `cancel`.
pub async fn run(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    cancel: CancellationToken,
) {
    let ctrl = Controller::new(
        "namespace",
        client.clone(),
        namespaces(),
        watcher::Config::default(),
    )
    .workers(2)
    .resync(Duration::from_secs(300));
    let reconciler = Arc::new(NamespaceReconciler {
        client,
        catalog,
        store: ctrl.store(),
    });
    ctrl.run(reconciler, cancel).await;
}

fn namespaces() -> ResourceRef {
    ResourceRef::new("", "v1", "namespaces", None)
}

struct NamespaceReconciler {
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    store: Store,
}

/// What deleting the content found.
#[derive(Default)]
struct Progress {
    /// Group/versions whose resources could not be listed because they are not served.
    discovery_failures: Vec<String>,
    /// Errors listing or deleting.
    content_failures: Vec<String>,
    /// `resource.group` → objects remaining.
    remaining: BTreeMap<String, usize>,
    /// finalizer → objects carrying it.
    finalizers: BTreeMap<String, usize>,
    /// Seconds after which the remaining content may be gone.
    estimate: i64,
}

#[async_trait::async_trait]
impl Reconcile for NamespaceReconciler {
    type Error = NamespaceError;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, NamespaceError> {
        let cached = self.store.get(key);
        if !cached.as_deref().is_some_and(key::is_deleting) {
            return Ok(Action::await_change());
        }
        let api = |source| NamespaceError::Api {
            namespace: key.name.clone(),
            source,
        };
        // Act on the live object, not the cache.
        let ns = match self.client.get(&namespaces(), &key.name).await {
            Ok(ns) => ns,
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(api(e)),
        };
        if !key::is_deleting(&ns) || !spec_finalizers(&ns).iter().any(|f| f == FINALIZER) {
            return Ok(Action::await_change());
        }
        let progress = self.delete_content(&key.name).await;
        self.update_conditions(&ns, &progress).await.map_err(api)?;
        if !progress.discovery_failures.is_empty() {
            return Err(NamespaceError::Discovery {
                namespace: key.name.clone(),
                groups: progress.discovery_failures.join(", "),
            });
        }
        if !progress.content_failures.is_empty() {
            return Err(NamespaceError::Content {
                namespace: key.name.clone(),
                message: progress.content_failures.join("; "),
            });
        }
        if !progress.remaining.is_empty() {
            let secs = u64::try_from(progress.estimate / 2 + 1).unwrap_or(1);
            return Ok(Action::requeue(Duration::from_secs(secs)));
        }
        self.finalize(&key.name).await.map_err(api)?;
        Ok(Action::await_change())
    }
}

fn spec_finalizers(ns: &Value) -> Vec<String> {
    ns["spec"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `resource` or `resource.group`, as upstream's GroupResource prints.
fn group_resource(r: &ResourceRef) -> String {
    if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    }
}

async fn list_all(client: &dyn Client, r: &ResourceRef) -> Result<Vec<Value>, ClientError> {
    let mut items = Vec::new();
    let mut params = ListParams {
        limit: Some(500),
        ..Default::default()
    };
    loop {
        let page = client.list(r, &params).await?;
        items.extend(page.items);
        match page.continue_token.filter(|t| !t.is_empty()) {
            Some(t) => params.continue_token = Some(t),
            None => return Ok(items),
        }
    }
}

impl NamespaceReconciler {
    async fn delete_content(&self, namespace: &str) -> Progress {
        let mut p = Progress::default();
        for mut r in self.catalog.namespaced() {
            r.namespace = Some(namespace.to_owned());
            let gr = group_resource(&r);
            let items = match list_all(self.client.as_ref(), &r).await {
                Ok(items) => items,
                Err(e) if e.is_not_found() => {
                    // No longer served (a removed CRD): its objects went with it.
                    let gv = if r.group.is_empty() {
                        r.version.clone()
                    } else {
                        format!("{}/{}", r.group, r.version)
                    };
                    p.discovery_failures.push(format!("{gv}: {e}"));
                    continue;
                }
                Err(e) => {
                    p.content_failures.push(format!("{gr}: {e}"));
                    continue;
                }
            };
            if items.is_empty() {
                continue;
            }
            for item in &items {
                if key::is_deleting(item) {
                    continue;
                }
                let params = DeleteParams {
                    propagation_policy: Some("Background".into()),
                    precondition_uid: Some(key::uid(item).to_owned()).filter(|u| !u.is_empty()),
                    ..Default::default()
                };
                match self.client.delete(&r, key::name(item), &params).await {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() || e.is_conflict() => {}
                    Err(e) => p.content_failures.push(format!("{gr}: {e}")),
                }
            }
            // What is left after the deletes: objects waiting for finalizers or grace.
            let left = match list_all(self.client.as_ref(), &r).await {
                Ok(left) => left,
                Err(e) => {
                    p.content_failures.push(format!("{gr}: {e}"));
                    continue;
                }
            };
            if left.is_empty() {
                continue;
            }
            p.remaining.insert(gr.clone(), left.len());
            let mut estimate = 0;
            for o in &left {
                for f in key::finalizers(o) {
                    *p.finalizers.entry(f).or_default() += 1;
                }
                if r.group.is_empty() && r.resource == "pods" {
                    estimate = estimate.max(pod_estimate(o));
                }
            }
            if estimate == 0 && left.iter().any(|o| !key::finalizers(o).is_empty()) {
                estimate = FINALIZER_ESTIMATE_SECONDS;
            }
            p.estimate = p.estimate.max(estimate);
        }
        p
    }

    async fn update_conditions(&self, ns: &Value, p: &Progress) -> Result<(), ClientError> {
        let failing = |kind: &str| -> Option<(String, String)> {
            match kind {
                "NamespaceDeletionDiscoveryFailure" if !p.discovery_failures.is_empty() => Some((
                    "DiscoveryFailed".into(),
                    format!(
                        "Discovery failed for some groups, {} failing: {}",
                        p.discovery_failures.len(),
                        p.discovery_failures.join(", ")
                    ),
                )),
                "NamespaceDeletionContentFailure" if !p.content_failures.is_empty() => Some((
                    "ContentDeletionFailed".into(),
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        p.content_failures.len(),
                        p.content_failures.join(", ")
                    ),
                )),
                "NamespaceContentRemaining" if !p.remaining.is_empty() => Some((
                    "SomeResourcesRemain".into(),
                    format!(
                        "Some resources are remaining: {}",
                        p.remaining
                            .iter()
                            .map(|(gr, n)| format!("{gr} has {n} resource instances"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
                "NamespaceFinalizersRemaining" if !p.finalizers.is_empty() => Some((
                    "SomeFinalizersRemain".into(),
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        p.finalizers
                            .iter()
                            .map(|(f, n)| format!("{f} in {n} resource instances"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
                _ => None,
            }
        };
        let ok = [
            (
                "NamespaceDeletionDiscoveryFailure",
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            (
                "NamespaceDeletionGroupVersionParsingFailure",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
            (
                "NamespaceDeletionContentFailure",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
            (
                "NamespaceContentRemaining",
                "ContentRemoved",
                "All content successfully removed",
            ),
            (
                "NamespaceFinalizersRemaining",
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished",
            ),
        ];
        let old: Vec<Value> = ns["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let now = k1s_runtime::clock::now();
        let mut conditions: Vec<Value> = old
            .iter()
            .filter(|c| !ok.iter().any(|(t, _, _)| c["type"].as_str() == Some(t)))
            .cloned()
            .collect();
        for (kind, ok_reason, ok_message) in ok {
            let (status, reason, message) = match failing(kind) {
                Some((reason, message)) => ("True", reason, message),
                None => ("False", ok_reason.to_owned(), ok_message.to_owned()),
            };
            let previous = old.iter().find(|c| c["type"] == kind);
            let unchanged = previous.is_some_and(|c| {
                c["status"] == status
                    && c["reason"] == reason.as_str()
                    && c["message"] == message.as_str()
            });
            match previous {
                Some(c) if unchanged => conditions.push(c.clone()),
                _ => conditions.push(json!({"type": kind, "status": status,
                    "lastTransitionTime": now, "reason": reason, "message": message})),
            }
        }
        if conditions == old {
            return Ok(());
        }
        let mut updated = ns.clone();
        updated["status"]["conditions"] = json!(conditions);
        match self
            .client
            .update(
                &namespaces(),
                updated,
                Some("status"),
                &WriteParams::default(),
            )
            .await
        {
            Ok(_) => Ok(()),
            // Someone else wrote meanwhile: the next pass writes the conditions again.
            Err(e) if e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes `kubernetes` from `spec.finalizers` through the `finalize` subresource.
    async fn finalize(&self, name: &str) -> Result<(), ClientError> {
        loop {
            let mut ns = match self.client.get(&namespaces(), name).await {
                Ok(ns) => ns,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            };
            let rest: Vec<String> = spec_finalizers(&ns)
                .into_iter()
                .filter(|f| f != FINALIZER)
                .collect();
            ns["spec"]["finalizers"] = json!(rest);
            match self
                .client
                .update(&namespaces(), ns, Some("finalize"), &WriteParams::default())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Upstream's estimate for a pod still terminating: its grace period, unless it has finished.
fn pod_estimate(pod: &Value) -> i64 {
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return 0;
    }
    pod["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(DEFAULT_POD_GRACE)
        .max(0)
}

//! The Deployment controller, as upstream's `deployment` package: ReplicaSets per pod
//! template (named `<deployment>-<template hash>`, carrying `pod-template-hash`), rolling
//! updates within maxSurge/maxUnavailable, Recreate, proportional scaling, pause, the
//! revision annotation (so `kubectl rollout undo` — a client-side template copy — brings an
//! old ReplicaSet back as the newest revision), revision history cleanup, and the status and
//! `Available`/`Progressing` conditions `kubectl rollout status` reads.
//!
//! - [`rollout`]: the pure arithmetic (budgets, hash, revisions).
//! - [`sync`]: the steps of one pass (new/old ReplicaSets, scaling, status).
//!
//! It owns the ReplicaSets it controls (their replicas and annotations) and Deployment status
//! and revision annotation; pods belong to the ReplicaSet controller.

pub mod rollout;
pub mod sync;

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use k1s_api::selector::LabelSelector;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::owned_pods::{self, spec_selector};
use k1s_runtime::clock::Clock;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::store::owner_uid_index;
use k1s_runtime::{Action, Controller, Reconcile, Seen, Store, watcher};

#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error("deployment {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
    #[error("deployment {key}: invalid selector: {source}")]
    Selector {
        key: String,
        #[source]
        source: k1s_api::selector::SelectorError,
    },
    #[error("deployment {key}: replicaset name {name} collides; collisionCount raised")]
    Collision { key: String, name: String },
}

pub(crate) fn deployments(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("apps", "v1", "deployments", ns)
}

pub(crate) fn replicasets(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("apps", "v1", "replicasets", ns)
}

/// Runs the Deployment controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, clock: Arc<dyn Clock>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "deployment",
        client.clone(),
        deployments(None),
        watcher::Config::default(),
    )
    .workers(5);
    let ds = ctrl.store();
    let ds_for_rs = ds.clone();
    let sets = ctrl.watches(
        replicasets(None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |rs: &Value, _| owners_of(rs, &ds_for_rs)),
    );
    let sets_for_pods = sets.clone();
    let pods = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        vec![owner_uid_index()],
        Arc::new(move |pod: &Value, _| {
            // A pod concerns the Deployment of its ReplicaSet (Recreate waits for old pods).
            key::controller_ref(pod)
                .filter(|r| r["kind"] == "ReplicaSet")
                .and_then(|r| {
                    sets_for_pods.get(&ObjectKey::new(
                        key::namespace(pod),
                        r["name"].as_str().unwrap_or(""),
                    ))
                })
                .and_then(|rs| {
                    key::controller_ref(&rs)
                        .filter(|r| r["kind"] == "Deployment")
                        .and_then(|r| r["name"].as_str())
                        .map(|n| ObjectKey::new(key::namespace(&rs), n))
                })
                .into_iter()
                .collect()
        }),
    );
    let reconciler = Arc::new(Deployments {
        client,
        deployments: ds,
        sets,
        pods,
        clock,
    });
    ctrl.run(reconciler, cancel).await;
}

/// The Deployments a ReplicaSet concerns: its controller, or every one that could adopt it.
fn owners_of(rs: &Value, ds: &Store) -> Vec<ObjectKey> {
    owned_pods::owner_keys("Deployment", rs, Seen::Listed, ds, None, |_| true)
}

/// The reference a Deployment puts on its ReplicaSets.
pub(crate) fn controller_ref_to(d: &Value) -> Value {
    owned_pods::controller_ref_to("Deployment", d)
}

pub(crate) struct Deployments {
    pub(crate) client: Arc<dyn Client>,
    pub(crate) deployments: Store,
    pub(crate) sets: Store,
    pub(crate) pods: Store,
    /// Dates the progress deadline.
    pub(crate) clock: Arc<dyn Clock>,
}

#[async_trait::async_trait]
impl Reconcile for Deployments {
    type Error = DeploymentError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, DeploymentError> {
        let Some(d) = self.deployments.get(k) else {
            return Ok(Action::await_change());
        };
        let d = (*d).clone();
        let ns = k.namespace.clone().unwrap_or_default();
        let api = |source| DeploymentError::Api {
            key: k.to_string(),
            source,
        };
        let Some(sel) = spec_selector(&d).map_err(|source| DeploymentError::Selector {
            key: k.to_string(),
            source,
        })?
        else {
            return Ok(Action::await_change());
        };
        let rss = self.claim(&d, &sel, &ns).await.map_err(api)?;
        let pass = sync::Pass {
            ctl: self,
            d: &d,
            ns: &ns,
            key: k,
            created: std::sync::Mutex::new(None),
            written: std::sync::Mutex::new(None),
        };
        if key::is_deleting(&d) {
            return pass.sync_status_only(rss).await;
        }
        if d["spec"]["paused"] == true || pass.is_scaling_event(&rss) {
            return pass.sync(rss).await;
        }
        if d["spec"]["strategy"]["type"] == "Recreate" {
            pass.recreate(rss).await
        } else {
            pass.rolling(rss).await
        }
    }
}

impl Deployments {
    /// The ReplicaSets this Deployment controls, after adopting matching orphans and releasing
    /// those that no longer match.
    async fn claim(
        &self,
        d: &Value,
        sel: &LabelSelector,
        ns: &str,
    ) -> Result<Vec<Value>, ClientError> {
        let uid = key::uid(d);
        let deleting = key::is_deleting(d);
        let mut owned = Vec::new();
        let mut adoption_checked = false;
        for rs in self.sets.list_namespace(ns) {
            let matches = sel.matches_json(&rs);
            match key::controller_ref(&rs) {
                Some(r) if r["uid"].as_str() == Some(uid) => {
                    if matches || deleting {
                        owned.push((*rs).clone());
                    } else {
                        let mut rs = (*rs).clone();
                        if let Some(refs) = rs["metadata"]["ownerReferences"].as_array_mut() {
                            refs.retain(|r| r["uid"].as_str() != Some(uid));
                        }
                        match self
                            .client
                            .update(&replicasets(Some(ns)), rs, None, &WriteParams::default())
                            .await
                        {
                            Err(e) if !e.is_not_found() => return Err(e),
                            _ => {}
                        }
                    }
                }
                Some(_) => {}
                None if matches && !deleting && !key::is_deleting(&rs) => {
                    if !adoption_checked {
                        let fresh = self
                            .client
                            .get(&deployments(Some(ns)), key::name(d))
                            .await?;
                        if key::uid(&fresh) != uid || key::is_deleting(&fresh) {
                            return Ok(owned);
                        }
                        adoption_checked = true;
                    }
                    let mut rs = (*rs).clone();
                    let mut refs = rs["metadata"]["ownerReferences"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    refs.push(controller_ref_to(d));
                    rs["metadata"]["ownerReferences"] = json!(refs);
                    match self
                        .client
                        .update(&replicasets(Some(ns)), rs, None, &WriteParams::default())
                        .await
                    {
                        Ok(adopted) => owned.push(adopted),
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(e),
                    }
                }
                None => {}
            }
        }
        owned.sort_by(|a, b| {
            let t = |o: &Value| {
                o["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            };
            t(a).cmp(&t(b)).then_with(|| key::name(a).cmp(key::name(b)))
        });
        Ok(owned)
    }
}

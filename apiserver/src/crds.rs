//! CustomResourceDefinitions: turning CRDs into served resources, their status (names
//! accepted, established), and the cleanup of a deleted CRD's custom resources.
//!
//! The catalog is rebuilt from the stored CRDs after every CRD write through this server and
//! on every CRD change another server makes (a watch), so a custom resource is served as soon
//! as the create of its CRD returns.

use std::sync::Arc;

use k1s_store::ListRequest;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::registry::ResourceType;
use crate::registry::apiextensions::CLEANUP_FINALIZER;
use crate::registry::apiextensions::custom::resource_types;
use crate::rest::{Rest, WriteOptions, meta};
use crate::status::ApiError;

impl Rest {
    /// Rebuilds the catalog's custom resources from the stored CRDs.
    pub async fn refresh_custom_resources(&self) -> Result<(), ApiError> {
        let Some(crds) = self
            .registry
            .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
        else {
            return Ok(());
        };
        let resp = self
            .store
            .list(ListRequest {
                prefix: crds.prefix(),
                ..Default::default()
            })
            .await?;
        let mut custom = Vec::new();
        for kv in resp.kvs {
            match self.decode_stored(&crds, &kv.key, &kv.value, kv.mod_revision) {
                Ok(crd) => custom.extend(resource_types(&crd)),
                Err(e) => tracing::warn!(key = %kv.key, error = %e.message, "cannot read a CRD"),
            }
        }
        self.registry.set_custom(custom);
        Ok(())
    }

    /// Deletes every custom resource of a deleted CRD, then lets the CRD go.
    async fn clean_up_crd(&self, crd: &Value) -> Result<(), ApiError> {
        let (Some(group), Some(plural)) = (
            crd["spec"]["group"].as_str(),
            crd["spec"]["names"]["plural"].as_str(),
        ) else {
            return Ok(());
        };
        let prefix = format!("/registry/{group}/{plural}/");
        loop {
            let resp = self
                .store
                .list(ListRequest {
                    prefix: prefix.clone(),
                    limit: 500,
                    ..Default::default()
                })
                .await?;
            for kv in &resp.kvs {
                let _ = self.store.delete(&kv.key, None).await;
            }
            if !resp.more {
                break;
            }
        }
        let Some(res) = self
            .registry
            .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
        else {
            return Ok(());
        };
        let name = meta::name(crd).to_owned();
        self.read_modify_write(&res, None, &name, None, &WriteOptions::default(), |cur| {
            let mut c = cur.clone();
            if let Some(f) = c["metadata"]["finalizers"].as_array_mut() {
                f.retain(|x| x != CLEANUP_FINALIZER);
            }
            Ok(c)
        })
        .await
        .map(|_| ())
    }
}

/// Keeps the catalog in step with CRD changes made anywhere, and finishes CRD deletions.
pub async fn run(rest: Arc<Rest>, cancel: CancellationToken) {
    let Some(res) = rest
        .registry
        .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
    else {
        return;
    };
    let store = rest.store.clone();
    crate::mirror::follow(store, res.prefix(), cancel, || async {
        if let Err(e) = rest.refresh_custom_resources().await {
            tracing::warn!(error = %e.message, "CRD watcher: cannot rebuild the catalog");
        }
        finish_deletions(&rest, &res).await;
    })
    .await;
}

async fn finish_deletions(rest: &Rest, res: &ResourceType) {
    let Ok(page) = rest.list(res, None, &Default::default()).await else {
        return;
    };
    for crd in page.items {
        if meta::is_deleting(&crd)
            && meta::finalizers(&crd)
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
            && let Err(e) = rest.clean_up_crd(&crd).await
        {
            tracing::warn!(crd = meta::name(&crd), error = %e.message, "cleaning up a deleted CRD failed");
        }
    }
}

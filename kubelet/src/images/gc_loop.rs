//! The image garbage collector's schedule, as upstream's image GC manager: every
//! `image_gc_period` (5 min), the images of the pods bound to this node are in use, and
//! when the image file system is at or above `image_gc_high_percent` used (85), the others
//! go, least recently used first, until it is below `image_gc_low_percent` (80). Which
//! images go, and that one used in the last two minutes never does, is [`crate::images::gc`].

use std::sync::Arc;

use k1s_api::client::{ListParams, ResourceRef};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::Deps;
use crate::images::ImageService;

/// The image references of `pod`'s containers (init, regular and ephemeral).
fn images_of(pod: &Value) -> impl Iterator<Item = &str> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |list| pod["spec"][list].as_array().into_iter().flatten())
        .filter_map(|c| c["image"].as_str())
}

/// The image IDs the pods use, of the images present.
pub fn in_use(pods: &[Value], images: &dyn ImageService) -> Vec<String> {
    let mut ids: Vec<String> = pods
        .iter()
        .flat_map(images_of)
        .filter_map(|r| images.get(r).map(|i| i.id))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Why a collection did not run to the end (logged; the next one tries again).
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("listing this node's pods: {0}")]
    ListPods(#[source] k1s_api::client::ClientError),
    #[error(transparent)]
    Images(#[from] super::ImageError),
}

/// One collection: the bytes freed.
pub async fn collect_once(deps: &Deps) -> Result<u64, GcError> {
    let config = &deps.config;
    collect(
        deps,
        config.image_gc_high_percent,
        config.image_gc_low_percent,
    )
    .await
}

/// Deletes every image no pod on this node uses (the eviction manager's reclaim under disk
/// pressure, upstream's `DeleteUnusedImages`): the bytes freed.
pub async fn reclaim(deps: &Deps) -> Result<u64, GcError> {
    collect(deps, 0, 0).await
}

async fn collect(deps: &Deps, high_percent: u8, low_percent: u8) -> Result<u64, GcError> {
    let pods = deps
        .client
        .list(
            &ResourceRef::new("", "v1", "pods", None),
            &ListParams {
                field_selector: Some(format!("spec.nodeName={}", deps.config.node_name)),
                ..Default::default()
            },
        )
        .await
        .map_err(GcError::ListPods)?;
    let in_use = in_use(&pods.items, deps.images.as_ref());
    Ok(deps
        .images
        .garbage_collect(&in_use, high_percent, low_percent)
        .await?)
}

/// Collects every `image_gc_period` until `cancel`.
pub async fn run(deps: Arc<Deps>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(deps.config.image_gc_period) => {}
        }
        match collect_once(&deps).await {
            Ok(0) => {}
            Ok(freed) => tracing::info!(freed_bytes = freed, "image garbage collection"),
            Err(e) => tracing::warn!(error = %e, "image garbage collection"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::ImageConfig;
    use crate::images::fake::FakeImageService;
    use serde_json::json;

    #[test]
    fn images_of_every_container_kind_present_on_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let images = FakeImageService::new(dir.path());
        let app = images.add_local("app:1", ImageConfig::default()).unwrap();
        let init = images.add_local("init:1", ImageConfig::default()).unwrap();
        images
            .add_local("unused:1", ImageConfig::default())
            .unwrap();
        let pods = [
            json!({"spec": {"initContainers": [{"image": "init:1"}],
                            "containers": [{"image": "app:1"}, {"image": "missing:1"}]}}),
            json!({"spec": {"containers": [{"image": "docker.io/library/app:1"}]}}),
            json!({"spec": {}}),
        ];
        let mut want = vec![app.id, init.id];
        want.sort();
        assert_eq!(in_use(&pods, &images), want);
    }
}

//! The storage API beyond plain CRUD: the snapshot CRDs the server installs (served, with
//! their schemas enforced), and PVC expansion rules (PersistentVolumeClaimResize admission,
//! no shrinking below the capacity, no request changes before binding).

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_store::redb::{RedbConfig, RedbStore};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn client(dir: &std::path::Path) -> (Arc<dyn Client>, CancellationToken) {
    let store = RedbStore::open(RedbConfig::new(dir.join("state.redb"))).unwrap();
    let state = ApiState::new(Arc::new(store), &ApiConfig::default()).unwrap();
    k1s_apiserver::bootstrap::run(&state.rest, "127.0.0.1".parse().unwrap(), 6443)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    tokio::spawn(k1s_apiserver::crds::run(state.rest.clone(), cancel.clone()));
    k1s_apiserver::snapshot_crds::ensure(&state.rest)
        .await
        .unwrap();
    // A second start finds them and leaves them alone.
    k1s_apiserver::snapshot_crds::ensure(&state.rest)
        .await
        .unwrap();
    let c: Arc<dyn Client> = Arc::new(LocalClient::new(state.rest.clone(), "test", cancel.clone()));
    (c, cancel)
}

fn w() -> WriteParams {
    WriteParams::default()
}

/// Creates `obj`, retrying while its resource is not served yet (the CRD controller runs
/// beside the test).
async fn create_when_served(c: &dyn Client, r: &ResourceRef, obj: Value) -> Value {
    for _ in 0..100 {
        match c.create(r, obj.clone(), &w()).await {
            Ok(v) => return v,
            Err(e) if e.code == 404 => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("creating {obj}: {e}"),
        }
    }
    panic!("{} never served", r.resource);
}

#[tokio::test]
async fn snapshot_api_is_served_with_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _cancel) = client(dir.path()).await;
    let classes = ResourceRef::new(
        "snapshot.storage.k8s.io",
        "v1",
        "volumesnapshotclasses",
        None,
    );
    let class = create_when_served(
        &*c,
        &classes,
        json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": "fast"}, "driver": "d.csi", "deletionPolicy": "Delete"}),
    )
    .await;
    assert_eq!(class["driver"], "d.csi");
    let err = c
        .create(
            &classes,
            json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
                "metadata": {"name": "bad"}, "driver": "d.csi", "deletionPolicy": "Sometimes"}),
            &w(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, 422, "{err}");
    assert!(err.message.contains("deletionPolicy"), "{err}");

    let snaps = ResourceRef::new(
        "snapshot.storage.k8s.io",
        "v1",
        "volumesnapshots",
        Some("default"),
    );
    let snap = create_when_served(
        &*c,
        &snaps,
        json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": "s"},
            "spec": {"volumeSnapshotClassName": "fast", "source": {"persistentVolumeClaimName": "data"}}}),
    )
    .await;
    assert_eq!(snap["spec"]["source"]["persistentVolumeClaimName"], "data");
    // Exactly one source.
    let err = c
        .create(
            &snaps,
            json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                "metadata": {"name": "two"},
                "spec": {"source": {"persistentVolumeClaimName": "a", "volumeSnapshotContentName": "b"}}}),
            &w(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, 422, "{err}");
    // Status is a subresource: a write of the object does not change it.
    let mut with_status = snap.clone();
    with_status["status"] = json!({"readyToUse": true});
    let updated = c.update(&snaps, with_status, None, &w()).await.unwrap();
    assert!(updated["status"]["readyToUse"].is_null(), "{updated}");
    let contents = ResourceRef::new(
        "snapshot.storage.k8s.io",
        "v1",
        "volumesnapshotcontents",
        None,
    );
    create_when_served(
        &*c,
        &contents,
        json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
            "metadata": {"name": "pre"},
            "spec": {"deletionPolicy": "Retain", "driver": "d.csi",
                "source": {"snapshotHandle": "h-1"},
                "volumeSnapshotRef": {"name": "s", "namespace": "default"}}}),
    )
    .await;
}

#[tokio::test]
async fn claims_grow_only_when_the_class_allows_and_never_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _cancel) = client(dir.path()).await;
    let scs = ResourceRef::new("storage.k8s.io", "v1", "storageclasses", None);
    for (name, allow) in [("grows", true), ("fixed", false)] {
        c.create(
            &scs,
            json!({"metadata": {"name": name}, "provisioner": "d.csi", "allowVolumeExpansion": allow}),
            &w(),
        )
        .await
        .unwrap();
    }
    let pvcs = ResourceRef::new("", "v1", "persistentvolumeclaims", Some("default"));
    let resize =
        |size: &str| Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}));
    for class in ["grows", "fixed"] {
        c.create(
            &pvcs,
            json!({"metadata": {"name": class}, "spec": {"storageClassName": class,
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            &w(),
        )
        .await
        .unwrap();
        // Unbound: the request may not change (for "fixed", admission refuses first).
        let err = c
            .patch(&pvcs, class, &resize("2Gi"), None, &w())
            .await
            .unwrap_err();
        assert_eq!(err.code, if class == "grows" { 422 } else { 403 }, "{err}");
        // Bound (as the PV controller would leave it).
        c.patch(
            &pvcs,
            class,
            &Patch::Merge(json!({"spec": {"volumeName": format!("pv-{class}")}})),
            None,
            &w(),
        )
        .await
        .unwrap();
        c.patch(
            &pvcs,
            class,
            &Patch::Merge(json!({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}})),
            Some("status"),
            &w(),
        )
        .await
        .unwrap();
    }
    let grown = c
        .patch(&pvcs, "grows", &resize("2Gi"), None, &w())
        .await
        .unwrap();
    assert_eq!(grown["spec"]["resources"]["requests"]["storage"], "2Gi");
    let err = c
        .patch(&pvcs, "fixed", &resize("2Gi"), None, &w())
        .await
        .unwrap_err();
    assert_eq!(err.code, 403, "{err}");
    assert!(
        err.message.contains("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"),
        "{err}"
    );
    let err = c
        .patch(&pvcs, "grows", &resize("512Mi"), None, &w())
        .await
        .unwrap_err();
    assert_eq!(err.code, 422, "{err}");
    assert!(
        err.message.contains("can not be less than status.capacity"),
        "{err}"
    );
    // Back down to the capacity is allowed (recovering from a failed expansion).
    c.patch(&pvcs, "grows", &resize("1Gi"), None, &w())
        .await
        .unwrap();
    // A claim bound to a bigger volume than it asked for can still be updated (finalizers,
    // annotations) while its request does not shrink.
    c.patch(
        &pvcs,
        "fixed",
        &Patch::Merge(json!({"status": {"capacity": {"storage": "5Gi"}}})),
        Some("status"),
        &w(),
    )
    .await
    .unwrap();
    c.patch(
        &pvcs,
        "fixed",
        &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        None,
        &w(),
    )
    .await
    .unwrap();
}

//! The PV controller and the provisioner against the real API semantics: static binding to
//! the smallest match, pre-binding both ways, Released volumes under Retain and Delete, Lost
//! claims, and dynamic provisioning through a fake provisioner that records its calls
//! (retries under the same name, WaitForFirstConsumer with the node's topology, secrets from
//! templates).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{create, env, eventually};
use k1s_api::client::{Client, DeleteParams, ListParams, Patch, ResourceRef, WriteParams};
use k1s_controllers::provisioner::{
    ProvisionError, ProvisionRequest, ProvisionedVolume, ProvisionerSet, VolumeProvisioner,
};
use serde_json::{Value, json};

const DRIVER: &str = "fake.csi.k1s.io";
const ZONE: &str = "topology.fake.csi.k1s.io/zone";

fn pvcs() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", Some("default"))
}
fn pvs() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumes", None)
}
fn classes() -> ResourceRef {
    ResourceRef::new("storage.k8s.io", "v1", "storageclasses", None)
}

fn pv(name: &str, size: &str, policy: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": policy, "storageClassName": "",
                 "hostPath": {"path": format!("/tmp/{name}")}}})
}

fn pvc(name: &str, size: &str, class: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}}})
}

async fn get(c: &Arc<dyn Client>, r: &ResourceRef, name: &str) -> Option<Value> {
    c.get(r, name).await.ok()
}

/// Waits until `r/name` satisfies `pred`, returning it.
async fn wait_for(
    c: &Arc<dyn Client>,
    r: &ResourceRef,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || {
        let (c, r) = (c.clone(), r.clone());
        let pred = &pred;
        async move { get(&c, &r, name).await.filter(|o| pred(o)) }
    })
    .await
}

async fn phase_is(c: &Arc<dyn Client>, r: &ResourceRef, name: &str, phase: &str) -> Value {
    wait_for(c, r, name, &format!("{name} {phase}"), |o| {
        o["status"]["phase"] == phase
    })
    .await
}

/// The events about `name` (any kind) in `default`, as (reason, message).
async fn events(c: &Arc<dyn Client>, name: &str) -> Vec<(String, String)> {
    let r = ResourceRef::new("", "v1", "events", Some("default"));
    c.list(&r, &ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_owned(),
                e["message"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

async fn wait_event(c: &Arc<dyn Client>, name: &str, reason: &str) -> String {
    eventually(&format!("event {reason} on {name}"), || {
        let c = c.clone();
        async move {
            events(&c, name)
                .await
                .into_iter()
                .find(|(r, _)| r == reason)
                .map(|(_, m)| m)
        }
    })
    .await
}

/// Drops a finalizer-held object for good: deletes it, then removes its finalizers (in that
/// order, or the protection controller may add its finalizer back in between).
async fn force_delete(c: &Arc<dyn Client>, r: &ResourceRef, name: &str) {
    c.delete(r, name, &DeleteParams::default()).await.unwrap();
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let _ = c
        .patch(r, name, &patch, None, &WriteParams::default())
        .await;
    eventually(&format!("{name} gone"), || {
        let (c, r) = (c.clone(), r.clone());
        async move { get(&c, &r, name).await.is_none().then_some(()) }
    })
    .await;
}

fn start_pv_controllers(c: &Arc<dyn Client>, cancel: &tokio_util::sync::CancellationToken) {
    use k1s_controllers::{pv, volume_protection};
    tokio::spawn(pv::run(c.clone(), cancel.clone()));
    tokio::spawn(volume_protection::run_pvc(c.clone(), cancel.clone()));
    tokio::spawn(volume_protection::run_pv(c.clone(), cancel.clone()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_binding_takes_the_smallest_match() {
    let env = env().await;
    let c = env.client.clone();
    start_pv_controllers(&c, &env.cancel);
    for (n, s) in [("big", "10Gi"), ("small", "2Gi"), ("tiny", "500Mi")] {
        create(&c, &pvs(), pv(n, s, "Retain")).await;
    }
    create(&c, &pvcs(), pvc("data", "1Gi", "")).await;
    let claim = phase_is(&c, &pvcs(), "data", "Bound").await;
    assert_eq!(claim["spec"]["volumeName"], "small");
    let ann = &claim["metadata"]["annotations"];
    assert_eq!(ann["pv.kubernetes.io/bound-by-controller"], "yes");
    assert_eq!(ann["pv.kubernetes.io/bind-completed"], "yes");
    assert_eq!(claim["status"]["capacity"]["storage"], "2Gi");
    assert_eq!(claim["status"]["accessModes"], json!(["ReadWriteOnce"]));

    let vol = phase_is(&c, &pvs(), "small", "Bound").await;
    assert_eq!(vol["spec"]["claimRef"]["name"], "data");
    assert_eq!(vol["spec"]["claimRef"]["uid"], claim["metadata"]["uid"]);
    assert_eq!(
        vol["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );
    assert!(vol["status"]["lastPhaseTransitionTime"].is_string());
    phase_is(&c, &pvs(), "big", "Available").await;
    phase_is(&c, &pvs(), "tiny", "Available").await;

    // Nothing left that fits and no class: Pending, with upstream's event.
    create(&c, &pvcs(), pvc("huge", "50Gi", "")).await;
    let msg = wait_event(&c, "huge", "FailedBinding").await;
    assert_eq!(
        msg,
        "no persistent volumes available for this claim and no storage class is set"
    );
    assert_eq!(
        get(&c, &pvcs(), "huge").await.unwrap()["status"]["phase"],
        "Pending"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_binding_by_claim_ref_and_by_volume_name() {
    let env = env().await;
    let c = env.client.clone();
    start_pv_controllers(&c, &env.cancel);
    // A PV reserved for claim "mine": bigger than a free one, still chosen; another claim
    // does not get it.
    let mut reserved = pv("reserved", "5Gi", "Retain");
    reserved["spec"]["claimRef"] = json!({"namespace": "default", "name": "mine"});
    create(&c, &pvs(), reserved).await;
    create(&c, &pvs(), pv("free", "1Gi", "Retain")).await;
    create(&c, &pvcs(), pvc("other", "2Gi", "")).await;
    phase_is(&c, &pvs(), "reserved", "Available").await;
    create(&c, &pvcs(), pvc("mine", "1Gi", "")).await;
    let claim = phase_is(&c, &pvcs(), "mine", "Bound").await;
    assert_eq!(claim["spec"]["volumeName"], "reserved");
    let vol = phase_is(&c, &pvs(), "reserved", "Bound").await;
    // The user bound the volume: no bound-by-controller on it.
    assert!(vol["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"].is_null());
    assert_eq!(vol["spec"]["claimRef"]["uid"], claim["metadata"]["uid"]);
    assert_eq!(
        get(&c, &pvcs(), "other").await.unwrap()["status"]["phase"],
        "Pending"
    );
    c.delete(&pvcs(), "other", &DeleteParams::default())
        .await
        .unwrap();
    // (A claim being deleted may still bind, as upstream: let it go first.)
    eventually("other gone", || {
        let c = c.clone();
        async move { get(&c, &pvcs(), "other").await.is_none().then_some(()) }
    })
    .await;

    // A claim naming its volume binds to it, even though a smaller one would fit.
    create(&c, &pvs(), pv("named", "8Gi", "Retain")).await;
    let mut named = pvc("wants-named", "1Gi", "");
    named["spec"]["volumeName"] = json!("named");
    create(&c, &pvcs(), named).await;
    let claim = phase_is(&c, &pvcs(), "wants-named", "Bound").await;
    assert!(claim["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"].is_null());
    assert_eq!(
        claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
        "yes"
    );
    let vol = phase_is(&c, &pvs(), "named", "Bound").await;
    assert_eq!(
        vol["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );

    // A named volume too small: VolumeMismatch, Pending.
    create(&c, &pvs(), pv("small-named", "1Gi", "Retain")).await;
    let mut big = pvc("too-big", "3Gi", "");
    big["spec"]["volumeName"] = json!("small-named");
    create(&c, &pvcs(), big).await;
    let msg = wait_event(&c, "too-big", "VolumeMismatch").await;
    assert_eq!(
        msg,
        "Cannot bind to requested volume \"small-named\": requested PV is too small"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_volumes_and_lost_claims() {
    let env = env().await;
    let c = env.client.clone();
    start_pv_controllers(&c, &env.cancel);
    create(&c, &pvs(), pv("keep", "1Gi", "Retain")).await;
    create(&c, &pvcs(), pvc("a", "1Gi", "")).await;
    phase_is(&c, &pvcs(), "a", "Bound").await;
    phase_is(&c, &pvs(), "keep", "Bound").await;
    c.delete(&pvcs(), "a", &DeleteParams::default())
        .await
        .unwrap();
    // Retain: Released, kept, still pointing at the old claim.
    let vol = phase_is(&c, &pvs(), "keep", "Released").await;
    assert_eq!(vol["spec"]["claimRef"]["name"], "a");
    // A new claim of the same name does not get it back.
    create(&c, &pvcs(), pvc("a", "1Gi", "")).await;
    eventually("the new claim pending", || {
        let c = c.clone();
        async move {
            let e = events(&c, "a").await;
            e.iter().any(|(r, _)| r == "FailedBinding").then_some(())
        }
    })
    .await;
    assert_eq!(
        get(&c, &pvs(), "keep").await.unwrap()["status"]["phase"],
        "Released"
    );
    c.delete(&pvcs(), "a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the second claim a gone", || {
        let c = c.clone();
        async move { get(&c, &pvcs(), "a").await.is_none().then_some(()) }
    })
    .await;

    // Delete without a provisioner: Failed, with an event.
    create(&c, &pvs(), pv("gone", "1Gi", "Delete")).await;
    create(&c, &pvcs(), pvc("b", "1Gi", "")).await;
    phase_is(&c, &pvs(), "gone", "Bound").await;
    c.delete(&pvcs(), "b", &DeleteParams::default())
        .await
        .unwrap();
    let vol = phase_is(&c, &pvs(), "gone", "Failed").await;
    assert_eq!(
        vol["status"]["message"],
        "no deletable volume plugin matched"
    );
    wait_event(&c, "gone", "VolumeFailedDelete").await;

    // Recycle: Failed.
    create(&c, &pvs(), pv("recycled", "1Gi", "Recycle")).await;
    create(&c, &pvcs(), pvc("r", "1Gi", "")).await;
    phase_is(&c, &pvs(), "recycled", "Bound").await;
    c.delete(&pvcs(), "r", &DeleteParams::default())
        .await
        .unwrap();
    let vol = phase_is(&c, &pvs(), "recycled", "Failed").await;
    assert_eq!(
        vol["status"]["message"],
        "No recycler plugin found for the volume!"
    );

    // A bound claim whose volume is removed by force: Lost.
    create(&c, &pvs(), pv("doomed", "1Gi", "Retain")).await;
    create(&c, &pvcs(), pvc("l", "1Gi", "")).await;
    phase_is(&c, &pvs(), "doomed", "Bound").await;
    phase_is(&c, &pvcs(), "l", "Bound").await;
    force_delete(&c, &pvs(), "doomed").await;
    phase_is(&c, &pvcs(), "l", "Lost").await;
    let msg = wait_event(&c, "l", "ClaimLost").await;
    assert_eq!(
        msg,
        "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
    );
}

/// A provisioner that records its calls, fails the first `fail_creates` creates, and
/// answers the same volume for the same name.
#[derive(Default)]
struct FakeProvisioner {
    creates: Mutex<Vec<ProvisionRequest>>,
    deletes: Mutex<Vec<(String, BTreeMap<String, String>)>>,
    fail_creates: Mutex<usize>,
}

#[async_trait::async_trait]
impl VolumeProvisioner for FakeProvisioner {
    fn name(&self) -> &str {
        DRIVER
    }
    async fn create(&self, req: ProvisionRequest) -> Result<ProvisionedVolume, ProvisionError> {
        self.creates.lock().unwrap().push(req.clone());
        {
            let mut f = self.fail_creates.lock().unwrap();
            if *f > 0 {
                *f -= 1;
                return Err(ProvisionError::Transient("backend is busy".into()));
            }
        }
        let topology = req
            .accessibility
            .as_ref()
            .and_then(|a| a.preferred.first().cloned())
            .into_iter()
            .collect();
        Ok(ProvisionedVolume {
            volume_handle: format!("handle-{}", req.name),
            capacity_bytes: req.required_bytes,
            volume_context: BTreeMap::from([("origin".into(), "fake".into())]),
            accessible_topology: topology,
        })
    }
    async fn delete(
        &self,
        handle: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        self.deletes
            .lock()
            .unwrap()
            .push((handle.to_owned(), secrets));
        Ok(())
    }
}

fn start_all(
    c: &Arc<dyn Client>,
    cancel: &tokio_util::sync::CancellationToken,
) -> (Arc<FakeProvisioner>, ProvisionerSet) {
    start_pv_controllers(c, cancel);
    let fake = Arc::new(FakeProvisioner::default());
    let set = ProvisionerSet::new();
    tokio::spawn(k1s_controllers::provisioner::run(
        c.clone(),
        set.clone(),
        cancel.clone(),
    ));
    (fake, set)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_provisioning_retries_under_one_name_and_deletes() {
    let env = env().await;
    let c = env.client.clone();
    let (fake, set) = start_all(&c, &env.cancel);
    *fake.fail_creates.lock().unwrap() = 1;
    let secrets = ResourceRef::new("", "v1", "secrets", Some("default"));
    create(
        &c,
        &secrets,
        json!({"metadata": {"name": "data-creds"},
        "data": {"user": "YWRtaW4=", "password": "czNjcmV0"}}),
    )
    .await;
    create(
        &c,
        &classes(),
        json!({"metadata": {"name": "fast"}, "provisioner": DRIVER,
        "parameters": {"type": "ssd",
            "csi.storage.k8s.io/fstype": "xfs",
            "csi.storage.k8s.io/provisioner-secret-name": "${pvc.name}-creds",
            "csi.storage.k8s.io/provisioner-secret-namespace": "${pvc.namespace}",
            "csi.storage.k8s.io/node-publish-secret-name": "${pv.name}-publish",
            "csi.storage.k8s.io/node-publish-secret-namespace": "${pvc.namespace}"},
        "mountOptions": ["noatime"], "volumeBindingMode": "Immediate"}),
    )
    .await;
    let claim = create(&c, &pvcs(), pvc("data", "1Gi", "fast")).await;
    let uid = claim["metadata"]["uid"].as_str().unwrap().to_owned();
    let pv_name = format!("pvc-{uid}");

    // The PV controller hands the claim to the provisioner, which is not registered yet.
    let claim = wait_for(&c, &pvcs(), "data", "the provisioner annotation", |o| {
        o["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == DRIVER
    })
    .await;
    assert_eq!(
        claim["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-provisioner"],
        DRIVER
    );
    let msg = wait_event(&c, "data", "ExternalProvisioning").await;
    assert!(msg.starts_with(&format!(
        "Waiting for a volume to be created either by the external provisioner '{DRIVER}'"
    )));
    assert!(fake.creates.lock().unwrap().is_empty());

    // The plugin registers: the claim is provisioned (after one failure) and bound.
    set.add(fake.clone());
    let claim = phase_is(&c, &pvcs(), "data", "Bound").await;
    assert_eq!(claim["spec"]["volumeName"], pv_name.as_str());
    let failed = wait_event(&c, "data", "ProvisioningFailed").await;
    assert_eq!(
        failed,
        "failed to provision volume with StorageClass \"fast\": backend is busy"
    );
    let ok = wait_event(&c, "data", "ProvisioningSucceeded").await;
    assert_eq!(ok, format!("Successfully provisioned volume {pv_name}"));
    {
        let creates = fake.creates.lock().unwrap();
        assert_eq!(creates.len(), 2, "one failure, one retry");
        assert!(
            creates.iter().all(|r| r.name == pv_name),
            "same name on retry"
        );
        let req = &creates[1];
        assert_eq!(req.required_bytes, 1 << 30);
        assert_eq!(
            req.parameters,
            BTreeMap::from([("type".into(), "ssd".into())])
        );
        assert_eq!(
            req.secrets.get("password").map(String::as_str),
            Some("s3cret")
        );
        assert_eq!(req.secrets.get("user").map(String::as_str), Some("admin"));
        assert_eq!(req.capabilities.len(), 1);
        assert!(req.accessibility.is_none(), "no topology without CSINodes");
    }
    let vol = phase_is(&c, &pvs(), &pv_name, "Bound").await;
    let spec = &vol["spec"];
    assert_eq!(spec["csi"]["driver"], DRIVER);
    assert_eq!(spec["csi"]["volumeHandle"], format!("handle-{pv_name}"));
    assert_eq!(spec["csi"]["fsType"], "xfs");
    assert_eq!(spec["csi"]["volumeAttributes"]["origin"], "fake");
    assert_eq!(
        spec["csi"]["nodePublishSecretRef"],
        json!({"name": format!("{pv_name}-publish"), "namespace": "default"})
    );
    assert_eq!(spec["claimRef"]["uid"], uid.as_str());
    assert_eq!(spec["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(spec["storageClassName"], "fast");
    assert_eq!(spec["capacity"]["storage"], "1Gi");
    assert_eq!(spec["mountOptions"], json!(["noatime"]));
    let ann = &vol["metadata"]["annotations"];
    assert_eq!(ann["pv.kubernetes.io/provisioned-by"], DRIVER);
    assert_eq!(
        ann["volume.kubernetes.io/provisioner-deletion-secret-name"],
        "data-creds"
    );
    assert_eq!(
        ann["volume.kubernetes.io/provisioner-deletion-secret-namespace"],
        "default"
    );
    let finalizers = vol["metadata"]["finalizers"].as_array().unwrap();
    assert!(finalizers.contains(&json!(
        "external-provisioner.volume.kubernetes.io/finalizer"
    )));

    // Deleting the claim deletes the volume (with the deletion secret), then the PV.
    c.delete(&pvcs(), "data", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the PV deleted", || {
        let c = c.clone();
        let n = pv_name.clone();
        async move { get(&c, &pvs(), &n).await.is_none().then_some(()) }
    })
    .await;
    let deletes = fake.deletes.lock().unwrap().clone();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].0, format!("handle-{pv_name}"));
    assert_eq!(deletes[0].1.get("user").map(String::as_str), Some("admin"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_uses_the_selected_nodes_topology() {
    let env = env().await;
    let c = env.client.clone();
    let (fake, set) = start_all(&c, &env.cancel);
    set.add(fake.clone());
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let csinodes = ResourceRef::new("storage.k8s.io", "v1", "csinodes", None);
    for (n, z) in [("n1", "z1"), ("n2", "z2")] {
        create(
            &c,
            &nodes,
            json!({"metadata": {"name": n, "labels": {ZONE: z}}}),
        )
        .await;
        create(
            &c,
            &csinodes,
            json!({"metadata": {"name": n}, "spec": {"drivers": [
            {"name": DRIVER, "nodeID": n, "topologyKeys": [ZONE]}]}}),
        )
        .await;
    }
    create(
        &c,
        &classes(),
        json!({"metadata": {"name": "local"}, "provisioner": DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain"}),
    )
    .await;
    create(&c, &pvcs(), pvc("late", "1Gi", "local")).await;
    let msg = wait_event(&c, "late", "WaitForFirstConsumer").await;
    assert_eq!(
        msg,
        "waiting for first consumer to be created before binding"
    );
    assert!(fake.creates.lock().unwrap().is_empty());
    assert_eq!(
        get(&c, &pvcs(), "late").await.unwrap()["status"]["phase"],
        "Pending"
    );

    // The scheduler picks n2.
    let patch = Patch::Merge(
        json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n2"}}}),
    );
    c.patch(&pvcs(), "late", &patch, None, &WriteParams::default())
        .await
        .unwrap();
    let claim = phase_is(&c, &pvcs(), "late", "Bound").await;
    let req = fake.creates.lock().unwrap()[0].clone();
    let acc = req.accessibility.expect("accessibility requirements");
    let seg = |z: &str| BTreeMap::from([(ZONE.to_owned(), z.to_owned())]);
    assert_eq!(acc.preferred[0], seg("z2"));
    assert_eq!(acc.requisite, vec![seg("z1"), seg("z2")]);
    let vol = get(&c, &pvs(), claim["spec"]["volumeName"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(vol["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(
        vol["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": ZONE, "operator": "In", "values": ["z2"]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_volume_deleted_first_keeps_its_storage_until_the_claim_goes() {
    let env = env().await;
    let c = env.client.clone();
    let (fake, set) = start_all(&c, &env.cancel);
    set.add(fake.clone());
    create(
        &c,
        &classes(),
        json!({"metadata": {"name": "fast"}, "provisioner": DRIVER}),
    )
    .await;
    let claim = create(&c, &pvcs(), pvc("data", "1Gi", "fast")).await;
    let pv_name = format!("pvc-{}", claim["metadata"]["uid"].as_str().unwrap());
    phase_is(&c, &pvcs(), "data", "Bound").await;
    phase_is(&c, &pvs(), &pv_name, "Bound").await;

    // The user deletes the PV first: it waits (bound, and its storage not deleted).
    c.delete(&pvs(), &pv_name, &DeleteParams::default())
        .await
        .unwrap();
    let vol = wait_for(&c, &pvs(), &pv_name, "the PV terminating", |o| {
        o["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert_eq!(vol["status"]["phase"], "Bound");
    assert!(fake.deletes.lock().unwrap().is_empty());

    // The claim goes: the storage is deleted (once), then the PV.
    c.delete(&pvcs(), "data", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the PV gone", || {
        let c = c.clone();
        let n = pv_name.clone();
        async move { get(&c, &pvs(), &n).await.is_none().then_some(()) }
    })
    .await;
    let deletes = fake.deletes.lock().unwrap().clone();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0].0, format!("handle-{pv_name}"));
    assert!(deletes[0].1.is_empty(), "no deletion secret");
}

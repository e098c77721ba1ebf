//! End to end, issue #8, against a second, independent CSI plugin: the recording fixture of
//! the kubelet's tests (`kubelet/tests/support/csi_fixture.rs`), served from this test
//! process and registered with the real `k1s server` through its kubelet's plugin registry
//! directory, as any third-party driver would. kubectl drives a real container through
//! it, and the fixture's record checks what k1s asked of the plugin, in which order:
//! provisioning retried with the same name after a lost response, attach before stage,
//! the publish context passed to the node, pod info on mount, the teardown in reverse,
//! WaitForFirstConsumer with allowed topologies, online expansion, a snapshot restored into
//! a new claim, static PVs bound to the smallest match, and Retain keeping the data.
//! Needs root (containers, bind mounts); skips visibly otherwise.

#[path = "../../kubelet/tests/support/csi_fixture.rs"]
mod csi_fixture;

use csi_fixture::{CsiFixture, FixtureOptions};
use k1s_tests::host::{HostCleanup, Images, StorageCleanup, start_with_kubelet as start};
use k1s_tests::{Cluster, eventually};

const DRIVER: &str = "fixture.csi.k1s.io";

fn gone(c: &Cluster, what: &[&str]) -> bool {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    !c.run(&args).status.success()
}

/// The calls made for volume `id`, stats polling left out.
fn calls_for(plugin: &CsiFixture, id: &str) -> Vec<&'static str> {
    plugin
        .calls()
        .into_iter()
        .filter(|c| c.volume_id == id && c.method != "NodeGetVolumeStats")
        .map(|c| c.method)
        .collect()
}

fn pod(image: &str, name: &str, claim: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: [sh, -c, '{command}']\n    volumeMounts: [{{name: v, mountPath: /data}}]\n  volumes:\n  - name: v\n    persistentVolumeClaim: {{claimName: {claim}}}\n"
    )
}

fn static_pv(name: &str, size: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec:\n  capacity: {{storage: {size}}}\n  accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  persistentVolumeReclaimPolicy: Retain\n  csi: {{driver: {DRIVER}, volumeHandle: {name}}}\n"
    )
}

#[test]
fn a_third_party_plugin_provisions_attaches_mounts_and_reclaims() {
    let Some(images) = Images::start() else {
        return;
    };
    let mut flags = images.kubelet_flags("fix");
    // A claim grows on the node at the pod's next sync.
    flags.extend([
        "--disable".into(),
        "local-storage".into(),
        "--sync-frequency".into(),
        "2s".into(),
    ]);
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("fix", &flags) else {
        return;
    };
    let _storage = StorageCleanup(c.data_dir());
    let image = images.busybox();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plugin = rt.block_on(CsiFixture::start(
        &c.data_dir().join("fixture"),
        &c.data_dir().join("agent/plugins_registry"),
        FixtureOptions {
            attach: true,
            lose_first_create: true,
            ..Default::default()
        },
    ));
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {{name: {DRIVER}}}\nspec: {{attachRequired: true, podInfoOnMount: true}}\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: fixture}}\nprovisioner: {DRIVER}\nparameters: {{color: blue}}\nreclaimPolicy: Delete\nvolumeBindingMode: Immediate\nallowVolumeExpansion: true\n"
        ),
    );

    // Registration: the kubelet asked the plugin for its node id and topology.
    eventually("the fixture driver on the CSINode", 60, || {
        c.get_json(&["csinode", "node-fix"])["spec"]["drivers"]
            .as_array()
            .is_some_and(|d| {
                d.iter()
                    .any(|d| d["name"] == DRIVER && d["nodeID"] == "fixture-node-1")
            })
    });
    assert!(
        plugin.registrations().iter().any(|r| r.plugin_registered),
        "{:?}",
        plugin.registrations()
    );
    let node = c.get_json(&["node", "node-fix"]);
    assert_eq!(
        node["metadata"]["labels"]["topology.fixture.csi.k1s.io/zone"], "z1",
        "{}",
        node["metadata"]
    );

    // Dynamic provisioning: the first CreateVolume's answer is lost; k1s asks again with
    // the same name and gets the same volume, so there is one volume, not two.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: dyn}\nspec:\n  storageClassName: fixture\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Mi}}\n",
    );
    eventually("the claim to be Bound", 60, || {
        c.get_json(&["pvc", "dyn"])["status"]["phase"] == "Bound"
    });
    let pvc = c.get_json(&["pvc", "dyn"]);
    let pv_name = k1s_tests::provisioned_pv_name(&pvc);
    assert_eq!(pvc["spec"]["volumeName"], pv_name.as_str());
    let pv = c.get_json(&["pv", &pv_name]);
    assert_eq!(pv["spec"]["csi"]["driver"], DRIVER, "{pv}");
    assert_eq!(pv["spec"]["csi"]["volumeHandle"], pv_name.as_str(), "{pv}");
    let creates: Vec<_> = plugin
        .calls()
        .into_iter()
        .filter(|c| c.method == "CreateVolume")
        .collect();
    assert_eq!(creates.len(), 2, "{creates:?}");
    assert!(creates.iter().all(|c| c.volume_id == pv_name));
    assert_eq!(creates[1].volume_context.get("color").unwrap(), "blue");
    let volumes: Vec<_> = std::fs::read_dir(plugin.volume_dir("x").parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(volumes, std::slice::from_ref(&pv_name));

    // A pod: attach (a VolumeAttachment, ControllerPublishVolume to the plugin's node id),
    // then stage with the publish context, then publish with the pod's identity.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            &image,
            "user",
            "dyn",
            "echo through-the-fixture > /data/hello; while true; do sleep 1; done",
        ),
    );
    eventually("the pod to run", 120, || {
        c.get_json(&["pod", "user"])["status"]["phase"] == "Running"
    });
    eventually("the file in the plugin's volume", 30, || {
        std::fs::read_to_string(plugin.volume_dir(&pv_name).join("hello")).ok()
            == Some("through-the-fixture\n".into())
    });
    let attachments = c.get_json(&["volumeattachments"]);
    let va = attachments["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|v| v["spec"]["source"]["persistentVolumeName"] == pv_name.as_str())
        })
        .cloned()
        .unwrap_or_else(|| panic!("no VolumeAttachment for {pv_name}: {attachments}"));
    assert_eq!(va["spec"]["attacher"], DRIVER);
    assert_eq!(va["spec"]["nodeName"], "node-fix");
    assert_eq!(va["status"]["attached"], true, "{va}");
    // The attacher holds the PV while it is attached.
    let finalizers = c.get_json(&["pv", &pv_name])["metadata"]["finalizers"].to_string();
    assert!(
        finalizers.contains(&format!("external-attacher/{DRIVER}")),
        "{finalizers}"
    );
    assert_eq!(
        calls_for(&plugin, &pv_name),
        [
            "CreateVolume",
            "CreateVolume",
            "ControllerPublishVolume",
            "NodeStageVolume",
            "NodePublishVolume"
        ]
    );
    let calls = plugin.calls();
    let call = |m: &str| calls.iter().find(|c| c.method == m).unwrap().clone();
    assert_eq!(call("ControllerPublishVolume").path, "fixture-node-1");
    let devpath = format!("/dev/fixture/{pv_name}");
    assert_eq!(
        call("NodeStageVolume").publish_context.get("devicePath"),
        Some(&devpath)
    );
    let publish = call("NodePublishVolume");
    assert_eq!(
        publish.volume_context.get("csi.storage.k8s.io/pod.name"),
        Some(&"user".to_owned()),
        "{publish:?}"
    );
    assert!(
        publish
            .volume_context
            .contains_key("csi.storage.k8s.io/pod.uid")
    );

    // Teardown in reverse once the pod goes; reclaim Delete once the claim does.
    c.ok(&["delete", "pod", "user"]);
    eventually("the volume to be detached", 90, || {
        calls_for(&plugin, &pv_name).ends_with(&[
            "NodeUnpublishVolume",
            "NodeUnstageVolume",
            "ControllerUnpublishVolume",
        ])
    });
    eventually("the VolumeAttachment to go", 30, || {
        !c.get_json(&["volumeattachments"])
            .to_string()
            .contains(&pv_name)
    });
    c.ok(&["delete", "pvc", "dyn"]);
    eventually("the PV to go", 60, || gone(&c, &["pv", &pv_name]));
    assert_eq!(
        calls_for(&plugin, &pv_name).last().copied(),
        Some("DeleteVolume")
    );
    assert!(!plugin.volume_dir(&pv_name).exists());

    // WaitForFirstConsumer with topology: a class allowed only in a zone without nodes
    // leaves its pod unschedulable and provisions nothing; one allowed in the plugin's zone
    // provisions for the pod's node, that node's topology the requirement, and the PV
    // follows the volume's accessible topology.
    let class = |name: &str, zone: &str| {
        format!(
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: {DRIVER}\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies:\n- matchLabelExpressions:\n  - {{key: topology.fixture.csi.k1s.io/zone, values: [{zone}]}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  storageClassName: {name}\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 5Mi}}}}\n---\n{}",
            pod(
                &image,
                &format!("{name}-user"),
                name,
                "while true; do sleep 1; done"
            )
        )
    };
    c.ok_stdin(&["apply", "-f", "-"], &class("far", "z2"));
    eventually("the far pod to be unschedulable", 60, || {
        c.ok(&["describe", "pod", "far-user"])
            .contains("FailedScheduling")
    });
    c.ok_stdin(&["apply", "-f", "-"], &class("near", "z1"));
    eventually("the near pod to run", 120, || {
        c.get_json(&["pod", "near-user"])["status"]["phase"] == "Running"
    });
    let near = c.get_json(&["pvc", "near"]);
    let near_pv = k1s_tests::provisioned_pv_name(&near);
    assert_eq!(near["status"]["phase"], "Bound");
    assert_eq!(
        near["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        "node-fix"
    );
    let create = plugin
        .calls()
        .into_iter()
        .find(|c| c.method == "CreateVolume" && c.volume_id == near_pv)
        .unwrap();
    let zone = [(
        "topology.fixture.csi.k1s.io/zone".to_owned(),
        "z1".to_owned(),
    )]
    .into();
    assert_eq!(create.requisite, [zone], "{create:?}");
    let affinity = c.get_json(&["pv", &near_pv])["spec"]["nodeAffinity"].to_string();
    assert!(
        affinity.contains("topology.fixture.csi.k1s.io/zone") && affinity.contains("z1"),
        "{affinity}"
    );
    assert_eq!(c.get_json(&["pvc", "far"])["status"]["phase"], "Pending");
    assert!(
        !plugin.calls().iter().any(|c| c.method == "CreateVolume"
            && c.volume_id != near_pv
            && c.volume_id != pv_name),
        "{:?}",
        plugin.methods()
    );
    c.ok(&["delete", "pod", "far-user", "near-user"]);
    c.ok(&["delete", "pvc", "far", "near"]);

    // Expansion while in use (ControllerExpandVolume, then NodeExpandVolume on the node),
    // and a snapshot restored into a new claim with the content.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: {{name: fixture}}\ndriver: {DRIVER}\ndeletionPolicy: Delete\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: grow}}\nspec:\n  storageClassName: fixture\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 10Mi}}}}\n---\n{}",
            pod(&image, "grower", "grow", "echo v1 > /data/v; while true; do sleep 1; done")
        ),
    );
    eventually("the grower to run", 120, || {
        c.get_json(&["pod", "grower"])["status"]["phase"] == "Running"
    });
    let grow_pv = k1s_tests::provisioned_pv_name(&c.get_json(&["pvc", "grow"]));
    eventually("the grower's file", 30, || {
        std::fs::read_to_string(plugin.volume_dir(&grow_pv).join("v")).ok() == Some("v1\n".into())
    });
    c.ok(&[
        "patch",
        "pvc",
        "grow",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"20Mi"}}}}"#,
    ]);
    eventually("the claim to grow to 20Mi", 90, || {
        c.get_json(&["pvc", "grow"])["status"]["capacity"]["storage"] == "20Mi"
    });
    let grow_calls = calls_for(&plugin, &grow_pv);
    let at = |m: &str| grow_calls.iter().position(|c| *c == m);
    assert!(
        at("ControllerExpandVolume") < at("NodeExpandVolume") && at("NodeExpandVolume").is_some(),
        "{grow_calls:?}"
    );
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {{name: snap}}\nspec:\n  volumeSnapshotClassName: fixture\n  source: {{persistentVolumeClaimName: grow}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: restored}}\nspec:\n  storageClassName: fixture\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 20Mi}}}}\n  dataSource: {{apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap}}\n---\n{}",
            pod(&image, "reader", "restored", "cat /data/v > /data/read-back; while true; do sleep 1; done")
        ),
    );
    eventually("the snapshot to be ready", 60, || {
        c.get_json(&["volumesnapshot", "snap"])["status"]["readyToUse"] == true
    });
    eventually("the reader to run", 120, || {
        c.get_json(&["pod", "reader"])["status"]["phase"] == "Running"
    });
    let restored_pv = k1s_tests::provisioned_pv_name(&c.get_json(&["pvc", "restored"]));
    eventually("the restored content read back in the pod", 30, || {
        std::fs::read_to_string(plugin.volume_dir(&restored_pv).join("read-back")).ok()
            == Some("v1\n".into())
    });
    assert!(
        plugin
            .calls()
            .iter()
            .any(|c| c.method == "CreateSnapshot" && c.volume_id == grow_pv),
        "{:?}",
        plugin.methods()
    );
    c.ok(&["delete", "pod", "grower", "reader"]);
    c.ok(&["delete", "volumesnapshot", "snap"]);
    eventually("the snapshot to be deleted in the plugin", 60, || {
        plugin.methods().contains(&"DeleteSnapshot")
    });
    c.ok(&["delete", "pvc", "grow", "restored"]);

    // Static PVs with a CSI source: the claim takes the smallest that fits; Retain keeps
    // the volume and its data when the claim goes.
    for name in ["static-small", "static-big"] {
        std::fs::create_dir_all(plugin.volume_dir(name)).unwrap();
    }
    std::fs::write(plugin.volume_dir("static-small").join("keep"), "admin data").unwrap();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "{}---\n{}---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: claim}}\nspec:\n  storageClassName: manual\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 15Mi}}}}\n",
            static_pv("static-big", "50Mi"),
            static_pv("static-small", "20Mi"),
        ),
    );
    eventually("the claim to bind", 60, || {
        c.get_json(&["pvc", "claim"])["status"]["phase"] == "Bound"
    });
    assert_eq!(
        c.get_json(&["pvc", "claim"])["spec"]["volumeName"],
        "static-small"
    );
    assert_eq!(
        c.get_json(&["pv", "static-big"])["status"]["phase"],
        "Available"
    );
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            &image,
            "static-user",
            "claim",
            "cat /data/keep > /data/copied; while true; do sleep 1; done",
        ),
    );
    eventually("the static pod to write", 120, || {
        std::fs::read_to_string(plugin.volume_dir("static-small").join("copied")).ok()
            == Some("admin data".into())
    });
    c.ok(&["delete", "pod", "static-user"]);
    c.ok(&["delete", "pvc", "claim"]);
    eventually("the PV to be Released", 60, || {
        c.get_json(&["pv", "static-small"])["status"]["phase"] == "Released"
    });
    eventually("the static volume to be detached", 60, || {
        calls_for(&plugin, "static-small").last() == Some(&"ControllerUnpublishVolume")
    });
    assert!(!calls_for(&plugin, "static-small").contains(&"DeleteVolume"));
    eventually("the attacher to let go of the PV", 30, || {
        !c.get_json(&["pv", "static-small"])["metadata"]["finalizers"]
            .to_string()
            .contains("external-attacher/")
    });
    assert_eq!(
        std::fs::read_to_string(plugin.volume_dir("static-small").join("copied")).unwrap(),
        "admin data"
    );
    drop(plugin);
    drop(rt);
}

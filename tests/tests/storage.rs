//! End to end, issue #8: storage through real CSI. `k1s server` starts `k1s csi-hostpath` (its
//! own process, registering over the kubelet's plugin socket directory), creates the default
//! `local-path` StorageClass, provisions through real `CreateVolume` calls, and the kubelet
//! stages and publishes real ext4 volumes on loop devices into real containers. kubectl drives
//! everything. Needs root (CI runs as root); skips visibly otherwise.

use std::path::Path;

use k1s_tests::host::{HostCleanup, Images, StorageCleanup, start_with_kubelet as start};
use k1s_tests::{Cluster, eventually};

const DRIVER: &str = "hostpath.csi.k1s.io";

fn running(c: &Cluster, selector: &str) -> Vec<String> {
    c.get_json(&["pods", "-l", selector])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
        })
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The plugin's registration went through: the CSINode lists the driver.
fn wait_for_driver(c: &Cluster, node: &str) {
    eventually("the hostpath driver to register on the node", 60, || {
        c.get_json(&["csinode", node])["spec"]["drivers"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["name"] == DRIVER))
    });
}

/// Images the plugin holds under the data dir: `volumes` or `snapshots`.
fn images_in(data: &Path, kind: &str) -> Vec<String> {
    std::fs::read_dir(data.join("storage/hostpath").join(kind))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "img"))
        .map(|p| p.display().to_string())
        .collect()
}

fn volume_images(data: &Path) -> Vec<String> {
    images_in(data, "volumes")
}

/// `df -k` total of `path` inside pod `pod`, in KiB.
fn df_kib(c: &Cluster, pod: &str, path: &str) -> u64 {
    let out = c.ok(&["exec", pod, "--", "df", "-k", path]);
    out.lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("df output: {out}"))
}

fn deployment(image: &str, claim: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: writers}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: writers}}}}
  template:
    metadata: {{labels: {{app: writers}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: w
        image: {image}
        command: ["sh", "-c", "hostname > /data/$(hostname); while true; do sleep 1; done"]
        volumeMounts: [{{name: data, mountPath: /data}}]
      volumes:
      - name: data
        persistentVolumeClaim: {{claimName: {claim}}}
"#
    )
}

#[test]
fn local_path_volumes_provision_share_expand_and_go() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("stor");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("stor", &flags) else {
        return;
    };
    let _storage = StorageCleanup(c.data_dir());
    let image = images.busybox();
    wait_for_driver(&c, "node-stor");
    // The Node got the plugin's id and topology from NodeGetInfo.
    let node = c.get_json(&["node", "node-stor"]);
    assert!(
        node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"]
            .as_str()
            .is_some_and(|a| a.contains(DRIVER)),
        "{}",
        node["metadata"]
    );
    assert_eq!(
        node["metadata"]["labels"]["topology.hostpath.csi.k1s.io/node"],
        "node-stor"
    );
    let classes = c.ok(&["get", "storageclass"]);
    assert!(
        classes.contains("local-path (default)") && classes.contains(DRIVER),
        "{classes}"
    );

    // A claim of the default class waits for its first consumer.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 32Mi}}\n",
    );
    eventually("the WaitForFirstConsumer event", 30, || {
        c.ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=data",
        ])
        .contains("WaitForFirstConsumer")
    });
    assert_eq!(c.get_json(&["pvc", "data"])["status"]["phase"], "Pending");

    // Three replicas share it (one node, ReadWriteOnce).
    c.ok_stdin(&["apply", "-f", "-"], &deployment(&image, "data", 3));
    eventually("the claim to be Bound", 90, || {
        c.get_json(&["pvc", "data"])["status"]["phase"] == "Bound"
    });
    let pvc = c.get_json(&["pvc", "data"]);
    let pv_name = pvc["spec"]["volumeName"].as_str().unwrap().to_owned();
    assert_eq!(pv_name, k1s_tests::provisioned_pv_name(&pvc));
    let pv = c.get_json(&["pv", &pv_name]);
    assert_eq!(pv["spec"]["csi"]["driver"], DRIVER, "{pv}");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        DRIVER
    );
    assert!(
        pv["spec"]["nodeAffinity"].to_string().contains("node-stor"),
        "{pv}"
    );
    eventually("3 writers Running", 120, || {
        running(&c, "app=writers").len() == 3
    });
    let pods = running(&c, "app=writers");
    eventually("every writer's file in the shared volume", 30, || {
        let ls = c.ok(&["exec", &pods[0], "--", "ls", "/data"]);
        pods.iter().all(|p| ls.contains(p.as_str()))
    });
    // A real file system of the claimed size (ext4 keeps some for itself).
    let kib = df_kib(&c, &pods[0], "/data");
    assert!((20_000..=33_000).contains(&kib), "df says {kib} KiB");
    assert_eq!(volume_images(&c.data_dir()).len(), 1);

    // Volume stats reach /metrics (refreshed once a minute).
    eventually("kubelet_volume_stats_* for the claim", 150, || {
        let m = c.ok(&["get", "--raw", "/metrics"]);
        m.lines().any(|l| {
            l.starts_with("kubelet_volume_stats_capacity_bytes")
                && l.contains("persistentvolumeclaim=\"data\"")
        }) && m.contains("kubelet_volume_stats_inodes_free")
    });

    // Expansion: the class allows it; the PV grows at once, the file system when the volume
    // is next staged (or online, when the plugin may resize mounted file systems).
    c.ok(&[
        "patch",
        "pvc",
        "data",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"64Mi"}}}}"#,
    ]);
    eventually("the PV to grow to 64Mi", 60, || {
        c.get_json(&["pv", &pv_name])["spec"]["capacity"]["storage"] == "64Mi"
    });
    c.ok(&["scale", "deployment", "writers", "--replicas=0"]);
    eventually("the writers to go", 60, || {
        c.get_json(&["pods", "-l", "app=writers"])["items"]
            .as_array()
            .is_some_and(Vec::is_empty)
    });
    c.ok(&["scale", "deployment", "writers", "--replicas=1"]);
    eventually("a writer Running again", 90, || {
        running(&c, "app=writers").len() == 1
    });
    eventually("the claim's capacity to be 64Mi", 60, || {
        c.get_json(&["pvc", "data"])["status"]["capacity"]["storage"] == "64Mi"
    });
    let pod = running(&c, "app=writers").remove(0);
    let kib = df_kib(&c, &pod, "/data");
    assert!(kib > 50_000, "df says {kib} KiB after expanding to 64Mi");
    // The files written before are still there.
    let ls = c.ok(&["exec", &pod, "--", "ls", "/data"]);
    assert!(pods.iter().all(|p| ls.contains(p.as_str())), "{ls}");

    // A claim in use is not removed while its pod runs.
    c.ok(&["delete", "pvc", "data", "--wait=false"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pvc = c.get_json(&["pvc", "data"]);
    assert!(pvc["metadata"]["deletionTimestamp"].is_string(), "{pvc}");
    assert_eq!(pvc["status"]["phase"], "Bound");
    // Reclaim Delete: the claim, the PV and the volume go once the pods do.
    c.ok(&["delete", "deployment", "writers"]);
    eventually("the claim to go", 90, || {
        !c.run(&["get", "pvc", "data"]).status.success()
    });
    eventually("the PV to go", 60, || {
        !c.run(&["get", "pv", &pv_name]).status.success()
    });
    eventually("the volume image to be deleted", 30, || {
        volume_images(&c.data_dir()).is_empty()
    });
}

#[test]
fn snapshots_restore_and_block_volumes() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("snap");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("snap", &flags) else {
        return;
    };
    let _storage = StorageCleanup(c.data_dir());
    let image = images.busybox();
    wait_for_driver(&c, "node-snap");
    let pod = |name: &str, claim: &str, command: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: [sh, -c, '{command}']\n    volumeMounts: [{{name: v, mountPath: /data}}]\n  volumes:\n  - name: v\n    persistentVolumeClaim: {{claimName: {claim}}}\n"
        )
    };
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: src}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 16Mi}}}}\n---\n{}",
            pod("writer", "src", "echo snapshot-me > /data/hello; sync; while true; do sleep 1; done")
        ),
    );
    eventually("the writer to run", 120, || {
        c.get_json(&["pod", "writer"])["status"]["phase"] == "Running"
    });
    eventually("the file to be written", 30, || {
        c.run(&["exec", "writer", "--", "cat", "/data/hello"])
            .stdout
            == b"snapshot-me\n"
    });
    // The snapshot API is there out of the box.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata:\n  name: hostpath\n  annotations: {{snapshot.storage.kubernetes.io/is-default-class: \"true\"}}\ndriver: {DRIVER}\ndeletionPolicy: Delete\n---\napiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {{name: snap1}}\nspec:\n  source: {{persistentVolumeClaimName: src}}\n"
        ),
    );
    eventually("the snapshot to be ready", 60, || {
        c.get_json(&["volumesnapshot", "snap1"])["status"]["readyToUse"] == true
    });
    let snap = c.get_json(&["volumesnapshot", "snap1"]);
    assert_eq!(
        snap["spec"]["volumeSnapshotClassName"], "hostpath",
        "{snap}"
    );
    let content = snap["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        content,
        format!("snapcontent-{}", snap["metadata"]["uid"].as_str().unwrap())
    );
    let table = c.ok(&["get", "volumesnapshot", "snap1"]);
    assert!(
        table.contains("READYTOUSE") && table.contains("true"),
        "{table}"
    );
    assert!(
        c.get_json(&["volumesnapshotcontent", &content])["status"]["snapshotHandle"].is_string()
    );

    // Restore into a new claim; the content is the snapshot's, not what the source has now.
    c.ok(&[
        "exec",
        "writer",
        "--",
        "sh",
        "-c",
        "echo changed > /data/hello",
    ]);
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: restored}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 16Mi}}}}\n  dataSource: {{apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap1}}\n---\n{}",
            pod("reader", "restored", "cat /data/hello; while true; do sleep 1; done")
        ),
    );
    eventually("the reader to run", 120, || {
        c.get_json(&["pod", "reader"])["status"]["phase"] == "Running"
    });
    eventually("the restored content", 30, || {
        c.run(&["logs", "reader"]).stdout == b"snapshot-me\n"
    });

    // Block mode: the container gets the device itself.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: raw}}\nspec:\n  volumeMode: Block\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 8Mi}}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: blocky}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: [sh, -c, 'while true; do sleep 1; done']\n    volumeDevices: [{{name: v, devicePath: /dev/xvda}}]\n  volumes:\n  - name: v\n    persistentVolumeClaim: {{claimName: raw}}\n"
        ),
    );
    eventually("the block pod to run", 120, || {
        c.get_json(&["pod", "blocky"])["status"]["phase"] == "Running"
    });
    c.ok(&["exec", "blocky", "--", "test", "-b", "/dev/xvda"]);
    c.ok(&[
        "exec",
        "blocky",
        "--",
        "sh",
        "-c",
        "echo raw-bytes | dd of=/dev/xvda bs=512 count=1 conv=sync 2>/dev/null",
    ]);
    let back = c.ok(&[
        "exec",
        "blocky",
        "--",
        "sh",
        "-c",
        "dd if=/dev/xvda bs=9 count=1 2>/dev/null",
    ]);
    assert_eq!(back, "raw-bytes");

    // Deleting the snapshot (policy Delete) removes its content.
    c.ok(&["delete", "volumesnapshot", "snap1"]);
    eventually("the content to go", 60, || {
        !c.run(&["get", "volumesnapshotcontent", &content])
            .status
            .success()
    });
    eventually("the snapshot image to be deleted", 30, || {
        images_in(&c.data_dir(), "snapshots").is_empty()
    });
    // Clean up the claims so no mount outlives the test.
    c.ok(&["delete", "pod", "writer", "reader", "blocky"]);
    c.ok(&["delete", "pvc", "src", "restored", "raw"]);
    eventually("the volumes to go", 90, || {
        volume_images(&c.data_dir()).is_empty()
    });
}

#[test]
fn a_crash_while_provisioning_leaks_nothing() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("crash");
    let _cleanup = HostCleanup(flags.clone());
    let Some(mut c) = start("crash", &flags) else {
        return;
    };
    let _storage = StorageCleanup(c.data_dir());
    let image = images.busybox();
    wait_for_driver(&c, "node-crash");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: c1}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 16Mi}}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: user}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: [sh, -c, 'while true; do sleep 1; done']\n    volumeMounts: [{{name: v, mountPath: /data}}]\n  volumes:\n  - name: v\n    persistentVolumeClaim: {{claimName: c1}}\n"
        ),
    );
    // Kill -9 as soon as the scheduler has handed the claim to the provisioner: the volume
    // is being created (or about to be) and its PV does not exist yet.
    eventually("the claim to get its selected node", 60, || {
        c.get_json(&["pvc", "c1"])["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]
            == "node-crash"
    });
    c.server.kill();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    c.server = k1s_tests::Server::start(&c.data_dir(), c.port, &c.kubeconfig, &flags);
    eventually("the pod to run after the restart", 120, || {
        c.get_json(&["pod", "user"])["status"]["phase"] == "Running"
    });
    let pvc = c.get_json(&["pvc", "c1"]);
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
    let pvs = c.get_json(&["pv"]);
    assert_eq!(pvs["items"].as_array().map(Vec::len), Some(1), "{pvs}");
    // One volume: a CreateVolume repeated after the crash found the first one by name.
    assert_eq!(volume_images(&c.data_dir()).len(), 1);
    // Exactly one plugin process serves this data dir (the old one died with its k1s).
    let data = c.data_dir().display().to_string();
    let plugins =
        k1s_tests::host::pids_where(|cmd| cmd.contains("csi-hostpath") && cmd.contains(&data))
            .len();
    assert_eq!(plugins, 1);
    c.ok(&["delete", "pod", "user"]);
    c.ok(&["delete", "pvc", "c1"]);
    eventually("the volume to go", 90, || {
        volume_images(&c.data_dir()).is_empty()
    });
}

//! End to end, issue #8 (the PV controller) through the real server and kubectl: an
//! admin-created set of PVs (hostPath and CSI sources) and a claim that binds to the smallest
//! match, the phases `kubectl get pv,pvc` shows, `Retain` leaving a `Released` volume when the
//! claim goes, and a claim `Lost` when its volume is removed by force.

use std::time::{Duration, Instant};

use k1s_tests::Cluster;

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn pv(name: &str, size: &str, source: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {{"name": "{name}"}},
            "spec": {{"capacity": {{"storage": "{size}"}}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                     {source}}}}}"#
    )
}

fn pvc(name: &str, size: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {{"name": "{name}", "namespace": "default"}},
            "spec": {{"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "resources": {{"requests": {{"storage": "{size}"}}}}}}}}"#
    )
}

fn field(c: &Cluster, what: &str, path: &str) -> String {
    c.run(&["get", what, "-o", &format!("jsonpath={path}")])
        .stdout
        .iter()
        .map(|b| *b as char)
        .collect()
}

/// The row of `kubectl get` output whose first column is `name`.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn static_volumes_bind_release_and_get_lost() {
    let Some(c) = Cluster::start(&[]) else { return };
    c.ok_stdin(
        &["create", "-f", "-"],
        &pv(
            "pv-big",
            "10Gi",
            r#""hostPath": {"path": "/tmp/k1s-pv-big"}"#,
        ),
    );
    c.ok_stdin(
        &["create", "-f", "-"],
        &pv(
            "pv-small",
            "2Gi",
            r#""csi": {"driver": "hostpath.csi.k8s.io", "volumeHandle": "vol-small"}"#,
        ),
    );
    c.ok_stdin(
        &["create", "-f", "-"],
        &pv(
            "pv-tiny",
            "500Mi",
            r#""hostPath": {"path": "/tmp/k1s-pv-tiny"}"#,
        ),
    );
    eventually("the PVs Available", || {
        field(&c, "pv", "{.items[*].status.phase}") == "Available Available Available"
    });
    c.ok_stdin(&["create", "-f", "-"], &pvc("data", "1Gi"));
    eventually("data Bound", || {
        field(&c, "pvc/data", "{.status.phase}") == "Bound"
    });
    assert_eq!(field(&c, "pvc/data", "{.spec.volumeName}"), "pv-small");
    eventually("pv-small Bound", || {
        field(&c, "pv/pv-small", "{.status.phase}") == "Bound"
    });

    // kubectl's columns: the claim's volume and capacity, the volume's claim and status.
    let out = c.ok(&["get", "pv,pvc"]);
    let claim = row(&out, "persistentvolumeclaim/data");
    assert_eq!(&claim[1..4], ["Bound", "pv-small", "2Gi"], "{out}");
    let vol = row(&out, "persistentvolume/pv-small");
    assert_eq!(
        &vol[1..6],
        ["2Gi", "RWO", "Retain", "Bound", "default/data"],
        "{out}"
    );
    let big = row(&out, "persistentvolume/pv-big");
    assert_eq!(big[4], "Available", "{out}");
    let described = c.ok(&["describe", "pvc", "data"]);
    assert!(
        described.contains("pv.kubernetes.io/bind-completed: yes"),
        "{described}"
    );

    // Retain: the claim goes, the volume stays Released (and is not bound again).
    c.ok(&["delete", "pvc", "data"]);
    eventually("pv-small Released", || {
        field(&c, "pv/pv-small", "{.status.phase}") == "Released"
    });
    let vol = row(&c.ok(&["get", "pv"]), "pv-small");
    assert_eq!(&vol[4..6], ["Released", "default/data"]);

    // A claim whose volume is removed by force is Lost.
    c.ok_stdin(&["create", "-f", "-"], &pvc("doomed", "1Gi"));
    eventually("doomed Bound", || {
        field(&c, "pvc/doomed", "{.status.phase}") == "Bound"
    });
    assert_eq!(field(&c, "pvc/doomed", "{.spec.volumeName}"), "pv-big");
    c.ok(&["delete", "pv", "pv-big", "--wait=false"]);
    c.ok(&[
        "patch",
        "pv",
        "pv-big",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually("doomed Lost", || {
        field(&c, "pvc/doomed", "{.status.phase}") == "Lost"
    });
    let claim = row(&c.ok(&["get", "pvc"]), "doomed");
    assert_eq!(&claim[1..3], ["Lost", "pv-big"]);
    eventually("the ClaimLost event", || {
        c.ok(&["describe", "pvc", "doomed"])
            .contains("Bound claim has lost its PersistentVolume. Data on the volume is lost!")
    });
}

fn node(name: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Node",
  "metadata": {{"name": "{name}", "labels": {{"kubernetes.io/hostname": "{name}", "kubernetes.io/os": "linux"}}}},
  "status": {{"capacity": {{"cpu": "4", "memory": "8Gi", "pods": "110"}},
             "allocatable": {{"cpu": "4", "memory": "8Gi", "pods": "110"}},
             "conditions": [{{"type": "Ready", "status": "True"}}]}}}}"#
    )
}

fn local_pv(name: &str, size: &str, node: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {{"name": "{name}"}},
            "spec": {{"capacity": {{"storage": "{size}"}}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "local",
                     "local": {{"path": "/mnt/{name}"}},
                     "nodeAffinity": {{"required": {{"nodeSelectorTerms": [{{"matchExpressions": [
                        {{"key": "kubernetes.io/hostname", "operator": "In", "values": ["{node}"]}}]}}]}}}}}}}}"#
    )
}

#[test]
fn wait_for_first_consumer_binds_on_the_pods_node() {
    let Some(c) = Cluster::start(&[]) else { return };
    c.ok_stdin(&["create", "-f", "-"], &node("n1"));
    c.ok_stdin(&["create", "-f", "-"], &node("n2"));
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"}"#,
    );
    c.ok_stdin(&["create", "-f", "-"], &local_pv("local-n1", "1Gi", "n1"));
    c.ok_stdin(
        &["create", "-f", "-"],
        &local_pv("local-n2-big", "5Gi", "n2"),
    );
    c.ok_stdin(&["create", "-f", "-"], &local_pv("local-n2", "2Gi", "n2"));
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "local-data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "resources": {"requests": {"storage": "1Gi"}}}}"#,
    );
    eventually("the WaitForFirstConsumer event", || {
        c.ok(&["describe", "pvc", "local-data"])
            .contains("waiting for first consumer to be created before binding")
    });
    assert_eq!(field(&c, "pvc/local-data", "{.status.phase}"), "Pending");
    eventually("the default ServiceAccount", || {
        c.run(&["get", "sa", "default"]).status.success()
    });
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user", "namespace": "default"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "n2"},
                     "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "local-data"}}]}}"#,
    );
    eventually("the pod bound to n2", || {
        field(&c, "pod/user", "{.spec.nodeName}") == "n2"
    });
    // The smallest volume on the pod's node, chosen by the scheduler, bound by the controller.
    assert_eq!(field(&c, "pvc/local-data", "{.status.phase}"), "Bound");
    assert_eq!(
        field(&c, "pvc/local-data", "{.spec.volumeName}"),
        "local-n2"
    );
    eventually("local-n2 Bound", || {
        field(&c, "pv/local-n2", "{.status.phase}") == "Bound"
    });
    assert_eq!(field(&c, "pv/local-n1", "{.status.phase}"), "Available");
}

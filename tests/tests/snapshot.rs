//! End to end, issue #30: datastore snapshots. `k1s snapshot save` takes one from a running
//! server (admins only), `ls` lists it, the server takes scheduled ones and keeps the newest
//! `--snapshot-retention`; `restore` makes a new data directory from one, and a server
//! started there with the cluster's original token is the same cluster: the objects of the
//! snapshot (not the later ones), the same CA (the old admin kubeconfig works), and clients
//! holding resourceVersions from before are told to relist (410). Real binary, real redb.

use k1s_tests::{Cluster, eventually, k1s, k1s_ok as ok};
use serde_json::Value;

#[test]
fn a_snapshot_restores_the_same_cluster_elsewhere() {
    let Some(mut a) = Cluster::start(&[
        "--snapshot-schedule",
        "* * * * *",
        "--snapshot-retention",
        "1",
    ]) else {
        return;
    };
    let token = std::fs::read_to_string(a.data_dir().join("server/token")).unwrap();
    a.ok(&["create", "configmap", "keep", "--from-literal=k=v"]);
    let kept: Value =
        serde_json::from_str(&a.ok(&["get", "configmap", "keep", "-o", "json"])).unwrap();
    let old_rv = kept["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // Admins only.
    let denied = a.run(&[
        "get",
        "--raw",
        "/k1s/v1/snapshot",
        "--as",
        "system:serviceaccount:default:default",
    ]);
    assert!(!denied.status.success());
    assert!(String::from_utf8_lossy(&denied.stderr).contains("Forbidden"));

    let dir = a.dir.path().join("snaps");
    let dir_s = dir.to_str().unwrap();
    let kubeconfig = a.kubeconfig.to_str().unwrap().to_string();
    let saved = ok(&[
        "snapshot",
        "save",
        "--kubeconfig",
        &kubeconfig,
        "--dir",
        dir_s,
        "--name",
        "before",
    ]);
    assert!(saved.contains("keys at revision"), "{saved}");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("before-")
        })
        .unwrap();
    let listed = ok(&["snapshot", "ls", "--dir", dir_s]);
    assert!(
        listed.contains(file.file_name().unwrap().to_str().unwrap()),
        "{listed}"
    );
    a.ok(&["create", "configmap", "after", "--from-literal=k=v"]);

    // The scheduled snapshots (every minute here) land in DATA_DIR/server/snapshots, one kept.
    let scheduled = a.data_dir().join("server/snapshots");
    let count = || {
        std::fs::read_dir(&scheduled)
            .map(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("scheduled-")
                })
                .count()
            })
            .unwrap_or(0)
    };
    eventually("a scheduled snapshot", 75, || count() == 1);
    // Never under a running server, --force or not.
    let busy = k1s(&[
        "snapshot",
        "restore",
        file.to_str().unwrap(),
        "--data-dir",
        a.data_dir().to_str().unwrap(),
        "--force",
    ]);
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("running server"));
    a.server.terminate();

    // Restore on a "new machine": an empty data directory, the original token.
    let b_dir = tempfile::tempdir().unwrap();
    let b_data = b_dir.path().join("data");
    let file_s = file.to_str().unwrap();
    let restored = ok(&[
        "snapshot",
        "restore",
        file_s,
        "--data-dir",
        b_data.to_str().unwrap(),
    ]);
    assert!(restored.contains("restored"), "{restored}");
    let again = k1s(&[
        "snapshot",
        "restore",
        file_s,
        "--data-dir",
        b_data.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let Some(b) = Cluster::start_in(b_dir, &["--token", token.trim()]) else {
        return;
    };
    assert_eq!(
        b.ok(&["get", "configmap", "keep", "-o", "jsonpath={.data.k}"]),
        "v"
    );
    assert!(
        !b.run(&["get", "configmap", "after"]).status.success(),
        "taken after the snapshot"
    );
    for f in ["tls/ca.crt", "tls/service-account.key"] {
        assert_eq!(
            std::fs::read(a.data_dir().join(f)).unwrap(),
            std::fs::read(b.data_dir().join(f)).unwrap(),
            "{f}"
        );
    }
    // The old admin kubeconfig (A's client certificate) on the restored server.
    let b_url = format!("https://127.0.0.1:{}", b.port);
    let old = a.run(&["--server", &b_url, "get", "configmap", "keep", "-o", "name"]);
    assert!(
        old.status.success(),
        "{}",
        String::from_utf8_lossy(&old.stderr)
    );
    // A watch from a resourceVersion of before is told it is gone.
    let watch = b.run(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old_rv}&timeoutSeconds=5"),
    ]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&watch.stdout),
        String::from_utf8_lossy(&watch.stderr)
    );
    assert!(
        said.contains("410") || said.contains("Expired") || said.contains("too old"),
        "{said}"
    );
}

//! End to end with the real `k1s` binary: the server starts on a temp data dir and stops
//! cleanly on SIGTERM, refuses a damaged store with a clear message, and `k1s bench store` runs
//! against the embedded store and a real etcd, ending with one JSON line.

#[path = "../../store/tests/support/etcd.rs"]
mod etcd_support;

use std::process::Command;

use k1s_tests::{Server, free_port, k1s_bin};

/// Starts `k1s server` on `data_dir` with `extra` flags, on a free loopback port with its
/// kubeconfig under `data_dir`, and waits until it listens.
fn start_server(data_dir: &std::path::Path, extra: &[&str]) -> Server {
    Server::start(
        data_dir,
        free_port(),
        &data_dir.join("kubeconfig.yaml"),
        extra,
    )
}

#[test]
fn server_starts_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), &[]);
    assert!(dir.path().join("db/state.redb").exists());
    let rest = server.stop();
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
}

#[test]
fn server_refuses_a_damaged_store_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db/state.redb");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::write(&db, vec![0x42u8; 8192]).unwrap();
    let out = Command::new(k1s_bin())
        .args(["server", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn server_rejects_an_unknown_datastore_endpoint() {
    let out = Command::new(k1s_bin())
        .args([
            "server",
            "--data-dir",
            "/nonexistent",
            "--datastore-endpoint",
            "mysql://x",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unsupported --datastore-endpoint"),
        "{stderr}"
    );
}

fn last_json_line(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {text}"))
}

#[test]
fn bench_store_reports_figures_for_k1s_and_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let small = [
        "--single-ops=50",
        "--concurrent-ops=400",
        "--writers=8",
        "--range-keys=100",
        "--range-reads=20",
        "--watch-events=100",
    ];
    let Some(etcd) = etcd_support::EtcdServer::start_or_skip() else {
        return;
    };
    let out = Command::new(k1s_bin())
        .args(["bench", "store", "--dir"])
        .arg(dir.path())
        .args(small)
        .args(["--etcd", &etcd.endpoint()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = last_json_line(&out.stdout);
    for backend in ["k1s", "etcd"] {
        let b = &json[backend];
        assert_eq!(b["put_n"]["ops"], 400);
        assert_eq!(b["put_n"]["writers"], 8);
        assert!(b["put_1"]["ops_per_sec"].as_f64().unwrap() > 0.0);
        assert_eq!(b["range"]["keys_per_read"], 100);
        assert!(b["range"]["reads_per_sec"].as_f64().unwrap() > 0.0);
        assert_eq!(b["watch"]["events"], 100);
        assert!(b["watch"]["put_to_event_p99_ms"].as_f64().unwrap() > 0.0);
    }
    assert!(json["ratio"]["put_n_ops"].as_f64().unwrap() > 0.0);
    // The scratch database is removed afterwards.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn server_runs_on_etcd() {
    let Some(etcd) = etcd_support::EtcdServer::start_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let endpoint = etcd.endpoint();
    let server = start_server(dir.path(), &["--datastore-endpoint", &endpoint]);
    assert!(
        !dir.path().join("db/state.redb").exists(),
        "used the embedded store"
    );
    server.stop();
}

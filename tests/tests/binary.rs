//! End to end with the real `k1s` binary: the server starts on a temp data dir and stops
//! cleanly on SIGTERM, refuses a damaged store with a clear message, and `k1s bench store` runs
//! against the embedded store and a real etcd, ending with one JSON line.

#[path = "../../store/tests/support/etcd.rs"]
mod etcd_support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The `k1s` binary of this workspace: `$K1S_BIN`, or `target/<profile>/k1s` beside this
/// test's executable (built with `cargo build -p k1s` if it is not there yet).
fn k1s_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("K1S_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_owned();
        let bin = profile_dir.join("k1s");
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "k1s"])
            .args(if profile_dir.ends_with("release") {
                &["--release"][..]
            } else {
                &[][..]
            })
            .status()
            .unwrap();
        assert!(status.success(), "cargo build -p k1s failed");
        assert!(bin.exists(), "{} missing after build", bin.display());
        bin
    })
    .clone()
}

fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Starts `k1s server` on `data_dir` with `args`, on a free loopback port and with its
/// kubeconfig under `data_dir`; its log lines arrive on the returned channel.
fn spawn_server(data_dir: &std::path::Path, args: &[&str]) -> (Child, Receiver<String>) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut child = Command::new(k1s_bin())
        .arg("server")
        .arg("--data-dir")
        .arg(data_dir)
        .args([
            "--bind-address",
            "127.0.0.1",
            "--https-port",
            &port.to_string(),
        ])
        .arg("--write-kubeconfig")
        .arg(data_dir.join("kubeconfig.yaml"))
        .args(args)
        .env("K1S_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Waits up to 30 s for a log line containing `needle`.
fn wait_for_log(rx: &Receiver<String>, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("server never logged {needle:?}"));
        if line.contains(needle) {
            return;
        }
    }
}

/// Sends SIGTERM and asserts a clean exit within 20 s.
fn stop(mut child: Child) {
    sigterm(child.id());
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "server ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "server exited with {status}");
}

#[test]
fn server_starts_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (child, rx) = spawn_server(dir.path(), &[]);
    wait_for_log(&rx, "API server listening");
    assert!(dir.path().join("db/state.redb").exists());
    stop(child);
    wait_for_log(&rx, "stopped");
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
    let (child, rx) = spawn_server(dir.path(), &["--datastore-endpoint", &endpoint]);
    wait_for_log(&rx, "using etcd datastore");
    wait_for_log(&rx, "API server listening");
    assert!(
        !dir.path().join("db/state.redb").exists(),
        "used the embedded store"
    );
    stop(child);
}

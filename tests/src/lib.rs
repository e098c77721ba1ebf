//! Helpers shared by the end-to-end tests in `tests/tests/`: the `k1s` binary of this
//! workspace, free loopback ports, and a running `k1s server` with its log lines.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The `k1s` binary of this workspace: `$K1S_BIN`, or `target/<profile>/k1s` beside the
/// running test's executable, built first with `cargo build -p k1s` (a no-op when current).
pub fn k1s_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("K1S_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_owned();
        let release: &[&str] = if profile_dir.ends_with("release") {
            &["--release"]
        } else {
            &[]
        };
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "k1s"])
            .args(release)
            .status()
            .unwrap();
        assert!(status.success(), "cargo build -p k1s failed");
        let bin = profile_dir.join("k1s");
        assert!(bin.exists(), "{} missing after build", bin.display());
        bin
    })
    .clone()
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// A running `k1s server`; SIGKILLed on drop unless [`Server::stop`] stopped it.
pub struct Server {
    child: Option<Child>,
    logs: Receiver<String>,
}

impl Server {
    /// Starts `k1s server` on `data_dir`, listening on 127.0.0.1:`port` and writing its admin
    /// kubeconfig to `kubeconfig`, with `extra` flags. Does not wait for it to be ready.
    pub fn spawn(data_dir: &Path, port: u16, kubeconfig: &Path, extra: &[&str]) -> Server {
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
            .arg(kubeconfig)
            .args(extra)
            .env("K1S_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, logs) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Server {
            child: Some(child),
            logs,
        }
    }

    /// [`Server::spawn`], then waits until the API server listens.
    pub fn start(data_dir: &Path, port: u16, kubeconfig: &Path, extra: &[&str]) -> Server {
        let server = Self::spawn(data_dir, port, kubeconfig, extra);
        server.wait_for_log("API server listening");
        server
    }

    /// Waits up to 60 s for a log line containing `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = self
                .logs
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("server never logged {needle:?}"));
            if line.contains(needle) {
                return;
            }
        }
    }

    /// Sends SIGTERM and asserts a clean exit within 30 s; returns the remaining log lines.
    pub fn stop(mut self) -> Vec<String> {
        let Some(mut child) = self.child.take() else {
            return Vec::new();
        };
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "server ignored SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "server exited with {status}");
        // The log thread ends with the process; collect what it still has.
        std::thread::sleep(Duration::from_millis(100));
        self.logs.try_iter().collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

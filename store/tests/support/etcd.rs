//! Test harness: a throwaway single-member etcd server (Debian's `etcd-server`, etcd 3.4) on
//! free loopback ports, with its data in a temporary directory, or a cluster of several
//! ([`EtcdCluster`]). Depends only on std and
//! `tempfile`, so any test file can include it:
//!
//! ```ignore
//! #[path = "support/etcd.rs"]
//! mod etcd_support;
//! ```
//!
//! `EtcdServer::start()` panics if etcd is not installed; `EtcdServer::start_or_skip()` returns
//! `None` instead when `K1S_SKIP_ETCD=1` is set. `K1S_ETCD_BIN` overrides the binary.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long etcd gets to answer its health check after starting.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How often to start etcd again on fresh ports if it dies at startup (a port taken between
/// choosing and binding it).
const START_ATTEMPTS: usize = 3;

/// A running etcd server; killed (SIGKILL) and its data removed on drop.
pub struct EtcdServer {
    child: Option<Child>,
    /// The member name, and the whole cluster's `--initial-cluster` (this member alone by
    /// default).
    name: String,
    initial_cluster: Option<String>,
    bin: PathBuf,
    client_port: u16,
    peer_port: u16,
    /// Plain-HTTP port for `/health` and `/metrics`, also when clients use TLS.
    metrics_port: u16,
    tls: Option<ServerTls>,
    dir: tempfile::TempDir,
}

/// PEM files for an etcd that serves clients over TLS and requires client certificates.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The CA that signed the serving certificate and that client certificates must chain to.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The etcd binary: `$K1S_ETCD_BIN`, else `etcd` on `$PATH`, else `/usr/bin/etcd`.
pub fn etcd_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("K1S_ETCD_BIN") {
        let bin = PathBuf::from(bin);
        return bin.is_file().then_some(bin);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("etcd"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let bin = PathBuf::from("/usr/bin/etcd");
        bin.is_file().then_some(bin)
    })
}

fn skip_requested() -> bool {
    std::env::var("K1S_SKIP_ETCD").is_ok_and(|v| v == "1")
}

const NOT_INSTALLED: &str = "etcd is not installed: `apt-get install etcd-server` (or set \
     K1S_ETCD_BIN to an etcd binary; set K1S_SKIP_ETCD=1 to skip the etcd tests)";

impl EtcdServer {
    /// Starts etcd and waits until it is healthy. Panics if etcd is missing or does not come
    /// up (with the tail of its log).
    pub fn start() -> EtcdServer {
        let Some(bin) = etcd_binary() else {
            panic!("{NOT_INSTALLED}");
        };
        Self::start_with(bin, None)
    }

    /// Starts etcd serving clients on `https://` with `--client-cert-auth`.
    pub fn start_tls(tls: ServerTls) -> EtcdServer {
        let Some(bin) = etcd_binary() else {
            panic!("{NOT_INSTALLED}");
        };
        Self::start_with(bin, Some(tls))
    }

    /// Like [`EtcdServer::start`], but if etcd is not installed and `K1S_SKIP_ETCD=1` is set,
    /// prints `SKIPPED: etcd not installed` to stderr and returns `None`.
    pub fn start_or_skip() -> Option<EtcdServer> {
        match etcd_binary() {
            Some(bin) => Some(Self::start_with(bin, None)),
            None if skip_requested() => {
                eprintln!("SKIPPED: etcd not installed (K1S_SKIP_ETCD=1)");
                None
            }
            None => panic!("{NOT_INSTALLED}"),
        }
    }

    /// A member named `name` on fresh ports and an empty temporary directory, not started.
    fn new(bin: PathBuf, name: &str, tls: Option<ServerTls>) -> EtcdServer {
        let dir = tempfile::Builder::new()
            .prefix("k1s-etcd-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for etcd: {e}"));
        EtcdServer {
            child: None,
            name: name.into(),
            initial_cluster: None,
            bin,
            client_port: free_port(),
            peer_port: free_port(),
            metrics_port: free_port(),
            tls,
            dir,
        }
    }

    fn start_with(bin: PathBuf, tls: Option<ServerTls>) -> EtcdServer {
        let mut server = Self::new(bin, "k1s-test", tls);
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            server.client_port = free_port();
            server.peer_port = free_port();
            server.metrics_port = free_port();
            match server.launch() {
                Ok(()) => return server,
                Err(e) => {
                    server.kill();
                    // Start over with an empty data directory on the new ports.
                    let _ = std::fs::remove_dir_all(server.data_dir());
                    last_error = e;
                }
            }
        }
        panic!("etcd did not start: {last_error}");
    }

    /// Starts an etcd on the data of `snapshot` (an etcd snapshot file), restored with
    /// `etcdctl snapshot restore` (Debian's `etcd-client`). Panics if that fails.
    pub fn start_restored(snapshot: &Path) -> EtcdServer {
        let Some(bin) = etcd_binary() else {
            panic!("{NOT_INSTALLED}");
        };
        let etcdctl = bin.with_file_name("etcdctl");
        let mut server = Self::new(bin, "k1s-test", None);
        let peer = format!("http://127.0.0.1:{}", server.peer_port);
        let out = Command::new(&etcdctl)
            .env("ETCDCTL_API", "3")
            .arg("snapshot")
            .arg("restore")
            .arg(snapshot)
            .arg(format!("--data-dir={}", server.data_dir().display()))
            .arg("--name=k1s-test")
            .arg(format!("--initial-cluster=k1s-test={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {}: {e} (apt-get install etcd-client)",
                    etcdctl.display()
                )
            });
        assert!(
            out.status.success(),
            "etcdctl snapshot restore: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Err(e) = server.launch() {
            panic!("the restored etcd did not start: {e}");
        }
        server
    }

    /// The client URL, e.g. `http://127.0.0.1:23790` (`https://` with TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// The value of an unlabelled metric from etcd's `/metrics`, e.g.
    /// `etcd_debugging_mvcc_watcher_total` (the number of open watchers).
    pub fn metric(&self, name: &str) -> Option<f64> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        let page = http_get(addr, "/metrics").ok()?;
        page.lines().find_map(|line| {
            let (metric, value) = line.split_once(' ')?;
            (metric == name)
                .then(|| value.trim().parse().ok())
                .flatten()
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Kills etcd (SIGKILL, like a crash) and starts it again on the same ports and data.
    pub fn kill_and_restart(&mut self) {
        self.kill();
        if let Err(e) = self.launch() {
            panic!("etcd did not restart: {e}");
        }
    }

    /// Kills etcd (SIGKILL) and waits for it to exit. The data stays until drop.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// Spawns etcd and waits for it to be healthy.
    fn launch(&mut self) -> Result<(), String> {
        self.spawn()?;
        self.wait_healthy()
    }

    /// Spawns etcd.
    fn spawn(&mut self) -> Result<(), String> {
        let client_url = self.endpoint();
        let peer_url = format!("http://127.0.0.1:{}", self.peer_port);
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| format!("cannot create {}: {e}", self.log_path().display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot open the etcd log twice: {e}"))?;
        let mut cmd = Command::new(&self.bin);
        if let Some(tls) = &self.tls {
            cmd.arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth");
        }
        let child = cmd
            .arg(format!("--name={}", self.name))
            .arg(format!(
                "--listen-metrics-urls=http://127.0.0.1:{}",
                self.metrics_port
            ))
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!(
                "--initial-cluster={}",
                self.initial_cluster
                    .clone()
                    .unwrap_or_else(|| format!("{}={peer_url}", self.name))
            ))
            .arg("--initial-cluster-state=new")
            .arg("--initial-cluster-token=k1s-test")
            .arg("--logger=zap")
            .arg("--log-outputs=stderr")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until etcd answers its health check (a member of a cluster: until the cluster
    /// has a leader).
    fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "etcd exited with {status}; log:\n{}",
                    log_tail(&self.log_path())
                ));
            }
            if healthy(addr) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "etcd did not become healthy within {START_TIMEOUT:?}; log:\n{}",
                    log_tail(&self.log_path())
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Three (or `n`) etcd members on loopback forming one cluster, each killable and
/// restartable on its own data.
pub struct EtcdCluster {
    pub members: Vec<EtcdServer>,
}

impl EtcdCluster {
    /// Starts `n` members and waits until the cluster is healthy; `None` as
    /// [`EtcdServer::start_or_skip`].
    pub fn start_or_skip(n: usize) -> Option<EtcdCluster> {
        let bin = match etcd_binary() {
            Some(bin) => bin,
            None if skip_requested() => {
                eprintln!("SKIPPED: etcd not installed (K1S_SKIP_ETCD=1)");
                return None;
            }
            None => panic!("{NOT_INSTALLED}"),
        };
        let mut members: Vec<EtcdServer> = (0..n)
            .map(|i| EtcdServer::new(bin.clone(), &format!("m{i}"), None))
            .collect();
        let cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        for m in &mut members {
            m.initial_cluster = Some(cluster.clone());
            m.spawn().unwrap_or_else(|e| panic!("etcd {}: {e}", m.name));
        }
        for m in &mut members {
            m.wait_healthy()
                .unwrap_or_else(|e| panic!("etcd {}: {e}", m.name));
        }
        Some(EtcdCluster { members })
    }

    /// Every member's client URL, comma-separated (as `--datastore-endpoint` takes them).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(EtcdServer::endpoint)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Kills member `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Starts member `i` again on its data, without waiting for it to be healthy (alone it
    /// is not: it needs a quorum).
    pub fn restart(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.spawn().unwrap_or_else(|e| panic!("etcd {}: {e}", m.name));
    }

    /// Waits until member `i` is healthy (the cluster has a leader again).
    pub fn wait_healthy(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.wait_healthy()
            .unwrap_or_else(|e| panic!("etcd {}: {e}", m.name));
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free loopback port: {e}"))
}

/// Whether etcd's `/health` endpoint on the metrics port says healthy.
fn healthy(addr: SocketAddr) -> bool {
    http_get(addr, "/health").is_ok_and(|answer| {
        answer.starts_with("HTTP/1.0 200") && answer.contains("\"health\":\"true\"")
    })
}

/// A plain HTTP/1.0 GET (no chunked encoding): status line, headers, body.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer)?;
    Ok(answer)
}

fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

//! Helpers shared by the end-to-end tests in `tests/tests/`: the `k1s` binary of this
//! workspace, free loopback ports, and a running `k1s server` with its log lines.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

mod build;
pub mod host;
pub mod lan;
pub mod mounts;
#[path = "../../kubelet/tests/support/registry.rs"]
pub mod registry;

pub use build::{agent_bin, k1s_bin};

/// Runs the `k1s` binary with `args` (a command such as `snapshot save`, not a server): its
/// output.
pub fn k1s(args: &[&str]) -> std::process::Output {
    Command::new(k1s_bin()).args(args).output().unwrap()
}

/// [`k1s`], which must succeed: its stdout.
pub fn k1s_ok(args: &[&str]) -> String {
    let out = k1s(args);
    assert!(
        out.status.success(),
        "k1s {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` every 300 ms until it holds; panics naming `what` after `secs` seconds.
pub fn eventually(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// A running `k1s server` (or `k1s agent`); SIGKILLed on drop unless [`Server::stop`] stopped it.
pub struct Server {
    child: Option<Child>,
    /// In a mutex so a `Server` can be shared with scoped threads.
    logs: std::sync::Mutex<Receiver<String>>,
    /// Lines read while waiting for another one, still available to later waits.
    pending: std::sync::Mutex<std::collections::VecDeque<String>>,
}

impl Server {
    /// Starts `k1s server` on `data_dir`, listening on 127.0.0.1:`port` and writing its admin
    /// kubeconfig to `kubeconfig`, with `extra` flags. Does not wait for it to be ready.
    pub fn spawn(data_dir: &Path, port: u16, kubeconfig: &Path, extra: &[&str]) -> Server {
        let mut cmd = Command::new(k1s_bin());
        cmd.arg("server")
            .arg("--data-dir")
            .arg(data_dir)
            .args(
                (!extra.contains(&"--bind-address"))
                    .then_some(["--bind-address", "127.0.0.1"])
                    .into_iter()
                    .flatten(),
            )
            .args(["--https-port", &port.to_string()])
            .arg("--write-kubeconfig")
            .arg(kubeconfig)
            .args(extra)
            // Only tests that ask for a kubelet (with `kubelet_flags`) get one: two kubelets
            // on one machine must not share a bridge, a cgroup tree or a pod CIDR.
            .args((!extra.contains(&"--bridge-name")).then_some("--disable-agent"))
            // Tests' stand-in Nodes keep the spec they were created with; the multi-node
            // test turns node IPAM on.
            .args(
                (!extra.iter().any(|a| a.starts_with("--allocate-node-cidrs")))
                    .then_some("--allocate-node-cidrs=false"),
            )
            // Without a kubelet, the Nodes tests create are stand-ins that renew no Lease;
            // node lifecycle would taint them unreachable after 40 s, mid-test. Tests of
            // node lifecycle itself pass their own grace period.
            .args(
                (!extra.contains(&"--bridge-name")
                    && !extra
                        .iter()
                        .any(|a| a.starts_with("--node-monitor-grace-period")))
                .then_some("--node-monitor-grace-period=1h"),
            );
        Self::run(cmd)
    }

    /// Starts `k1s agent` on `data_dir`, joining the server on 127.0.0.1:`server_port` with
    /// `token`, with `extra` flags (give it [`kubelet_flags`]). Does not wait for it.
    pub fn spawn_agent(data_dir: &Path, server_port: u16, token: &str, extra: &[&str]) -> Server {
        let mut cmd = Command::new(agent_bin());
        cmd.arg("agent")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--server", &format!("https://127.0.0.1:{server_port}")])
            .env("K1S_TOKEN", token)
            .args(extra);
        Self::run(cmd)
    }

    /// Starts `k1s agent` through `wrapper` (e.g. `nsenter --net=…`, to run it in a network
    /// namespace), joining `server` (a URL) with `token`. Does not wait for it.
    pub fn spawn_agent_via(
        wrapper: &[&str],
        data_dir: &Path,
        server: &str,
        token: &str,
        extra: &[&str],
    ) -> Server {
        let mut cmd = Command::new(wrapper[0]);
        cmd.args(&wrapper[1..])
            .arg(agent_bin())
            .arg("agent")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--server", server])
            .env("K1S_TOKEN", token)
            .args(extra);
        Self::run(cmd)
    }

    /// Runs `cmd` with its log (stderr) collected.
    fn run(mut cmd: Command) -> Server {
        let mut child = cmd
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
            logs: std::sync::Mutex::new(logs),
            pending: Default::default(),
        }
    }

    /// [`Server::spawn`], then waits until the API server listens.
    pub fn start(data_dir: &Path, port: u16, kubeconfig: &Path, extra: &[&str]) -> Server {
        let server = Self::spawn(data_dir, port, kubeconfig, extra);
        server.wait_for_log("API server listening");
        server
    }

    /// Waits up to 60 s for a log line containing `needle` and takes it. Lines that arrive
    /// meanwhile stay available to later waits, so the order in which two things are logged
    /// does not matter to a test that waits for both.
    pub fn wait_for_log(&self, needle: &str) {
        {
            let mut pending = self.pending.lock().unwrap();
            if let Some(i) = pending.iter().position(|l| l.contains(needle)) {
                pending.remove(i);
                return;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = self
                .logs
                .lock()
                .unwrap()
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| {
                    // What it did log says why (a start-up error comes before its backtrace).
                    let pending = self.pending.lock().unwrap();
                    let tail: Vec<&str> = pending.iter().take(10).map(String::as_str).collect();
                    panic!(
                        "server never logged {needle:?}; its first unclaimed lines:\n{}",
                        tail.join("\n")
                    )
                });
            if line.contains(needle) {
                return;
            }
            self.pending.lock().unwrap().push_back(line);
        }
    }

    /// SIGKILLs the server (a crash) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether a log line containing `needle` arrived (and is not taken yet), without waiting.
    pub fn logged(&self, needle: &str) -> bool {
        let mut pending = self.pending.lock().unwrap();
        pending.extend(self.logs.lock().unwrap().try_iter());
        pending.iter().any(|l| l.contains(needle))
    }

    /// Sends SIGTERM and asserts a clean exit within 30 s; returns the remaining log lines.
    pub fn stop(mut self) -> Vec<String> {
        self.terminate()
    }

    /// [`Server::stop`] in place (a new server can take this one's place afterwards).
    pub fn terminate(&mut self) -> Vec<String> {
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
        let mut lines: Vec<String> = self.pending.lock().unwrap().drain(..).collect();
        lines.extend(self.logs.lock().unwrap().try_iter());
        lines
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

/// Where scripts/deps.sh puts test clients that are not on PATH (kubectl 1.20, the Python venv).
pub fn test_tools() -> PathBuf {
    std::env::var_os("K1S_TEST_TOOLS")
        .map_or_else(|| PathBuf::from("/var/cache/k1s-test"), PathBuf::from)
}

/// A test client that is missing: fails under CI (scripts/deps.sh installs it), else returns
/// false after printing a visible SKIPPED line.
pub fn missing(what: &str) -> bool {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} is not installed (scripts/deps.sh installs it)"
    );
    eprintln!("SKIPPED: {what} not installed");
    false
}

/// The default kubectl: `$K1S_KUBECTL`, else `kubectl` on `$PATH` (on these machines the
/// dispatcher that picks the client matching the server's minor version).
pub fn kubectl() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("K1S_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        missing("kubectl");
    }
    found
}

/// Every kubectl this machine has, with its label: the default one, the bundled
/// `kubectl.1.NN` clients, and Debian's 1.20 from [`test_tools`].
pub fn all_kubectls() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = kubectl()
        .map(|k| ("default".to_owned(), k))
        .into_iter()
        .collect();
    for minor in 27..=33 {
        let p = PathBuf::from(format!("/usr/lib/google-cloud-sdk/bin/kubectl.1.{minor}"));
        if p.is_file() {
            out.push((format!("1.{minor}"), p));
        }
    }
    let old = test_tools().join("kubectl-1.20");
    if old.is_file() {
        out.push(("1.20".to_owned(), old));
    } else {
        missing("Debian's kubectl 1.20");
    }
    out
}

/// Flags for tests of the API alone: no controllers or scheduler writing objects and status
/// behind the test's back (e.g. `kube-root-ca.crt` in every namespace, Deployment status).
pub const API_ONLY: &[&str] = &["--disable-controller-manager", "--disable-scheduler"];

/// The name the external provisioner gives a claim's dynamically provisioned PV:
/// `pvc-<claim UID>`.
pub fn provisioned_pv_name(claim: &serde_json::Value) -> String {
    format!(
        "pvc-{}",
        claim["metadata"]["uid"].as_str().unwrap_or_default()
    )
}

/// Hard eviction thresholds for test kubelets: low enough that the host's own state never
/// puts a test node under pressure (a thin-provisioned VM disk can show under 15% available,
/// upstream's imagefs default, and a node under disk pressure refuses every pod).
pub const TEST_EVICTION_HARD: &str = "memory.available<1Mi,nodefs.available<1%,nodefs.inodesFree<1%,imagefs.available<1%,imagefs.inodesFree<1%";

/// Flags that give a test server a kubelet of its own: a bridge, a cgroup tree, a pod CIDR
/// and a kubelet port no other test uses, a 1 s restart back-off, and [`TEST_EVICTION_HARD`].
/// The service proxy is off: every test server allocates the same ClusterIPs, so proxies
/// of parallel tests would program the same addresses; tests of the proxy turn it on with
/// a service CIDR and a table of their own ([`proxy_flags`]). NetworkPolicy enforcement is
/// off too (tests of it give each node a table of its own).
pub fn kubelet_flags(tag: &str) -> Vec<String> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n =
        (std::process::id() % 200) * 8 + N.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 8;
    vec![
        "--node-name".into(),
        format!("node-{tag}"),
        "--bridge-name".into(),
        format!("k1st{n}"),
        "--cgroup-top".into(),
        format!("k1s-test-{n}"),
        "--pod-cidr".into(),
        format!("10.{}.{}.0/24", 100 + n / 250, n % 250),
        "--restart-backoff-seconds".into(),
        "1".into(),
        "--eviction-hard".into(),
        TEST_EVICTION_HARD.into(),
        "--kubelet-port".into(),
        free_port().to_string(),
        "--disable-kube-proxy".into(),
        "--disable-dns".into(),
        "--disable-network-policy".into(),
        "--pod-network-backend".into(),
        "none".into(),
    ]
}

/// `flags` (from [`kubelet_flags`]) with the service proxy and the node's cluster DNS server
/// on: the proxy's own nftables table, the
/// service CIDR `service_cidr` (no other test may use it) and the node's pod CIDR as the
/// cluster CIDR. Pass the same `--service-cidr` to the server.
pub fn proxy_flags(flags: &[String], table: &str) -> Vec<String> {
    let pod_cidr = flags
        .iter()
        .position(|f| f == "--pod-cidr")
        .and_then(|i| flags.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<String> = flags
        .iter()
        .filter(|f| *f != "--disable-kube-proxy" && *f != "--disable-dns")
        .cloned()
        .collect();
    out.extend([
        "--proxy-table".into(),
        table.into(),
        "--cluster-cidr".into(),
        pod_cidr,
    ]);
    out
}

/// A server on a temp dir with everything a test needs to talk to it.
pub struct Cluster {
    pub server: Server,
    /// Unmounts what the server's kubelet left mounted when it goes (after the server).
    pub dir: mounts::ScratchDir,
    pub port: u16,
    pub kubeconfig: PathBuf,
    pub kubectl: PathBuf,
}

/// What a raw HTTPS request got back.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

impl Cluster {
    /// Starts a server with `extra` flags; `None` when kubectl is missing (skipped visibly).
    pub fn start(extra: &[&str]) -> Option<Cluster> {
        Self::start_in(tempfile::tempdir().unwrap(), extra)
    }

    /// Starts a server on `dir` (its data directory is `dir/data`, which may hold state
    /// already, e.g. a restored store).
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Option<Cluster> {
        let kubectl = kubectl()?;
        let port = free_port();
        let kubeconfig = dir.path().join("k1s.yaml");
        let server = Server::start(&dir.path().join("data"), port, &kubeconfig, extra);
        Some(Cluster {
            server,
            dir: dir.into(),
            port,
            kubeconfig,
            kubectl,
        })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A token of the `default` ServiceAccount of `default` (TokenRequest), once it exists.
    pub fn service_account_token(&self) -> String {
        eventually("the default ServiceAccount", 30, || {
            self.run(&["get", "serviceaccount", "default", "-n", "default"])
                .status
                .success()
        });
        let request = serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest", "spec": {}});
        let issued: serde_json::Value = serde_json::from_str(&self.ok_stdin(
            &[
                "create",
                "--raw",
                "/api/v1/namespaces/default/serviceaccounts/default/token",
                "-f",
                "-",
            ],
            &request.to_string(),
        ))
        .unwrap();
        issued["status"]["token"].as_str().unwrap().to_string()
    }

    /// Runs `kubectl` (or another client binary) with this cluster's kubeconfig and a private
    /// cache directory.
    pub fn run_with(
        &self,
        kubectl: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> std::process::Output {
        let mut cmd = Command::new(kubectl);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join(format!(
                "cache-{}",
                kubectl.file_name().unwrap().to_string_lossy()
            )))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.run_with(&self.kubectl, args, None)
    }

    /// `kubectl get WHAT -o json`, parsed; `Null` when kubectl fails (e.g. not found).
    pub fn get_json(&self, what: &[&str]) -> serde_json::Value {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend_from_slice(&["-o", "json"]);
        let out = self.run(&args);
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
    }

    /// Runs kubectl and returns its stdout; panics with stderr on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with("", &self.kubectl, args, None)
    }

    /// Runs another client binary (see [`all_kubectls`]) and returns stdout; panics naming
    /// `label` and showing stderr on failure.
    pub fn ok_with(
        &self,
        label: &str,
        kubectl: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> String {
        let out = self.run_with(kubectl, args, stdin);
        assert!(
            out.status.success(),
            "kubectl {label} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl with `input` on stdin (`-f -`) and returns stdout.
    pub fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        self.ok_with("", &self.kubectl, args, Some(input))
    }

    /// Runs kubectl, expects failure, and returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        self.fails_with(args, None)
    }

    /// Runs kubectl with `input` on stdin, expects failure, and returns stderr.
    pub fn fails_stdin(&self, args: &[&str], input: &str) -> String {
        self.fails_with(args, Some(input))
    }

    fn fails_with(&self, args: &[&str], input: Option<&str>) -> String {
        let out = self.run_with(&self.kubectl, args, input);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A raw HTTPS request as the admin (curl with the admin client certificate).
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> Reply {
        self.raw_accept(method, path, content_type, None, body)
    }

    /// [`Cluster::raw`] with an `Accept` header.
    pub fn raw_accept(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Option<&[u8]>,
    ) -> Reply {
        let tls = self.data_dir().join("tls");
        let mut cmd = Command::new("curl");
        if let Some(a) = accept {
            cmd.args(["-H", &format!("Accept: {a}")]);
        }
        cmd.args([
            "-sS",
            "--http1.1",
            "-X",
            method,
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
        ])
        .arg("--cacert")
        .arg(tls.join("ca.crt"))
        .arg("--cert")
        .arg(tls.join("admin.crt"))
        .arg("--key")
        .arg(tls.join("admin.key"));
        // No content type given: send none (curl would otherwise send a form type).
        let ct = content_type.map_or_else(
            || "Content-Type:".to_owned(),
            |ct| format!("Content-Type: {ct}"),
        );
        cmd.args(["-H", &ct]);
        let body_file = self.dir.path().join("curl-body");
        if let Some(b) = body {
            std::fs::write(&body_file, b).unwrap();
            cmd.arg("--data-binary")
                .arg(format!("@{}", body_file.display()));
        }
        let out = cmd
            .arg(format!("https://127.0.0.1:{}{path}", self.port))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "curl failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap();
        Reply {
            code: code.trim().parse().unwrap(),
            body: body.to_owned(),
        }
    }
}

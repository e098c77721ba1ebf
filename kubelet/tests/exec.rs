//! exec, attach and port-forward against real containers: the real shim (`k1s internal shim`)
//! and exec helper (`k1s internal exec`) of this workspace's `k1s` binary, a busybox rootfs
//! layer, real namespaces and a real cgroup, driven through `KubeletStreams` as the API
//! server drives it.
//!
//! Needs root and a static busybox (`busybox-static`); prints SKIP otherwise. Each test gets
//! its own temp dir, namespaces and cgroup (named after the process and test), removed by a
//! drop guard even when an assertion fails.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k1s_api::streams::{NodeStreams, StreamIo, StreamOptions, TerminalSize};
use k1s_kubelet::Config;
use k1s_kubelet::runtime::spec::{ContainerSpec, DEFAULT_CAPABILITIES, Process};
use k1s_kubelet::runtime::{Runtime, ShimRuntime, nsfile};
use k1s_kubelet::streams::KubeletStreams;
use nix::sched::CloneFlags;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

// Only `k1s_bin` of it is used here.
#[allow(dead_code)]
#[path = "../../tests/src/build.rs"]
mod build;
use build::k1s_bin;

fn busybox() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "command -v busybox"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Only a static busybox runs in a rootfs without a libc.
    let file = Command::new("sh")
        .arg("-c")
        .arg(format!("ldd {} 2>&1", p.display()))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&file.stdout);
    (p.is_file() && (text.contains("not a dynamic") || text.contains("statically"))).then_some(p)
}

fn ready() -> Option<PathBuf> {
    if !is_root() {
        eprintln!("SKIP: exec tests need root (namespaces, cgroups, mounts)");
        return None;
    }
    match busybox() {
        Some(b) => Some(b),
        None => {
            let _ = Command::new("sh")
                .arg("-c")
                .arg("DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends busybox-static >/dev/null 2>&1")
                .status();
            let b = busybox();
            if b.is_none() {
                eprintln!("SKIP: no static busybox (apt-get install busybox-static)");
            }
            b
        }
    }
}

/// A pod on disk: its directory layout under a kubelet root, namespaces, a cgroup, a
/// busybox layer. Dropping it kills its containers and removes what it made.
struct Pod {
    dir: tempfile::TempDir,
    config: Arc<Config>,
    runtime: Arc<ShimRuntime>,
    streams: KubeletStreams,
    uid: String,
    layer: PathBuf,
    netns: PathBuf,
    ipcns: PathBuf,
    cgroup: Option<PathBuf>,
    bundles: std::sync::Mutex<Vec<PathBuf>>,
}

fn runtime() -> ShimRuntime {
    ShimRuntime::new(vec![k1s_bin(), "internal".into(), "shim".into()])
}

impl Pod {
    fn new(test: &str, busybox: &Path) -> Pod {
        let dir = tempfile::tempdir().unwrap();
        let config = Arc::new(Config::new(
            "node-exec",
            dir.path().join("agent"),
            "127.0.0.1".parse().unwrap(),
        ));
        let uid = format!("uid-{test}-{}", std::process::id());
        let layer = dir.path().join("layer");
        let bin = layer.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(busybox, bin.join("busybox")).unwrap();
        for applet in [
            "sh", "cat", "echo", "stty", "nc", "sleep", "hostname", "id", "pwd", "tty", "ls",
        ] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
        }
        for d in ["proc", "dev", "sys", "etc", "tmp", "work"] {
            std::fs::create_dir_all(layer.join(d)).unwrap();
        }
        let ns = config.pods_dir().join(&uid).join("ns");
        let (netns, ipcns) = (ns.join("net"), ns.join("ipc"));
        nsfile::create(&netns, CloneFlags::CLONE_NEWNET).unwrap();
        nsfile::create(&ipcns, CloneFlags::CLONE_NEWIPC).unwrap();
        let up = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .args(["ip", "link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(up.success(), "bringing lo up in the pod");
        // A pids cgroup of its own (v1 here), to see execs join the container's cgroup.
        let cgroup = Path::new("/sys/fs/cgroup/pids").is_dir().then(|| {
            PathBuf::from(format!(
                "/sys/fs/cgroup/pids/k1s-exec-{test}-{}",
                std::process::id()
            ))
        });
        if let Some(c) = &cgroup {
            std::fs::create_dir_all(c).unwrap();
        }
        let runtime = Arc::new(runtime());
        let streams = KubeletStreams::new(config.clone(), runtime.clone());
        Pod {
            dir,
            config,
            runtime,
            streams,
            uid,
            layer,
            netns,
            ipcns,
            cgroup,
            bundles: Default::default(),
        }
    }

    /// The Pod object as the API server would pass it.
    fn object(&self, containers: Value) -> Value {
        json!({
            "metadata": {"name": "p", "namespace": "default", "uid": self.uid},
            "spec": {"containers": containers}
        })
    }

    /// Starts container `name` (attempt 0) running `args`.
    async fn start(&self, name: &str, args: &[&str], stdin: bool, stdin_once: bool, tty: bool) {
        let bundle = self.config.bundle_dir(&self.uid, false, name, 0);
        std::fs::create_dir_all(&bundle).unwrap();
        let spec = ContainerSpec {
            id: format!("{name}-{}", std::process::id()),
            layers: vec![self.layer.clone()],
            upper: bundle.join("upper"),
            work: bundle.join("work"),
            rootfs: bundle.join("rootfs"),
            hostname: "exec-pod".into(),
            netns: Some(self.netns.clone()),
            ipcns: Some(self.ipcns.clone()),
            process: Process {
                args: args.iter().map(|s| s.to_string()).collect(),
                env: vec!["PATH=/bin".into(), "GREETING=hello".into()],
                cwd: "/work".into(),
                capabilities: DEFAULT_CAPABILITIES.iter().map(|s| s.to_string()).collect(),
                stdin,
                stdin_once,
                tty,
                ..Default::default()
            },
            cgroup_procs: self.cgroup.iter().map(|c| c.join("cgroup.procs")).collect(),
            log_path: bundle.join("log"),
            log_max_bytes: 1 << 20,
            log_max_files: 2,
            ..Default::default()
        };
        self.runtime.start(&bundle, &spec).await.unwrap();
        self.bundles.lock().unwrap().push(bundle);
    }

    fn bundle(&self, name: &str) -> PathBuf {
        self.config.bundle_dir(&self.uid, false, name, 0)
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        for b in self.bundles.lock().unwrap().iter() {
            let _ = self.runtime.kill(b, libc::SIGKILL);
            // The shim writes exit.json when the container is gone.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !b.join("exit.json").exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        nsfile::remove(&self.netns);
        nsfile::remove(&self.ipcns);
        if let Some(c) = &self.cgroup {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::fs::remove_dir(c).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = &self.dir;
    }
}

/// The channels of a session, seen from the client.
struct Client {
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    stdout: mpsc::Receiver<Vec<u8>>,
    stderr: Option<mpsc::Receiver<Vec<u8>>>,
    resize: Option<mpsc::Sender<TerminalSize>>,
}

fn session(stdin: bool, tty: bool) -> (StreamIo, Client) {
    let (in_tx, in_rx) = mpsc::channel(16);
    let (out_tx, out_rx) = mpsc::channel(16);
    let (err_tx, err_rx) = mpsc::channel(16);
    let (rs_tx, rs_rx) = mpsc::channel(16);
    let io = StreamIo {
        stdin: stdin.then_some(in_rx),
        stdout: Some(out_tx),
        stderr: (!tty).then_some(err_tx),
        resize: tty.then_some(rs_rx),
    };
    let client = Client {
        stdin: stdin.then_some(in_tx),
        stdout: out_rx,
        stderr: (!tty).then_some(err_rx),
        resize: tty.then_some(rs_tx),
    };
    (io, client)
}

async fn read_all(rx: &mut mpsc::Receiver<Vec<u8>>) -> String {
    let mut out = Vec::new();
    while let Some(b) = rx.recv().await {
        out.extend(b);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads from `rx` until the text read so far contains `want`; the text.
async fn read_until(rx: &mut mpsc::Receiver<Vec<u8>>, want: &str) -> String {
    let mut out = Vec::new();
    let read = async {
        while !String::from_utf8_lossy(&out).contains(want) {
            match rx.recv().await {
                Some(b) => out.extend(b),
                None => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(30), read).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.contains(want), "wanted {want:?}, got {text:?}");
    text
}

fn exec_opts(container: &str, command: &[&str], stdin: bool, tty: bool) -> StreamOptions {
    StreamOptions {
        container: Some(container.into()),
        command: command.iter().map(|s| s.to_string()).collect(),
        stdin,
        stdout: true,
        stderr: !tty,
        tty,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_in_the_container_with_its_streams_and_exit_code() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("streams", &bb);
    pod.start("main", &["sleep", "1000"], false, false, false)
        .await;
    let obj = pod.object(json!([{"name": "main"}]));

    // stdout, stderr, stdin to EOF, exit code; the container's env, cwd, hostname, pid
    // namespace and cgroup.
    let script = "echo out; echo err >&2; cat; echo \"$GREETING $(pwd) $(hostname)\"; \
                  cat /proc/1/cmdline; echo; cat /proc/self/cgroup; exit 3";
    let (io, mut client) = session(true, false);
    let opts = exec_opts("main", &["sh", "-c", script], true, false);
    let exec = {
        let obj = obj.clone();
        let streams = &pod.streams;
        async move { streams.exec(&obj, &opts, io).await }
    };
    let stdin = client.stdin.take().unwrap();
    let feed = async move {
        stdin.send(b"from stdin\n".to_vec()).await.unwrap();
        drop(stdin);
    };
    let mut stderr = client.stderr.take().unwrap();
    let (code, (), out, err) = tokio::join!(
        exec,
        feed,
        read_all(&mut client.stdout),
        read_all(&mut stderr)
    );
    assert_eq!(code.unwrap(), 3);
    assert_eq!(err, "err\n");
    assert!(
        out.starts_with("out\nfrom stdin\nhello /work exec-pod\n"),
        "{out}"
    );
    assert!(
        out.contains("sleep"),
        "pid 1 of the exec is the container's init: {out}"
    );
    if let Some(c) = &pod.cgroup {
        let name = c.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            out.contains(&name),
            "the exec is in the container's cgroup: {out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_errors_are_the_users_to_read() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("errors", &bb);
    pod.start("main", &["sleep", "1000"], false, false, false)
        .await;
    let obj = pod.object(json!([{"name": "main"}, {"name": "other"}]));

    let (io, _client) = session(false, false);
    let err = pod
        .streams
        .exec(&obj, &exec_opts("main", &["nope"], false, false), io)
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains("exec: \"nope\": executable file not found in $PATH"),
        "{}",
        err.message
    );
    let (io, _client) = session(false, false);
    let err = pod
        .streams
        .exec(&obj, &exec_opts("other", &["true"], false, false), io)
        .await
        .unwrap_err();
    assert_eq!(err.message, "container not found (\"other\")");

    // An exec outlives nothing: killing the container ends it (137, SIGKILL by the kernel
    // as the pid namespace goes).
    let (io, mut client) = session(false, false);
    let opts = exec_opts(
        "main",
        &["sh", "-c", "echo started; sleep 1000"],
        false,
        false,
    );
    let exec = pod.streams.exec(&obj, &opts, io);
    let kill = async {
        read_until(&mut client.stdout, "started").await;
        pod.runtime
            .kill(&pod.bundle("main"), libc::SIGKILL)
            .unwrap();
    };
    let (code, ()) = tokio::join!(exec, kill);
    assert_eq!(code.unwrap(), 137);
    pod.runtime.wait(&pod.bundle("main")).await;

    // A stopped container.
    let (io, _client) = session(false, false);
    let err = pod
        .streams
        .exec(&obj, &exec_opts("main", &["true"], false, false), io)
        .await
        .unwrap_err();
    assert_eq!(err.message, "container not found (\"main\")");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_with_a_terminal_applies_resizes() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("tty", &bb);
    pod.start("main", &["sleep", "1000"], false, false, false)
        .await;
    let obj = pod.object(json!([{"name": "main"}]));
    let (io, mut client) = session(true, true);
    let opts = exec_opts(
        "main",
        &[
            "sh",
            "-c",
            "read x; stty size; [ -t 0 ] && echo on-a-tty; tty; ls /dev/pts; echo $TERM; read y; exit 4",
        ],
        true,
        true,
    );
    let exec = pod.streams.exec(&obj, &opts, io);
    let drive = async {
        let resize = client.resize.take().unwrap();
        let stdin = client.stdin.take().unwrap();
        // The resize is sent before the line that makes the command ask for the size.
        resize
            .send(TerminalSize {
                width: 100,
                height: 30,
            })
            .await
            .unwrap();
        stdin.send(b"go\n".to_vec()).await.unwrap();
        let out = read_until(&mut client.stdout, "xterm").await;
        assert!(out.contains("30 100"), "{out}");
        // A terminal of the container's own devpts: `tty` names it and it is there.
        assert!(out.contains("on-a-tty"), "{out}");
        assert!(out.contains("/dev/pts/0"), "{out}");
        assert!(!out.contains("not a tty"), "{out}");
        stdin.send(b"bye\n".to_vec()).await.unwrap();
        read_all(&mut client.stdout).await;
    };
    let (code, ()) = tokio::join!(exec, drive);
    assert_eq!(code.unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_sends_stdin_and_gets_output_and_survives_a_new_kubelet() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("attach", &bb);
    let script =
        "echo ready; while read l; do echo \"got $l\"; echo \"err $l\" >&2; done; echo bye; exit 6";
    pod.start("main", &["sh", "-c", script], true, false, false)
        .await;
    let obj = pod.object(json!([{"name": "main", "stdin": true}]));
    let opts = StreamOptions {
        container: Some("main".into()),
        stdin: true,
        stdout: true,
        stderr: true,
        ..Default::default()
    };

    // First session: send a line, read it back on both streams, go away.
    let (io, mut client) = session(true, false);
    let attach = pod.streams.attach(&obj, &opts, io);
    let drive = async {
        let stdin = client.stdin.take().unwrap();
        stdin.send(b"one\n".to_vec()).await.unwrap();
        read_until(&mut client.stdout, "got one").await;
        read_until(client.stderr.as_mut().unwrap(), "err one").await;
        // Going away: the session ends, the container keeps its stdin (no stdinOnce).
        drop(client);
    };
    let (code, ()) = tokio::join!(attach, drive);
    assert_eq!(code.unwrap(), 0);

    // A new kubelet (a new runtime and streams over the same directories) attaches again.
    let streams = KubeletStreams::new(pod.config.clone(), Arc::new(runtime()));
    let (io, mut client) = session(true, false);
    let attach = streams.attach(&obj, &opts, io);
    let drive = async {
        let stdin = client.stdin.take().unwrap();
        stdin.send(b"two\n".to_vec()).await.unwrap();
        let out = read_until(&mut client.stdout, "got two").await;
        assert!(
            !out.contains("got one"),
            "output from the moment of attach: {out}"
        );
        // The shell writes the stderr line after the stdout one: wait for it before the kill.
        read_until(client.stderr.as_mut().unwrap(), "err two").await;
        // The container's stdin stays open across sessions; closing this session's stdin
        // does not close it without stdinOnce, so end the container with a signal.
        drop(stdin);
        pod.runtime
            .kill(&pod.bundle("main"), libc::SIGKILL)
            .unwrap();
        read_all(&mut client.stdout).await;
    };
    let (code, ()) = tokio::join!(attach, drive);
    assert_eq!(code.unwrap(), 137);
    let log = std::fs::read_to_string(pod.bundle("main").join("log")).unwrap();
    assert!(
        log.contains(" stdout F got one") && log.contains(" stderr F err two"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_with_stdin_once_closes_the_containers_stdin() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("once", &bb);
    let script = "while read l; do echo \"got $l\"; done; echo eof; exit 5";
    pod.start("main", &["sh", "-c", script], true, true, false)
        .await;
    let obj = pod.object(json!([{"name": "main", "stdin": true, "stdinOnce": true}]));
    let opts = StreamOptions {
        container: Some("main".into()),
        stdin: true,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let (io, mut client) = session(true, false);
    let attach = pod.streams.attach(&obj, &opts, io);
    let drive = async {
        let stdin = client.stdin.take().unwrap();
        stdin.send(b"x\n".to_vec()).await.unwrap();
        read_until(&mut client.stdout, "got x").await;
        drop(stdin);
        read_until(&mut client.stdout, "eof").await;
        read_all(&mut client.stdout).await;
    };
    let (code, ()) = tokio::join!(attach, drive);
    assert_eq!(code.unwrap(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_to_a_terminal_container() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("ttyattach", &bb);
    pod.start("main", &["sh"], true, true, true).await;
    let obj = pod.object(json!([{"name": "main", "stdin": true, "stdinOnce": true, "tty": true}]));
    let opts = StreamOptions {
        container: Some("main".into()),
        stdin: true,
        stdout: true,
        tty: true,
        ..Default::default()
    };
    let (io, mut client) = session(true, true);
    let attach = pod.streams.attach(&obj, &opts, io);
    let drive = async {
        let resize = client.resize.take().unwrap();
        let stdin = client.stdin.take().unwrap();
        resize
            .send(TerminalSize {
                width: 90,
                height: 20,
            })
            .await
            .unwrap();
        // The resize travels on the same socket before the line, so it is applied first.
        // The terminal echoes the line back; `do''ne` keeps the echo from matching "done".
        stdin
            .send(b"stty size; echo do''ne\n".to_vec())
            .await
            .unwrap();
        let out = read_until(&mut client.stdout, "done\r\n").await;
        assert!(out.contains("20 90"), "{out}");
        stdin.send(b"exit 9\n".to_vec()).await.unwrap();
        read_all(&mut client.stdout).await;
    };
    let (code, ()) = tokio::join!(attach, drive);
    assert_eq!(code.unwrap(), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_reaches_the_pods_loopback() {
    let Some(bb) = ready() else { return };
    let pod = Pod::new("pf", &bb);
    let port = 18080;
    let obj = pod.object(json!([{"name": "main"}]));
    // Nothing listens yet: upstream's message.
    let err = match pod.streams.port_forward(&obj, port).await {
        Err(e) => e,
        Ok(_) => panic!("connected with nothing listening"),
    };
    assert!(
        err.message.contains("connection refused"),
        "{}",
        err.message
    );
    // The host's loopback is not the pod's.
    let host = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let host_port = host.local_addr().unwrap().port();
    assert!(pod.streams.port_forward(&obj, host_port).await.is_err());

    pod.start(
        "main",
        &["sh", "-c", "echo hello | nc -l -p 18080 127.0.0.1"],
        false,
        false,
        false,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut conn = loop {
        match pod.streams.port_forward(&obj, port).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "nc never listened: {}",
                    e.message
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    conn.write_all(b"from the client\n").await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while !String::from_utf8_lossy(&got).contains("hello") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed before the greeting");
        got.extend_from_slice(&buf[..n]);
    }
    drop(conn);
    let exit = pod.runtime.wait(&pod.bundle("main")).await;
    assert_eq!(exit.exit_code, 0);
    let log = std::fs::read_to_string(pod.bundle("main").join("log")).unwrap();
    assert!(log.contains("from the client"), "{log}");
}

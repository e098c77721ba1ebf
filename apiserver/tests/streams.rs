//! exec, attach and port-forward through the real HTTPS server (in process) with a scripted
//! kubelet, driven by stock kubectl: the dispatcher's 1.33 (websocket v5, and the SPDY
//! tunnel for port-forward) and 1.27 (SPDY/3.1). Skips visibly when kubectl is missing.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use k1s_api::streams::{ByteStream, Duplex, LogOptions, NodeStreams, StreamIo, StreamOptions};
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::pki::{Pki, PkiConfig};
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_store::redb::{RedbConfig, RedbStore};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// A kubelet whose "containers" run scripts named by the command's first word.
struct Scripted;

fn err(code: u16, message: &str) -> ClientError {
    ClientError {
        code,
        reason: "InternalError".into(),
        message: message.into(),
    }
}

#[async_trait::async_trait]
impl NodeStreams for Scripted {
    fn node_name(&self) -> &str {
        "n1"
    }
    async fn logs(&self, _: &Value, _: &LogOptions) -> Result<ByteStream, ClientError> {
        Err(err(500, "no logs here"))
    }
    async fn exec(&self, _: &Value, o: &StreamOptions, io: StreamIo) -> Result<i32, ClientError> {
        let args = &o.command[1..];
        match o.command[0].as_str() {
            "echo" => {
                if let Some(out) = &io.stdout {
                    let _ = out.send(format!("{}\n", args.join(" ")).into_bytes()).await;
                }
                Ok(0)
            }
            "fail" => {
                if let Some(e) = &io.stderr {
                    let _ = e.send(b"oops\n".to_vec()).await;
                }
                Ok(args[0].parse().unwrap_or(1))
            }
            "cat" => {
                let (Some(mut stdin), Some(out)) = (io.stdin, io.stdout) else {
                    return Ok(2);
                };
                while let Some(b) = stdin.recv().await {
                    if out.send(b).await.is_err() {
                        break;
                    }
                }
                Ok(0)
            }
            "big" => {
                let n: usize = args[0].parse().unwrap();
                if let Some(out) = &io.stdout {
                    for _ in 0..n / 1000 {
                        let _ = out.send(vec![b'x'; 1000]).await;
                    }
                }
                Ok(0)
            }
            other => Err(err(
                500,
                &format!("exec: \"{other}\": executable file not found in $PATH"),
            )),
        }
    }
    async fn attach(&self, _: &Value, _: &StreamOptions, io: StreamIo) -> Result<i32, ClientError> {
        if let Some(out) = &io.stdout {
            let _ = out.send(b"attached\n".to_vec()).await;
        }
        if let (Some(mut stdin), Some(out)) = (io.stdin, io.stdout) {
            while let Some(b) = stdin.recv().await {
                let _ = out.send(b).await;
            }
        }
        Ok(0)
    }
    async fn port_forward(&self, _: &Value, port: u16) -> Result<Box<dyn Duplex>, ClientError> {
        if port != 80 {
            return Err(err(
                500,
                &format!("dial tcp 127.0.0.1:{port}: connect: connection refused"),
            ));
        }
        let (a, mut b) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                match b.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut out = b"echo:".to_vec();
                        out.extend_from_slice(&buf[..n]);
                        if b.write_all(&out).await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(Box::new(a))
    }
}

struct Env {
    cancel: CancellationToken,
    kubeconfig: PathBuf,
    /// The routes hold it weakly.
    _streams: Arc<dyn NodeStreams>,
    _dir: tempfile::TempDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}

/// The API server with the scripted kubelet of node `n1`: in process, or (`remote`) behind
/// the kubelet's HTTPS port ([`k1s_kubelet::port`]), reached by the API server
/// over TLS as a remote node's kubelet.
async fn env(remote: bool) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(RedbConfig::new(dir.path().join("state.redb"))).unwrap();
    let pki = Pki::load_or_create(&PkiConfig {
        dir: dir.path().join("tls"),
        hostname: "localhost".into(),
        node_ips: vec!["127.0.0.1".parse().unwrap()],
        tls_sans: vec![],
    })
    .unwrap();
    let config = ApiConfig {
        pki: Some(pki.clone()),
        ..ApiConfig::default()
    };
    let state = ApiState::new(Arc::new(store), &config).unwrap();
    k1s_apiserver::bootstrap::run(&state.rest, "127.0.0.1".parse().unwrap(), 6443)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let tasks = tokio_util::task::TaskTracker::new();
    state.start(&tasks, &cancel).await.unwrap();
    let streams: Arc<dyn NodeStreams> = Arc::new(Scripted);
    let client = LocalClient::new(state.rest.clone(), "test", cancel.clone());
    if remote {
        serve_kubelet_port(&pki, &state, &client, streams.clone(), &cancel).await;
    } else {
        state.rest.set_node_streams(&streams);
    }
    let sa = ResourceRef::new("", "v1", "serviceaccounts", Some("default"));
    let _ = client
        .create(
            &sa,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
            &WriteParams::default(),
        )
        .await;
    for (name, node, running) in [
        ("p", "n1", true),
        ("pending", "", false),
        ("stopped", "n1", false),
    ] {
        let created = client
            .create(
                &pods(),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "stdin": true}]}}),
                &WriteParams::default(),
            )
            .await
            .unwrap();
        let mut status = created.clone();
        let state_of = if running {
            json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
        } else {
            json!({"terminated": {"exitCode": 0}})
        };
        status["status"] = json!({"phase": if running {"Running"} else {"Pending"},
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": running,
                "restartCount": 0, "state": state_of}]});
        client
            .update(&pods(), status, Some("status"), &WriteParams::default())
            .await
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = Arc::new(pki.server_config().unwrap());
    let certs = pki.client_cert_check().unwrap();
    tokio::spawn(k1s_apiserver::server::serve(
        listener,
        tls,
        Some(certs),
        state,
        cancel.clone(),
    ));
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        pki.kubeconfig(&format!("https://127.0.0.1:{port}"))
            .unwrap(),
    )
    .unwrap();
    Env {
        cancel,
        kubeconfig,
        _streams: streams,
        _dir: dir,
    }
}

/// Serves `streams` on a kubelet port of node `n1` (registered with that port at 127.0.0.1),
/// with a serving certificate from the cluster CA, and lets the API server dial it.
async fn serve_kubelet_port(
    pki: &Pki,
    state: &ApiState,
    client: &LocalClient,
    streams: Arc<dyn NodeStreams>,
    cancel: &CancellationToken,
) {
    use k1s_apiserver::kubelet_client::{KUBELET_CLIENT_GROUP, KUBELET_CLIENT_USER, KubeletDialer};
    use k1s_kubelet::port::{KubeletServer, KubeletTls};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let node = client
        .create(
            &nodes,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    let mut node = node;
    node["status"] = json!({"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}});
    client
        .update(&nodes, node, Some("status"), &WriteParams::default())
        .await
        .unwrap();
    let (serving, key) = pki
        .issue_kubelet_serving_cert(
            "n1",
            &["127.0.0.1".parse().unwrap()],
            jiff::SignedDuration::from_hours(24),
            None,
        )
        .unwrap();
    let tls = KubeletTls::new(&pki.ca.cert_pem, &serving, &key.unwrap()).unwrap();
    let server = KubeletServer {
        streams,
        client: Arc::new(client.clone()),
    };
    tokio::spawn(k1s_kubelet::port::serve(
        listener,
        tls,
        Arc::new(server),
        cancel.clone(),
    ));
    let (cert, key) = pki
        .issue_client_cert(
            KUBELET_CLIENT_USER,
            Some(KUBELET_CLIENT_GROUP),
            jiff::SignedDuration::from_hours(24),
            None,
        )
        .unwrap();
    state
        .rest
        .set_kubelet_dialer(KubeletDialer::new(&pki.ca.cert_pem, &cert, &key.unwrap()).unwrap());
}

/// The kubectl binaries present: (label, path).
fn kubectls() -> Vec<(&'static str, PathBuf)> {
    [
        ("1.33 (websocket)", "/usr/bin/kubectl"),
        ("1.27 (spdy)", "/usr/lib/google-cloud-sdk/bin/kubectl.1.27"),
        ("1.20 (spdy)", "/var/cache/k1s-test/kubectl-1.20"),
    ]
    .into_iter()
    .map(|(l, p)| (l, PathBuf::from(p)))
    .filter(|(_, p)| p.exists())
    .collect()
}

fn kubectl(bin: &Path, env: &Env, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let cache = env._dir.path().join("cache");
    let mut cmd = Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .arg("--cache-dir")
        .arg(&cache)
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
        let mut s = child.stdin.take().unwrap();
        s.write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_attach_and_errors() {
    exec_attach_and_errors(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_attach_and_errors_through_a_kubelet_port() {
    exec_attach_and_errors(true).await;
}

async fn exec_attach_and_errors(remote: bool) {
    let bins = kubectls();
    if bins.is_empty() {
        eprintln!("SKIP: no kubectl");
        return;
    }
    let env = env(remote).await;
    let env = Arc::new(env);
    for (label, bin) in bins {
        let e = env.clone();
        let b = bin.clone();
        let run = move |args: Vec<&'static str>, stdin: Option<&'static [u8]>| {
            let e = e.clone();
            let b = b.clone();
            tokio::task::spawn_blocking(move || kubectl(&b, &e, &args, stdin))
        };
        let out = run(vec!["exec", "p", "--", "echo", "hello", "world"], None)
            .await
            .unwrap();
        assert!(out.status.success(), "{label}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "hello world\n", "{label}");

        let out = run(vec!["exec", "p", "--", "fail", "3"], None)
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{label}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr),
            "oops\ncommand terminated with exit code 3\n",
            "{label}"
        );

        let out = run(
            vec!["exec", "-i", "p", "--", "cat"],
            Some(b"from stdin\nline 2\n"),
        )
        .await
        .unwrap();
        assert!(out.status.success(), "{label}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "from stdin\nline 2\n", "{label}");

        let out = run(vec!["exec", "p", "--", "big", "1000000"], None)
            .await
            .unwrap();
        assert!(out.status.success(), "{label}: {}", text(&out.stderr));
        assert_eq!(out.stdout.len(), 1_000_000, "{label}");

        let out = run(vec!["exec", "p", "--", "nope"], None).await.unwrap();
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("executable file not found"),
            "{label}: {}",
            text(&out.stderr)
        );

        let out = run(vec!["attach", "-i", "p"], Some(b"typed\n"))
            .await
            .unwrap();
        assert!(out.status.success(), "{label}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("typed\n"),
            "{label}: {}",
            text(&out.stdout)
        );

        let out = run(vec!["exec", "missing", "--", "echo"], None)
            .await
            .unwrap();
        assert!(
            text(&out.stderr).contains("pods \"missing\" not found"),
            "{label}: {}",
            text(&out.stderr)
        );
        let out = run(vec!["exec", "p", "-c", "zz", "--", "echo"], None)
            .await
            .unwrap();
        assert!(
            text(&out.stderr).contains("container zz is not valid for pod p"),
            "{label}: {}",
            text(&out.stderr)
        );
        let out = run(vec!["exec", "pending", "--", "echo"], None)
            .await
            .unwrap();
        assert!(
            text(&out.stderr).contains("does not have a host assigned"),
            "{label}: {}",
            text(&out.stderr)
        );
    }
}

/// Starts `kubectl port-forward pod/p :80` and returns the child and the local port.
fn port_forward(bin: &Path, env: &Env, remote: u16) -> (std::process::Child, u16) {
    let mut child = Command::new(bin)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["port-forward", "pod/p", &format!(":{remote}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\n") {
        if out.read(&mut byte).unwrap() == 0 {
            let mut e = String::new();
            child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            panic!("port-forward ended: {e}");
        }
        seen.push(byte[0]);
    }
    // kubectl prints "Handling connection for PORT" per connection: keep draining stdout, or
    // it dies of SIGPIPE on its first connection.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    // "Forwarding from 127.0.0.1:PORT -> 80"
    let line = text(&seen);
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected port-forward output {line:?}"));
    (child, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward() {
    port_forwards(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_through_a_kubelet_port() {
    port_forwards(true).await;
}

async fn port_forwards(remote: bool) {
    let bins = kubectls();
    if bins.is_empty() {
        eprintln!("SKIP: no kubectl");
        return;
    }
    let env = Arc::new(env(remote).await);
    for (label, bin) in bins {
        let e = env.clone();
        tokio::task::spawn_blocking(move || {
            let (mut child, port) = port_forward(&bin, &e, 80);
            let mut failure = None;
            for round in 0..2 {
                let msg = format!("hello {round}");
                let mut buf = vec![0u8; 5 + msg.len()];
                let res = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
                    s.write_all(msg.as_bytes())?;
                    s.read_exact(&mut buf)
                });
                match res {
                    Ok(()) if text(&buf) == format!("echo:{msg}") => {}
                    Ok(()) => failure = Some(format!("round {round}: got {:?}", text(&buf))),
                    Err(e) => failure = Some(format!("round {round}: {e}")),
                }
                if failure.is_some() {
                    break;
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            if let Some(f) = failure {
                let mut e = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut e);
                panic!("{label}: {f}; kubectl said: {e}");
            }
        })
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_exec_and_port_forward() {
    let python = PathBuf::from(
        std::env::var("K1S_TEST_TOOLS").unwrap_or_else(|_| "/var/cache/k1s-test".into()),
    )
    .join("pyvenv/bin/python");
    if !python.is_file() {
        eprintln!("SKIP: the Python kubernetes client venv is missing");
        return;
    }
    let env = env(false).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/streams_test.py");
    let kubeconfig = env.kubeconfig.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .arg(&script)
            .arg(&kubeconfig)
            .args(["p", "fake"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "streams_test.py failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("all stream checks passed"));
}

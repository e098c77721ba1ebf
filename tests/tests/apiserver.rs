//! End to end with the real `k1s server` and stock kubectl: the server creates its PKI and an
//! admin kubeconfig; kubectl connects over TLS with it, reads `/version` (and so picks its
//! 1.33 client through the dispatcher), the health endpoints and upstream's 404 Status; a
//! restart keeps the CA, so the kubeconfig keeps working.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use k1s_tests::{Server, free_port, k1s_bin, kubectl};

/// The flags every server in this file gets.
const FLAGS: &[&str] = &[
    "--write-kubeconfig-mode",
    "640",
    "--tls-san",
    "k1s.example.test",
];

fn run_kubectl(kubectl: &Path, kubeconfig: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn kubectl_connects_over_tls_with_the_admin_kubeconfig() {
    let Some(kubectl) = kubectl() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("etc/k1s.yaml");
    let cache = dir.path().join("kube-cache");
    let port = free_port();
    let server = Server::start(&data, port, &kubeconfig, FLAGS);

    let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "--write-kubeconfig-mode");

    let kc = |args: &[&str]| run_kubectl(&kubectl, &kubeconfig, &cache, args);
    let version: serde_json::Value =
        serde_json::from_str(&stdout_of(&kc(&["version", "-o", "json"]))).unwrap();
    let server_version = &version["serverVersion"];
    assert_eq!(server_version["major"], "1");
    assert_eq!(server_version["minor"], "33");
    assert!(
        server_version["gitVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.33."),
        "{version}"
    );

    assert_eq!(stdout_of(&kc(&["get", "--raw", "/livez"])), "ok");
    let ready = stdout_of(&kc(&["get", "--raw", "/readyz?verbose"]));
    assert!(ready.contains("[+]etcd ok"), "{ready}");
    assert!(ready.contains("readyz check passed"), "{ready}");
    assert_eq!(stdout_of(&kc(&["get", "--raw", "/healthz/etcd"])), "ok");

    let metrics = stdout_of(&kc(&["get", "--raw", "/metrics"]));
    for needle in [
        "apiserver_request_total{verb=\"GET\",group=\"\",version=\"\",resource=\"\",subresource=\"\",code=\"200\"}",
        "k1s_store_request_duration_seconds_count{operation=\"current_revision\",result=\"ok\"}",
    ] {
        assert!(
            metrics.contains(needle),
            "missing {needle:?} in /metrics:\n{metrics}"
        );
    }

    let missing = kc(&["get", "--raw", "/apis/nothing.example/v1/things"]);
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("NotFound"), "{stderr}");

    // The serving certificate names the --tls-san; a restart keeps the CA and the kubeconfig.
    let ca_before = std::fs::read(data.join("tls/ca.crt")).unwrap();
    server.stop();
    let server = Server::start(&data, port, &kubeconfig, FLAGS);
    assert_eq!(std::fs::read(data.join("tls/ca.crt")).unwrap(), ca_before);
    assert_eq!(stdout_of(&kc(&["get", "--raw", "/readyz"])), "ok");
    server.stop();
}

#[test]
fn plain_http_and_bad_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = Server::start(
        &dir.path().join("data"),
        port,
        &dir.path().join("kc.yaml"),
        FLAGS,
    );
    // Plain HTTP to the TLS port gets no HTTP answer (the TLS handshake fails).
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::io::Write::write_all(&mut conn, b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut conn, &mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("gitVersion"));
    server.stop();

    // The service proxy's ranges are checked before anything starts, on both commands.
    let out = Command::new(k1s_bin())
        .args(["server", "--cluster-cidr", "10.42.0.0/33"])
        .arg("--data-dir")
        .arg(dir.path().join("never"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--cluster-cidr \"10.42.0.0/33\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.path().join("never").exists());
    let out = Command::new(k1s_bin())
        .args(["agent", "--server", "https://127.0.0.1:1", "--token", "t"])
        .args(["--service-cidr", "nonsense"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--service-cidr \"nonsense\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(k1s_bin())
        .args(["server", "--write-kubeconfig-mode", "9x9"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("octal file mode"));

    // An admission plugin nobody has: refused before anything is written, naming it.
    let data = dir.path().join("never");
    let out = Command::new(k1s_bin())
        .args([
            "server",
            "--disable-admission-plugins",
            "Priority,ServiceAcount",
        ])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("disable-admission-plugins plugin \"ServiceAcount\" is unknown"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!data.exists());
}

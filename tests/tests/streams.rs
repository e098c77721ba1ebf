//! End to end, the streaming subresources with real containers (and the ServiceAccount token
//! mounted in one, which authenticates as its pod): `kubectl exec` (stdout,
//! stderr, piped stdin, exit codes, a tty under `script`), `attach`, `port-forward` to `nc`
//! in the pod and `cp` both ways, with every kubectl on the machine (1.33 over websockets,
//! 1.27–1.29 and 1.20 over SPDY), and the Python client's `stream`/`portforward`
//! (tests/python/streams_test.py). Needs root and the local registry tools, like
//! tests/tests/kubelet.rs; skips visibly otherwise.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use k1s_tests::host::{HostCleanup, Images, start_with_kubelet};
use k1s_tests::{Cluster, all_kubectls, eventually, test_tools};
use serde_json::Value;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn pod(c: &Cluster, name: &str) -> Value {
    serde_json::from_slice(&c.run(&["get", "pod", name, "-o", "json"]).stdout)
        .unwrap_or(Value::Null)
}

fn running(c: &Cluster, name: &str) {
    eventually(&format!("{name} to be Running"), 90, || {
        pod(c, name)["status"]["phase"] == "Running"
    });
}

#[test]
fn exec_attach_port_forward_and_cp_with_real_containers() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("streams");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start_with_kubelet("streams", &flags) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let image = images.busybox();
    c.ok(&[
        "run",
        "box",
        &format!("--image={image}"),
        "--command",
        "--",
        "sh",
        "-c",
        "nc -ll -p 8080 -e cat & while true; do sleep 1; done",
    ]);
    running(&c, "box");

    // The ServiceAccount token admission mounted is in the container and authenticates as the
    // pod's ServiceAccount, bound to the pod; the CA and namespace files are beside it.
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    let token = c.ok(&["exec", "box", "--", "cat", &format!("{sa}/token")]);
    assert_eq!(
        c.ok(&["exec", "box", "--", "cat", &format!("{sa}/namespace")]),
        "default"
    );
    let ca = c.data_dir().join("tls/ca.crt");
    assert_eq!(
        c.ok(&["exec", "box", "--", "cat", &format!("{sa}/ca.crt")]),
        std::fs::read_to_string(&ca).unwrap()
    );
    let review = Command::new("curl")
        .args(["-sS", "-X", "POST", "-H", "Content-Type: application/json"])
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", token.trim()))
        .arg("--cacert")
        .arg(&ca)
        .args([
            "-d",
            r#"{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}"#,
        ])
        .arg(format!(
            "https://127.0.0.1:{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            c.port
        ))
        .output()
        .unwrap();
    let review: Value = serde_json::from_slice(&review.stdout).unwrap_or(Value::Null);
    let user = &review["status"]["userInfo"];
    assert_eq!(
        user["username"], "system:serviceaccount:default:default",
        "{review}"
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-name"][0], "box",
        "{review}"
    );

    for (label, bin) in all_kubectls() {
        let run = |args: &[&str], stdin: Option<&str>| c.run_with(&bin, args, stdin);
        let out = run(
            &["exec", "box", "--", "sh", "-c", "echo out; echo err >&2"],
            None,
        );
        assert!(out.status.success(), "{label}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "out\n", "{label}");
        assert_eq!(text(&out.stderr), "err\n", "{label}");

        let out = run(&["exec", "box", "--", "sh", "-c", "exit 7"], None);
        assert_eq!(out.status.code(), Some(7), "{label}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("command terminated with exit code 7"),
            "{label}: {}",
            text(&out.stderr)
        );

        let out = run(&["exec", "-i", "box", "--", "wc", "-l"], Some("a\nb\nc\n"));
        assert!(out.status.success(), "{label}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), "3", "{label}");

        // A tty: `script` gives kubectl a terminal, the shell sees one.
        let cmdline = format!(
            "{} --kubeconfig {} exec -it box -- sh -c 'tty && stty size'",
            bin.display(),
            c.kubeconfig.display()
        );
        let out = Command::new("script")
            .args(["-qec", &cmdline, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let shown = text(&out.stdout);
        assert!(
            shown.contains("/dev/pts/"),
            "{label}: tty: {shown}{}",
            text(&out.stderr)
        );

        // Port-forward to nc (an echo server) in the pod.
        let mut child = Command::new(&bin)
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(["port-forward", "pod/box", ":8080"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\n") && stdout.read(&mut byte).unwrap_or(0) == 1 {
            line.push(byte[0]);
        }
        let port: u16 = text(&line)
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{label}: port-forward said {:?}", text(&line)));
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(b"through the tunnel\n").unwrap();
        let mut got = vec![0u8; 19];
        s.read_exact(&mut got).unwrap();
        assert_eq!(text(&got), "through the tunnel\n", "{label}");
        drop(s);
        let _ = child.kill();
        let _ = child.wait();

        // cp both ways (tar over exec).
        let local = dir.path().join(format!("cp-{}", label.replace('.', "-")));
        std::fs::create_dir_all(&local).unwrap();
        let src = local.join("up.txt");
        std::fs::write(&src, "copied up\n".repeat(1000)).unwrap();
        let remote = format!("box:/tmp/up-{}.txt", label.replace('.', "-"));
        let out = run(&["cp", src.to_str().unwrap(), &remote], None);
        assert!(
            out.status.success(),
            "{label}: cp up: {}",
            text(&out.stderr)
        );
        let back = local.join("down.txt");
        let out = run(&["cp", &remote, back.to_str().unwrap()], None);
        assert!(
            out.status.success(),
            "{label}: cp down: {}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(&src).unwrap(),
            "{label}"
        );
    }

    // attach: the main process's output from now on.
    c.ok(&[
        "run",
        "ticker",
        &format!("--image={image}"),
        "--restart=Never",
        "--command",
        "--",
        "sh",
        "-c",
        "sleep 3; for i in 1 2 3; do echo tick $i; sleep 1; done",
    ]);
    running(&c, "ticker");
    let out = c.run(&["attach", "ticker"]);
    assert!(
        text(&out.stdout).contains("tick 3"),
        "attach: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // The Python client.
    let python = test_tools().join("pyvenv/bin/python");
    if python.is_file() {
        let script: PathBuf =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/streams_test.py");
        let out = Command::new(&python)
            .arg(&script)
            .arg(&c.kubeconfig)
            .args(["box", "real", "8080"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "streams_test.py:\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    } else {
        k1s_tests::missing("the Python kubernetes client venv");
    }
}

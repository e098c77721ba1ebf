//! End to end, encryption at rest (issue #4): Secrets written through kubectl are stored as
//! `k8s:enc:aesgcm:v1:<key>:...` (no plaintext anywhere under the data dir), read back and
//! watched decrypted, survive `k1s secrets-encrypt rotate-keys` (picked up by the running
//! server, which re-encrypts them) and the removal of the old key; secrets written before
//! encryption was enabled stay readable; a bad configuration stops the server with a clear
//! error and a value under an unknown key is a 500 naming the key.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use k1s_tests::{Cluster, Server, k1s_bin};
use serde_json::Value;

const K1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const K2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A value no other test and no file of a fresh data dir contains.
fn unique(tag: &str) -> String {
    format!("{tag}-{}-{}", std::process::id(), uuid_ish())
}

fn uuid_ish() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Every regular file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().map_while(Result::ok) {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// The files under `dir` that contain `needle`.
fn containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    files(dir)
        .into_iter()
        .filter(|f| {
            std::fs::read(f)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        })
        .collect()
}

/// Stops the cluster's server and starts it again with `extra` flags.
fn restart(c: Cluster, extra: &[&str]) -> Cluster {
    let Cluster {
        server,
        dir,
        port,
        kubeconfig,
        kubectl,
    } = c;
    server.stop();
    let server = Server::start(&dir.path().join("data"), port, &kubeconfig, extra);
    Cluster {
        server,
        dir,
        port,
        kubeconfig,
        kubectl,
    }
}

fn secret_value(c: &Cluster, name: &str) -> String {
    let s = json(&c.ok(&["get", "secret", name, "-o", "json"]));
    let v = s["data"]["password"].as_str().unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(v)
            .unwrap_or_default(),
    )
    .unwrap()
}

fn secrets_encrypt(data_dir: &Path, args: &[&str]) -> String {
    let out = Command::new(k1s_bin())
        .args(["secrets-encrypt"])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "secrets-encrypt {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The key that writes, from `k1s secrets-encrypt status`.
fn write_key(data_dir: &Path) -> String {
    let status = secrets_encrypt(data_dir, &["status"]);
    status
        .lines()
        .find_map(|l| l.trim().strip_prefix("writes with: aesgcm key "))
        .unwrap_or_else(|| panic!("no write key in {status}"))
        .to_owned()
}

/// Starts a watch of the default namespace's secrets from `rv` (curl, ended by the server
/// after `timeoutSeconds`); returns its events once it ends.
fn watch_secrets(c: &Cluster, rv: &str) -> std::thread::JoinHandle<Vec<Value>> {
    let tls = c.data_dir().join("tls");
    let child = Command::new("curl")
        .args(["-sS", "-N", "--http1.1", "--max-time", "60"])
        .arg("--cacert")
        .arg(tls.join("ca.crt"))
        .arg("--cert")
        .arg(tls.join("admin.crt"))
        .arg("--key")
        .arg(tls.join("admin.key"))
        .arg(format!(
            "https://127.0.0.1:{}/api/v1/namespaces/default/secrets?watch=true&resourceVersion={rv}&timeoutSeconds=8",
            c.port
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::spawn(move || {
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(json)
            .collect()
    })
}

#[test]
fn secrets_are_encrypted_at_rest_and_survive_key_rotation() {
    let Some(c) = Cluster::start(&["--secrets-encryption", "--disable-controller-manager"]) else {
        return;
    };
    let data = c.data_dir();
    let generated = data.join("server/cred/encryption-config.json");
    assert!(generated.is_file());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&generated).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let first_key = write_key(&data);

    // Create and read back; a watch sees the object decrypted.
    let v1 = unique("first");
    let rv = json(
        &c.raw("GET", "/api/v1/namespaces/default/secrets", None, None)
            .body,
    )["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let watch = watch_secrets(&c, &rv);
    std::thread::sleep(Duration::from_millis(500));
    c.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        &format!("--from-literal=password={v1}"),
    ]);
    assert_eq!(secret_value(&c, "s1"), v1);
    let listed = json(&c.ok(&["get", "secrets", "-o", "json"]));
    assert!(
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["data"]["password"] == b64(&v1))
    );
    let events = watch.join().unwrap();
    assert!(
        events.iter().any(|e| e["type"] == "ADDED"
            && e["object"]["metadata"]["name"] == "s1"
            && e["object"]["data"]["password"] == b64(&v1)),
        "{events:?}"
    );
    // A PATCH reads and rewrites it through the same path.
    c.ok(&["label", "secret", "s1", "tier=gold"]);
    assert_eq!(secret_value(&c, "s1"), v1);

    // At rest: only ciphertext under the data dir.
    let c = {
        let Cluster {
            server,
            dir,
            port,
            kubeconfig,
            kubectl,
        } = c;
        server.stop();
        for needle in [v1.clone(), b64(&v1)] {
            assert!(
                containing(&data, &needle).is_empty(),
                "plaintext {needle} found in {:?}",
                containing(&data, &needle)
            );
        }
        let marker = format!("k8s:enc:aesgcm:v1:{first_key}:");
        assert!(
            !containing(&data.join("db"), &marker).is_empty(),
            "no {marker} in the store files"
        );
        let server = Server::start(
            &data,
            port,
            &kubeconfig,
            &["--secrets-encryption", "--disable-controller-manager"],
        );
        Cluster {
            server,
            dir,
            port,
            kubeconfig,
            kubectl,
        }
    };
    assert_eq!(secret_value(&c, "s1"), v1);
    c.server.wait_for_log("re-encryption sweep done");

    // Rotate while the server runs: it reloads the file and re-encrypts s1.
    let rotated = secrets_encrypt(&data, &["rotate-keys"]);
    assert!(rotated.contains("Added key"), "{rotated}");
    let second_key = write_key(&data);
    assert_ne!(second_key, first_key);
    let status = secrets_encrypt(&data, &["status"]);
    assert!(
        status.contains(&format!("aesgcm (keys: {second_key}, {first_key})")),
        "{status}"
    );
    c.server
        .wait_for_log("reloaded the encryption configuration");
    c.server.wait_for_log("re-encryption sweep done");
    assert_eq!(secret_value(&c, "s1"), v1);
    let v2 = unique("second");
    c.ok(&[
        "create",
        "secret",
        "generic",
        "s2",
        &format!("--from-literal=password={v2}"),
    ]);
    let c = restart(c, &["--secrets-encryption", "--disable-controller-manager"]);
    assert_eq!(secret_value(&c, "s1"), v1);

    // Drop the old key from the file: everything still reads.
    let mut doc = json(&std::fs::read_to_string(&generated).unwrap());
    let keys = doc["resources"][0]["providers"][0]["aesgcm"]["keys"]
        .as_array_mut()
        .unwrap();
    keys.retain(|k| k["name"] == second_key.as_str());
    assert_eq!(keys.len(), 1);
    std::fs::write(&generated, serde_json::to_string(&doc).unwrap()).unwrap();
    let c = restart(c, &["--secrets-encryption", "--disable-controller-manager"]);
    assert_eq!(secret_value(&c, "s1"), v1);
    assert_eq!(secret_value(&c, "s2"), v2);
    c.ok(&["delete", "secret", "s2"]);
    let data = c.data_dir();
    let Cluster { server, .. } = c;
    server.stop();
    let marker = format!("k8s:enc:aesgcm:v1:{second_key}:");
    assert!(!containing(&data.join("db"), &marker).is_empty());
}

fn config(keys: &[(&str, &str)]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|(n, s)| format!("            - name: {n}\n              secret: {s}\n"))
        .collect();
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources:\n      - secrets\n    providers:\n      - aesgcm:\n          keys:\n{}      - identity: {{}}\n",
        keys.concat()
    )
}

/// Runs `k1s server` expecting it to exit with an error; returns its stderr.
fn server_fails(data: &Path, extra: &[&str]) -> String {
    let mut child = Command::new(k1s_bin())
        .arg("server")
        .arg("--data-dir")
        .arg(data)
        .args(["--bind-address", "127.0.0.1", "--https-port"])
        .arg(k1s_tests::free_port().to_string())
        .arg("--write-kubeconfig")
        .arg(data.join("fail.yaml"))
        .arg("--disable-agent")
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success());
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server started with {extra:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

#[test]
fn plaintext_secrets_stay_readable_and_bad_keys_are_clear_errors() {
    let api = ["--disable-controller-manager", "--disable-scheduler"];
    let Some(c) = Cluster::start(&api) else {
        return;
    };
    let v0 = unique("before");
    c.ok(&[
        "create",
        "secret",
        "generic",
        "old",
        &format!("--from-literal=password={v0}"),
    ]);
    let data = c.data_dir();
    let dir = c.dir.path().to_owned();

    // A configuration the server cannot use stops it with a message saying what to fix.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        config(&[("key1", "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0")]),
    )
    .unwrap();
    let cfg = dir.join("enc.yaml");
    std::fs::write(&cfg, config(&[("key1", K1)])).unwrap();
    let Cluster {
        server,
        dir: tmp,
        port,
        kubeconfig,
        kubectl,
    } = c;
    server.stop();
    let err = server_fails(
        &data,
        &["--encryption-provider-config", bad.to_str().unwrap()],
    );
    assert!(
        err.contains("keys[0].secret") && err.contains("16 or 32 bytes"),
        "{err}"
    );

    let mut flags = api.to_vec();
    flags.extend(["--encryption-provider-config", cfg.to_str().unwrap()]);
    let server = Server::start(&data, port, &kubeconfig, &flags);
    let c = Cluster {
        server,
        dir: tmp,
        port,
        kubeconfig,
        kubectl,
    };
    // Written before encryption: still readable, and the sweep encrypts it.
    assert_eq!(secret_value(&c, "old"), v0);
    c.server.wait_for_log("re-encryption sweep done");
    let v1 = unique("after");
    c.ok(&[
        "create",
        "secret",
        "generic",
        "new",
        &format!("--from-literal=password={v1}"),
    ]);
    assert_eq!(secret_value(&c, "new"), v1);
    let page = json(&c.ok(&["get", "secrets", "--chunk-size=1", "-o", "json"]));
    assert_eq!(page["items"].as_array().unwrap().len(), 2, "{page}");

    // A configuration without key1: its values are a 500 naming the key, not garbage.
    std::fs::write(&cfg, config(&[("key2", K2)])).unwrap();
    let c = restart(c, &flags);
    let reply = c.raw("GET", "/api/v1/namespaces/default/secrets/new", None, None);
    assert_eq!(reply.code, 500, "{}", reply.body);
    let status = reply.json();
    assert_eq!(status["reason"], "InternalError", "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("\"key1\""),
        "{status}"
    );
    assert!(!reply.body.contains(&b64(&v1)));
    // Put key1 back (second): everything reads again, deletecollection works.
    std::fs::write(&cfg, config(&[("key2", K2), ("key1", K1)])).unwrap();
    let c = restart(c, &flags);
    assert_eq!(secret_value(&c, "new"), v1);
    assert_eq!(secret_value(&c, "old"), v0);
    c.ok(&["delete", "secrets", "--all"]);
    let left = json(&c.ok(&["get", "secrets", "-o", "json"]));
    assert_eq!(left["items"].as_array().unwrap().len(), 0, "{left}");
    let Cluster { server, .. } = c;
    let logs = server.stop();
    for l in &logs {
        assert!(!l.contains(&v1) && !l.contains(&b64(&v1)), "{l}");
    }
}

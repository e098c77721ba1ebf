//! End to end: dynamic admission (issue #29). A webhook server of the test's own (HTTPS on
//! loopback, its certificate signed by a CA the configurations carry in `caBundle`) refuses,
//! mutates or stalls what the real `k1s server` sends it, driven with stock kubectl: refusals
//! with upstream's message, namespace and object selectors, a JSON-patch mutation, deletes,
//! `failurePolicy` Fail and Ignore, `timeoutSeconds`, server-side dry run, validation of the
//! configurations, and configurations that no webhook can block.

use std::sync::{Arc, Mutex};

use base64::Engine;
use k1s_tests::{API_ONLY, Cluster};
use serde_json::{Value, json};

/// The test's webhook server: what it was asked, and how to trust it.
struct Hook {
    port: u16,
    ca_bundle: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Hook {
    /// The reviews' requests it received for `path`, oldest first.
    fn requests(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["path"] == path)
            .map(|r| r["request"].clone())
            .collect()
    }
}

/// A CA and a serving certificate for 127.0.0.1 signed by it (PEM).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "webhook test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_cert.pem(), &ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".into()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// What the webhook answers to `request` at `path`.
async fn decide(path: &str, request: &Value) -> Value {
    let uid = request["uid"].clone();
    let allow = json!({"uid": uid, "allowed": true});
    match path {
        "/validate" => {
            let obj = if request["operation"] == "DELETE" {
                &request["oldObject"]
            } else {
                &request["object"]
            };
            let labels = &obj["metadata"]["labels"];
            if labels["deny"] == "yes" {
                json!({"uid": uid, "allowed": false, "status": {
                    "code": 403, "reason": "Forbidden",
                    "message": "the object carries the deny label"}})
            } else if request["operation"] == "DELETE" && labels["protected"] == "yes" {
                json!({"uid": uid, "allowed": false,
                       "status": {"message": "protected objects stay"}})
            } else {
                json!({"uid": uid, "allowed": true, "warnings": ["seen by the test webhook"]})
            }
        }
        "/mutate" => {
            let patch = if request["object"]["data"].is_object() {
                json!([{"op": "add", "path": "/data/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/data", "value": {"mutated": "yes"}}])
            };
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "/slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            allow
        }
        _ => json!({"uid": uid, "allowed": false, "status": {"message": "unknown path"}}),
    }
}

/// Starts the webhook server on a thread of its own.
fn start_hook() -> Hook {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (ca, cert, key) = certificates();
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            port_tx.send(listener.local_addr().unwrap().port()).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, log) = (acceptor.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut data = Vec::new();
                    let mut buf = [0u8; 8192];
                    let (head_len, body_len) = loop {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => data.extend_from_slice(&buf[..n]),
                        }
                        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            break (end + 4, len);
                        }
                    };
                    while data.len() < head_len + body_len {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => data.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&data[..head_len]).into_owned();
                    let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let path = target.split('?').next().unwrap_or("/").to_owned();
                    let review: Value =
                        serde_json::from_slice(&data[head_len..head_len + body_len])
                            .unwrap_or(Value::Null);
                    log.lock().unwrap().push(json!({"path": path, "target": target,
                        "request": review["request"]}));
                    let response = decide(&path, &review["request"]).await;
                    let body = json!({"apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview", "response": response})
                    .to_string();
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(answer.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    Hook {
        port: port_rx.recv().unwrap(),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca),
        seen,
    }
}

/// A configuration of one webhook at `url` for `resources`' `operations`.
fn configuration(
    kind: &str,
    name: &str,
    url: &str,
    ca_bundle: &str,
    operations: &[&str],
    resources: &[&str],
    extra: Value,
) -> String {
    let mut hook = json!({
        "name": format!("{name}.k1s.test"),
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": resources}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1", "v1beta1"],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        hook[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
           "metadata": {"name": name}, "webhooks": [hook]})
    .to_string()
}

fn config_map(ns: &str, name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "data": {"k": "v"}})
    .to_string()
}

#[test]
fn webhooks_refuse_mutate_and_fail_as_upstream() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let hook = start_hook();
    let base = format!("https://127.0.0.1:{}", hook.port);
    c.ok(&["create", "namespace", "hooked"]);
    c.ok(&["label", "namespace", "hooked", "webhook-test=on"]);
    c.ok(&["create", "namespace", "other"]);

    // Validation of the configurations themselves.
    let mut bad: Value = serde_json::from_str(&configuration(
        "ValidatingWebhookConfiguration",
        "bad",
        &format!("{base}/validate"),
        &hook.ca_bundle,
        &["CREATE"],
        &["configmaps"],
        json!({"sideEffects": "Unknown"}),
    ))
    .unwrap();
    bad["webhooks"][0]["timeoutSeconds"] = json!(45);
    let e = c.fails_stdin(&["create", "-f", "-"], &bad.to_string());
    assert!(
        e.contains("webhooks[0].sideEffects: Unsupported value: \"Unknown\""),
        "{e}"
    );
    assert!(
        e.contains("webhooks[0].timeoutSeconds: Invalid value: 45"),
        "{e}"
    );

    // A validating webhook for configmaps in labelled namespaces.
    c.ok_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "deny",
            &format!("{base}/validate"),
            &hook.ca_bundle,
            &["CREATE", "UPDATE", "DELETE"],
            &["configmaps"],
            json!({"namespaceSelector": {"matchLabels": {"webhook-test": "on"}}}),
        ),
    );
    let stored = c.get_json(&["validatingwebhookconfiguration", "deny"]);
    let w = &stored["webhooks"][0];
    assert_eq!(
        (&w["failurePolicy"], &w["matchPolicy"], &w["timeoutSeconds"]),
        (&json!("Fail"), &json!("Equivalent"), &json!(10)),
        "{stored}"
    );
    assert_eq!(w["rules"][0]["scope"], "*");
    let e = c.fails_stdin(
        &["create", "-f", "-"],
        &config_map("hooked", "refused", json!({"deny": "yes"})),
    );
    assert!(
        e.contains("admission webhook \"deny.k1s.test\" denied the request: the object carries the deny label"),
        "{e}"
    );
    assert!(e.contains("(Forbidden)"), "{e}");
    // Outside the selected namespaces the webhook is not asked.
    c.ok_stdin(
        &["create", "-f", "-"],
        &config_map("other", "refused", json!({"deny": "yes"})),
    );
    let out = c.run_with(
        &c.kubectl,
        &["create", "-f", "-"],
        Some(&config_map(
            "hooked",
            "allowed",
            json!({"protected": "yes"}),
        )),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("seen by the test webhook"),
        "the webhook's warning reaches kubectl: {out:?}"
    );
    let asked = hook.requests("/validate");
    let create = asked
        .iter()
        .find(|r| r["name"] == "allowed" && r["operation"] == "CREATE")
        .expect("the allowed create was reviewed");
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        create["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(create["namespace"], "hooked");
    assert_eq!(create["dryRun"], false);
    assert_eq!(create["object"]["data"]["k"], "v");
    assert!(
        create["userInfo"]["username"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{create}"
    );
    assert_eq!(create["options"]["kind"], "CreateOptions");
    assert!(
        hook.seen.lock().unwrap().iter().all(|r| r["target"]
            .as_str()
            .is_some_and(|t| t.ends_with("?timeout=10s"))),
        "upstream's timeout query"
    );
    assert!(asked.iter().all(|r| r["namespace"] != "other"));
    // Updates and deletes are reviewed too (the old object for deletes).
    let e = c.fails_stdin(
        &["label", "-f", "-", "deny=yes"],
        &config_map("hooked", "allowed", json!({"protected": "yes"})),
    );
    assert!(e.contains("denied the request"), "{e}");
    let e = c.fails(&["delete", "configmap", "allowed", "-n", "hooked"]);
    assert!(
        e.contains(
            "admission webhook \"deny.k1s.test\" denied the request: protected objects stay"
        ),
        "{e}"
    );
    // Without a code or reason the refusal is a 400 with no reason, as upstream's.
    assert!(e.contains("Error from server: admission webhook"), "{e}");
    c.ok(&["get", "configmap", "allowed", "-n", "hooked"]);
    // Server-side dry run reaches webhooks without side effects, marked as such.
    c.ok_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        &config_map("hooked", "dry", json!({})),
    );
    let dry = hook.requests("/validate");
    assert!(
        dry.iter()
            .any(|r| r["name"] == "dry" && r["dryRun"] == true),
        "{dry:?}"
    );

    // A mutating webhook patches what is stored.
    c.ok_stdin(
        &["create", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "mutate",
            &format!("{base}/mutate"),
            &hook.ca_bundle,
            &["CREATE"],
            &["configmaps"],
            json!({"reinvocationPolicy": "IfNeeded"}),
        ),
    );
    c.ok_stdin(
        &["create", "-f", "-"],
        &config_map("other", "patched", json!({})),
    );
    let cm = c.get_json(&["configmap", "patched", "-n", "other"]);
    assert_eq!(cm["data"], json!({"k": "v", "mutated": "yes"}), "{cm}");

    // An unreachable webhook: Fail refuses with upstream's 500, Ignore lets the write pass.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    c.ok_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "down",
            &format!("https://127.0.0.1:{closed}/validate"),
            &hook.ca_bundle,
            &["CREATE"],
            &["secrets"],
            json!({}),
        ),
    );
    let e = c.fails(&["create", "secret", "generic", "s1", "--from-literal=a=b"]);
    assert!(
        e.contains("Internal error occurred: failed calling webhook \"down.k1s.test\""),
        "{e}"
    );
    c.ok(&[
        "patch",
        "validatingwebhookconfiguration",
        "down",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]"#,
    ]);
    c.ok(&["create", "secret", "generic", "s1", "--from-literal=a=b"]);

    // A webhook slower than its timeoutSeconds.
    c.ok_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "slow",
            &format!("{base}/slow"),
            &hook.ca_bundle,
            &["CREATE"],
            &["services"],
            json!({"timeoutSeconds": 1}),
        ),
    );
    let e = c.fails(&["create", "service", "clusterip", "late", "--tcp=80:80"]);
    assert!(e.contains("context deadline exceeded"), "{e}");

    // A webhook that refuses everything cannot lock its own configuration in.
    c.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "everything"},
            "webhooks": [{"name": "everything.k1s.test",
                "clientConfig": {"url": format!("https://127.0.0.1:{closed}/"),
                                 "caBundle": hook.ca_bundle},
                "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                           "resources": ["*/*"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
        .to_string(),
    );
    let e = c.fails(&["create", "configmap", "blocked", "-n", "other"]);
    assert!(
        e.contains("failed calling webhook \"everything.k1s.test\""),
        "{e}"
    );
    c.ok(&[
        "delete",
        "validatingwebhookconfiguration",
        "everything",
        "slow",
        "down",
        "deny",
    ]);
    c.ok(&["delete", "mutatingwebhookconfiguration", "mutate"]);
    c.ok(&["create", "configmap", "free", "-n", "hooked"]);
}

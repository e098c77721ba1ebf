//! End to end: dynamic admission (issue #29). A webhook server of the test's own (HTTPS on
//! loopback, its certificate signed by a CA the configurations carry in `caBundle`) refuses,
//! mutates or stalls what the real `k1s server` sends it, driven with stock kubectl: refusals
//! with upstream's message, namespace and object selectors, a JSON-patch mutation, deletes,
//! `failurePolicy` Fail and Ignore, `timeoutSeconds`, server-side dry run, validation of the
//! configurations, and configurations that no webhook can block. The same server converts
//! custom resources between the versions of a CRD (`conversion.strategy: Webhook`).

mod support;

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
        "/convert" => convert(request),
        "/slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            allow
        }
        _ => json!({"uid": uid, "allowed": false, "status": {"message": "unknown path"}}),
    }
}

/// The test's conversion (as the conformance suite's webhook): `v1` holds `hostPort:
/// "host:port"`, `v2` holds `host` and `port`.
fn convert(request: &Value) -> Value {
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let mut out = Vec::new();
    for o in request["objects"].as_array().into_iter().flatten() {
        let mut c = o.clone();
        let m = c.as_object_mut().unwrap();
        if desired.ends_with("/v2") {
            if let Some(hp) = m.remove("hostPort") {
                let (h, p) = hp
                    .as_str()
                    .unwrap_or("")
                    .split_once(':')
                    .unwrap_or(("", ""));
                m.insert("host".into(), json!(h));
                m.insert("port".into(), json!(p));
            }
        } else if let (Some(h), Some(p)) = (m.remove("host"), m.remove("port")) {
            let hp = format!("{}:{}", h.as_str().unwrap_or(""), p.as_str().unwrap_or(""));
            m.insert("hostPort".into(), json!(hp));
        }
        m.insert("apiVersion".into(), json!(desired));
        out.push(c);
    }
    json!({"uid": request["uid"], "convertedObjects": out, "result": {"status": "Success"}})
}

/// Starts the webhook server on a thread of its own.
fn start_hook() -> Hook {
    let (ca, cert, key) = certificates();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let config = support::server_config(&cert, &key, None);
    let port = support::serve_tls(config, move |mut tls| {
        let log = log.clone();
        async move {
            let Some((head, body)) = support::read_request(&mut tls).await else {
                return;
            };
            let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let path = target.split('?').next().unwrap_or("/").to_owned();
            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log.lock()
                .unwrap()
                .push(json!({"path": path, "target": target,
                        "request": review["request"]}));
            let response = decide(&path, &review["request"]).await;
            let body = if path == "/convert" {
                json!({"apiVersion": "apiextensions.k8s.io/v1",
                            "kind": "ConversionReview", "response": response})
            } else {
                json!({"apiVersion": "admission.k8s.io/v1",
                            "kind": "AdmissionReview", "response": response})
            }
            .to_string();
            support::respond(&mut tls, 200, &body).await;
        }
    });
    Hook {
        port,
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

/// The CRD of the conversion test: `v1` and `v2`, `storage` the storage version, converted
/// by the test's webhook.
fn converted_crd(hook: &Hook, storage: &str) -> String {
    let version = |name: &str| {
        json!({"name": name, "served": true, "storage": name == storage,
            "schema": {"openAPIV3Schema": {"type": "object",
                "x-kubernetes-preserve-unknown-fields": true}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "endpoints.conv.k1s.test"},
        "spec": {"group": "conv.k1s.test", "scope": "Namespaced",
            "names": {"plural": "endpoints", "singular": "endpoint", "kind": "Endpoint"},
            "versions": [version("v1"), version("v2")],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1", "v1beta1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{}/convert", hook.port),
                    "caBundle": hook.ca_bundle}}}}})
    .to_string()
}

/// Upstream's CustomResourceConversionWebhook conformance cases and more: objects are stored
/// in the storage version and served in the version asked for, through the CRD's webhook, on
/// reads, writes, lists of objects stored in different versions, and watches.
#[test]
fn crd_conversion_webhook_converts_reads_writes_lists_and_watches() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let hook = start_hook();
    c.ok_stdin(&["create", "-f", "-"], &converted_crd(&hook, "v1"));
    let base = "/apis/conv.k1s.test";
    let path = |v: &str, name: &str| format!("{base}/{v}/namespaces/default/endpoints/{name}");
    let wait_served = || {
        for _ in 0..100 {
            if c.raw(
                "GET",
                &format!("{base}/v2/namespaces/default/endpoints"),
                None,
                None,
            )
            .code
                == 200
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("the custom resource is not served");
    };
    wait_served();
    let v1 = |name: &str| {
        json!({"apiVersion": "conv.k1s.test/v1", "kind": "Endpoint",
            "metadata": {"name": name, "namespace": "default"}, "hostPort": "localhost:8080"})
        .to_string()
    };
    c.ok_stdin(&["create", "-f", "-"], &v1("one"));
    // Stored as v1 (no conversion on the way in); read as v2 through the webhook.
    assert!(hook.requests("/convert").is_empty());
    let got = c.raw("GET", &path("v2", "one"), None, None);
    assert_eq!(got.code, 200, "{}", got.body);
    let got = got.json();
    assert_eq!(got["apiVersion"], "conv.k1s.test/v2");
    assert_eq!(
        (got["host"].as_str(), got["port"].as_str()),
        (Some("localhost"), Some("8080"))
    );
    assert!(got.get("hostPort").is_none(), "{got}");
    let asked = hook.requests("/convert");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["desiredAPIVersion"], "conv.k1s.test/v2");
    assert_eq!(asked[0]["objects"][0]["hostPort"], "localhost:8080");

    // The storage version becomes v2: a v1 write is converted on its way in.
    let crd = c.raw(
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/endpoints.conv.k1s.test",
        None,
        None,
    );
    let mut crd = crd.json();
    crd["spec"]["versions"][0]["storage"] = json!(false);
    crd["spec"]["versions"][1]["storage"] = json!(true);
    c.ok_stdin(&["replace", "-f", "-"], &crd.to_string());
    let crd = c
        .raw(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/endpoints.conv.k1s.test",
            None,
            None,
        )
        .json();
    assert_eq!(
        crd["status"]["storedVersions"],
        json!(["v1", "v2"]),
        "{crd}"
    );
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
    let mut created = false;
    for _ in 0..50 {
        let before = hook.requests("/convert").len();
        c.ok_stdin(&["create", "-f", "-"], &v1("two"));
        let stored = hook.requests("/convert")[before..]
            .iter()
            .any(|r| r["desiredAPIVersion"] == "conv.k1s.test/v2");
        if stored {
            created = true;
            break;
        }
        // The catalog had not taken the new storage version yet: try again.
        c.ok(&["delete", "endpoints.conv.k1s.test", "two"]);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(created, "the second object was not stored as v2");

    // Lists of objects stored in both versions, in either version.
    for (v, field) in [("v1", "hostPort"), ("v2", "host")] {
        let list = c.raw(
            "GET",
            &format!("{base}/{v}/namespaces/default/endpoints"),
            None,
            None,
        );
        assert_eq!(list.code, 200, "{}", list.body);
        let list = list.json();
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 2, "{list}");
        for item in items {
            assert_eq!(item["apiVersion"], format!("conv.k1s.test/{v}"), "{item}");
            assert!(item.get(field).is_some(), "{item}");
        }
    }
    // kubectl reads the preferred version (v1, the first listed).
    let out = c.ok(&[
        "get",
        "endpoints.conv.k1s.test",
        "two",
        "-o",
        "jsonpath={.hostPort}",
    ]);
    assert_eq!(out, "localhost:8080");

    // A watch in v2 sees a change made through v1 converted.
    let list = c
        .raw(
            "GET",
            &format!("{base}/v2/namespaces/default/endpoints"),
            None,
            None,
        )
        .json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    c.ok(&["label", "endpoints.conv.k1s.test", "one", "changed=yes"]);
    let watched = c.raw(
        "GET",
        &format!(
            "{base}/v2/namespaces/default/endpoints?watch=1&timeoutSeconds=1&resourceVersion={rv}"
        ),
        None,
        None,
    );
    let event: Value = serde_json::from_str(watched.body.lines().next().unwrap_or("null")).unwrap();
    assert_eq!(event["type"], "MODIFIED", "{}", watched.body);
    assert_eq!(event["object"]["host"], "localhost", "{}", watched.body);
    assert_eq!(event["object"]["metadata"]["labels"]["changed"], "yes");
}

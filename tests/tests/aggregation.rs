//! End to end: the aggregation layer (issue #29). An extension API server of the test's own
//! (HTTPS under `ext.default.svc`, signed by a CA the APIService carries in `caBundle`, and
//! requiring a client certificate from the front proxy CA that
//! `kube-system/extension-apiserver-authentication` publishes) serves `flunders`; the real
//! `k1s server` proxies `/apis/wardle.k1s.test/v1alpha1/...` to it through a Service, lists
//! the group in discovery, reports the APIService Available, passes the user along in
//! `X-Remote-User`/`X-Remote-Group`, and streams a watch; stock kubectl reads the resource.
//! The group versions k1s serves itself have local APIServices.

mod support;

use std::sync::{Arc, Mutex};

use base64::Engine;
use k1s_tests::{API_ONLY, Cluster};
use serde_json::{Value, json};

/// What the extension server saw: (method, path, X-Remote-User, X-Remote-Groups).
type Seen = Arc<Mutex<Vec<(String, String, String, Vec<String>)>>>;

/// A CA and a serving certificate for `ext.default.svc` signed by it (PEM).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "extension test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_cert.pem(), &ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["ext.default.svc".into()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

const RESOURCES: &str = r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"wardle.k1s.test/v1alpha1","resources":[{"name":"flunders","singularName":"flunder","namespaced":true,"kind":"Flunder","verbs":["create","delete","get","list","watch"]}]}"#;

fn flunder(name: &str, user: &str) -> Value {
    json!({"apiVersion": "wardle.k1s.test/v1alpha1", "kind": "Flunder",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1",
            "annotations": {"seen-user": user}}})
}

/// Starts the extension server; its port. Only clients with a certificate from
/// `front_proxy_ca` get through the handshake.
fn start_extension(serving: (&str, &str), front_proxy_ca: &str, seen: Seen) -> u16 {
    use tokio::io::AsyncWriteExt;

    let config = support::server_config(serving.0, serving.1, Some(front_proxy_ca));
    support::serve_tls(config, move |mut tls| {
        let seen = seen.clone();
        async move {
            let Some((head, body)) = support::read_request(&mut tls).await else {
                return;
            };
            let mut words = head.split_whitespace();
            let method = words.next().unwrap_or("").to_owned();
            let target = words.next().unwrap_or("/").to_owned();
            let header = |name: &str| -> Vec<String> {
                head.lines()
                    .filter_map(|l| l.split_once(':'))
                    .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.trim().to_owned())
                    .collect()
            };
            let user = header("x-remote-user")
                .into_iter()
                .next()
                .unwrap_or_default();
            let (path, query) = target.split_once('?').unwrap_or((&target, ""));
            seen.lock().unwrap().push((
                method.clone(),
                path.to_owned(),
                user.clone(),
                header("x-remote-group"),
            ));
            let list_path = "/apis/wardle.k1s.test/v1alpha1/namespaces/default/flunders";
            let (code, body, stream) = match (method.as_str(), path) {
                ("GET", "/apis/wardle.k1s.test/v1alpha1") => (200, RESOURCES.to_owned(), false),
                ("GET", p) if p == list_path && query.contains("watch=") => {
                    (200, String::new(), true)
                }
                ("GET", p) if p == list_path => {
                    let list = json!({"apiVersion": "wardle.k1s.test/v1alpha1",
                                "kind": "FlunderList", "metadata": {"resourceVersion": "1"},
                                "items": [flunder("one", &user)]});
                    (200, list.to_string(), false)
                }
                ("POST", p) if p == list_path => {
                    let mut f: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    f["metadata"]["annotations"] = json!({"seen-user": user});
                    (201, f.to_string(), false)
                }
                _ => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "NotFound", "code": 404})
                    .to_string(),
                    false,
                ),
            };
            if stream {
                // A watch: two events, a moment apart, in chunks.
                let _ = tls
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
                            .await;
                for name in ["one", "two"] {
                    let ev = format!(
                        "{}\n",
                        json!({"type": "ADDED", "object": flunder(name, &user)})
                    );
                    let _ = tls
                        .write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())
                        .await;
                    let _ = tls.flush().await;
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                }
                let _ = tls.write_all(b"0\r\n\r\n").await;
                let _ = tls.shutdown().await;
            } else {
                support::respond(&mut tls, code, &body).await;
            }
        }
    })
}

/// The APIService `name` once `until` holds (or as last read, after 20 s).
fn apiservice_where(c: &Cluster, name: &str, until: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}");
    let mut last = Value::Null;
    for _ in 0..100 {
        last = c.raw("GET", &path, None, None).json();
        if until(&last) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    last
}

#[test]
fn aggregated_api_is_proxied_discovered_and_available() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    // What extension servers read to trust the front proxy.
    let auth_config = |key: &str| {
        c.ok(&[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "extension-apiserver-authentication",
            "-o",
            &format!("jsonpath={{.data.{key}}}"),
        ])
    };
    let front_proxy_ca = auth_config("requestheader-client-ca-file");
    assert!(
        front_proxy_ca.contains("BEGIN CERTIFICATE"),
        "{front_proxy_ca}"
    );
    let names = auth_config("requestheader-allowed-names");
    assert_eq!(names, r#"["front-proxy-client"]"#);
    c.ok(&[
        "-n",
        "kube-system",
        "get",
        "role",
        "extension-apiserver-authentication-reader",
    ]);

    let (ca, cert, key) = certificates();
    let seen: Seen = Arc::default();
    let port = start_extension((&cert, &key), &front_proxy_ca, seen.clone());
    // A Service without a selector and its Endpoints at the extension server.
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "ext", "namespace": "default"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    c.ok_stdin(&["create", "-f", "-"], &svc.to_string());
    let eps = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "ext", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port}]}]});
    c.ok_stdin(&["create", "-f", "-"], &eps.to_string());

    // Validation as upstream's.
    let bad = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.wrong.k1s.test"},
        "spec": {"group": "wardle.k1s.test", "version": "v1alpha1", "groupPriorityMinimum": 0,
            "versionPriority": 10, "service": {"name": "ext", "namespace": "default"}}});
    let e = c.fails_stdin(&["create", "-f", "-"], &bad.to_string());
    assert!(e.contains("must be v1alpha1.wardle.k1s.test"), "{e}");
    assert!(e.contains("spec.groupPriorityMinimum"), "{e}");

    let apiservice = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.wardle.k1s.test"},
        "spec": {"group": "wardle.k1s.test", "version": "v1alpha1",
            "groupPriorityMinimum": 2000, "versionPriority": 200,
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&ca),
            "service": {"name": "ext", "namespace": "default"}}});
    c.ok_stdin(&["create", "-f", "-"], &apiservice.to_string());
    let got = c.raw(
        "GET",
        "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.wardle.k1s.test",
        None,
        None,
    );
    assert_eq!(got.json()["spec"]["service"]["port"], 443, "{}", got.body);

    // Discovery.
    let groups = c.raw("GET", "/apis", None, None).json();
    let wardle = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "wardle.k1s.test")
        .unwrap_or_else(|| panic!("no aggregated group in {groups}"));
    assert_eq!(
        wardle["preferredVersion"]["groupVersion"],
        "wardle.k1s.test/v1alpha1"
    );
    let group = c.raw("GET", "/apis/wardle.k1s.test", None, None).json();
    assert_eq!(group["kind"], "APIGroup");
    let resources = c.raw("GET", "/apis/wardle.k1s.test/v1alpha1", None, None);
    assert_eq!(resources.code, 200, "{}", resources.body);
    assert_eq!(resources.json()["resources"][0]["name"], "flunders");

    // Stock kubectl finds the resource through discovery and lists it; the extension saw
    // the admin user.
    let out = c.ok(&[
        "get",
        "flunders",
        "-o",
        "jsonpath={.items[*].metadata.annotations.seen-user}",
    ]);
    assert_eq!(out, "system:admin");
    let created = c.raw(
        "POST",
        "/apis/wardle.k1s.test/v1alpha1/namespaces/default/flunders",
        Some("application/json"),
        Some(br#"{"apiVersion":"wardle.k1s.test/v1alpha1","kind":"Flunder","metadata":{"name":"new"}}"#),
    );
    assert_eq!(created.code, 201, "{}", created.body);
    {
        let seen = seen.lock().unwrap();
        let post = seen
            .iter()
            .find(|s| s.0 == "POST")
            .expect("the create reached the extension");
        assert_eq!(post.2, "system:admin");
        assert!(post.3.iter().any(|g| g == "system:masters"), "{post:?}");
    }

    // A watch streams through.
    let watched = c.raw(
        "GET",
        "/apis/wardle.k1s.test/v1alpha1/namespaces/default/flunders?watch=1",
        None,
        None,
    );
    let names: Vec<String> = watched
        .body
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(names, ["one", "two"], "{}", watched.body);

    // The availability check passes.
    let available = apiservice_where(&c, "v1alpha1.wardle.k1s.test", |a| {
        a["status"]["conditions"][0]["status"] == "True"
    });
    let available = &available["status"]["conditions"][0];
    assert_eq!(available["reason"], "Passed", "{available}");

    // The group versions served locally have local APIServices, available.
    let local = apiservice_where(&c, "v1.apps", |a| {
        a["status"]["conditions"][0]["reason"] == "Local"
    });
    assert_eq!(local["spec"]["groupPriorityMinimum"], 17800, "{local}");
    assert_eq!(
        local["status"]["conditions"][0]["status"], "True",
        "{local}"
    );
    // kubectl's table, as upstream's printer: SERVICE Local or NS/NAME, AVAILABLE.
    let table = c.ok(&["get", "apiservices"]);
    let row = |name: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    );
    assert_eq!(row("v1.apps")[1..3], ["Local", "True"]);
    assert_eq!(
        row("v1alpha1.wardle.k1s.test")[1..3],
        ["default/ext", "True"]
    );
    let listed = c.ok(&["get", "apiservices", "-o", "name"]);
    assert!(
        listed.contains("apiservice.apiregistration.k8s.io/v1."),
        "{listed}"
    );
    assert!(listed.contains("v1alpha1.wardle.k1s.test"), "{listed}");

    // Without its Endpoints the group version is unavailable (503) and says so.
    c.ok(&["delete", "endpoints", "ext"]);
    let gone = c.raw(
        "GET",
        "/apis/wardle.k1s.test/v1alpha1/namespaces/default/flunders",
        None,
        None,
    );
    assert_eq!(gone.code, 503, "{}", gone.body);
    let failing = apiservice_where(&c, "v1alpha1.wardle.k1s.test", |a| {
        a["status"]["conditions"][0]["status"] == "False"
    });
    let reason = &failing["status"]["conditions"][0]["reason"];
    assert_ne!(reason, "Passed");
}

//! The HTTP client (`k1s_api::http_client`, feature `http`) against the real `k1s server`,
//! through the `Client` trait and the typed `Api<K>`: CRUD, the four patch types, deletes with
//! options, lists with selectors and pages, watches (events, bookmarks, 410 Expired), the pod
//! binding subresource, `Status` errors, and TLS failures. A small TLS listener in the test
//! checks that a bearer token is sent.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k1s_api::client::{
    Api, Client, DeleteParams, ListParams, Patch, ResourceRef, WatchEvent, WatchParams, WriteParams,
};
use k1s_api::http_client::{HttpClient, HttpOptions, TlsSettings};
use k1s_api::kubeconfig::Kubeconfig;
use k1s_tests::{API_ONLY, Cluster};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use serde_json::{Value, json};

fn client(c: &Cluster) -> HttpClient {
    HttpClient::from_kubeconfig(&c.kubeconfig).unwrap()
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

async fn namespace(c: &dyn Client, name: &str) {
    c.create(
        &ResourceRef::new("", "v1", "namespaces", None),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        &WriteParams::default(),
    )
    .await
    .unwrap();
}

/// Next watch item within 20 s.
async fn next(w: &mut k1s_api::client::WatchStream) -> k1s_api::client::Result<WatchEvent> {
    tokio::time::timeout(Duration::from_secs(20), w.next())
        .await
        .expect("no watch event within 20 s")
        .expect("the watch ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_and_patches_through_the_client_trait() {
    let Some(cluster) = Cluster::start(API_ONLY) else {
        return;
    };
    let c: Arc<dyn Client> = Arc::new(client(&cluster));
    namespace(&*c, "h").await;
    let r = ResourceRef::new("", "v1", "configmaps", Some("h"));
    let wp = WriteParams::default();

    // create, get, AlreadyExists, NotFound
    let created = c.create(&r, cm("a", json!({"k": "v"})), &wp).await.unwrap();
    assert_eq!(created["metadata"]["namespace"], "h");
    let got = c.get(&r, "a").await.unwrap();
    assert_eq!(got["data"]["k"], "v");
    let e = c.create(&r, cm("a", json!({})), &wp).await.unwrap_err();
    assert!(e.is_already_exists(), "{e:?}");
    let e = c.get(&r, "missing").await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert_eq!(e.reason, "NotFound");
    assert!(e.message.contains("missing"), "{e:?}");
    // A dry run answers with the object and keeps nothing.
    let dry = WriteParams {
        dry_run: true,
        ..Default::default()
    };
    c.create(&r, cm("dry", json!({})), &dry).await.unwrap();
    assert!(c.get(&r, "dry").await.unwrap_err().is_not_found());
    // An invalid object is 422 Invalid from the server.
    let e = c
        .create(&r, cm("Not_Valid", json!({})), &wp)
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");

    // update, then a stale update is a Conflict
    let mut obj = got.clone();
    obj["data"]["k"] = json!("v2");
    let updated = c.update(&r, obj, None, &wp).await.unwrap();
    assert_eq!(updated["data"]["k"], "v2");
    let mut stale = got;
    stale["data"]["k"] = json!("v3");
    let e = c.update(&r, stale, None, &wp).await.unwrap_err();
    assert!(e.is_conflict(), "{e:?}");

    // the four patch types
    let p = c
        .patch(
            &r,
            "a",
            &Patch::Json(json!([{"op": "add", "path": "/data/j", "value": "json"}])),
            None,
            &wp,
        )
        .await
        .unwrap();
    assert_eq!(p["data"]["j"], "json");
    let p = c
        .patch(
            &r,
            "a",
            &Patch::Merge(json!({"data": {"m": "merge", "j": null}})),
            None,
            &wp,
        )
        .await
        .unwrap();
    assert_eq!(p["data"]["m"], "merge");
    assert!(p["data"].get("j").is_none(), "{p}");
    let p = c
        .patch(
            &r,
            "a",
            &Patch::Strategic(json!({"metadata": {"labels": {"tier": "x"}}})),
            None,
            &wp,
        )
        .await
        .unwrap();
    assert_eq!(p["metadata"]["labels"]["tier"], "x");
    let apply = WriteParams {
        field_manager: Some("http-test".into()),
        dry_run: false,
    };
    let p = c
        .patch(
            &r,
            "applied",
            &Patch::Apply {
                config: cm("applied", json!({"s": "ssa"})),
                force: true,
            },
            None,
            &apply,
        )
        .await
        .unwrap();
    assert_eq!(p["data"]["s"], "ssa");
    assert!(
        p["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "http-test"),
        "{p}"
    );
    // A patch that does not apply is the server's error.
    let e = c
        .patch(&r, "a", &Patch::Json(json!({"not": "a list"})), None, &wp)
        .await
        .unwrap_err();
    assert_eq!(e.code, 400, "{e:?}");

    // list: label selector, pages, items that carry their kind
    for i in 0..5 {
        let mut o = cm(&format!("l{i}"), json!({}));
        o["metadata"]["labels"] = json!({"group": if i % 2 == 0 { "even" } else { "odd" }});
        c.create(&r, o, &wp).await.unwrap();
    }
    let even = c
        .list(
            &r,
            &ListParams {
                label_selector: Some("group in (even),group!=odd".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let names: Vec<&str> = even
        .items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["l0", "l2", "l4"]);
    assert!(even.items.iter().all(|i| i["kind"] == "ConfigMap"));
    assert!(!even.resource_version.is_empty());
    let mut seen = 0;
    let mut params = ListParams {
        limit: Some(3),
        ..Default::default()
    };
    loop {
        let page = c.list(&r, &params).await.unwrap();
        assert!(page.items.len() <= 3);
        seen += page.items.len();
        match page.continue_token {
            Some(t) => params.continue_token = Some(t),
            None => break,
        }
    }
    assert_eq!(seen, 7, "a, applied, l0..l4");
    let by_field = c
        .list(
            &r,
            &ListParams {
                field_selector: Some("metadata.name=l3".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(by_field.items.len(), 1);

    // delete with a precondition that fails, then plainly; then it is gone
    let e = c
        .delete(
            &r,
            "a",
            &DeleteParams {
                precondition_uid: Some("not-the-uid".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e:?}");
    c.delete(&r, "a", &DeleteParams::default()).await.unwrap();
    assert!(c.get(&r, "a").await.unwrap_err().is_not_found());
    let e = c
        .delete(&r, "a", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");

    // The same through HTTP/1.1 only, and a non-resource path.
    let h1 = HttpClient::from_kubeconfig_with(
        &cluster.kubeconfig,
        None,
        HttpOptions {
            http1_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(h1.get(&r, "l1").await.unwrap()["metadata"]["name"], "l1");
    let version = h1.get_path("/version").await.unwrap();
    assert_eq!(version["major"], "1");
    let e = h1.get_path("/no/such/path").await.unwrap_err();
    assert_eq!(e.code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_events_and_bookmarks() {
    let Some(cluster) = Cluster::start(API_ONLY) else {
        return;
    };
    let c = client(&cluster);
    namespace(&c, "w").await;
    let r = ResourceRef::new("", "v1", "configmaps", Some("w"));
    let wp = WriteParams::default();
    c.create(&r, cm("before", json!({})), &wp).await.unwrap();
    let list = c.list(&r, &ListParams::default()).await.unwrap();

    // From the list's version: only what happens next, in order.
    let mut w = c
        .watch(
            &r,
            &WatchParams {
                resource_version: Some(list.resource_version.clone()),
                allow_bookmarks: true,
                timeout_seconds: Some(60),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // Without a version: the current objects first, as ADDED.
    let mut from_now = c.watch(&r, &WatchParams::default()).await.unwrap();
    // With a label selector: only matching objects.
    let mut labelled = c
        .watch(
            &r,
            &WatchParams {
                label_selector: Some("pick=me".into()),
                resource_version: Some(list.resource_version.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    c.create(&r, cm("x", json!({"n": "1"})), &wp).await.unwrap();
    c.patch(
        &r,
        "x",
        &Patch::Merge(json!({"data": {"n": "2"}})),
        None,
        &wp,
    )
    .await
    .unwrap();
    let mut picked = cm("y", json!({}));
    picked["metadata"]["labels"] = json!({"pick": "me"});
    c.create(&r, picked, &wp).await.unwrap();
    c.delete(&r, "x", &DeleteParams::default()).await.unwrap();

    let mut events = Vec::new();
    while events.len() < 4 {
        match next(&mut w).await.unwrap() {
            WatchEvent::Bookmark(_) => {}
            e => events.push(e),
        }
    }
    assert!(matches!(&events[0], WatchEvent::Added(o) if o["metadata"]["name"] == "x"));
    assert!(matches!(&events[1], WatchEvent::Modified(o) if o["data"]["n"] == "2"));
    assert!(matches!(&events[2], WatchEvent::Added(o) if o["metadata"]["name"] == "y"));
    assert!(matches!(&events[3], WatchEvent::Deleted(o) if o["metadata"]["name"] == "x"));

    match next(&mut from_now).await.unwrap() {
        WatchEvent::Added(o) => assert_eq!(o["metadata"]["name"], "before"),
        e => panic!("expected the existing object first, got {e:?}"),
    }
    match next(&mut labelled).await.unwrap() {
        WatchEvent::Added(o) => assert_eq!(o["metadata"]["name"], "y"),
        e => panic!("expected only the labelled object, got {e:?}"),
    }

    // An idle watch that asked for bookmarks gets one (the server sends them every 10 s).
    let rv = loop {
        if let WatchEvent::Bookmark(rv) = next(&mut w).await.unwrap() {
            break rv;
        }
    };
    assert!(rv.parse::<u64>().unwrap() > 0, "{rv}");

    // timeoutSeconds ends the stream cleanly.
    let mut short = c
        .watch(
            &r,
            &WatchParams {
                resource_version: Some(rv),
                timeout_seconds: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), short.next())
        .await
        .unwrap();
    assert!(end.is_none(), "{end:?}");

    // A watch of a namespace that the server cannot serve is an error before any stream.
    let bad = ResourceRef::new("", "v1", "nosuchresources", Some("w"));
    let e = c.watch(&bad, &WatchParams::default()).await.err().unwrap();
    assert_eq!(e.code, 404, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_a_compacted_version_is_410_expired() {
    let Some(cluster) = Cluster::start(&[
        "--disable-controller-manager",
        "--disable-scheduler",
        "--compaction-interval-seconds",
        "1",
        "--compaction-keep-revisions",
        "1",
        "--compaction-keep-seconds",
        "0",
    ]) else {
        return;
    };
    let c = client(&cluster);
    namespace(&c, "e").await;
    let r = ResourceRef::new("", "v1", "configmaps", Some("e"));
    let first = c
        .create(&r, cm("a", json!({})), &WriteParams::default())
        .await
        .unwrap();
    let old = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..5 {
        c.create(&r, cm(&format!("b{i}"), json!({})), &WriteParams::default())
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut w = c
            .watch(
                &r,
                &WatchParams {
                    resource_version: Some(old.clone()),
                    timeout_seconds: Some(2),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        match w.next().await {
            Some(Err(e)) if e.is_expired() => {
                assert_eq!(e.reason, "Expired");
                // The ERROR event is the last one.
                assert!(w.next().await.is_none());
                break;
            }
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "never compacted: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_binding_status_and_the_typed_api() {
    // The controllers give namespace `t` its ServiceAccount; the test binds the pod itself.
    let Some(cluster) = Cluster::start(&["--disable-scheduler"]) else {
        return;
    };
    let client: Arc<dyn Client> = Arc::new(client(&cluster));
    let namespaces: Api<Namespace> = Api::new(client.clone(), None);
    let mut ns = Namespace::default();
    ns.metadata.name = Some("t".into());
    namespaces.create(&ns).await.unwrap();
    assert_eq!(
        namespaces.get("t").await.unwrap().metadata.name.as_deref(),
        Some("t")
    );

    let pods: Api<Pod> = Api::new(client.clone(), Some("t"));
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    let created = pods.create(&pod).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let r = ResourceRef::of::<Pod>(Some("t"));
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}
    });
    let status = client
        .create_subresource(&r, "p", "binding", binding.clone())
        .await
        .unwrap();
    assert_eq!(status["status"], "Success", "{status}");
    let bound = pods.get("p").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-1")
    );
    let e = client
        .create_subresource(&r, "p", "binding", binding)
        .await
        .unwrap_err();
    assert_eq!(e.code, 409, "{e:?}");

    // PUT of the status subresource.
    let mut with_status = bound.clone();
    with_status.status.get_or_insert_default().message = Some("from the test".into());
    let replaced = pods.replace_status(&with_status).await.unwrap();
    assert_eq!(
        replaced.status.unwrap().message.as_deref(),
        Some("from the test")
    );
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.len(), 1);

    // A bound pod waits for its kubelet; grace period 0 deletes it at once.
    client
        .delete(
            &r,
            "p",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(pods.get("p").await.unwrap_err().is_not_found());

    // Typed ConfigMaps: create, replace, patch, delete.
    let cms: Api<ConfigMap> = Api::new(client.clone(), Some("t"));
    let mut c = ConfigMap::default();
    c.metadata.name = Some("c".into());
    c.data = Some([("a".to_owned(), "1".to_owned())].into());
    let mut c = cms.create(&c).await.unwrap();
    c.data
        .get_or_insert_default()
        .insert("b".into(), "2".into());
    let c = cms.replace(&c).await.unwrap();
    assert_eq!(c.data.as_ref().unwrap().len(), 2);
    let c = cms
        .patch("c", &Patch::Merge(json!({"data": {"a": null}})))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap().keys().collect::<Vec<_>>(), ["b"]);
    cms.delete("c").await.unwrap();
    assert!(cms.get("c").await.unwrap_err().is_not_found());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_trust_and_credentials() {
    let Some(cluster) = Cluster::start(API_ONLY) else {
        return;
    };
    let resolved = Kubeconfig::load(&cluster.kubeconfig)
        .unwrap()
        .resolve(None)
        .unwrap();
    let ns = ResourceRef::new("", "v1", "namespaces", None);

    // No client certificate: the TLS handshake still succeeds (the server asks but does not
    // require one), and the anonymous request gets RBAC's 403.
    let anonymous = HttpClient::new(
        &resolved.server,
        TlsSettings {
            ca_pem: resolved.tls.ca_pem.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    let err = anonymous.get(&ns, "default").await.unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"), "{err}");

    // A CA that did not sign the server's certificate: a transport error, code 0.
    let other_ca = std::fs::read(cluster.data_dir().join("tls/admin.crt")).unwrap();
    let distrusting = HttpClient::new(
        &resolved.server,
        TlsSettings {
            ca_pem: Some(other_ca),
            ..Default::default()
        },
    )
    .unwrap();
    let e = distrusting.get(&ns, "default").await.unwrap_err();
    assert_eq!(e.code, 0, "{e:?}");
    assert!(e.message.to_lowercase().contains("certificate"), "{e:?}");

    // The right CA but a name the certificate does not carry.
    let misnamed = HttpClient::new(
        &resolved.server,
        TlsSettings {
            server_name: Some("not-on-the-cert.example".into()),
            ..resolved.tls.clone()
        },
    )
    .unwrap();
    assert_eq!(misnamed.get(&ns, "default").await.unwrap_err().code, 0);

    // Nobody listening: a transport error.
    let port = k1s_tests::free_port();
    let nobody =
        HttpClient::new(&format!("https://127.0.0.1:{port}"), resolved.tls.clone()).unwrap();
    assert_eq!(nobody.get(&ns, "default").await.unwrap_err().code, 0);

    // A bearer token goes out as the Authorization header: a one-shot TLS listener with the
    // server's own certificate records the request and answers with a non-Status 403.
    let tls = cluster.data_dir().join("tls");
    let cert = std::fs::read(tls.join("serving.crt")).unwrap();
    let key = std::fs::read(tls.join("serving.key")).unwrap();
    let (port, request) = one_shot_https(&cert, &key, "403 Forbidden", "denied by test").await;
    let with_token = HttpClient::new(
        &format!("https://127.0.0.1:{port}"),
        TlsSettings {
            ca_pem: resolved.tls.ca_pem.clone(),
            bearer_token: Some("tok-123".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let e = with_token.get(&ns, "default").await.unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"), "{e:?}");
    assert_eq!(e.message, "denied by test");
    let head = request.await.unwrap().to_lowercase();
    assert!(
        head.starts_with("get /api/v1/namespaces/default "),
        "{head}"
    );
    assert!(
        head.contains("\r\nauthorization: bearer tok-123\r\n"),
        "{head}"
    );
}

/// A TLS listener on a free loopback port that answers one HTTP/1.1 request with `status` and
/// a plain-text `body`; resolves to the request head it read.
async fn one_shot_https(
    cert: &[u8],
    key: &[u8],
    status: &'static str,
    body: &'static str,
) -> (u16, tokio::task::JoinHandle<String>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key).unwrap();
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tls.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client closed before a whole request head");
            head.extend_from_slice(&buf[..n]);
        }
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(answer.as_bytes()).await.unwrap();
        tls.shutdown().await.unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    (port, task)
}

//! End to end, issue #4: stock kubectl acting as different users against the real server.
//! Client certificates are made with the cluster CA (and one with another CA), ServiceAccount
//! tokens come from `kubectl create token`, a static token from `--token-auth-file`. Covers
//! 401 for bad credentials (forged, expired, foreign — tokens and certificates), 403 with
//! upstream's Status, RBAC grants and the `auth can-i` matrix, escalation checks,
//! impersonation, the Node authorizer, the join-token certificate exchange, and the admission
//! plugins that act on pods.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use k1s_tests::{Cluster, eventually};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
};
use serde_json::{Value, json};

/// A client certificate for `cn` in group `o`, signed by the CA in `tls` (valid from
/// `from_hours` to `to_hours` relative to now).
fn client_cert(
    tls: &Path,
    cn: &str,
    o: Option<&str>,
    from_hours: i64,
    to_hours: i64,
) -> (String, String) {
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(tls.join("ca.key")).unwrap()).unwrap();
    let ca_pem = std::fs::read_to_string(tls.join("ca.crt")).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    if let Some(o) = o {
        dn.push(DnType::OrganizationName, o);
    }
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    // rcgen's validity fields are `time`'s: converted from jiff, in whole seconds.
    let at = |hours| {
        let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(hours);
        time::OffsetDateTime::from_unix_timestamp(t.as_second()).unwrap()
    };
    params.not_before = at(from_hours);
    params.not_after = at(to_hours);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A user's kubeconfig: a client certificate, or a bearer token.
enum Creds<'a> {
    Cert(&'a (String, String)),
    Token(&'a str),
}

fn kubeconfig(c: &Cluster, name: &str, creds: Creds<'_>) -> PathBuf {
    let ca = std::fs::read_to_string(c.data_dir().join("tls/ca.crt")).unwrap();
    let user = match creds {
        Creds::Cert((cert, key)) => json!({
            "client-certificate-data": B64.encode(cert),
            "client-key-data": B64.encode(key),
        }),
        Creds::Token(t) => json!({"token": t}),
    };
    let cfg = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "k1s", "cluster": {
            "server": format!("https://127.0.0.1:{}", c.port),
            "certificate-authority-data": B64.encode(ca)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": "k1s", "user": name}}],
        "current-context": name,
    });
    let path = c.dir.path().join(format!("{name}.kubeconfig"));
    std::fs::write(&path, cfg.to_string()).unwrap();
    path
}

/// kubectl with another kubeconfig.
fn kubectl_as(c: &Cluster, cfg: &Path, args: &[&str]) -> Output {
    kubectl_stdin(c, cfg, args, "")
}

/// kubectl with another kubeconfig and `input` on stdin.
fn kubectl_stdin(c: &Cluster, cfg: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(&c.kubectl)
        .arg("--kubeconfig")
        .arg(cfg)
        .arg("--cache-dir")
        .arg(c.dir.path().join(format!(
            "cache-{}",
            cfg.file_name().unwrap().to_string_lossy()
        )))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn ok_as(c: &Cluster, cfg: &Path, args: &[&str]) -> String {
    let out = kubectl_as(c, cfg, args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails_as(c: &Cluster, cfg: &Path, args: &[&str]) -> String {
    let out = kubectl_as(c, cfg, args);
    assert!(
        !out.status.success(),
        "kubectl {args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `curl` with a bearer token (or none), and optionally a client certificate; returns the
/// status code and the body.
fn curl(
    c: &Cluster,
    path: &str,
    token: Option<&str>,
    cert: Option<(&Path, &Path)>,
) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert"])
        .arg(c.data_dir().join("tls/ca.crt"));
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some((crt, key)) = cert {
        cmd.arg("--cert").arg(crt).arg("--key").arg(key);
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{}{path}", c.port))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Waits for the ServiceAccount controller to give `ns` its `default` ServiceAccount.
fn wait_for_default_sa(c: &Cluster, ns: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !c.run(&["get", "sa", "default", "-n", ns]).status.success() {
        assert!(
            std::time::Instant::now() < deadline,
            "no default ServiceAccount in {ns}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn status_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not a Status ({e}): {body}"))
}

#[test]
fn users_groups_rbac_and_bad_credentials() {
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), "bobs-static-token,bob,1001,\"admins,dev\"\n").unwrap();
    let Some(c) = Cluster::start(&["--token-auth-file", tokens.path().to_str().unwrap()]) else {
        return;
    };
    let tls = c.data_dir().join("tls");

    // Anonymous: public info only; everything else is a 403 Status.
    assert_eq!(curl(&c, "/healthz", None, None).0, 200);
    assert_eq!(curl(&c, "/version", None, None).0, 200);
    let (code, body) = curl(&c, "/api/v1/namespaces", None, None);
    assert_eq!(code, 403, "{body}");
    let s = status_of(&body);
    assert_eq!(s["reason"], "Forbidden");
    assert_eq!(
        s["message"],
        "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );

    // Bad credentials: 401 Status.
    let (code, body) = curl(&c, "/api/v1/namespaces", Some("not-a-token"), None);
    assert_eq!(
        (code, status_of(&body)["reason"].as_str()),
        (401, Some("Unauthorized")),
        "{body}"
    );
    let foreign = tempfile::tempdir().unwrap();
    let other = k1s_apiserver::pki::Pki::load_or_create(&k1s_apiserver::pki::PkiConfig {
        dir: foreign.path().join("tls"),
        hostname: "elsewhere".into(),
        node_ips: vec![],
        tls_sans: vec![],
    })
    .unwrap();
    let (code, _) = curl(
        &c,
        "/api/v1/namespaces",
        None,
        Some((&other.admin.cert_path, &other.admin.key_path)),
    );
    assert_eq!(code, 401, "a system:masters certificate from another CA");
    let expired = client_cert(&tls, "jane", Some("dev"), -48, -24);
    let cfg = kubeconfig(&c, "expired", Creds::Cert(&expired));
    let err = fails_as(&c, &cfg, &["get", "ns"]);
    // kubectl's words for a 401.
    assert!(
        err.contains("the server has asked for the client to provide credentials"),
        "{err}"
    );

    // A user from a certificate: forbidden until bound, with upstream's message.
    let jane = client_cert(&tls, "jane", Some("dev"), 0, 24);
    let jane_cfg = kubeconfig(&c, "jane", Creds::Cert(&jane));
    assert_eq!(
        ok_as(
            &c,
            &jane_cfg,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}"
            ]
        ),
        "jane"
    );
    let err = fails_as(&c, &jane_cfg, &["get", "pods"]);
    assert!(
        err.contains("Error from server (Forbidden): pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{err}"
    );
    c.ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods,pods/log",
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "jane-reads",
        "--role=pod-reader",
        "--user=jane",
    ]);
    c.ok(&["create", "configmap", "cfg", "--from-literal=a=1"]);
    ok_as(&c, &jane_cfg, &["get", "pods"]);
    let err = fails_as(&c, &jane_cfg, &["delete", "configmap", "cfg"]);
    assert!(
        err.contains("cannot delete resource \"configmaps\""),
        "{err}"
    );
    // A group binding reaches her through her certificate's O.
    c.ok(&[
        "create",
        "clusterrole",
        "cm-reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    c.ok(&[
        "create",
        "clusterrolebinding",
        "dev-reads",
        "--clusterrole=cm-reader",
        "--group=dev",
    ]);
    ok_as(&c, &jane_cfg, &["get", "configmap", "cfg", "-n", "default"]);

    // The can-i matrix, asked by jane herself and by the admin impersonating her.
    let can = |args: &[&str]| {
        let out = kubectl_as(&c, &jane_cfg, &[&["auth", "can-i"], args].concat());
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    for (args, want) in [
        (&["get", "pods"][..], "yes"),
        (&["list", "pods", "-n", "default"], "yes"),
        (&["get", "pods/log"], "yes"),
        (&["create", "pods"], "no"),
        (&["get", "pods", "-n", "kube-system"], "no"),
        (&["list", "configmaps", "-n", "kube-system"], "yes"),
        (&["delete", "configmaps"], "no"),
        (&["get", "secrets"], "no"),
        (&["get", "/version"], "yes"),
        (&["get", "/metrics"], "no"),
    ] {
        assert_eq!(can(args), want, "jane: can-i {args:?}");
        let mut admin = vec!["auth", "can-i", "--as", "jane", "--as-group", "dev"];
        admin.extend_from_slice(args);
        let out = c.run(&admin);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "admin as jane: can-i {args:?}"
        );
    }
    let list = ok_as(&c, &jane_cfg, &["auth", "can-i", "--list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("pods ") && l.contains("[get list watch]")),
        "{list}"
    );
    assert!(
        list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{list}"
    );
    // Jane may not impersonate.
    let err = fails_as(&c, &jane_cfg, &["get", "pods", "--as", "bob"]);
    assert!(
        err.contains("cannot impersonate resource \"users\""),
        "{err}"
    );

    // Escalation: a role writer cannot grant what she lacks, until given `escalate`.
    c.ok(&[
        "create",
        "role",
        "role-writer",
        "--verb=create,get,update",
        "--resource=roles,rolebindings",
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "jane-writes-roles",
        "--role=role-writer",
        "--user=jane",
    ]);
    ok_as(
        &c,
        &jane_cfg,
        &[
            "create",
            "role",
            "also-reader",
            "--verb=get",
            "--resource=pods",
        ],
    );
    let err = fails_as(
        &c,
        &jane_cfg,
        &[
            "create",
            "role",
            "deleter",
            "--verb=delete",
            "--resource=pods",
        ],
    );
    assert!(
        err.contains("attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    let err = fails_as(
        &c,
        &jane_cfg,
        &[
            "create",
            "rolebinding",
            "jane-admin",
            "--clusterrole=admin",
            "--user=jane",
        ],
    );
    assert!(
        err.contains("attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    c.ok(&[
        "create",
        "role",
        "escalator",
        "--verb=escalate",
        "--resource=roles",
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "jane-escalates",
        "--role=escalator",
        "--user=jane",
    ]);
    ok_as(
        &c,
        &jane_cfg,
        &[
            "create",
            "role",
            "deleter",
            "--verb=delete",
            "--resource=pods",
        ],
    );

    // The static token file: bob in group admins, bound to cluster-admin.
    let bob_cfg = kubeconfig(&c, "bob", Creds::Token("bobs-static-token"));
    fails_as(&c, &bob_cfg, &["get", "nodes"]);
    c.ok(&[
        "create",
        "clusterrolebinding",
        "admins",
        "--clusterrole=cluster-admin",
        "--group=admins",
    ]);
    ok_as(&c, &bob_cfg, &["get", "nodes"]);
    ok_as(&c, &bob_cfg, &["get", "pods", "--as", "jane"]);

    // The bootstrap policy is there, aggregation included.
    let view = c.ok(&["get", "clusterrole", "view", "-o", "json"]);
    let view: Value = serde_json::from_str(&view).unwrap();
    assert!(
        view["rules"].as_array().is_some_and(|r| r.len() > 5),
        "{view}"
    );
    c.ok(&[
        "get",
        "clusterrolebinding",
        "system:public-info-viewer",
        "system:discovery",
        "cluster-admin",
    ]);
}

#[test]
fn service_account_tokens() {
    let Some(c) = Cluster::start(&[]) else { return };
    c.ok(&["create", "serviceaccount", "app"]);
    c.ok(&[
        "create",
        "rolebinding",
        "app-views",
        "--clusterrole=view",
        "--serviceaccount=default:app",
    ]);
    let token = c
        .ok(&["create", "token", "app", "--duration=20m"])
        .trim()
        .to_owned();
    let cfg = kubeconfig(&c, "app", Creds::Token(&token));
    assert_eq!(
        ok_as(
            &c,
            &cfg,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}"
            ]
        ),
        "system:serviceaccount:default:app"
    );
    ok_as(&c, &cfg, &["get", "configmaps"]);
    let err = fails_as(&c, &cfg, &["get", "secrets"]);
    assert!(
        err.contains("User \"system:serviceaccount:default:app\" cannot list resource \"secrets\""),
        "{err}"
    );
    let err = fails_as(&c, &cfg, &["get", "configmaps", "-n", "kube-system"]);
    assert!(err.contains("Forbidden"), "{err}");
    // Too short a lifetime: 422, as upstream.
    let out = c.run(&["create", "token", "app", "--duration=1m"]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("may not specify a duration less than 10 minutes")
    );

    // A token bound to a pod dies with the pod.
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"serviceAccountName": "app", "containers": [{"name": "c", "image": "busybox"}]}}"#,
    );
    // ServiceAccount admission mounted the API token; DefaultTolerationSeconds added its two.
    let pod: Value = serde_json::from_str(&c.ok(&["get", "pod", "p", "-o", "json"])).unwrap();
    let vol = &pod["spec"]["volumes"][0];
    assert!(
        vol["name"]
            .as_str()
            .unwrap()
            .starts_with("kube-api-access-"),
        "{pod}"
    );
    assert_eq!(
        vol["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3607
    );
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2);
    assert_eq!(pod["spec"]["priority"], 0);
    let bound = c
        .ok(&[
            "create",
            "token",
            "app",
            "--bound-object-kind=Pod",
            "--bound-object-name=p",
        ])
        .trim()
        .to_owned();
    let bound_cfg = kubeconfig(&c, "bound", Creds::Token(&bound));
    let who: Value =
        serde_json::from_str(&ok_as(&c, &bound_cfg, &["auth", "whoami", "-o", "json"])).unwrap();
    assert_eq!(
        who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"][0],
        "p"
    );
    c.ok(&["delete", "pod", "p", "--wait=false"]);
    // Not bound to a node: deleted at once, so its token stops working (after the 10 s cache).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = kubectl_as(&c, &bound_cfg, &["get", "configmaps"]);
        if String::from_utf8_lossy(&out.stderr).contains("Unauthorized") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the bound token outlived its pod"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    // An expired token signed with the server's own key, and a forged one: 401.
    let signer = k1s_apiserver::auth::jwt::Signer::load_or_create(
        &c.data_dir().join("tls/service-account.key"),
    )
    .unwrap();
    let sa: Value = serde_json::from_str(&c.ok(&["get", "sa", "app", "-o", "json"])).unwrap();
    let now = jiff::Timestamp::now().as_second();
    let claims = |exp: i64| {
        json!({"iss": "https://kubernetes.default.svc.cluster.local", "aud": ["https://kubernetes.default.svc.cluster.local"],
            "sub": "system:serviceaccount:default:app", "exp": exp, "iat": now - 7200, "nbf": now - 7200,
            "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "app", "uid": sa["metadata"]["uid"]}}})
    };
    let valid = signer.sign(&claims(now + 600));
    assert_eq!(
        curl(
            &c,
            "/api/v1/namespaces/default/configmaps",
            Some(&valid),
            None
        )
        .0,
        200
    );
    let expired = signer.sign(&claims(now - 60));
    assert_eq!(
        curl(
            &c,
            "/api/v1/namespaces/default/configmaps",
            Some(&expired),
            None
        )
        .0,
        401
    );
    let forger =
        k1s_apiserver::auth::jwt::Signer::load_or_create(&c.dir.path().join("forged.key")).unwrap();
    let forged = forger.sign(&claims(now + 600));
    assert_eq!(
        curl(
            &c,
            "/api/v1/namespaces/default/configmaps",
            Some(&forged),
            None
        )
        .0,
        401
    );
    // Deleting the ServiceAccount revokes its tokens.
    c.ok(&["delete", "sa", "app"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while curl(
        &c,
        "/api/v1/namespaces/default/configmaps",
        Some(&valid),
        None,
    )
    .0 != 401
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the token outlived its ServiceAccount"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // Issuer discovery documents.
    let (code, body) = curl(&c, "/openid/v1/jwks", Some(&token), None);
    assert_eq!(code, 401, "the SA is gone, so is its token: {body}");
    let r = c.raw("GET", "/.well-known/openid-configuration", None, None);
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.json()["issuer"],
        "https://kubernetes.default.svc.cluster.local"
    );
}

#[test]
fn node_identities_reach_only_their_own_objects() {
    let Some(c) = Cluster::start(&[]) else { return };
    let tls = c.data_dir().join("tls");
    let n1 = kubeconfig(
        &c,
        "n1",
        Creds::Cert(&client_cert(
            &tls,
            "system:node:n1",
            Some("system:nodes"),
            0,
            24,
        )),
    );
    let n2 = kubeconfig(
        &c,
        "n2",
        Creds::Cert(&client_cert(
            &tls,
            "system:node:n2",
            Some("system:nodes"),
            0,
            24,
        )),
    );
    c.ok(&["create", "secret", "generic", "s1", "--from-literal=k=v"]);
    c.ok(&["create", "secret", "generic", "s2", "--from-literal=k=v"]);
    wait_for_default_sa(&c, "default");
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "s", "secret": {"secretName": "s1"}}]}}"#,
    );
    ok_as(&c, &n1, &["get", "secret", "s1"]);
    ok_as(&c, &n1, &["get", "pod", "p1"]);
    ok_as(
        &c,
        &n1,
        &["get", "pods", "-A", "--field-selector", "spec.nodeName=n1"],
    );
    let err = fails_as(&c, &n1, &["get", "secret", "s2"]);
    assert!(
        err.contains("no relationship found between node 'n1' and this object"),
        "{err}"
    );
    let err = fails_as(&c, &n2, &["get", "secret", "s1"]);
    assert!(
        err.contains("secrets \"s1\" is forbidden: User \"system:node:n2\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'n2' and this object"),
        "{err}"
    );
    fails_as(&c, &n2, &["get", "pod", "p1"]);
    fails_as(&c, &n1, &["get", "pods", "-A"]);
    // The node's cluster-network identity (NetworkPolicy enforcement) lists and watches
    // every pod, namespace and policy, and nothing else.
    let net = kubeconfig(
        &c,
        "net1",
        Creds::Cert(&client_cert(
            &tls,
            "system:k1s:network:n1",
            Some("system:k1s:networks"),
            0,
            24,
        )),
    );
    for what in ["pods", "namespaces", "networkpolicies.networking.k8s.io"] {
        ok_as(&c, &net, &["get", what, "-A"]);
    }
    fails_as(&c, &net, &["get", "pod", "p1"]);
    fails_as(&c, &net, &["get", "secrets", "-A"]);
    fails_as(&c, &net, &["delete", "pod", "p1"]);
    // The service proxy in every node's process watches Services and EndpointSlices with
    // the node's identity (system:node-proxier); it may not change them.
    ok_as(&c, &n1, &["get", "services", "-A"]);
    ok_as(&c, &n1, &["get", "endpointslices.discovery.k8s.io", "-A"]);
    fails_as(&c, &n1, &["delete", "service", "kubernetes"]);
    fails_as(
        &c,
        &n2,
        &["get", "pods", "-A", "--field-selector", "spec.nodeName=n1"],
    );
    // Its own Node; not another's.
    let node = |n: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "{n}", "labels": {{"kubernetes.io/hostname": "{n}"}}}}}}"#
        )
    };
    let out = kubectl_stdin(&c, &n1, &["create", "-f", "-"], &node("n1"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl_stdin(&c, &n1, &["create", "-f", "-"], &node("n3"));
    assert!(!out.status.success(), "n1 created node n3");
    let err = fails_as(
        &c,
        &n1,
        &[
            "label",
            "node",
            "n1",
            "node-role.kubernetes.io/control-plane=",
        ],
    );
    assert!(
        err.contains("is not allowed to modify labels: node-role.kubernetes.io/control-plane"),
        "{err}"
    );
    ok_as(&c, &n1, &["label", "node", "n1", "example.com/rack=r1"]);
    // Its own Lease and CSINode (created without a name in the URL); not another's.
    for (kind, api, ns) in [
        (
            "Lease",
            "coordination.k8s.io/v1",
            r#", "namespace": "kube-node-lease""#,
        ),
        ("CSINode", "storage.k8s.io/v1", ""),
    ] {
        let obj = |n: &str| {
            let spec = if kind == "CSINode" {
                r#", "spec": {"drivers": []}"#
            } else {
                ""
            };
            format!(
                r#"{{"apiVersion": "{api}", "kind": "{kind}", "metadata": {{"name": "{n}"{ns}}}{spec}}}"#
            )
        };
        let out = kubectl_stdin(&c, &n1, &["create", "-f", "-"], &obj("n1"));
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = kubectl_stdin(&c, &n1, &["create", "-f", "-"], &obj("n2"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("with the same name as the requesting node"),
            "{kind}: {err}"
        );
    }
    let err = fails_as(&c, &n2, &["label", "node", "n1", "example.com/rack=r2"]);
    assert!(err.contains("Forbidden"), "{err}");
    // A kubelet may only create mirror pods bound to itself.
    let err = fails_as(&c, &n1, &["run", "x", "--image=busybox"]);
    assert!(err.contains("can only create mirror pods"), "{err}");
}

#[test]
fn join_token_buys_a_node_certificate() {
    let Some(c) = Cluster::start(&["--token", "K1Ssecret-for-agents"]) else {
        return;
    };
    let saved = std::fs::read_to_string(c.data_dir().join("server/token")).unwrap();
    let ca = std::fs::read_to_string(c.data_dir().join("tls/ca.crt")).unwrap();
    let hash = k1s_apiserver::auth::join_token::ca_hash(&ca);
    assert_eq!(
        saved.trim(),
        format!("K10{hash}::server:K1Ssecret-for-agents")
    );
    // The CA is public, so an agent can check it against the hash in its token.
    let (code, body) = curl(&c, "/cacerts", None, None);
    assert_eq!((code, body.as_str()), (200, ca.as_str()));
    // With the token, a CSR becomes a node client certificate; without, 401/403.
    let key = KeyPair::generate().unwrap();
    let csr = CertificateParams::default()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap();
    let body = json!({"nodeName": "worker-1", "csr": csr}).to_string();
    let post = |token: Option<&str>| {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &body,
            "--cacert",
        ])
        .arg(c.data_dir().join("tls/ca.crt"));
        if let Some(t) = token {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        let out = cmd
            .arg(format!(
                "https://127.0.0.1:{}/k1s/v1/node-certificate",
                c.port
            ))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (b, code) = text.rsplit_once('\n').unwrap();
        (code.trim().parse::<u16>().unwrap(), b.to_owned())
    };
    assert_eq!(post(None).0, 403);
    assert_eq!(post(Some("K1Swrong-secret")).0, 401);
    let (code, reply) = post(Some(saved.trim()));
    assert_eq!(code, 201, "{reply}");
    let cert = serde_json::from_str::<Value>(&reply).unwrap()["certificate"]
        .as_str()
        .unwrap()
        .to_owned();
    let cfg = kubeconfig(&c, "worker", Creds::Cert(&(cert, key.serialize_pem())));
    assert_eq!(
        ok_as(
            &c,
            &cfg,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}"
            ]
        ),
        "system:node:worker-1"
    );
    // The bootstrap identity can do nothing else.
    let boot = kubeconfig(&c, "boot", Creds::Token(saved.trim()));
    fails_as(&c, &boot, &["get", "pods"]);
}

#[test]
fn quotas_limit_ranges_and_pod_security() {
    let Some(c) = Cluster::start(&[]) else { return };
    c.ok(&["create", "namespace", "q"]);
    // The ServiceAccount controller gives the namespace its default ServiceAccount.
    wait_for_default_sa(&c, "q");
    let pod = |name: &str, extra: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "q"}},
                "spec": {{"containers": [{{"name": "c", "image": "busybox"{extra}}}]}}}}"#
        )
    };
    // LimitRanger: defaults filled in, maxima enforced.
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "q"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"},
              "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "100m", "memory": "64Mi"}}]}}"#,
    );
    c.ok_stdin(&["create", "-f", "-"], &pod("p1", ""));
    let p1: Value =
        serde_json::from_str(&c.ok(&["get", "pod", "p1", "-n", "q", "-o", "json"])).unwrap();
    assert_eq!(
        p1["spec"]["containers"][0]["resources"]["limits"]["cpu"], "500m",
        "{p1}"
    );
    assert_eq!(
        p1["spec"]["containers"][0]["resources"]["requests"]["memory"],
        "64Mi"
    );
    assert_eq!(p1["status"]["qosClass"], "Burstable");
    let out = c.run_with(
        &c.kubectl,
        &["create", "-f", "-"],
        Some(&pod("big", r#", "resources": {"limits": {"cpu": "2"}}"#)),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("maximum cpu usage per Container is 1, but limit is 2"),
        "{err}"
    );

    // ResourceQuota: a second pod fits, a third does not; usage is recorded.
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q1", "namespace": "q"},
            "spec": {"hard": {"pods": "2", "configmaps": "3"}}}"#,
    );
    c.ok_stdin(&["create", "-f", "-"], &pod("p2", ""));
    let out = c.run_with(&c.kubectl, &["create", "-f", "-"], Some(&pod("p3", "")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pods \"p3\" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=2, limited: pods=2"),
        "{err}"
    );
    let q: Value =
        serde_json::from_str(&c.ok(&["get", "quota", "q1", "-n", "q", "-o", "json"])).unwrap();
    assert_eq!(q["status"]["used"]["pods"], "2", "{q}");
    // Room again after a delete, once the ResourceQuota controller has recounted (admission
    // only ever charges usage; the controller lowers it).
    c.ok(&["delete", "pod", "p2", "-n", "q", "--wait=false"]);
    eventually(
        "the quota controller to release the deleted pod",
        30,
        || {
            let q: Value =
                serde_json::from_str(&c.ok(&["get", "quota", "q1", "-n", "q", "-o", "json"]))
                    .unwrap();
            q["status"]["used"]["pods"] == "1"
        },
    );
    c.ok_stdin(&["create", "-f", "-"], &pod("p3", ""));
    // A deleted ConfigMap is released at once too (not at the next full recount, a minute
    // later), as upstream's controller replenishes every kind it counts. In a namespace of
    // its own: no pod changes there to make the controller recount anyway.
    c.ok(&["create", "namespace", "cmq"]);
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q2", "namespace": "cmq"},
            "spec": {"hard": {"configmaps": "5"}}}"#,
    );
    let configmaps = |c: &Cluster| -> Option<i64> {
        let q: Value =
            serde_json::from_str(&c.ok(&["get", "quota", "q2", "-n", "cmq", "-o", "json"]))
                .unwrap();
        q["status"]["used"]["configmaps"].as_str()?.parse().ok()
    };
    eventually("the quota controller to count ConfigMaps", 30, || {
        configmaps(&c).is_some()
    });
    c.ok(&["create", "configmap", "counted", "-n", "cmq"]);
    let with = configmaps(&c).unwrap();
    c.ok(&["delete", "configmap", "counted", "-n", "cmq"]);
    eventually(
        "the quota controller to release the deleted ConfigMap",
        10,
        || configmaps(&c) == Some(with - 1),
    );

    // Concurrent creates racing for the last slots: the quota is charged with a
    // compare-and-swap before each object is stored, so exactly the room left is used.
    c.ok(&["create", "namespace", "race"]);
    wait_for_default_sa(&c, "race");
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "three", "namespace": "race"},
            "spec": {"hard": {"secrets": "3"}}}"#,
    );
    eventually("the controller to fill in the quota's status", 30, || {
        let q: Value =
            serde_json::from_str(&c.ok(&["get", "quota", "three", "-n", "race", "-o", "json"]))
                .unwrap();
        q["status"]["used"]["secrets"] == "0"
    });
    let created = std::thread::scope(|scope| {
        let tries: Vec<_> = (0..10)
            .map(|i| {
                let c = &c;
                scope.spawn(move || {
                    c.run(&[
                        "create",
                        "secret",
                        "generic",
                        &format!("s{i}"),
                        "-n",
                        "race",
                    ])
                    .status
                    .success()
                })
            })
            .collect();
        tries
            .into_iter()
            .map(|t| t.join())
            .filter(|r| matches!(r, Ok(true)))
            .count()
    });
    assert_eq!(created, 3, "10 racing creates against room for 3");
    let listed = c.ok(&["get", "secrets", "-n", "race", "-o", "name"]);
    assert_eq!(listed.lines().count(), 3, "{listed}");

    // PodSecurity: restricted enforced by label.
    c.ok(&["create", "namespace", "locked"]);
    c.ok(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    wait_for_default_sa(&c, "locked");
    let out = c.run(&["run", "x", "-n", "locked", "--image=busybox"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false"
        ),
        "{err}"
    );
    let ok_pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "good", "namespace": "locked"},
        "spec": {"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
          "containers": [{"name": "c", "image": "busybox", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}}"#;
    c.ok_stdin(&["create", "-f", "-"], ok_pod);
}

#[test]
fn pod_security_defaults_and_exemptions_from_the_admission_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admission.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: pod-security.yaml
",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pod-security.yaml"),
        "apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  warn: restricted
exemptions:
  usernames: [ci-bot]
  namespaces: [free]
  runtimeClasses: [trusted]
",
    )
    .unwrap();
    let Some(c) = Cluster::start(&["--admission-control-config-file", config.to_str().unwrap()])
    else {
        return;
    };
    for ns in ["plain", "free", "open"] {
        c.ok(&["create", "namespace", ns]);
        wait_for_default_sa(&c, ns);
    }
    c.ok(&[
        "label",
        "namespace",
        "open",
        "pod-security.kubernetes.io/enforce=privileged",
    ]);
    let privileged = |name: &str, ns: &str, runtime_class: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "{ns}"}},
                "spec": {{{runtime_class}"containers": [{{"name": "c", "image": "busybox",
                  "securityContext": {{"privileged": true}}}}]}}}}"#
        )
    };
    // The configured default (baseline) applies to a namespace without labels.
    let out = c.run_with(
        &c.kubectl,
        &["create", "-f", "-"],
        Some(&privileged("p", "plain", "")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("violates PodSecurity \"baseline:latest\": privileged"),
        "{err}"
    );
    // A namespace label overrides the default; warnings still come from the default warn level.
    let out = c.run_with(
        &c.kubectl,
        &["create", "-f", "-"],
        Some(&privileged("p", "open", "")),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("would violate PodSecurity \"restricted:latest\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Exempt namespace, runtime class and user.
    c.ok_stdin(&["create", "-f", "-"], &privileged("p", "free", ""));
    c.ok_stdin(
        &["create", "-f", "-"],
        &privileged("rc", "plain", r#""runtimeClassName": "trusted", "#),
    );
    c.ok(&[
        "create",
        "clusterrolebinding",
        "ci-bot-admin",
        "--clusterrole=cluster-admin",
        "--user=ci-bot",
    ]);
    c.ok_stdin(
        &["create", "--as=ci-bot", "-f", "-"],
        &privileged("bot", "plain", ""),
    );
    let out = c.run_with(
        &c.kubectl,
        &["create", "--as=someone-else", "-f", "-"],
        Some(&privileged("other", "plain", "")),
    );
    assert!(!out.status.success());
}

#[test]
fn bad_admission_configuration_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admission.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: strict
",
    )
    .unwrap();
    let out = Command::new(k1s_tests::k1s_bin())
        .args(["server", "--disable-agent", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--write-kubeconfig")
        .arg(dir.path().join("k.yaml"))
        .args(["--bind-address", "127.0.0.1", "--https-port"])
        .arg(k1s_tests::free_port().to_string())
        .arg("--admission-control-config-file")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted"),
        "{err}"
    );
}

#[test]
fn claims_and_volumes_in_use_are_protected() {
    let Some(c) = Cluster::start(&[]) else { return };
    wait_for_default_sa(&c, "default");
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                      "hostPath": {"path": "/tmp/pv1"}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                      "resources": {"requests": {"storage": "1Gi"}}}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
             "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                      "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}
        ]}"#,
    );
    let get = |kind: &str, name: &str| -> Value {
        let out = c.run(&["get", kind, name, "-o", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    };
    assert_eq!(
        get("pvc", "data")["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    assert_eq!(
        get("pv", "pv1")["metadata"]["finalizers"],
        json!(["kubernetes.io/pv-protection"])
    );
    // The PV controller binds the two; a Bound volume is held when deleted.
    eventually("pv1 bound", 30, || {
        get("pv", "pv1")["status"]["phase"] == "Bound"
    });
    c.ok(&["delete", "pv", "pv1", "--wait=false"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(get("pv", "pv1")["metadata"]["deletionTimestamp"].is_string());
    // In use by a scheduled pod: deleting only marks the claim.
    c.ok(&["delete", "pvc", "data", "--wait=false"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pvc = get("pvc", "data");
    assert!(pvc["metadata"]["deletionTimestamp"].is_string(), "{pvc}");
    // The pod goes (no kubelet here: force it), and the claim follows; the volume, released,
    // goes too.
    c.ok(&["delete", "pod", "user", "--grace-period=0", "--force"]);
    eventually("the released claim to be deleted", 30, || {
        get("pvc", "data").is_null()
    });
    eventually("the released volume to be deleted", 30, || {
        get("pv", "pv1").is_null()
    });
}

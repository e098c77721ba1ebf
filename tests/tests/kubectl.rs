//! End to end with stock kubectl against the real `k1s server`: the workflows of issue #3
//! (create, apply client- and server-side, get in every output, describe, label, annotate,
//! scale, the four patch types, delete, watch, wait, rollout status, api-resources,
//! pagination), run with every kubectl this machine has.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k1s_tests::{API_ONLY, Cluster, all_kubectls};
use serde_json::Value;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: busybox:1.36
        ports: [{containerPort: 80}]
        env: [{name: A, value: "1"}]
"#;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn everyday_workflow_with_the_default_kubectl() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    c.ok(&["create", "namespace", "demo"]);
    // kubectl 1.32+ sends this one as protobuf.
    c.ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "demo",
        "--from-literal=a=1",
    ]);
    let cm = json(&c.ok(&["get", "cm", "settings", "-n", "demo", "-o", "json"]));
    assert_eq!(cm["data"]["a"], "1");
    assert!(
        cm["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );
    assert!(cm["metadata"]["creationTimestamp"].is_string());

    // Client-side apply: create, then an edit goes as a strategic merge patch.
    c.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    let edited = DEPLOYMENT
        .replace("busybox:1.36", "busybox:1.37")
        .replace("value: \"1\"", "value: \"2\"");
    assert!(
        c.ok_stdin(&["apply", "-f", "-"], &edited)
            .contains("configured")
    );
    let d = json(&c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"]));
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "busybox:1.37");
    assert_eq!(container["env"][0]["value"], "2");
    assert_eq!(container["ports"][0]["containerPort"], 80);
    assert_eq!(d["metadata"]["generation"], 2);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate", "defaulted");
    assert!(
        c.ok_stdin(&["apply", "-f", "-"], &edited)
            .contains("unchanged")
    );

    // Table output as upstream prints it.
    let wide = c.ok(&["get", "deploy", "-n", "demo", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert!(
        wide.contains("busybox:1.37") && wide.contains("app=web"),
        "{wide}"
    );
    let yaml = c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: Deployment") && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    let described = c.ok(&["describe", "deploy", "web", "-n", "demo"]);
    assert!(
        described.contains("busybox:1.37") && described.contains("RollingUpdate"),
        "{described}"
    );

    // label, annotate (merge patches), scale (the scale subresource).
    c.ok(&["label", "deploy", "web", "-n", "demo", "tier=front"]);
    c.ok(&["annotate", "deploy", "web", "-n", "demo", "note=hello"]);
    c.ok(&["scale", "deploy", "web", "-n", "demo", "--replicas=5"]);
    let d = json(&c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"]));
    assert_eq!(d["metadata"]["labels"]["tier"], "front");
    assert_eq!(d["metadata"]["annotations"]["note"], "hello");
    assert_eq!(d["spec"]["replicas"], 5);
    assert!(
        c.ok(&[
            "get",
            "deploy",
            "-n",
            "demo",
            "-l",
            "tier=front",
            "-o",
            "name"
        ])
        .contains("deployment.apps/web")
    );
    assert!(
        c.ok(&[
            "get",
            "deploy",
            "-n",
            "demo",
            "-l",
            "tier!=front",
            "-o",
            "name"
        ])
        .trim()
        .is_empty()
    );

    // The four patch types.
    c.ok(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/b","value":"2"}]"#,
    ]);
    c.ok(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "demo",
        "--type=merge",
        "-p",
        r#"{"data":{"c":"3","a":null}}"#,
    ]);
    c.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "demo",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox:1.38"}]}}}}"#,
    ]);
    let cm = json(&c.ok(&["get", "cm", "settings", "-n", "demo", "-o", "json"]));
    assert_eq!(cm["data"], serde_json::json!({"b": "2", "c": "3"}));
    let d = json(&c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"]));
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:1.38"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"], "A",
        "strategic merge keeps env"
    );
    let three = edited.replace("replicas: 2", "replicas: 3");
    // Server-side apply: fields other managers set conflict, until forced.
    let out = c.run_with(
        &c.kubectl,
        &["apply", "--server-side", "-f", "-"],
        Some(&three),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("conflict") && err.contains(".spec.replicas"),
        "{err}"
    );
    let applied = c.ok_stdin(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        &three,
    );
    assert!(applied.contains("serverside-applied"), "{applied}");
    let managers = c.ok(&[
        "get",
        "deploy",
        "web",
        "-n",
        "demo",
        "--show-managed-fields",
        "-o",
        "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}",
    ]);
    // kubectl applied (Apply); label and annotate wrote as their own managers (Update).
    for entry in [
        "kubectl/Apply",
        "kubectl-label/Update",
        "kubectl-annotate/Update",
    ] {
        assert!(
            managers.split(' ').any(|m| m == entry),
            "{entry} missing: {managers}"
        );
    }
    assert_eq!(
        c.ok(&[
            "get",
            "deploy",
            "web",
            "-n",
            "demo",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "3"
    );

    // set image and rollout restart: strategic merge patches kubectl builds itself.
    c.ok(&["set", "image", "deploy/web", "-n", "demo", "c=busybox:1.39"]);
    c.ok(&["rollout", "restart", "deploy/web", "-n", "demo"]);
    let d = json(&c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"]));
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:1.39"
    );
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string()
    );

    // Errors print as upstream's.
    let err = c.fails(&["get", "deploy", "nope", "-n", "demo"]);
    assert!(
        err.contains("Error from server (NotFound): deployments.apps \"nope\" not found"),
        "{err}"
    );
    let err = c.fails(&["create", "namespace", "demo"]);
    assert!(err.contains("(AlreadyExists)"), "{err}");
    let err = c.fails(&["create", "configmap", "x", "-n", "missing-ns"]);
    assert!(err.contains("namespaces \"missing-ns\" not found"), "{err}");

    // diff (a server-side dry run) shows a pending change and stores nothing; explain reads
    // the OpenAPI documents.
    let out = c.run_with(
        &c.kubectl,
        &["diff", "-f", "-"],
        Some(&DEPLOYMENT.replace("busybox:1.36", "busybox:9.9")),
    );
    let diff = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{diff}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(diff.contains("+        image: busybox:9.9"), "{diff}");
    assert!(
        !c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "yaml"])
            .contains("9.9")
    );
    let explained = c.ok(&["explain", "deployment.spec.replicas"]);
    assert!(
        explained.contains("FIELD: replicas") && explained.contains("integer"),
        "{explained}"
    );

    // api-resources from aggregated discovery.
    let resources = c.ok(&["api-resources"]);
    for needle in [
        "deployments",
        "deploy",
        "apps/v1",
        "persistentvolumeclaims",
        "leases",
        "customresourcedefinitions",
    ] {
        assert!(resources.contains(needle), "{needle} missing:\n{resources}");
    }

    // delete: the deployment goes, kubectl waits for it.
    c.ok(&["delete", "deploy", "web", "-n", "demo"]);
    c.fails(&["get", "deploy", "web", "-n", "demo"]);
    c.ok(&["delete", "cm", "settings", "-n", "demo"]);
    assert!(
        c.ok(&["get", "cm", "-n", "demo", "-o", "name"])
            .trim()
            .is_empty()
    );
}

/// `kubectl get -w` prints the initial list, then each change.
#[test]
fn get_watch_and_wait_and_rollout_status() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    c.ok(&["create", "namespace", "demo"]);
    c.ok(&["create", "configmap", "first", "-n", "demo"]);
    let mut watch = Command::new(&c.kubectl)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["get", "cm", "-n", "demo", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = |want: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("watch never printed {want:?}"));
            if line.contains(want) {
                return line;
            }
        }
    };
    next("first");
    c.ok(&["create", "configmap", "second", "-n", "demo"]);
    assert!(next("second").starts_with("ADDED"));
    let metrics = c.ok(&["get", "--raw", "/metrics"]);
    for needle in [
        "apiserver_registered_watchers{group=\"\",version=\"v1\",kind=\"ConfigMap\"} 1",
        "apiserver_request_total{verb=\"LIST\",group=\"\",version=\"v1\",resource=\"configmaps\",subresource=\"\",code=\"200\"}",
        "apiserver_request_total{verb=\"POST\",group=\"\",version=\"v1\",resource=\"configmaps\",subresource=\"\",code=\"201\"}",
    ] {
        assert!(metrics.contains(needle), "{needle} missing:\n{metrics}");
    }
    c.ok(&["label", "configmap", "second", "-n", "demo", "x=y"]);
    assert!(next("second").starts_with("MODIFIED"));
    c.ok(&["delete", "configmap", "second", "-n", "demo"]);
    assert!(next("second").starts_with("DELETED"));
    let _ = watch.kill();
    let _ = watch.wait();

    // wait --for=condition and rollout status, with the status a controller would write.
    c.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    let status = r#"{"status":{"observedGeneration":1,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2,
        "conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok"}]}}"#;
    let waiter = std::thread::scope(|s| {
        let h = s.spawn(|| {
            c.run(&[
                "wait",
                "--for=condition=Available",
                "deploy/web",
                "-n",
                "demo",
                "--timeout=30s",
            ])
        });
        let r = s.spawn(|| {
            c.run(&[
                "rollout",
                "status",
                "deploy/web",
                "-n",
                "demo",
                "--timeout=30s",
            ])
        });
        std::thread::sleep(Duration::from_secs(1));
        c.ok(&[
            "patch",
            "deploy",
            "web",
            "-n",
            "demo",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ]);
        (h.join().unwrap(), r.join().unwrap())
    });
    for out in [&waiter.0, &waiter.1] {
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(String::from_utf8_lossy(&waiter.1.stdout).contains("successfully rolled out"));
    // Spec writes ignore status and status writes ignore spec.
    let d = json(&c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"]));
    assert_eq!(d["status"]["availableReplicas"], 2);
    c.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "demo",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    c.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "demo",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":9}}"#,
    ]);
    let d = json(&c.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"]));
    assert_eq!(
        (
            d["status"]["replicas"].as_i64(),
            d["spec"]["replicas"].as_i64()
        ),
        (Some(2), Some(2))
    );
}

/// 2,000 objects listed in pages: every object exactly once, one snapshot.
#[test]
fn pagination_over_two_thousand_objects() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    c.ok(&["create", "namespace", "many"]);
    let mut list = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..2000 {
        list.push_str(&format!("- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm-{i:04}, namespace: many}}, data: {{i: \"{i}\"}}}}\n"));
    }
    c.ok_stdin(&["create", "-f", "-"], &list);
    let names = c.ok(&["get", "cm", "-n", "many", "--chunk-size=150", "-o", "name"]);
    let names: Vec<&str> = names.lines().collect();
    assert_eq!(names.len(), 2000);
    let mut sorted = names.clone();
    sorted.dedup();
    assert_eq!(sorted.len(), 2000);

    // By hand: limit/continue pages from one snapshot, with remainingItemCount.
    let mut path = "/api/v1/namespaces/many/configmaps?limit=500".to_owned();
    let mut seen = 0;
    let mut rv = None;
    loop {
        let page = c.raw("GET", &path, None, None).json();
        let items = page["items"].as_array().unwrap().len();
        seen += items;
        let page_rv = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            rv.get_or_insert(page_rv.clone()),
            &page_rv,
            "pages come from one snapshot"
        );
        match page["metadata"]["continue"].as_str() {
            Some(token) => {
                assert_eq!(
                    page["metadata"]["remainingItemCount"].as_i64(),
                    Some(2000 - seen as i64)
                );
                // A write between pages does not show up in the next page.
                if seen == 500 {
                    c.ok(&["create", "configmap", "zz-late", "-n", "many"]);
                }
                path = format!("/api/v1/namespaces/many/configmaps?limit=500&continue={token}");
            }
            None => break,
        }
    }
    assert_eq!(seen, 2000);
    // A list with a label selector and a limit still returns full pages.
    let page = c
        .raw(
            "GET",
            "/api/v1/namespaces/many/configmaps?limit=10&fieldSelector=metadata.name%3Dcm-1999",
            None,
            None,
        )
        .json();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    // A cluster-wide list narrowed to one namespace by a field selector.
    let page = c
        .raw(
            "GET",
            "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dmany&limit=5",
            None,
            None,
        )
        .json();
    assert_eq!(page["items"].as_array().unwrap().len(), 5);
    assert!(page["metadata"]["continue"].is_string());
}

/// A watch from a compacted resourceVersion ends with 410 Expired; a relist and a watch from
/// its resourceVersion then see new events.
#[test]
fn watch_after_compaction_gets_410_then_relist_works() {
    let Some(c) = Cluster::start(&[
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
    c.ok(&["create", "namespace", "w"]);
    let first = json(&c.ok(&["create", "configmap", "a", "-n", "w", "-o", "json"]));
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..5 {
        c.ok(&["create", "configmap", &format!("b{i}"), "-n", "w"]);
    }
    // Wait for the compactor to pass the old revision.
    let deadline = Instant::now() + Duration::from_secs(30);
    let expired = loop {
        let r = c.raw(
            "GET",
            &format!(
                "/api/v1/namespaces/w/configmaps?watch=1&resourceVersion={old_rv}&timeoutSeconds=2"
            ),
            None,
            None,
        );
        if r.body.contains("\"code\":410") {
            break r;
        }
        assert!(Instant::now() < deadline, "never compacted: {}", r.body);
        std::thread::sleep(Duration::from_millis(500));
    };
    let event = json(expired.body.lines().next().unwrap());
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["reason"], "Expired");
    // An exact list at the compacted revision is 410 too.
    let r = c.raw(
        "GET",
        &format!(
            "/api/v1/namespaces/w/configmaps?resourceVersion={old_rv}&resourceVersionMatch=Exact"
        ),
        None,
        None,
    );
    assert_eq!(r.code, 410, "{}", r.body);
    // Relist, then watch from the list's revision.
    let list = c
        .raw("GET", "/api/v1/namespaces/w/configmaps", None, None)
        .json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            c.raw(
                "GET",
                &format!(
                    "/api/v1/namespaces/w/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=3"
                ),
                None,
                None,
            )
        });
        std::thread::sleep(Duration::from_millis(500));
        c.ok(&["create", "configmap", "after", "-n", "w"]);
        let body = w.join().unwrap().body;
        let events: Vec<Value> = body.lines().map(json).collect();
        assert_eq!(events.len(), 1, "{body}");
        assert_eq!(
            (
                events[0]["type"].as_str(),
                events[0]["object"]["metadata"]["name"].as_str()
            ),
            (Some("ADDED"), Some("after"))
        );
    });
}

/// The same basic workflow with each kubectl the machine has (1.27–1.33 and Debian's 1.20).
#[test]
fn every_kubectl_version_works() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    for (label, bin) in all_kubectls() {
        let ns = format!("v{}", label.replace('.', "-"));
        let run = |args: &[&str], stdin: Option<&str>| c.ok_with(&label, &bin, args, stdin);
        run(&["create", "namespace", &ns], None);
        run(
            &["create", "configmap", "c", "-n", &ns, "--from-literal=k=v"],
            None,
        );
        run(
            &[
                "create",
                "deployment",
                "d",
                "-n",
                &ns,
                "--image=busybox:1.36",
            ],
            None,
        );
        run(
            &["apply", "-n", &ns, "-f", "-"],
            Some(&DEPLOYMENT.replace("namespace: demo", &format!("namespace: {ns}"))),
        );
        let table = run(&["get", "deploy,cm", "-n", &ns], None);
        assert!(
            table.contains("deployment.apps/web") && table.contains("configmap/c"),
            "{label}: {table}"
        );
        run(&["scale", "deploy", "d", "-n", &ns, "--replicas=2"], None);
        run(&["label", "cm", "c", "-n", &ns, "x=y"], None);
        run(&["describe", "cm", "c", "-n", &ns], None);
        run(&["api-resources"], None);
        let listed = run(
            &[
                "get",
                "cm",
                "c",
                "-n",
                &ns,
                "-o",
                "jsonpath={.metadata.labels.x}",
            ],
            None,
        );
        assert_eq!(listed, "y", "{label}");
        run(&["delete", "deploy", "d", "web", "-n", &ns], None);
        eprintln!("kubectl {label}: ok");
    }
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string, pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
              image: {type: string}
              replicas: {type: integer, minimum: 1, maximum: 10, default: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
"#;

/// A CRD and its custom resources: served at once, validated, pruned and defaulted by the
/// schema, printed with the CRD's columns, with status and scale subresources; deleting the
/// CRD deletes its resources.
#[test]
fn custom_resources() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/crontabs.stable.example.com",
        "--timeout=20s",
    ]);
    let good = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: tab, namespace: default}\nspec: {cronSpec: '* * * * */5', image: busybox}\n";
    c.ok_stdin(&["apply", "-f", "-"], good);
    let ct = json(&c.ok(&["get", "ct", "tab", "-o", "json"]));
    assert_eq!(ct["spec"]["replicas"], 1, "defaulted from the schema");
    assert_eq!(ct["metadata"]["generation"], 1);
    let table = c.ok(&["get", "crontabs"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SPEC", "REPLICAS"], "{table}");
    assert!(table.contains("* * * * */5"), "{table}");

    // Validation errors name the field, as upstream's do.
    let bad = good.replace("cronSpec: '* * * * */5'", "cronSpec: 'nope', replicas: 20");
    let out = c.run_with(
        &c.kubectl,
        &["apply", "-f", "-"],
        Some(&bad.replace("name: tab", "name: bad")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("spec.replicas") && err.contains("less than or equal to 10"),
        "{err}"
    );
    assert!(err.contains("spec.cronSpec"), "{err}");
    // Unknown fields: refused under kubectl's default strict validation, pruned with Ignore.
    let extra = good
        .replace("image: busybox", "image: busybox, color: red")
        .replace("name: tab", "name: extra");
    let err = String::from_utf8_lossy(
        &c.run_with(&c.kubectl, &["apply", "-f", "-"], Some(&extra))
            .stderr,
    )
    .into_owned();
    assert!(err.contains("unknown field \"spec.color\""), "{err}");
    c.ok_stdin(&["apply", "--validate=false", "-f", "-"], &extra);
    assert_eq!(
        c.ok(&["get", "ct", "extra", "-o", "jsonpath={.spec.color}"]),
        ""
    );

    // Status and scale subresources.
    c.ok(&["scale", "ct", "tab", "--replicas=4"]);
    assert_eq!(
        c.ok(&["get", "ct", "tab", "-o", "jsonpath={.spec.replicas}"]),
        "4"
    );
    c.ok(&[
        "patch",
        "ct",
        "tab",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":4}}"#,
    ]);
    let scale = c
        .raw(
            "GET",
            "/apis/stable.example.com/v1/namespaces/default/crontabs/tab/scale",
            None,
            None,
        )
        .json();
    assert_eq!(
        (
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["replicas"].as_i64()
        ),
        (Some(4), Some(4))
    );
    let resources = c.ok(&["api-resources", "--api-group=stable.example.com"]);
    assert!(
        resources.contains("crontabs") && resources.contains("ct"),
        "{resources}"
    );
    let explained = c.ok(&["explain", "crontab"]);
    assert!(explained.contains("CronTab"), "{explained}");
    let explained = c.ok(&["explain", "crontab.spec"]);
    assert!(
        explained.contains("cronSpec") && explained.contains("replicas"),
        "{explained}"
    );

    // Deleting the CRD deletes its custom resources, then the CRD.
    c.ok(&[
        "delete",
        "crd",
        "crontabs.stable.example.com",
        "--timeout=30s",
    ]);
    let err = c.fails(&["get", "crontabs"]);
    assert!(
        err.contains("the server doesn't have a resource type") || err.contains("NotFound"),
        "{err}"
    );
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/crontabs.stable.example.com",
        "--timeout=20s",
    ]);
    assert!(
        c.ok(&["get", "crontabs", "-A", "-o", "name"])
            .trim()
            .is_empty(),
        "old resources are gone"
    );
}

/// Every error of issue #3 point 7: a Status with the upstream code and reason, never a crash.
#[test]
fn bad_input_gets_status_errors() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    let status = |r: &k1s_tests::Reply, code: u16, reason: &str| {
        assert_eq!(r.code, code, "{}", r.body);
        let s = r.json();
        assert_eq!(
            (s["kind"].as_str(), s["reason"].as_str()),
            (Some("Status"), Some(reason)),
            "{}",
            r.body
        );
        s
    };
    // Malformed JSON, YAML and protobuf.
    status(
        &c.raw(
            "POST",
            cms,
            Some("application/json"),
            Some(b"{\"metadata\": "),
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw(
            "POST",
            cms,
            Some("application/yaml"),
            Some(b"metadata: [unclosed"),
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw(
            "POST",
            cms,
            Some("application/vnd.kubernetes.protobuf"),
            Some(b"k8s\0\x0a\xff\xff"),
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw("POST", cms, Some("text/csv"), Some(b"a,b")),
        415,
        "UnsupportedMediaType",
    );
    // A body of the wrong kind or apiVersion.
    status(
        &c.raw(
            "POST",
            cms,
            None,
            Some(br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#),
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw(
            "POST",
            cms,
            None,
            Some(br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#),
        ),
        400,
        "BadRequest",
    );
    // Wrong types, an unknown kind, absurd nesting, a body over 3 MiB.
    status(
        &c.raw(
            "POST",
            cms,
            None,
            Some(br#"{"metadata":{"name":"x"},"data":{"a":1}}"#),
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw("GET", "/apis/nothing.example/v1/widgets", None, None),
        404,
        "NotFound",
    );
    let deep = format!(
        "{{\"metadata\":{{\"name\":\"x\"}},\"data\":{}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    status(
        &c.raw("POST", cms, None, Some(deep.as_bytes())),
        400,
        "BadRequest",
    );
    let big = format!(
        "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"a\":\"{}\"}}}}",
        "x".repeat(4 << 20)
    );
    status(
        &c.raw("POST", cms, None, Some(big.as_bytes())),
        413,
        "RequestEntityTooLarge",
    );
    // Invalid names list the field in details.causes (422).
    let s = status(
        &c.raw(
            "POST",
            cms,
            None,
            Some(br#"{"metadata":{"name":"Not_Valid"}}"#),
        ),
        422,
        "Invalid",
    );
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    // Strict field validation, conflicts, duplicates, bad selectors, bad patches.
    status(
        &c.raw(
            "POST",
            &format!("{cms}?fieldValidation=Strict"),
            None,
            Some(br#"{"metadata":{"name":"s"},"bogus":1}"#),
        ),
        400,
        "BadRequest",
    );
    assert_eq!(
        c.raw("POST", cms, None, Some(br#"{"metadata":{"name":"c"}}"#))
            .code,
        201
    );
    status(
        &c.raw("POST", cms, None, Some(br#"{"metadata":{"name":"c"}}"#)),
        409,
        "AlreadyExists",
    );
    status(
        &c.raw(
            "PUT",
            &format!("{cms}/c"),
            None,
            Some(br#"{"metadata":{"name":"c","resourceVersion":"1"}}"#),
        ),
        409,
        "Conflict",
    );
    status(
        &c.raw(
            "GET",
            &format!("{cms}?labelSelector=a%20in%20(b"),
            None,
            None,
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw(
            "GET",
            &format!("{cms}?fieldSelector=spec.bogus%3D1"),
            None,
            None,
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw(
            "PATCH",
            &format!("{cms}/c"),
            Some("application/json-patch+json"),
            Some(br#"[{"op":"test","path":"/data/x","value":"1"}]"#),
        ),
        422,
        "Invalid",
    );
    status(
        &c.raw(
            "PATCH",
            &format!("{cms}/c"),
            Some("application/merge-patch+json"),
            Some(b"{not json"),
        ),
        400,
        "BadRequest",
    );
    status(
        &c.raw("GET", &format!("{cms}/missing"), None, None),
        404,
        "NotFound",
    );
    // Strategic merge patch on a custom resource is 415, as upstream.
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/crontabs.stable.example.com",
    ]);
    let cts = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    assert_eq!(
        c.raw(
            "POST",
            cts,
            None,
            Some(br#"{"metadata":{"name":"t"},"spec":{"image":"x"}}"#)
        )
        .code,
        201
    );
    status(
        &c.raw(
            "PATCH",
            &format!("{cts}/t"),
            Some("application/strategic-merge-patch+json"),
            Some(b"{}"),
        ),
        415,
        "UnsupportedMediaType",
    );
    // An Accept nothing can satisfy is 406.
    status(
        &c.raw_accept(
            "GET",
            cms,
            None,
            Some("application/vnd.kubernetes.protobuf"),
            None,
        ),
        406,
        "NotAcceptable",
    );
    // The server is still fine, and nothing was stored by the failures.
    let list = c.raw("GET", cms, None, None).json();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c"]);
}

/// The representations kubectl and controllers ask for: Table (with and without objects),
/// PartialObjectMetadata lists, YAML; and `fieldValidation=Warn` warnings.
#[test]
fn tables_metadata_and_warnings() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    c.ok(&["create", "configmap", "one", "--from-literal=a=b"]);
    let cms = "/api/v1/namespaces/default/configmaps";
    let table = c
        .raw_accept(
            "GET",
            &format!("{cms}?includeObject=Object"),
            None,
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            None,
        )
        .json();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Data", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "one");
    assert_eq!(table["rows"][0]["object"]["data"]["a"], "b");
    let meta = c
        .raw_accept(
            "GET",
            cms,
            None,
            Some("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
            None,
        )
        .json();
    assert_eq!(meta["kind"], "PartialObjectMetadataList");
    assert_eq!(meta["items"][0]["kind"], "PartialObjectMetadata");
    assert!(meta["items"][0].get("data").is_none());
    let yaml = c.raw_accept(
        "GET",
        &format!("{cms}/one"),
        None,
        Some("application/yaml"),
        None,
    );
    assert!(yaml.body.contains("kind: ConfigMap"), "{}", yaml.body);
    // fieldValidation=Warn: stored without the unknown field, and kubectl shows the warning.
    let out = c.run_with(
        &c.kubectl,
        &["apply", "--validate=warn", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two, namespace: default}\ndata: {a: b}\nbogus: 1\n"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("unknown field \"bogus\""), "{err}");
}

#[test]
fn secrets_and_config_maps_are_decoded_and_validated_as_upstream() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let fails_stdin = |input: &str| {
        let out = c.run_with(&c.kubectl, &["apply", "-f", "-"], Some(input));
        assert!(!out.status.success(), "applied: {input}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // stringData is written into data and never stored; a later apply changes it again.
    let secret = |value: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: creds}}\n\
             data: {{base: YmFzZQ==}}\nstringData: {{user: admin, pass: \"{value}\"}}\n"
        )
    };
    c.ok_stdin(&["apply", "-f", "-"], &secret("s3cret"));
    let got = json(&c.ok(&["get", "secret", "creds", "-o", "json"]));
    assert_eq!(got["type"], "Opaque");
    assert!(got.get("stringData").is_none(), "{got}");
    assert_eq!(
        got["data"],
        serde_json::json!({"base": "YmFzZQ==", "user": "YWRtaW4=", "pass": "czNjcmV0"})
    );
    c.ok_stdin(&["apply", "-f", "-"], &secret("other"));
    let got = json(&c.ok(&["get", "secret", "creds", "-o", "json"]));
    assert_eq!(got["data"]["pass"], "b3RoZXI=");

    // Each type's keys, key syntax, and immutable objects.
    let err = fails_stdin(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: cert}\ntype: kubernetes.io/tls\n\
         stringData: {tls.crt: x}\n",
    );
    assert!(err.contains("data[tls.key]: Required value"), "{err}");
    let err = c.fails(&["create", "configmap", "bad", "--from-literal=a b=1"]);
    assert!(err.contains("a valid config key must consist of"), "{err}");
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: true\ndata: {a: \"1\"}\n",
    );
    let err = c.fails(&["patch", "cm", "frozen", "-p", r#"{"data":{"a":"2"}}"#]);
    assert!(
        err.contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{err}"
    );
    c.ok(&["label", "cm", "frozen", "tier=config"]);
    let err = c.fails(&[
        "patch",
        "secret",
        "creds",
        "-p",
        r#"{"type":"kubernetes.io/tls"}"#,
    ]);
    assert!(err.contains("field is immutable"), "{err}");
}

/// `--disable-admission-plugins`: the plugins named are skipped, the others still run. No
/// controller manager runs, so no namespace has its default ServiceAccount: with
/// ServiceAccount admission on, a pod would be refused for the missing account.
#[test]
fn disabled_admission_plugins_are_skipped() {
    let Some(c) = Cluster::start(&[
        "--disable-controller-manager",
        "--disable-scheduler",
        "--disable-admission-plugins",
        "ServiceAccount,Priority,NamespaceLifecycle,TaintNodesByCondition",
    ]) else {
        return;
    };
    let pod = |ns: &str, name: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod",
                "metadata": {{"name": "{name}", "namespace": "{ns}"}},
                "spec": {{"priorityClassName": "no-such-class",
                          "containers": [{{"name": "c", "image": "busybox"}}]}}}}"#
        )
    };
    c.ok_stdin(&["create", "-f", "-"], &pod("default", "p"));
    let p = json(&c.ok(&["get", "pod", "p", "-o", "json"]));
    // ServiceAccount: no account, no API token volume. Priority: the unknown class is not
    // resolved (upstream would refuse it), no priority set.
    assert!(p["spec"]["serviceAccountName"].is_null(), "{p}");
    assert!(p["spec"]["volumes"].is_null(), "{p}");
    assert!(p["spec"]["containers"][0]["volumeMounts"].is_null(), "{p}");
    assert!(p["spec"]["priority"].is_null(), "{p}");
    assert_eq!(p["spec"]["priorityClassName"], "no-such-class");
    // DefaultTolerationSeconds was not named: its two tolerations are there.
    assert_eq!(
        p["spec"]["tolerations"].as_array().map(Vec::len),
        Some(2),
        "{p}"
    );
    // NamespaceLifecycle: a pod in a namespace that does not exist is stored.
    c.ok_stdin(&["create", "-f", "-"], &pod("nowhere", "q"));
    c.ok(&["get", "pod", "q", "-n", "nowhere"]);
}

/// client-go sends `DeleteOptions` in protobuf with its default content type (issue #29:
/// every namespace deletion of the conformance suite failed with 400). A hand-built body:
/// `k8s\0` + runtime.Unknown{typeMeta{v1, DeleteOptions}, raw: DeleteOptions{
/// gracePeriodSeconds: 0, propagationPolicy: "Background"}}.
#[test]
fn protobuf_delete_options_are_understood() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let raw = [&[0x08, 0x00][..], &[0x22, 10], b"Background"].concat();
    let type_meta = [&[0x0a, 2][..], b"v1", &[0x12, 13], b"DeleteOptions"].concat();
    let body = [
        &b"k8s\0"[..],
        &[0x0a, type_meta.len() as u8],
        &type_meta,
        &[0x12, raw.len() as u8],
        &raw,
    ]
    .concat();
    let proto = Some("application/vnd.kubernetes.protobuf");
    for name in ["pb-one", "pb-two", "pb-three"] {
        c.ok(&["create", "configmap", name]);
    }
    let one = c.raw(
        "DELETE",
        "/api/v1/namespaces/default/configmaps/pb-one",
        proto,
        Some(&body),
    );
    assert_eq!(one.code, 200, "{}", one.body);
    assert!(!c.run(&["get", "configmap", "pb-one"]).status.success());
    let all = c.raw(
        "DELETE",
        "/api/v1/namespaces/default/configmaps",
        proto,
        Some(&body),
    );
    assert_eq!(all.code, 200, "{}", all.body);
    assert!(
        c.ok(&["get", "configmaps", "-o", "name"])
            .lines()
            .all(|l| !l.contains("pb-"))
    );
    // A broken protobuf body is still a 400 that says what could not be decoded.
    let bad = c.raw(
        "DELETE",
        "/api/v1/namespaces/default/configmaps/x",
        proto,
        Some(b"k8s\0\x0a\xff\xff"),
    );
    assert_eq!(bad.code, 400, "{}", bad.body);
    assert!(
        bad.body.contains("DeleteOptions body could not be decoded"),
        "{}",
        bad.body
    );
}

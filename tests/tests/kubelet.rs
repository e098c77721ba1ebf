//! End to end, issue #7: `k1s server` runs real containers from a real registry. A local
//! `docker-registry` serves a busybox image built with umoci and pushed with skopeo (see
//! `kubelet/tests/support/registry.rs`); kubectl drives the pods; the test checks the host for
//! the processes, their namespaces and cgroups. Needs root (CI runs as root); skips visibly
//! otherwise.

use std::time::{Duration, Instant};

use k1s_tests::host::{HostCleanup, Images, pids_with, start_with_kubelet as start};

#[path = "../../kubelet/tests/support/device_plugin.rs"]
mod device_plugin;
use k1s_tests::{Cluster, eventually};
use serde_json::Value;

fn pod(c: &Cluster, name: &str) -> Value {
    let out = c.run(&["get", "pod", name, "-o", "json"]);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn waiting_reason(p: &Value) -> String {
    p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn pods_run_as_real_containers() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("run");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("run", &flags) else {
        return;
    };
    let image = images.busybox();

    // A long-running pod: Running and Ready, with a real address and IDs.
    c.ok(&[
        "run",
        "web",
        &format!("--image={image}"),
        "--command",
        "--",
        "sh",
        "-c",
        "echo hello from k1s; while true; do sleep 1; done",
    ]);
    eventually("web to be Running and Ready", 90, || {
        let p = pod(&c, "web");
        p["status"]["phase"] == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    });
    let p = pod(&c, "web");
    let ip = p["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(ip.starts_with("10."), "podIP {ip}");
    let cs = &p["status"]["containerStatuses"][0];
    assert!(
        cs["containerID"].as_str().unwrap().starts_with("k1s://"),
        "{cs}"
    );
    assert!(cs["imageID"].as_str().unwrap().contains("@sha256:"), "{cs}");
    assert!(p["status"]["hostIP"].is_string());
    let conds: Vec<String> = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "True")
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect();
    for want in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert!(conds.contains(&want.to_string()), "{want} in {conds:?}");
    }
    // A real process, in namespaces and a cgroup of its own.
    let pids = pids_with("hello from k1s");
    assert!(!pids.is_empty(), "no container process on the host");
    let pid = pids[0];
    for ns in ["pid", "mnt", "net", "uts", "ipc"] {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
        let mine = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert_ne!(theirs, mine, "{ns} namespace shared with the host");
    }
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroup.contains("k1s-test-"), "{cgroup}");
    // kubectl logs, plain and with timestamps.
    assert_eq!(
        c.ok(&["logs", "web"]).lines().next(),
        Some("hello from k1s")
    );
    let ts = c.ok(&["logs", "web", "--timestamps", "--tail=1"]);
    assert!(
        ts.starts_with("20") && ts.trim_end().ends_with("hello from k1s"),
        "{ts}"
    );
    let events = c.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
        "-o",
        "json",
    ]);
    for reason in ["Scheduled", "Pulling", "Pulled", "Created", "Started"] {
        assert!(
            events.contains(&format!("\"reason\": \"{reason}\"")),
            "{reason} event missing: {events}"
        );
    }

    // A crash loop: the restart count climbs and the back-off shows.
    c.ok(&[
        "run",
        "crash",
        &format!("--image={image}"),
        "--command",
        "--",
        "sh",
        "-c",
        "echo dying; exit 3",
    ]);
    let mut saw_backoff = false;
    eventually("crash to restart twice", 90, || {
        let p = pod(&c, "crash");
        saw_backoff |= waiting_reason(&p) == "CrashLoopBackOff";
        p["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .unwrap_or(0)
            >= 2
    });
    let p = pod(&c, "crash");
    assert_eq!(
        p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 3,
        "{p}"
    );
    assert_eq!(c.ok(&["logs", "crash", "--previous"]).trim(), "dying");
    eventually("CrashLoopBackOff", 60, || {
        saw_backoff |= waiting_reason(&pod(&c, "crash")) == "CrashLoopBackOff";
        saw_backoff
    });
    // Each restart's Started event is the same event again: one Event whose count grows, as
    // client-go's correlator makes it.
    let events: Value = serde_json::from_str(&c.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=crash",
        "-o",
        "json",
    ]))
    .unwrap();
    let started: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "Started")
        .collect();
    assert_eq!(started.len(), 1, "{events}");
    assert!(started[0]["count"].as_i64().unwrap_or(0) >= 2, "{events}");
    assert_ne!(
        started[0]["firstTimestamp"], started[0]["lastTimestamp"],
        "{events}"
    );

    // Bad input, each with a reason in the status.
    c.ok(&[
        "run",
        "nope",
        &format!("--image={}/nope:latest", images.registry.host()),
    ]);
    eventually("ErrImagePull then ImagePullBackOff", 60, || {
        waiting_reason(&pod(&c, "nope")) == "ImagePullBackOff"
    });
    let msg = pod(&c, "nope")["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
        .to_string();
    assert!(msg.contains("nope"), "{msg}");
    c.ok(&[
        "run",
        "badcmd",
        &format!("--image={image}"),
        "--command",
        "--",
        "/no/such/binary",
    ]);
    eventually("RunContainerError", 60, || {
        waiting_reason(&pod(&c, "badcmd")) == "RunContainerError"
    });
    let msg = pod(&c, "badcmd")["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
        .to_string();
    assert!(msg.contains("/no/such/binary"), "{msg}");

    // Graceful deletion: sh as pid 1 ignores SIGTERM, so SIGKILL after the grace period.
    let started = Instant::now();
    c.ok(&["delete", "pod", "web", "--grace-period=2", "--wait=true"]);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "deleted before the grace period"
    );
    eventually("the container process to be gone", 20, || {
        pids_with("hello from k1s").is_empty()
    });
    for p in ["crash", "nope", "badcmd"] {
        c.ok(&["delete", "pod", p, "--grace-period=0", "--force"]);
    }
}

#[test]
fn restarting_k1s_keeps_containers_running() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("restart");
    let _cleanup = HostCleanup(flags.clone());
    let Some(mut c) = start("restart", &flags) else {
        return;
    };
    let image = images.busybox();
    c.ok(&[
        "run",
        "keep",
        &format!("--image={image}"),
        "--command",
        "--",
        "sh",
        "-c",
        "echo keep me; while true; do sleep 1; done",
    ]);
    eventually("keep to be Running", 90, || {
        pod(&c, "keep")["status"]["phase"] == "Running"
    });
    let before = pids_with("keep me");
    assert_eq!(before.len(), 1, "{before:?}");
    // kill -9 the server: the container must not notice.
    let port = c.port;
    c.server.kill();
    assert_eq!(pids_with("keep me"), before, "the container died with k1s");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    c.server = k1s_tests::Server::start(&c.data_dir(), port, &c.kubeconfig, &flags);
    eventually("the server to answer", 60, || {
        c.run(&["get", "pod", "keep"]).status.success()
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(pids_with("keep me"), before, "the container was restarted");
    let p = pod(&c, "keep");
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(
        p["status"]["containerStatuses"][0]["restartCount"], 0,
        "{p}"
    );

    // SIGTERM: a clean stop that closes the store (the next start repairs nothing), and the
    // container lives on again.
    c.server.wait_for_log("node registered");
    let logs = c.server.terminate();
    assert!(logs.iter().any(|l| l.contains("stopped")), "{logs:?}");
    assert_eq!(pids_with("keep me"), before, "the container died with k1s");
    c.server = k1s_tests::Server::start(&c.data_dir(), port, &c.kubeconfig, &flags);
    assert!(
        !c.server.logged("unclean shutdown"),
        "the store was not closed cleanly on SIGTERM"
    );
    eventually("the server to answer", 60, || {
        c.run(&["get", "pod", "keep"]).status.success()
    });
    assert_eq!(pids_with("keep me"), before, "the container was restarted");
    c.ok(&["delete", "pod", "keep", "--grace-period=1"]);
    eventually("the container process to be gone", 20, || {
        pids_with("keep me").is_empty()
    });
}

/// `kubectl get pod NAME`'s READY column.
fn ready_column(c: &Cluster, name: &str) -> String {
    let out = c.run(&["get", "pod", name, "--no-headers"]);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

/// A one-request-at-a-time HTTP server on the host for preStop hooks: for each request it
/// records whether a process with `marker` in its command line still ran.
fn hook_server(marker: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<bool>>>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            s2.lock().unwrap().push(!pids_with(marker).is_empty());
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, seen)
}

fn apply(c: &Cluster, manifest: &Value) {
    let out = c.run_with(
        &c.kubectl,
        &["create", "-f", "-"],
        Some(&manifest.to_string()),
    );
    assert!(
        out.status.success(),
        "kubectl create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn probes_hooks_and_oom_on_real_containers() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("probes");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("probes", &flags) else {
        return;
    };
    let image = images.busybox();

    // Readiness: httpGet on busybox httpd, ready while /www-ready/ready exists.
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ready"},
        "spec": {"containers": [{"name": "web", "image": image,
            "command": ["sh", "-c", "mkdir -p /www-ready && exec httpd -f -p 8080 -h /www-ready"],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"},
                "periodSeconds": 1, "failureThreshold": 1}}]}}),
    );
    eventually("ready to run", 90, || {
        pod(&c, "ready")["status"]["phase"] == "Running"
    });
    let pid = pids_with("/www-ready")[0];
    assert_eq!(ready_column(&c, "ready"), "0/1");
    let flag = format!("/proc/{pid}/root/www-ready/ready");
    std::fs::write(&flag, "ok").unwrap();
    eventually("READY 1/1", 30, || ready_column(&c, "ready") == "1/1");
    let p = pod(&c, "ready");
    assert!(
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{p}"
    );
    std::fs::remove_file(&flag).unwrap();
    eventually("READY 0/1 again", 30, || ready_column(&c, "ready") == "0/1");
    let events = c.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=ready",
    ]);
    assert!(
        events.contains("Readiness probe failed: HTTP probe failed with statuscode: 404"),
        "{events}"
    );

    // Liveness: nothing listens on 9999, so the container is killed and restarted.
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "live"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": image,
            "command": ["sh", "-c", "echo live-probed; while true; do sleep 1; done"],
            "livenessProbe": {"tcpSocket": {"port": 9999},
                "periodSeconds": 1, "failureThreshold": 2}}]}}),
    );
    eventually("live to be restarted", 120, || {
        pod(&c, "live")["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .unwrap_or(0)
            >= 1
    });
    let events = c.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=live",
    ]);
    assert!(
        events.contains("Container c failed liveness probe, will be restarted"),
        "{events}"
    );
    assert!(
        events.contains("Liveness probe failed: dial tcp"),
        "{events}"
    );

    // Graceful deletion with a preStop httpGet (to a server on the host) and a grace period.
    let (port, seen) = hook_server("prestop-victim");
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stopper"},
        "spec": {"terminationGracePeriodSeconds": 3, "containers": [{"name": "c", "image": image,
            "command": ["sh", "-c", "echo prestop-victim; while true; do sleep 1; done"],
            "lifecycle": {"preStop": {"httpGet": {"host": "127.0.0.1", "port": port,
                "path": "/stop"}}}}]}}),
    );
    eventually("stopper to be Running", 90, || {
        pod(&c, "stopper")["status"]["phase"] == "Running"
    });
    let started = Instant::now();
    c.ok(&["delete", "pod", "stopper", "--wait=true"]);
    // sh ignores SIGTERM: it goes only with the SIGKILL at the end of the grace period.
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "deleted before the grace period"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        vec![true],
        "the preStop hook ran once, before the kill"
    );
    eventually("the container process to be gone", 20, || {
        pids_with("prestop-victim").is_empty()
    });

    // OOM: a memory hog over its limit is OOMKilled.
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": image,
            // dd fills a 64 MiB block buffer: far over the limit. (The image has only
            // /bin/sh and /bin/busybox; sh runs busybox's applets.)
            "command": ["sh", "-c", "dd if=/dev/zero of=/dev/null bs=64M count=4"],
            "resources": {"limits": {"memory": "16Mi"}}}]}}),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    while pod(&c, "hog")["status"]["phase"] != "Failed" {
        assert!(
            Instant::now() < deadline,
            "hog never failed: {}",
            pod(&c, "hog")["status"]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let p = pod(&c, "hog");
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["reason"], "OOMKilled", "{p}");
    assert_eq!(t["exitCode"], 137, "{p}");

    // A sidecar (restartable init container) with a startup probe: the next init container
    // runs only once it has started (it sees the sidecar's file), the app beside it; when the
    // app completes (restartPolicy Never) the sidecar is stopped and the pod Succeeded.
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [
                {"name": "sidecar", "image": image, "restartPolicy": "Always",
                 "command": ["sh", "-c", "sleep 1; touch /shared/up; exec sleep 3597"],
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                 "startupProbe": {"exec": {"command": ["test", "-f", "/shared/up"]},
                    "periodSeconds": 1, "failureThreshold": 30}},
                {"name": "check", "image": image, "command": ["test", "-f", "/shared/up"],
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}],
            "containers": [{"name": "app", "image": image,
                "command": ["sh", "-c", "sleep 2; echo work done"]}]}}),
    );
    eventually("the job pod to succeed", 90, || {
        pod(&c, "job")["status"]["phase"] == "Succeeded"
    });
    let p = pod(&c, "job");
    let inits = &p["status"]["initContainerStatuses"];
    assert_eq!(inits[1]["state"]["terminated"]["exitCode"], 0, "{p}");
    assert!(inits[0]["state"]["terminated"].is_object(), "{p}");
    assert_eq!(inits[0]["restartCount"], 0, "{p}");
    assert_eq!(c.ok(&["logs", "job", "-c", "app"]).trim(), "work done");
    // (After the exec its command line is `sleep NUL 3597`.)
    assert!(
        pids_with("sleep\u{0}3597").is_empty(),
        "the sidecar still runs"
    );

    for p in ["ready", "live", "hog", "job"] {
        c.ok(&["delete", "pod", p, "--grace-period=0", "--force"]);
    }
}

/// The eviction manager on real containers: a pod whose emptyDir outgrows its sizeLimit, and
/// one whose container writes more than its ephemeral-storage limit, are evicted (Failed,
/// Evicted, upstream's messages, DisruptionTarget, an event); a pod within its limits runs on.
#[test]
fn local_storage_limits_evict_pods() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("evict");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("evict", &flags) else {
        return;
    };
    let image = images.busybox();
    let writer = |name: &str, script: &str, limits: Value| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "c", "image": image, "command": ["sh", "-c", script],
                "resources": {"limits": limits},
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}]}
        })
    };
    let fill = |path: &str, kib: u32| {
        format!(
            "dd if=/dev/zero of={path} bs=1024 count={kib} 2>/dev/null; echo written; while true; do sleep 1; done"
        )
    };
    apply(
        &c,
        &writer(
            "volume-hog",
            &fill("/scratch/data", 4096),
            serde_json::json!({}),
        ),
    );
    apply(
        &c,
        &writer(
            "layer-hog",
            &fill("/data", 4096),
            serde_json::json!({"ephemeral-storage": "2Mi"}),
        ),
    );
    apply(
        &c,
        &writer(
            "modest",
            &fill("/scratch/data", 256),
            serde_json::json!({"ephemeral-storage": "2Mi"}),
        ),
    );
    let evicted = |name: &str, message: &str| {
        eventually(&format!("{name} to be evicted"), 120, || {
            pod(&c, name)["status"]["phase"] == "Failed"
        });
        let p = pod(&c, name);
        assert_eq!(p["status"]["reason"], "Evicted", "{p}");
        assert_eq!(p["status"]["message"], message, "{p}");
        let d = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["type"] == "DisruptionTarget")
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            (d["status"].as_str(), d["reason"].as_str()),
            (Some("True"), Some("TerminationByKubelet")),
            "{p}"
        );
        let events = c.ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={name}"),
        ]);
        assert!(events.contains("Evicted"), "{events}");
    };
    evicted(
        "volume-hog",
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ",
    );
    evicted(
        "layer-hog",
        "Container c exceeded its local ephemeral storage limit \"2Mi\". ",
    );
    eventually("modest to have written", 60, || {
        c.ok(&["logs", "modest"]).contains("written")
    });
    // Two more eviction rounds (10 s each): it stays.
    std::thread::sleep(Duration::from_secs(21));
    assert_eq!(pod(&c, "modest")["status"]["phase"], "Running");
    assert!(
        pids_with("of=/data bs=1024").is_empty(),
        "the evicted container still runs"
    );
    for p in ["volume-hog", "layer-hog", "modest"] {
        c.ok(&["delete", "pod", p, "--grace-period=0", "--force"]);
    }
}

/// Memory pressure from the start (a threshold every node crosses): a Burstable pod, admitted
/// under memory pressure as upstream admits it, is evicted once running, with upstream's
/// message naming the signal.
#[test]
fn memory_pressure_evicts_running_pods() {
    let Some(images) = Images::start() else {
        return;
    };
    let mut flags = images.kubelet_flags("mempress");
    let at = flags.iter().position(|f| f == "--eviction-hard").unwrap() + 1;
    flags[at] = "memory.available<100%,nodefs.available<1%,imagefs.available<1%".into();
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("mempress", &flags) else {
        return;
    };
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "burst"},
            "spec": {"nodeName": "node-mempress", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": images.busybox(),
                "command": ["sh", "-c", "echo up; while true; do sleep 1; done"],
                // No memory request: the threshold (all of the memory) leaves no allocatable
                // memory, and admission would refuse it (OutOfmemory), as upstream's would.
                "resources": {"requests": {"cpu": "10m"}}}]}}),
    );
    eventually("burst to be evicted", 120, || {
        pod(&c, "burst")["status"]["phase"] == "Failed"
    });
    let p = pod(&c, "burst");
    assert_eq!(p["status"]["reason"], "Evicted", "{p}");
    let message = p["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: "),
        "{p}"
    );
    assert!(c.ok(&["logs", "burst"]).contains("up"), "it never ran");
    c.ok(&["delete", "pod", "burst", "--grace-period=0", "--force"]);
}

/// Disk pressure from the start (a threshold every file system crosses): the condition, the
/// taint, the scheduler keeping new pods off, and the kubelet refusing a pod bound to it
/// directly.
#[test]
fn disk_pressure_is_reported_tainted_and_refuses_new_pods() {
    if !k1s_tests::host::is_root() {
        eprintln!("SKIP: a test kubelet needs root (bridge, cgroups)");
        return;
    }
    // A threshold every file system crosses: the node is under disk pressure from the start.
    let mut flags = k1s_tests::kubelet_flags("press");
    let at = flags.iter().position(|f| f == "--eviction-hard").unwrap() + 1;
    flags[at] = "nodefs.available<100%".into();
    flags.extend(["--disable".into(), "local-storage".into()]);
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("press", &flags) else {
        return;
    };
    let condition = |type_: &str| {
        let node = c.get_json(&["node", "node-press"]);
        node["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|x| x["type"] == type_).cloned())
            .unwrap_or(Value::Null)
    };
    let disk = condition("DiskPressure");
    assert_eq!(
        (disk["status"].as_str(), disk["reason"].as_str()),
        (Some("True"), Some("KubeletHasDiskPressure")),
        "{disk}"
    );
    assert_eq!(condition("MemoryPressure")["status"], "False");
    assert_eq!(condition("PIDPressure")["status"], "False");
    eventually("the disk-pressure taint", 60, || {
        c.get_json(&["node", "node-press"])["spec"]["taints"]
            .to_string()
            .contains("node.kubernetes.io/disk-pressure")
    });
    c.ok(&["run", "late", "--image=busybox", "--restart=Never"]);
    eventually("the pod to be kept off the node", 60, || {
        c.ok(&["describe", "pod", "late"]).contains("disk-pressure")
    });
    assert!(pod(&c, "late")["spec"]["nodeName"].is_null());
    // Bound to the node directly (no scheduler to keep it off): the kubelet refuses it, as
    // upstream's eviction manager does.
    apply(
        &c,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"},
            "spec": {"nodeName": "node-press", "containers": [{"name": "c", "image": "busybox"}]}}),
    );
    eventually("the kubelet to refuse the pod", 60, || {
        pod(&c, "bound")["status"]["phase"] == "Failed"
    });
    let p = pod(&c, "bound");
    assert_eq!(p["status"]["reason"], "Evicted", "{p}");
    assert_eq!(
        p["status"]["message"], "The node had condition: [DiskPressure]. ",
        "{p}"
    );
    // Bad thresholds are refused at start with a message that says what to fix.
    let out = std::process::Command::new(k1s_tests::k1s_bin())
        .args(["server", "--eviction-hard", "memory.free<1Gi"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--eviction-hard") && err.contains("unknown signal"),
        "{err}"
    );
}

/// A sample device plugin (real gRPC over the real socket directory) registers with
/// `k1s server`: the node offers its devices, the scheduler keeps a pod that wants more than
/// there are off the node, and a pod that gets one sees the plugin's env, mount and device
/// node in a real container, which its device cgroup lets it open while a device node it
/// makes itself for another device stays closed. A restart of k1s keeps the pod and its
/// device (no second Allocate); the plugin registers again and its devices are offered again.
#[test]
fn device_plugin_devices_reach_real_containers() {
    use device_plugin::{SamplePlugin, Setup};
    const RES: &str = "example.com/sample";
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("devplug");
    let _cleanup = HostCleanup(flags.clone());
    let Some(mut c) = start("devplug", &flags) else {
        return;
    };
    let image = images.busybox();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("info"), "sample files\n").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plugin = rt.block_on(SamplePlugin::start(
        &c.data_dir().join("agent/device-plugins"),
        "sample.sock",
        Setup {
            resource: RES.into(),
            ids: vec!["s0".into(), "s1".into()],
            preferred: false,
            pre_start: false,
            // /dev/kmsg (c 1:11): not on the default device allow-list; opening it for
            // writing needs no capability.
            host_device: "/dev/kmsg".into(),
            mount_dir: files.path().to_owned(),
        },
    ));
    let offered = |c: &Cluster| {
        let node = c.get_json(&["node", "node-devplug"]);
        (
            node["status"]["capacity"][RES].as_str().map(str::to_owned),
            node["status"]["allocatable"][RES]
                .as_str()
                .map(str::to_owned),
        )
    };
    let two = (Some("2".to_string()), Some("2".to_string()));
    eventually("the node to offer 2 sample devices", 60, || {
        offered(&c) == two
    });

    // A host block device (`MAJOR:MINOR`): the container may make a node for it, but not open
    // it.
    let disk = std::fs::read_dir("/sys/dev/block")
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().replace(':', " "))
        .unwrap_or_else(|| {
            eprintln!("no block device on this host: the block device check opens nothing");
            "7 0".into()
        });
    let pod_with = |name: &str, n: u32| {
        let script = format!(
            "echo devices=$SAMPLE_DEVICES; ls -l /dev/sample-s0; cat /sample/info; \
             true >/dev/sample-s0 && echo opened; \
             mknod /tmp/disk b {disk} && {{ true </tmp/disk && echo read-host-disk || echo denied; }}; \
             while true; do sleep 1; done"
        );
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "c", "image": image,
                "command": ["sh", "-c", script],
                "resources": {"limits": {RES: n.to_string()}}}]}
        })
    };
    apply(&c, &pod_with("gpu", 1));
    eventually("gpu to be Running", 90, || {
        pod(&c, "gpu")["status"]["phase"] == "Running"
    });
    eventually("gpu's output", 30, || {
        c.ok(&["logs", "gpu"]).contains("denied")
    });
    let logs = c.ok(&["logs", "gpu"]);
    assert!(logs.contains("devices=s0"), "{logs}");
    assert!(logs.contains("sample files"), "{logs}");
    let node_line = logs
        .lines()
        .find(|l| l.contains("/dev/sample-s0"))
        .unwrap_or_default();
    // A character device with /dev/kmsg's numbers (1, 11), which the container's device
    // cgroup lets it open; a node it made itself for a host disk it cannot open.
    assert!(
        node_line.starts_with('c') && node_line.contains("1,") && node_line.contains(" 11 "),
        "{logs}"
    );
    assert!(logs.contains("opened"), "{logs}");
    assert!(!logs.contains("read-host-disk"), "{logs}");
    assert_eq!(plugin.allocations(), [vec!["s0".to_string()]]);

    // Two more than the one left: the scheduler says so, and the pod stays Pending.
    apply(&c, &pod_with("greedy", 2));
    eventually("greedy to be unschedulable", 60, || {
        c.ok(&["describe", "pod", "greedy"])
            .contains(&format!("Insufficient {RES}"))
    });
    assert!(pod(&c, "greedy")["spec"]["nodeName"].is_null());
    c.ok(&["delete", "pod", "greedy", "--wait=false"]);

    // kill -9 and start again: the pod keeps running with its device; the plugin registers
    // again (the new kubelet replaced its socket) and is offered again.
    let before = pids_with("devices=$SAMPLE_DEVICES");
    assert_eq!(before.len(), 1, "{before:?}");
    let port = c.port;
    c.server.kill();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    c.server = k1s_tests::Server::start(&c.data_dir(), port, &c.kubeconfig, &flags);
    eventually("the server to answer", 60, || {
        c.run(&["get", "pod", "gpu"]).status.success()
    });
    eventually("the devices to be offered again", 60, || offered(&c) == two);
    assert_eq!(
        pids_with("devices=$SAMPLE_DEVICES"),
        before,
        "the pod was restarted"
    );
    assert_eq!(pod(&c, "gpu")["status"]["phase"], "Running");
    assert_eq!(
        plugin.allocations().len(),
        1,
        "Allocate again after a restart"
    );

    c.ok(&["delete", "pod", "gpu", "--grace-period=1"]);
    drop(plugin);
    eventually("nothing allocatable without the plugin", 60, || {
        offered(&c).1.as_deref() == Some("0")
    });
}

/// Static pods: a manifest in `DATA_DIR/agent/pod-manifests` runs as a real container without
/// the API, and shows in the API as a mirror pod (Running, owned by the Node) that kubectl
/// logs and exec reach. A deleted mirror pod comes back while the container keeps running; a
/// bad manifest is skipped; removing the manifest stops the pod and removes the mirror pod.
#[test]
fn static_pods_run_from_manifests_and_show_as_mirror_pods() {
    let Some(images) = Images::start() else {
        return;
    };
    let mut flags = images.kubelet_flags("static");
    flags.extend(["--file-check-frequency".into(), "1s".into()]);
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("static", &flags) else {
        return;
    };
    let image = images.busybox();
    let dir = c.data_dir().join("agent/pod-manifests");
    std::fs::write(dir.join("broken.yaml"), "kind: Service\n").unwrap();
    std::fs::write(
        dir.join("web.yaml"),
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: [sh, -c, 'echo static hello; while true; do sleep 1; done']\n"
        ),
    )
    .unwrap();
    let name = "web-node-static";
    let get = || c.get_json(&["pod", "-n", "kube-system", name]);
    eventually("the mirror pod to show the static pod Running", 90, || {
        get()["status"]["phase"] == "Running"
    });
    let p = get();
    let a = &p["metadata"]["annotations"];
    assert!(a["kubernetes.io/config.mirror"].is_string(), "{p}");
    assert_eq!(
        a["kubernetes.io/config.mirror"], a["kubernetes.io/config.hash"],
        "{p}"
    );
    assert_eq!(a["kubernetes.io/config.source"], "file");
    assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(p["metadata"]["ownerReferences"][0]["name"], "node-static");
    assert_eq!(p["spec"]["nodeName"], "node-static");
    eventually("the static pod's logs", 30, || {
        c.ok(&["logs", "-n", "kube-system", name])
            .contains("static hello")
    });
    assert_eq!(
        c.ok(&["exec", "-n", "kube-system", name, "--", "echo", "inside"])
            .trim(),
        "inside"
    );
    let pids = pids_with("static hello");
    assert_eq!(pids.len(), 1, "{pids:?}");

    // kubectl delete of the mirror pod: a new one appears, the container runs on.
    let first = p["metadata"]["uid"].clone();
    c.ok(&["delete", "pod", "-n", "kube-system", name, "--wait=false"]);
    eventually("a new mirror pod showing the running pod", 60, || {
        let p = get();
        p["metadata"]["uid"].is_string()
            && p["metadata"]["uid"] != first
            && p["metadata"]["deletionTimestamp"].is_null()
            && p["status"]["phase"] == "Running"
    });
    assert_eq!(
        pids_with("static hello"),
        pids,
        "the container was restarted"
    );

    // Removing the manifest: the pod stops and its mirror pod goes.
    std::fs::remove_file(dir.join("web.yaml")).unwrap();
    eventually("the mirror pod to be deleted", 60, || {
        !c.run(&["get", "pod", "-n", "kube-system", name])
            .status
            .success()
    });
    eventually("the container process to be gone", 30, || {
        pids_with("static hello").is_empty()
    });
}

/// `nodes/NAME/proxy/...` reaches the kubelet: the summary API with the node's and a real
/// container's usage, the resource metrics metrics-server reads, `/pods` and `/healthz`;
/// RBAC's `nodes/proxy` guards it.
#[test]
fn node_proxy_serves_the_summary_api() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("stats");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("stats", &flags) else {
        return;
    };
    let node = "node-stats";
    let proxy = |path: &str| format!("/api/v1/nodes/{node}/proxy{path}");
    assert_eq!(c.ok(&["get", "--raw", &proxy("/healthz")]), "ok");

    // A container that writes 512 KiB into its root file system, then waits.
    c.ok(&[
        "run",
        "hog",
        &format!("--image={}", images.busybox()),
        "--command",
        "--",
        "sh",
        "-c",
        "dd if=/dev/zero of=/blob bs=1024 count=512; echo written; while true; do sleep 1; done",
    ]);
    eventually("hog to be Running", 90, || {
        pod(&c, "hog")["status"]["phase"] == "Running"
    });
    eventually("hog to have written its file", 30, || {
        String::from_utf8_lossy(&c.run(&["logs", "hog"]).stdout).contains("written")
    });

    let summary = |c: &Cluster| -> Value {
        serde_json::from_str(&c.ok(&["get", "--raw", &proxy("/stats/summary")])).unwrap()
    };
    let first = summary(&c);
    let n = &first["node"];
    assert_eq!(n["nodeName"], node, "{n}");
    for (what, v) in [
        ("memory.workingSetBytes", &n["memory"]["workingSetBytes"]),
        ("memory.availableBytes", &n["memory"]["availableBytes"]),
        (
            "cpu.usageCoreNanoSeconds",
            &n["cpu"]["usageCoreNanoSeconds"],
        ),
        ("fs.capacityBytes", &n["fs"]["capacityBytes"]),
        (
            "runtime.imageFs.capacityBytes",
            &n["runtime"]["imageFs"]["capacityBytes"],
        ),
        ("rlimit.maxpid", &n["rlimit"]["maxpid"]),
    ] {
        assert!(v.as_u64().unwrap_or(0) > 0, "node {what}: {n}");
    }
    assert!(n["startTime"].as_str().unwrap_or("").ends_with('Z'), "{n}");
    let hog = |s: &Value| -> Value {
        s["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["podRef"]["name"] == "hog")
            .cloned()
            .unwrap_or_else(|| panic!("no hog in {s}"))
    };
    let p = hog(&first);
    assert_eq!(p["podRef"]["namespace"], "default");
    assert_eq!(p["podRef"]["uid"], pod(&c, "hog")["metadata"]["uid"]);
    let ct = &p["containers"][0];
    assert_eq!(ct["name"], "hog", "{p}");
    assert!(
        ct["memory"]["workingSetBytes"].as_u64().unwrap() > 0,
        "{ct}"
    );
    assert!(
        ct["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0,
        "{ct}"
    );
    assert!(
        ct["rootfs"]["usedBytes"].as_u64().unwrap() >= 512 * 1024,
        "the 512 KiB file is in the writable layer: {ct}"
    );
    assert!(ct["logs"]["usedBytes"].as_u64().unwrap() > 0, "{ct}");
    assert!(p["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{p}");
    assert!(
        p["process_stats"]["process_count"].as_u64().unwrap() >= 1,
        "{p}"
    );
    assert!(p["network"]["txBytes"].is_u64(), "{p}");
    assert!(
        p["ephemeral-storage"]["usedBytes"].as_u64().unwrap() >= 512 * 1024,
        "{p}"
    );
    // A rate needs two readings: the second summary has usageNanoCores.
    std::thread::sleep(Duration::from_millis(300));
    let second = summary(&c);
    assert!(
        second["node"]["cpu"]["usageNanoCores"].is_u64(),
        "{}",
        second["node"]
    );
    assert!(hog(&second)["containers"][0]["cpu"]["usageNanoCores"].is_u64());

    let metrics = c.ok(&["get", "--raw", &proxy("/metrics/resource")]);
    for series in [
        "container_memory_working_set_bytes{container=\"hog\",namespace=\"default\",pod=\"hog\"}",
        "container_cpu_usage_seconds_total{container=\"hog\",namespace=\"default\",pod=\"hog\"}",
        "pod_memory_working_set_bytes{namespace=\"default\",pod=\"hog\"}",
        "node_cpu_usage_seconds_total ",
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
    let pods: Value = serde_json::from_str(&c.ok(&["get", "--raw", &proxy("/pods")])).unwrap();
    assert_eq!(pods["kind"], "PodList");
    assert!(
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["metadata"]["name"] == "hog")
    );
    let log = c.ok(&["get", "--raw", &proxy("/containerLogs/default/hog/hog")]);
    assert!(log.contains("written"), "{log}");

    // Errors: an unknown kubelet path, an unknown node, and a user without nodes/proxy.
    let err = c.fails(&["get", "--raw", &proxy("/no/such/path")]);
    assert!(err.contains("NotFound") || err.contains("404"), "{err}");
    let err = c.fails(&["get", "--raw", "/api/v1/nodes/no-such-node/proxy/healthz"]);
    assert!(err.contains("not found"), "{err}");
    let err = c.fails(&[
        "get",
        "--raw",
        &proxy("/stats/summary"),
        "--as=system:serviceaccount:default:default",
    ]);
    assert!(err.contains("forbidden"), "{err}");
    c.ok(&["delete", "pod", "hog", "--grace-period=0", "--force"]);
}

//! End to end, issue #29: kubelet behaviours upstream's v1.20 conformance suite checks and
//! k1s got wrong, with real containers from the local registry (see `tests/src/host.rs`):
//!
//! 1. downward API env `status.podIP(s)` / `status.hostIP(s)`, resolved before the pod's
//!    status shows them;
//! 2. `resourceFieldRef` limits a container does not set read the node's allocatable, in
//!    env vars and in downwardAPI and projected volume files;
//! 3. init containers: app containers wait `PodInitializing` meanwhile, completed init
//!    containers are ready, the `Initialized` condition and its message, a failure fails a
//!    RestartNever pod and is restarted with back-off on a RestartAlways one;
//! 4. termination messages: `FallbackToLogsOnError` reads the log's tail, and a non-root
//!    user writes a non-default `terminationMessagePath`.
//!
//! One server for all of it, every pod created up front, so the test stays well under a
//! minute. Needs root (CI runs as root); skips visibly otherwise.

use k1s_tests::host::{HostCleanup, Images, start_with_kubelet as start, wait_for_teardown};
use k1s_tests::{Cluster, eventually};
use serde_json::{Value, json};

const NODE: &str = "node-kconf";

fn pod(c: &Cluster, name: &str) -> Value {
    c.get_json(&["pod", name])
}

fn create(c: &Cluster, manifest: &Value) {
    c.ok_stdin(&["create", "-f", "-"], &manifest.to_string());
}

/// `Initialized` is True and both init containers exited 0 and count as ready.
fn assert_both_init_containers_done(p: &Value) {
    assert_eq!(condition(p, "Initialized")["status"], "True", "{p}");
    for i in 0..2 {
        assert_eq!(
            p["status"]["initContainerStatuses"][i]["ready"], true,
            "{p}"
        );
        assert_eq!(terminated(p, "initContainerStatuses", i)["exitCode"], 0);
    }
}

/// A pod of busybox containers: `init` and `main` are (name, shell script) pairs.
fn pod_of(image: &str, name: &str, policy: &str, init: &[(&str, &str)], main: Value) -> Value {
    let init: Vec<Value> = init
        .iter()
        .map(|(n, script)| json!({"name": n, "image": image, "command": ["sh", "-c", script]}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": NODE, "restartPolicy": policy, "terminationGracePeriodSeconds": 1,
                 "initContainers": init, "containers": main}})
}

fn condition<'a>(p: &'a Value, type_: &str) -> &'a Value {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// Upstream's invariant while a pod is not initialized: every app container waits with
/// `PodInitializing` and has never restarted.
fn assert_apps_wait_initializing(p: &Value) {
    for s in p["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_eq!(
            s["state"]["waiting"]["reason"], "PodInitializing",
            "app container out of PodInitializing before the pod is initialized: {p}"
        );
        assert_eq!(s["restartCount"], 0, "{p}");
    }
}

fn terminated<'a>(p: &'a Value, list: &str, i: usize) -> &'a Value {
    &p["status"][list][i]["state"]["terminated"]
}

#[test]
fn kubelet_conformance_causes_of_issue_29() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("kconf");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start("kconf", &flags) else {
        return;
    };
    let image = images.busybox();
    let dapi_items = json!([
        {"path": "cpu_limit", "resourceFieldRef": {"containerName": "c",
            "resource": "limits.cpu", "divisor": "1m"}},
        {"path": "memory_limit", "resourceFieldRef": {"containerName": "c",
            "resource": "limits.memory"}},
    ]);

    // 1 and 2: env and volume files, printed once; the container has no limits.
    let script = "echo POD_IP=$POD_IP; echo POD_IPS=$POD_IPS; echo HOST_IP=$HOST_IP; \
                  echo HOST_IPS=$HOST_IPS; echo CPU_LIMIT=$CPU_LIMIT; \
                  echo MEMORY_LIMIT=$MEMORY_LIMIT; echo MEMORY_REQUEST=$MEMORY_REQUEST; \
                  echo VOL_CPU=$(cat /dapi/cpu_limit); echo VOL_MEM=$(cat /dapi/memory_limit); \
                  echo PROJ_CPU=$(cat /proj/cpu_limit); echo PROJ_MEM=$(cat /proj/memory_limit)";
    let field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    let resource = |name: &str, r: &str, divisor: &str| json!({"name": name, "valueFrom": {"resourceFieldRef": {"resource": r, "divisor": divisor}}});
    let mut downward = pod_of(
        &image,
        "downward",
        "Never",
        &[],
        json!([{"name": "c", "image": image, "command": ["sh", "-c", script],
            "env": [field("POD_IP", "status.podIP"), field("POD_IPS", "status.podIPs"),
                    field("HOST_IP", "status.hostIP"), field("HOST_IPS", "status.hostIPs"),
                    resource("CPU_LIMIT", "limits.cpu", "1m"),
                    resource("MEMORY_LIMIT", "limits.memory", "1"),
                    resource("MEMORY_REQUEST", "requests.memory", "1")],
            "volumeMounts": [{"name": "dapi", "mountPath": "/dapi"},
                             {"name": "proj", "mountPath": "/proj"}]}]),
    );
    downward["spec"]["volumes"] = json!([
        {"name": "dapi", "downwardAPI": {"items": dapi_items}},
        {"name": "proj", "projected": {"sources": [{"downwardAPI": {"items": dapi_items}}]}},
    ]);
    create(&c, &downward);

    // 3: init containers.
    let sleeper = json!([{"name": "run1", "image": image,
        "command": ["sh", "-c", "while true; do sleep 1; done"]}]);
    let truthy = json!([{"name": "run1", "image": image, "command": ["true"]}]);
    let ok_inits = [("init1", "true"), ("init2", "true")];
    create(
        &c,
        &pod_of(&image, "init-never-ok", "Never", &ok_inits, truthy.clone()),
    );
    create(
        &c,
        &pod_of(
            &image,
            "init-never-fail",
            "Never",
            &[("init1", "true"), ("init2", "false")],
            json!([{"name": "run1", "image": image,
                "command": ["sh", "-c", "echo app started"]}]),
        ),
    );
    create(
        &c,
        &pod_of(
            &image,
            "init-always-ok",
            "Always",
            &ok_inits,
            sleeper.clone(),
        ),
    );
    create(
        &c,
        &pod_of(
            &image,
            "init-always-fail",
            "Always",
            &[("init1", "false"), ("init2", "true")],
            sleeper,
        ),
    );

    // 4: termination messages.
    let term = |name: &str, script: &str, extra: Value| {
        let mut ctr = json!({"name": "c", "image": image, "command": ["sh", "-c", script]});
        for (k, v) in extra.as_object().unwrap() {
            ctr[k] = v.clone();
        }
        pod_of(&image, name, "Never", &[], json!([ctr]))
    };
    let fallback = json!({"terminationMessagePolicy": "FallbackToLogsOnError"});
    create(
        &c,
        &term("term-fallback", "echo -n DONE; false", fallback.clone()),
    );
    create(&c, &term("term-fallback-ok", "echo -n OK", fallback));
    create(
        &c,
        &term(
            "term-nonroot",
            "echo -n DONE > /dev/termination-custom-log",
            json!({"terminationMessagePath": "/dev/termination-custom-log",
                   "securityContext": {"runAsUser": 1000}}),
        ),
    );

    // 1 and 2.
    eventually("the downward pod to succeed", 60, || {
        pod(&c, "downward")["status"]["phase"] == "Succeeded"
    });
    let p = pod(&c, "downward");
    let logs = c.ok(&["logs", "downward"]);
    let var = |k: &str| -> String {
        logs.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} missing from {logs}"))
            .to_string()
    };
    let pod_ip = p["status"]["podIP"].as_str().unwrap_or_default();
    let host_ip = p["status"]["hostIP"].as_str().unwrap_or_default();
    assert!(!pod_ip.is_empty() && !host_ip.is_empty(), "{p}");
    assert_eq!(var("POD_IP"), pod_ip, "{logs}");
    assert_eq!(var("POD_IPS"), pod_ip, "{logs}");
    assert_eq!(var("HOST_IP"), host_ip, "{logs}");
    assert_eq!(var("HOST_IPS"), host_ip, "{logs}");
    let node = c.get_json(&["node", NODE]);
    let alloc = &node["status"]["allocatable"];
    let cpu_milli = {
        let q = alloc["cpu"].as_str().unwrap();
        match q.strip_suffix('m') {
            Some(m) => m.parse::<i64>().unwrap(),
            None => q.parse::<i64>().unwrap() * 1000,
        }
    };
    let mem_bytes = {
        let q = alloc["memory"].as_str().unwrap();
        let (n, unit) = q.split_at(q.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(q.len()));
        let mult: i64 = match unit {
            "" => 1,
            "Ki" => 1 << 10,
            "Mi" => 1 << 20,
            "Gi" => 1 << 30,
            other => panic!("unexpected memory unit {other} in {alloc}"),
        };
        n.parse::<i64>().unwrap() * mult
    };
    assert!(cpu_milli > 0 && mem_bytes > 0, "{alloc}");
    for k in ["CPU_LIMIT", "VOL_CPU", "PROJ_CPU"] {
        assert_eq!(var(k), cpu_milli.to_string(), "{k}: {logs} vs {alloc}");
    }
    for k in ["MEMORY_LIMIT", "VOL_MEM", "PROJ_MEM"] {
        assert_eq!(var(k), mem_bytes.to_string(), "{k}: {logs} vs {alloc}");
    }
    assert_eq!(var("MEMORY_REQUEST"), "0");

    // 3. RestartNever, all succeed: Succeeded, Initialized, every init container ready.
    eventually("init-never-ok to succeed", 60, || {
        let p = pod(&c, "init-never-ok");
        if p["status"]["phase"] != "Succeeded" {
            if condition(&p, "Initialized")["status"] != "True" {
                assert_apps_wait_initializing(&p);
            }
            return false;
        }
        true
    });
    let p = pod(&c, "init-never-ok");
    assert_both_init_containers_done(&p);
    // RestartNever, init2 fails: Failed, the app container never started.
    eventually("init-never-fail to fail", 60, || {
        let p = pod(&c, "init-never-fail");
        assert_apps_wait_initializing(&p);
        p["status"]["phase"] == "Failed"
    });
    let p = pod(&c, "init-never-fail");
    let init = condition(&p, "Initialized");
    assert_eq!(init["status"], "False", "{p}");
    assert_eq!(init["reason"], "ContainersNotInitialized");
    assert_eq!(
        init["message"],
        "containers with incomplete status: [init2]"
    );
    assert_eq!(
        p["status"]["initContainerStatuses"][0]["ready"], true,
        "{p}"
    );
    assert_ne!(terminated(&p, "initContainerStatuses", 1)["exitCode"], 0);
    assert_apps_wait_initializing(&p);
    let logs = c.run(&["logs", "init-never-fail", "-c", "run1"]);
    assert!(
        !String::from_utf8_lossy(&logs.stdout).contains("app started"),
        "the app container ran"
    );
    // RestartAlways, all succeed: Running and initialized.
    eventually("init-always-ok to run", 60, || {
        let p = pod(&c, "init-always-ok");
        p["status"]["phase"] == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    });
    let p = pod(&c, "init-always-ok");
    assert_both_init_containers_done(&p);
    assert_eq!(condition(&p, "Ready")["status"], "True", "{p}");
    // RestartAlways, init1 fails: restarted with back-off, the rest waits, Pending.
    eventually("init1 of init-always-fail to restart 3 times", 60, || {
        let p = pod(&c, "init-always-fail");
        assert_apps_wait_initializing(&p);
        let second = &p["status"]["initContainerStatuses"][1];
        if !second.is_null() {
            assert_eq!(
                second["state"]["waiting"]["reason"], "PodInitializing",
                "{p}"
            );
        }
        p["status"]["initContainerStatuses"][0]["restartCount"]
            .as_i64()
            .is_some_and(|n| n >= 3)
    });
    let p = pod(&c, "init-always-fail");
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    let init = condition(&p, "Initialized");
    assert_eq!(init["status"], "False", "{p}");
    assert_eq!(init["reason"], "ContainersNotInitialized");
    assert_eq!(
        init["message"],
        "containers with incomplete status: [init1 init2]"
    );
    assert!(
        !p["status"]["initContainerStatuses"][0]["lastState"]["terminated"].is_null(),
        "{p}"
    );

    // 4.
    let message = |name: &str| -> Value {
        let mut last = Value::Null;
        eventually(&format!("{name} to end"), 60, || {
            last = pod(&c, name);
            !terminated(&last, "containerStatuses", 0).is_null()
        });
        terminated(&last, "containerStatuses", 0).clone()
    };
    let t = message("term-fallback");
    assert_eq!(t["exitCode"], 1, "{t}");
    assert_eq!(t["message"], "DONE", "{t}");
    let t = message("term-fallback-ok");
    assert_eq!(t["exitCode"], 0, "{t}");
    assert!(t["message"].is_null(), "{t}");
    let t = message("term-nonroot");
    assert_eq!(t["exitCode"], 0, "{t}");
    assert_eq!(t["message"], "DONE", "{t}");

    c.ok(&["delete", "pods", "--all", "--grace-period=0", "--force"]);
    wait_for_teardown(&c.data_dir());
}

//! End to end with kubectl against the real binary: Jobs (completions/parallelism, backoff
//! limit, Indexed), `kubectl create job --from=cronjob/...`, a CronJob's own run, and the TTL
//! of finished Jobs. A Node object stands in for a kubelet; the test sets pod phases through
//! the status subresource as a kubelet would.

use std::time::{Duration, Instant};

use k1s_tests::Cluster;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn eventually(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

const NODE: &str = r#"{"apiVersion": "v1", "kind": "Node",
  "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"}},
  "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
             "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
             "conditions": [{"type": "Ready", "status": "True"}]}}"#;

/// The unfinished pods of job `job`.
fn running_pods(c: &Cluster, job: &str) -> Vec<Value> {
    let pods = json(&c.ok(&[
        "get",
        "pods",
        "-l",
        &format!("job-name={job}"),
        "-o",
        "json",
    ]));
    pods["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p["metadata"]["deletionTimestamp"].is_null()
                && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        })
        .collect()
}

fn wait_pods(c: &Cluster, job: &str, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    eventually(
        &format!("{n} pods of {job}"),
        Duration::from_secs(60),
        || {
            got = running_pods(c, job);
            got.len() == n
        },
    );
    got
}

/// Finishes a pod as a kubelet would.
fn finish(c: &Cluster, pod: &Value, phase: &str, code: i32) {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let patch = format!(
        r#"{{"status": {{"phase": "{phase}", "containerStatuses": [{{"name": "main", "image": "busybox",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {{"terminated": {{"exitCode": {code}, "finishedAt": "2024-01-01T00:00:00Z"}}}}}}]}}}}"#
    );
    c.ok(&[
        "patch",
        "pod",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ]);
}

fn job_yaml(name: &str, extra: &str) -> String {
    format!(
        r#"{{"apiVersion": "batch/v1", "kind": "Job", "metadata": {{"name": "{name}"}},
          "spec": {{{extra} "template": {{"spec": {{"restartPolicy": "Never",
            "containers": [{{"name": "main", "image": "busybox"}}]}}}}}}}}"#
    )
}

#[test]
fn jobs_cronjobs_and_ttl() {
    let Some(c) = Cluster::start(&[]) else { return };
    c.ok_stdin(&["create", "-f", "-"], NODE);
    eventually(
        "the default ServiceAccount",
        Duration::from_secs(60),
        || c.run(&["get", "sa", "default"]).status.success(),
    );

    // completions=3 parallelism=2 completes; kubectl wait and get columns agree.
    c.ok_stdin(
        &["create", "-f", "-"],
        &job_yaml("work", r#""completions": 3, "parallelism": 2,"#),
    );
    for p in wait_pods(&c, "work", 2) {
        finish(&c, &p, "Succeeded", 0);
    }
    for p in wait_pods(&c, "work", 1) {
        finish(&c, &p, "Succeeded", 0);
    }
    c.ok(&[
        "wait",
        "--for=condition=complete",
        "job/work",
        "--timeout=60s",
    ]);
    let row = c.ok(&["get", "job", "work", "--no-headers"]);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[0], "work", "{row}");
    assert!(row.contains("Complete"), "{row}");
    assert!(row.contains("3/3"), "{row}");
    let describe = c.ok(&["describe", "job", "work"]);
    assert!(describe.contains("3 Succeeded"), "{describe}");
    assert!(describe.contains("SuccessfulCreate"), "{describe}");
    assert!(describe.contains("Completed"), "{describe}");

    // A failing job hits its backoff limit (0: the first failure ends it).
    c.ok_stdin(
        &["create", "-f", "-"],
        &job_yaml("boom", r#""backoffLimit": 0,"#),
    );
    for p in wait_pods(&c, "boom", 1) {
        finish(&c, &p, "Failed", 1);
    }
    c.ok(&[
        "wait",
        "--for=condition=failed",
        "job/boom",
        "--timeout=60s",
    ]);
    let reason = c.ok(&[
        "get",
        "job",
        "boom",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="Failed")].reason}"#,
    ]);
    assert_eq!(reason, "BackoffLimitExceeded");
    assert!(
        c.ok(&["get", "job", "boom", "--no-headers"])
            .contains("Failed")
    );

    // An Indexed job: one pod per index, with its index.
    c.ok_stdin(
        &["create", "-f", "-"],
        &job_yaml(
            "idx",
            r#""completions": 2, "parallelism": 2, "completionMode": "Indexed","#,
        ),
    );
    let pods = wait_pods(&c, "idx", 2);
    let mut indexes: Vec<String> = pods
        .iter()
        .map(|p| {
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1"]);
    for p in &pods {
        finish(&c, p, "Succeeded", 0);
    }
    c.ok(&[
        "wait",
        "--for=condition=complete",
        "job/idx",
        "--timeout=60s",
    ]);
    assert_eq!(
        c.ok(&[
            "get",
            "job",
            "idx",
            "-o",
            "jsonpath={.status.completedIndexes}"
        ]),
        "0,1"
    );

    // A CronJob: a manual run through kubectl, then its own run at the next minute.
    c.ok(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=*/1 * * * *",
        "--",
        "true",
    ]);
    c.ok(&["create", "job", "manual", "--from=cronjob/tick"]);
    let manual = json(&c.ok(&["get", "job", "manual", "-o", "json"]));
    assert_eq!(
        manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(manual["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    wait_pods(&c, "manual", 1);
    eventually(
        "the CronJob's scheduled job",
        Duration::from_secs(75),
        || {
            let cj = json(&c.ok(&["get", "cronjob", "tick", "-o", "json"]));
            cj["status"]["lastScheduleTime"].is_string()
                && cj["status"]["active"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|r| r["name"] != "manual"))
        },
    );
    let row = c.ok(&["get", "cronjob", "tick", "--no-headers"]);
    assert!(row.contains("*/1 * * * *"), "{row}");

    // TTL: a finished job with ttlSecondsAfterFinished goes.
    c.ok_stdin(
        &["create", "-f", "-"],
        &job_yaml("brief", r#""ttlSecondsAfterFinished": 1,"#),
    );
    for p in wait_pods(&c, "brief", 1) {
        finish(&c, &p, "Succeeded", 0);
    }
    eventually("the finished job deleted", Duration::from_secs(60), || {
        !c.run(&["get", "job", "brief"]).status.success()
    });
}

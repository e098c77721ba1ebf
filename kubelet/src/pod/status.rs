//! The pod's status as the kubelet reports it: phase, the conditions (PodReadyToStartContainers,
//! Initialized, ContainersReady, Ready with the readiness gates, DisruptionTarget when the
//! kubelet evicts; conditions others own kept), container statuses, pod and host IPs, start
//! time, and the reason and message of a pod the kubelet failed. Pure: built from the pod
//! worker's view of its containers.
//!
//! As upstream's kubelet: a container not created yet waits with `PodInitializing` in a pod
//! with init containers (`ContainerCreating` otherwise), so app containers say
//! `PodInitializing` while init containers run or have failed; an init container that
//! exited 0 is `ready`; `Initialized` is False with `ContainersNotInitialized` and
//! "containers with incomplete status: [...]" until every init container has succeeded
//! (sidecars: started); a Succeeded pod's conditions carry the reason `PodCompleted`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::pod::plan::{self, Observed, RestartPolicy, State};

/// How one container stands, as the worker knows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerView {
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub container_id: Option<String>,
    pub restart_count: i32,
    pub state: ContainerState,
    pub last: Option<Terminated>,
    pub ready: bool,
    pub started: bool,
    /// A restartable init container (`restartPolicy: Always`): it runs beside the app
    /// containers once started.
    pub sidecar: bool,
}

/// Whether `c` is a sidecar: an init container with `restartPolicy: Always`.
pub fn is_sidecar(c: &k8s_openapi::api::core::v1::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

#[derive(Debug, Clone, Default, PartialEq)]
pub enum ContainerState {
    #[default]
    Unknown,
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: String,
    },
    Terminated(Terminated),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Terminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: String,
    pub message: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub container_id: Option<String>,
}

fn terminated_json(t: &Terminated) -> Value {
    let mut v = json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
    });
    // Unknown times are left out (upstream's zero metav1.Time); "" is not a time the API
    // server accepts, and the whole status write would be refused.
    for (key, at) in [("startedAt", &t.started_at), ("finishedAt", &t.finished_at)] {
        if !at.is_empty() {
            v[key] = json!(at);
        }
    }
    if let Some(s) = t.signal {
        v["signal"] = json!(s);
    }
    if let Some(m) = &t.message {
        v["message"] = json!(m);
    }
    if let Some(id) = &t.container_id {
        v["containerID"] = json!(id);
    }
    v
}

pub fn container_status(c: &ContainerView) -> Value {
    container_status_waiting(c, "ContainerCreating")
}

/// The reason a container that is not created yet waits with: `PodInitializing` in a pod
/// with init containers, else `ContainerCreating` (upstream's default waiting state).
pub fn default_waiting_reason(pod: &Pod) -> &'static str {
    let has_init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|i| !i.is_empty());
    if has_init {
        "PodInitializing"
    } else {
        "ContainerCreating"
    }
}

/// A container's status; one not created yet waits with `default_reason`.
fn container_status_waiting(c: &ContainerView, default_reason: &str) -> Value {
    let state = match &c.state {
        ContainerState::Unknown => json!({"waiting": {"reason": default_reason}}),
        ContainerState::Waiting { reason, message } => {
            let mut w = json!({"reason": reason});
            if let Some(m) = message {
                w["message"] = json!(m);
            }
            json!({"waiting": w})
        }
        ContainerState::Running { started_at } if started_at.is_empty() => json!({"running": {}}),
        ContainerState::Running { started_at } => json!({"running": {"startedAt": started_at}}),
        ContainerState::Terminated(t) => json!({"terminated": terminated_json(t)}),
    };
    let mut v = json!({
        "name": c.name,
        "image": c.image,
        "imageID": c.image_id,
        "restartCount": c.restart_count,
        "ready": c.ready,
        "started": c.started,
        "state": state,
        "lastState": c.last.as_ref().map_or(json!({}), |t| json!({"terminated": terminated_json(t)})),
    });
    if let Some(id) = &c.container_id {
        v["containerID"] = json!(id);
    }
    v
}

/// Everything the status is built from.
pub struct PodView<'a> {
    pub pod: &'a Pod,
    pub init: &'a [ContainerView],
    pub containers: &'a [ContainerView],
    pub sandbox_ready: bool,
    pub pod_ip: Option<String>,
    pub host_ip: String,
    pub start_time: &'a str,
    /// Set once the pod has reached a terminal phase (it never leaves it).
    pub terminal: Option<&'a str>,
    /// Why the kubelet failed the pod (reason, message), shown in `status`: refused at
    /// admission, evicted, or past its active deadline.
    pub rejected: Option<(&'a str, &'a str)>,
    /// The kubelet evicted the pod: a `DisruptionTarget` condition (reason
    /// `TerminationByKubelet`, the rejection's message) says so, as upstream.
    pub disrupted: bool,
    pub now: &'a str,
}

/// The pod conditions the kubelet owns; others (PodScheduled, DisruptionTarget from the
/// scheduler or the taint manager, readiness gates' conditions from controllers) are kept.
const KUBELET_CONDITIONS: &[&str] = &[
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// A readiness gate that does not hold; the Display is upstream's message for the Ready
/// condition.
#[derive(Debug, thiserror::Error)]
enum ReadinessGateError {
    #[error("corresponding condition of pod readiness gate {0:?} does not exist.")]
    Missing(String),
    #[error("the status of pod readiness gate {gate:?} is not \"True\", but {status}")]
    NotTrue { gate: String, status: String },
}

/// Whether the pod's readiness gates all hold (each named condition present and True); else
/// why the first does not.
fn readiness_gates(pod: &Pod, old: &Value) -> Result<(), ReadinessGateError> {
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .into_iter()
        .flatten();
    for g in gates {
        let t = g.condition_type.as_str();
        let found = old["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t));
        match found {
            None => {
                return Err(ReadinessGateError::Missing(t.to_string()));
            }
            Some(c) if c["status"] != "True" => {
                return Err(ReadinessGateError::NotTrue {
                    gate: t.to_string(),
                    status: c["status"].as_str().unwrap_or_default().to_string(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn succeeded(c: &ContainerView) -> bool {
    matches!(&c.state, ContainerState::Terminated(t) if t.exit_code == 0)
}

/// A container view as the plan sees it ([`crate::pod::plan`]).
fn observed(c: &ContainerView) -> Observed {
    let state = match &c.state {
        ContainerState::Running { .. } => State::Running { started: c.started },
        ContainerState::Terminated(t) => State::Exited {
            exit_code: t.exit_code,
        },
        _ if c.last.is_some() => State::Restarting,
        _ => State::Waiting,
    };
    Observed {
        name: c.name.clone(),
        sidecar: c.sidecar,
        state,
        ..Default::default()
    }
}

fn observed_all(cs: &[ContainerView]) -> Vec<Observed> {
    cs.iter().map(observed).collect()
}

/// Whether the pod is initialized: every init container succeeded and every sidecar has
/// started, or an app container has run already (upstream's
/// `HasAnyRegularContainerStarted`), whatever its sidecars do now.
pub fn initialized(init: &[ContainerView], containers: &[ContainerView]) -> bool {
    plan::initialized(&observed_all(init), &observed_all(containers))
}

/// The pod phase, as upstream's `getPhase` ([`plan::phase`]).
pub fn phase(pod: &Pod, init: &[ContainerView], containers: &[ContainerView]) -> &'static str {
    let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
    let (init, containers) = (observed_all(init), observed_all(containers));
    plan::phase(RestartPolicy::parse(policy), &init, &containers).as_str()
}

fn condition(
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<&str>,
    now: &str,
    old: &Value,
) -> Value {
    let status = if ok { "True" } else { "False" };
    // Keep the transition time while the status stays the same.
    let prev = old["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_));
    let transition = match prev {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let mut c = json!({"type": type_, "status": status, "lastProbeTime": null,
                       "lastTransitionTime": transition});
    if let Some(r) = reason.filter(|_| !ok) {
        c["reason"] = json!(r);
    }
    if let Some(m) = message.filter(|_| !ok) {
        c["message"] = json!(m);
    }
    c
}

/// The `status` to report.
pub fn pod_status(v: &PodView<'_>) -> Value {
    let old = serde_json::to_value(&v.pod.status).unwrap_or(Value::Null);
    let phase = v
        .terminal
        .unwrap_or_else(|| phase(v.pod, v.init, v.containers));
    let init_ok = initialized(v.init, v.containers);
    let completed = phase == "Succeeded";
    // Upstream: "containers with incomplete status: [a b]".
    let incomplete: Vec<&str> = v
        .init
        .iter()
        .filter(|c| if c.sidecar { !c.started } else { !succeeded(c) })
        .map(|c| c.name.as_str())
        .collect();
    let incomplete_msg = format!(
        "containers with incomplete status: [{}]",
        incomplete.join(" ")
    );
    // Sidecars count for readiness (first, as upstream lists them).
    let counted = || v.init.iter().filter(|c| c.sidecar).chain(v.containers);
    let all_ready = !v.containers.is_empty() && counted().all(|c| c.ready);
    // Upstream: "containers with unready status: [a b]".
    let unready: Vec<&str> = counted()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let unready_msg = format!("containers with unready status: [{}]", unready.join(" "));
    let unready_msg = (!unready.is_empty()).then_some(unready_msg.as_str());
    let mut conditions = vec![
        condition(
            "PodReadyToStartContainers",
            v.sandbox_ready,
            None,
            None,
            v.now,
            &old,
        ),
        condition(
            "Initialized",
            init_ok,
            Some("ContainersNotInitialized"),
            Some(&incomplete_msg),
            v.now,
            &old,
        ),
        condition(
            "ContainersReady",
            all_ready,
            Some("ContainersNotReady"),
            unready_msg,
            v.now,
            &old,
        ),
    ];
    // Ready also needs the readiness gates (upstream: ReadinessGatesNotReady).
    let gates = readiness_gates(v.pod, &old).map_err(|e| e.to_string());
    conditions.push(match (&gates, all_ready) {
        (Err(m), true) => condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(m),
            v.now,
            &old,
        ),
        _ => condition(
            "Ready",
            all_ready,
            Some("ContainersNotReady"),
            unready_msg,
            v.now,
            &old,
        ),
    });
    if completed {
        // Upstream: a Succeeded pod is Initialized, and neither Ready nor ContainersReady,
        // for the reason PodCompleted (without a list of containers).
        for c in &mut conditions[1..] {
            c["reason"] = json!("PodCompleted");
            if let Some(o) = c.as_object_mut() {
                o.remove("message");
            }
        }
    }
    if let Some(cs) = old["conditions"].as_array() {
        let others = cs.iter().filter(|c| {
            let t = c["type"].as_str().unwrap_or_default();
            let replaced = v.disrupted && t == "DisruptionTarget";
            !KUBELET_CONDITIONS.contains(&t) && !replaced
        });
        for c in others.rev() {
            conditions.insert(0, c.clone());
        }
    }
    if v.disrupted {
        let mut c = condition("DisruptionTarget", true, None, None, v.now, &old);
        c["reason"] = json!("TerminationByKubelet");
        c["message"] = json!(v.rejected.map(|r| r.1).unwrap_or_default());
        conditions.push(c);
    }
    let waiting = default_waiting_reason(v.pod);
    let status_of = |c: &ContainerView| container_status_waiting(c, waiting);
    let mut s = json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": v.host_ip,
        "hostIPs": [{"ip": v.host_ip}],
        "startTime": v.start_time,
        "containerStatuses": v.containers.iter().map(status_of).collect::<Vec<_>>(),
    });
    if !v.init.is_empty() {
        // An init container that exited 0 is ready (upstream's prober manager says so).
        let init = v.init.iter().map(|c| {
            let mut st = status_of(c);
            if !c.sidecar {
                st["ready"] = json!(succeeded(c));
            }
            st
        });
        s["initContainerStatuses"] = json!(init.collect::<Vec<_>>());
    }
    if let Some(ip) = &v.pod_ip {
        s["podIP"] = json!(ip);
        s["podIPs"] = json!([{"ip": ip}]);
    }
    if let Some(q) = &old["qosClass"].as_str() {
        s["qosClass"] = json!(q);
    }
    if let Some((reason, message)) = v.rejected {
        s["reason"] = json!(reason);
        s["message"] = json!(message);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A running pod's view with a ready sandbox on node 192.168.1.2, started at `t0`, seen
    /// at `t1`; tests override what they vary.
    fn view<'a>(
        pod: &'a Pod,
        init: &'a [ContainerView],
        containers: &'a [ContainerView],
    ) -> PodView<'a> {
        PodView {
            pod,
            init,
            containers,
            sandbox_ready: true,
            pod_ip: None,
            host_ip: "192.168.1.2".into(),
            start_time: "t0",
            terminal: None,
            rejected: None,
            disrupted: false,
            now: "t1",
        }
    }

    /// The pod condition of type `t` in status `s` (`Null` when absent).
    fn condition_of(s: &Value, t: &str) -> Value {
        s["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == t)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn pod(policy: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"restartPolicy": policy, "containers": []},
            "status": {"qosClass": "BestEffort", "conditions": [
                {"type": "PodScheduled", "status": "True"}]}}))
        .unwrap()
    }

    fn running() -> ContainerView {
        ContainerView {
            name: "c".into(),
            state: ContainerState::Running {
                started_at: "t".into(),
            },
            ready: true,
            started: true,
            ..Default::default()
        }
    }

    fn exited(code: i32) -> ContainerView {
        ContainerView {
            name: "c".into(),
            state: ContainerState::Terminated(Terminated {
                exit_code: code,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn backing_off() -> ContainerView {
        ContainerView {
            state: ContainerState::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: None,
            },
            last: Some(Terminated::default()),
            ..Default::default()
        }
    }

    /// A running sidecar, started or not.
    fn sidecar(started: bool) -> ContainerView {
        ContainerView {
            started,
            ready: started,
            ..running().into_sidecar()
        }
    }

    impl ContainerView {
        fn into_sidecar(self) -> Self {
            Self {
                sidecar: true,
                ..self
            }
        }
    }

    #[test]
    fn sidecars_initialize_the_pod_once_started() {
        assert!(!initialized(&[sidecar(false)], &[]));
        assert!(initialized(&[sidecar(true), exited(0)], &[]));
        assert!(!initialized(&[sidecar(true), exited(1)], &[]));
        // Restarting after the app containers ran: still initialized.
        assert!(initialized(&[backing_off().into_sidecar()], &[running()]));
    }

    #[test]
    fn unknown_times_are_left_out() {
        let t = Terminated {
            exit_code: 137,
            reason: "Error".into(),
            finished_at: "2026-11-22T10:00:00Z".into(),
            ..Default::default()
        };
        let v = terminated_json(&t);
        assert!(v.get("startedAt").is_none(), "{v}");
        assert_eq!(v["finishedAt"], "2026-11-22T10:00:00Z");
        let never = terminated_json(&Terminated::default());
        assert!(never.get("finishedAt").is_none(), "{never}");
    }

    #[test]
    fn phases_as_upstream() {
        let waiting = ContainerView::default();
        let cases: Vec<(&str, Vec<ContainerView>, Vec<ContainerView>, &str)> = vec![
            ("Always", vec![], vec![running()], "Running"),
            ("Always", vec![], vec![waiting.clone()], "Pending"),
            ("Always", vec![exited(1)], vec![waiting.clone()], "Pending"),
            ("Never", vec![exited(1)], vec![waiting.clone()], "Failed"),
            ("Always", vec![exited(0)], vec![running()], "Running"),
            ("Never", vec![], vec![exited(0)], "Succeeded"),
            ("Never", vec![], vec![exited(0), exited(2)], "Failed"),
            ("OnFailure", vec![], vec![exited(0)], "Succeeded"),
            ("OnFailure", vec![], vec![backing_off()], "Running"),
            ("Always", vec![], vec![exited(0)], "Running"),
            ("Always", vec![], vec![backing_off()], "Running"),
            // Sidecars: the pod is initialized once they have started; a running one keeps
            // it Running, a stopped one does not count; one that failed never fails it.
            (
                "Never",
                vec![sidecar(false)],
                vec![waiting.clone()],
                "Pending",
            ),
            (
                "Never",
                vec![sidecar(true)],
                vec![waiting.clone()],
                "Pending",
            ),
            ("Never", vec![sidecar(true)], vec![running()], "Running"),
            ("Never", vec![sidecar(true)], vec![exited(0)], "Running"),
            (
                "Never",
                vec![exited(1).into_sidecar()],
                vec![exited(0)],
                "Succeeded",
            ),
            (
                "Never",
                vec![exited(1).into_sidecar()],
                vec![waiting.clone()],
                "Pending",
            ),
            (
                "Never",
                vec![backing_off().into_sidecar()],
                vec![running()],
                "Running",
            ),
        ];
        for (i, (policy, init, cs, want)) in cases.into_iter().enumerate() {
            assert_eq!(phase(&pod(policy), &init, &cs), want, "case {i}");
        }
    }

    #[test]
    fn status_has_conditions_ips_and_keeps_scheduled_and_qos() {
        let p = pod("Always");
        let cs = [running()];
        let s = pod_status(&PodView {
            pod_ip: Some("10.42.0.7".into()),
            ..view(&p, &[], &cs)
        });
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIP"], "10.42.0.7");
        assert_eq!(s["podIPs"], json!([{"ip": "10.42.0.7"}]));
        assert_eq!(s["qosClass"], "BestEffort");
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "PodScheduled",
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready"
            ]
        );
        assert_eq!(s["conditions"][4]["status"], "True");
        assert!(s["conditions"][4].get("message").is_none());
        let mut not_ready = running();
        not_ready.ready = false;
        not_ready.name = "web".into();
        let s2 = pod_status(&view(&p, &[], &[not_ready, running()]));
        for i in [3, 4] {
            assert_eq!(s2["conditions"][i]["status"], "False");
            assert_eq!(s2["conditions"][i]["reason"], "ContainersNotReady");
            assert_eq!(
                s2["conditions"][i]["message"],
                "containers with unready status: [web]"
            );
        }
        assert_eq!(
            s["containerStatuses"][0]["state"]["running"]["startedAt"],
            "t"
        );
    }

    #[test]
    fn readiness_gates_kept_conditions_and_disruption() {
        let with = |conditions: Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"},
                "spec": {"containers": [], "readinessGates": [{"conditionType": "example.com/lb"}]},
                "status": {"conditions": conditions}}))
            .unwrap()
        };
        let cs = [running()];
        let status = |p: &Pod, rejected: Option<(&str, &str)>, disrupted: bool| {
            pod_status(&PodView {
                terminal: rejected.map(|_| "Failed"),
                rejected,
                disrupted,
                ..view(p, &[], &cs)
            })
        };
        let cond = condition_of;
        // The gate's condition is missing: not Ready, with upstream's reason and message.
        let s = status(&with(json!([])), None, false);
        let ready = cond(&s, "Ready");
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "ReadinessGatesNotReady");
        assert_eq!(
            ready["message"],
            "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
        );
        assert_eq!(cond(&s, "ContainersReady")["status"], "True");
        // False, then True: the controller's condition is kept either way.
        let gate = |st: &str| json!([{"type": "example.com/lb", "status": st}]);
        let s = status(&with(gate("False")), None, false);
        assert_eq!(
            cond(&s, "Ready")["message"],
            "the status of pod readiness gate \"example.com/lb\" is not \"True\", but False"
        );
        assert_eq!(cond(&s, "example.com/lb")["status"], "False");
        let s = status(&with(gate("True")), None, false);
        assert_eq!(cond(&s, "Ready")["status"], "True");
        assert_eq!(cond(&s, "example.com/lb")["status"], "True");
        // An eviction: reason, message, and DisruptionTarget (replacing an older one).
        let old = json!([{"type": "DisruptionTarget", "status": "False"}]);
        let s = status(&with(old), Some(("Evicted", "low on memory")), true);
        assert_eq!(
            (s["phase"].as_str(), s["reason"].as_str()),
            (Some("Failed"), Some("Evicted"))
        );
        let d = cond(&s, "DisruptionTarget");
        assert_eq!(d["status"], "True");
        assert_eq!(d["reason"], "TerminationByKubelet");
        assert_eq!(d["message"], "low on memory");
        assert_eq!(
            s["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["type"] == "DisruptionTarget")
                .count(),
            1
        );
    }

    /// Issue #29: upstream's InitContainer conformance tests read these.
    #[test]
    fn init_containers_as_upstream_reports_them() {
        let with_init = |policy: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"},
                "spec": {"restartPolicy": policy,
                         "initContainers": [{"name": "init1"}, {"name": "init2"}],
                         "containers": [{"name": "run1"}]}}))
            .unwrap()
        };
        let named = |name: &str, v: ContainerView| ContainerView {
            name: name.into(),
            ..v
        };
        let not_created = |name: &str| named(name, ContainerView::default());
        let status =
            |p: &Pod, init: &[ContainerView], cs: &[ContainerView]| pod_status(&view(p, init, cs));
        let cond = condition_of;
        // RestartAlways, init1 failed and backs off: everything else waits PodInitializing.
        let p = with_init("Always");
        let init = [named("init1", backing_off()), not_created("init2")];
        let cs = [not_created("run1")];
        let s = status(&p, &init, &cs);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "PodInitializing"
        );
        assert_eq!(
            s["initContainerStatuses"][1]["state"]["waiting"]["reason"],
            "PodInitializing"
        );
        assert_eq!(s["initContainerStatuses"][0]["ready"], false);
        let c = cond(&s, "Initialized");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "ContainersNotInitialized");
        assert_eq!(
            c["message"],
            "containers with incomplete status: [init1 init2]"
        );
        assert_eq!(cond(&s, "Ready")["reason"], "ContainersNotReady");
        assert_eq!(
            cond(&s, "Ready")["message"],
            "containers with unready status: [run1]"
        );
        // RestartNever, init2 failed: Failed, only init2 incomplete, init1 ready.
        let p = with_init("Never");
        let init = [named("init1", exited(0)), named("init2", exited(1))];
        let s = status(&p, &init, &cs);
        assert_eq!(s["phase"], "Failed");
        assert_eq!(
            cond(&s, "Initialized")["message"],
            "containers with incomplete status: [init2]"
        );
        assert_eq!(s["initContainerStatuses"][0]["ready"], true);
        assert_eq!(s["initContainerStatuses"][1]["ready"], false);
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "PodInitializing"
        );
        // Succeeded: Initialized True, the others PodCompleted, completed inits ready.
        let init = [named("init1", exited(0)), named("init2", exited(0))];
        let s = status(&p, &init, &[named("run1", exited(0))]);
        assert_eq!(s["phase"], "Succeeded");
        let c = cond(&s, "Initialized");
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&json!("True"), &json!("PodCompleted"))
        );
        assert!(c.get("message").is_none());
        for t in ["ContainersReady", "Ready"] {
            let c = cond(&s, t);
            assert_eq!(
                (&c["status"], &c["reason"]),
                (&json!("False"), &json!("PodCompleted"))
            );
            assert!(c.get("message").is_none(), "{c}");
        }
        for i in 0..2 {
            assert_eq!(s["initContainerStatuses"][i]["ready"], true);
        }
        // Without init containers a container not created yet is ContainerCreating.
        let s = status(&pod("Always"), &[], &[not_created("c")]);
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
    }
}

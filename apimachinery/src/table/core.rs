//! Printers of the core (`""`) group.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::format::{
    age, arr_at, deleting, format_labels, get, int_at, layout_containers, len_at, name, opt_int,
    opt_str, or_none, quantity, since, str_at, time_at,
};
use super::{Column, Printer};

// ---------------------------------------------------------------------------
// Pods

pub(crate) struct Pods;

impl Printer for Pods {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Ready",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            Column::s(
                "Status",
                "The aggregate status of the containers in this pod.",
            ),
            Column::s(
                "Restarts",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            Column::age(),
            Column::s(
                "IP",
                "IP address allocated to the pod. Routable at least within the cluster.",
            )
            .wide(),
            Column::s("Node", "The node the pod is bound to.").wide(),
            Column::s(
                "Nominated Node",
                "The node the pod is nominated to run on after preemption.",
            )
            .wide(),
            Column::s(
                "Readiness Gates",
                "Readiness gates of the pod: true conditions / gates.",
            )
            .wide(),
        ]
    }

    fn cells(&self, pod: &Value, now: Timestamp) -> Vec<Value> {
        let s = pod_summary(pod);
        let restarts = match s.last_restart {
            Some(t) if s.restarts != 0 => format!("{} ({} ago)", s.restarts, since(Some(t), now)),
            _ => s.restarts.to_string(),
        };

        // Upstream reads status.podIPs; a v1 object may only carry podIP,
        // which the v1 -> internal conversion puts first.
        let ip = match opt_str(pod, "/status/podIP") {
            Some(ip) if !ip.is_empty() => ip,
            _ => str_at(pod, "/status/podIPs/0/ip"),
        };
        let gates = arr_at(pod, "/spec/readinessGates");
        let readiness_gates = if gates.is_empty() {
            "<none>".to_owned()
        } else {
            let conds = arr_at(pod, "/status/conditions");
            let trues = gates
                .iter()
                .filter(|g| {
                    let t = str_at(g, "/conditionType");
                    conds
                        .iter()
                        .find(|c| str_at(c, "/type") == t)
                        .is_some_and(|c| str_at(c, "/status") == "True")
                })
                .count();
            format!("{trues}/{}", gates.len())
        };
        vec![
            name(pod).into(),
            format!("{}/{}", s.ready, s.total).into(),
            s.reason.into(),
            restarts.into(),
            age(pod, now),
            or_none(ip).into(),
            or_none(str_at(pod, "/spec/nodeName")).into(),
            or_none(str_at(pod, "/status/nominatedNodeName")).into(),
            readiness_gates.into(),
        ]
    }

    fn row_conditions(&self, pod: &Value) -> Option<Value> {
        let (reason, message) = match str_at(pod, "/status/phase") {
            "Succeeded" => ("Succeeded", "The pod has completed successfully."),
            "Failed" => ("Failed", "The pod failed."),
            _ => return None,
        };
        Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
    }
}

struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<Timestamp>,
}

fn later(acc: &mut Option<Timestamp>, t: Option<Timestamp>) {
    if let Some(t) = t
        && acc.is_none_or(|a| a < t)
    {
        *acc = Some(t);
    }
}

/// The READY, STATUS and RESTARTS logic of upstream `printPod`.
fn pod_summary(pod: &Value) -> PodSummary {
    let init_specs = arr_at(pod, "/spec/initContainers");
    let restartable = |cname: &str| {
        init_specs
            .iter()
            .find(|c| str_at(c, "/name") == cname)
            .is_some_and(|c| str_at(c, "/restartPolicy") == "Always")
    };
    let mut total = arr_at(pod, "/spec/containers").len();
    total += init_specs
        .iter()
        .filter(|c| str_at(c, "/restartPolicy") == "Always")
        .count();
    let mut ready = 0;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart = None;
    let mut sidecar_last_restart = None;

    let phase = str_at(pod, "/status/phase");
    let mut reason = match str_at(pod, "/status/reason") {
        "" => phase.to_owned(),
        r => r.to_owned(),
    };
    let conditions = arr_at(pod, "/status/conditions");
    for c in conditions {
        if str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated" {
            reason = "SchedulingGated".to_owned();
        }
    }

    let mut initializing = false;
    for (i, st) in arr_at(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        let finished = time_at(st, "/lastState/terminated/finishedAt");
        let has_last_terminated = get(st, "/lastState/terminated").is_some();
        restarts += int_at(st, "/restartCount");
        if has_last_terminated {
            later(&mut last_restart, finished);
        }
        let is_sidecar = restartable(str_at(st, "/name"));
        if is_sidecar {
            sidecar_restarts += int_at(st, "/restartCount");
            if has_last_terminated {
                later(&mut sidecar_last_restart, finished);
            }
        }
        let terminated = get(st, "/state/terminated");
        let waiting_reason = str_at(st, "/state/waiting/reason");
        if terminated.is_some_and(|t| int_at(t, "/exitCode") == 0) {
            continue;
        }
        if is_sidecar && get(st, "/started").and_then(Value::as_bool) == Some(true) {
            if get(st, "/ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = match str_at(t, "/reason") {
                "" => match int_at(t, "/signal") {
                    0 => format!("Init:ExitCode:{}", int_at(t, "/exitCode")),
                    sig => format!("Init:Signal:{sig}"),
                },
                r => format!("Init:{r}"),
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions
        .iter()
        .any(|c| str_at(c, "/type") == "Initialized" && str_at(c, "/status") == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut has_running = false;
        for st in arr_at(pod, "/status/containerStatuses").iter().rev() {
            restarts += int_at(st, "/restartCount");
            if get(st, "/lastState/terminated").is_some() {
                later(
                    &mut last_restart,
                    time_at(st, "/lastState/terminated/finishedAt"),
                );
            }
            let waiting_reason = str_at(st, "/state/waiting/reason");
            let terminated = get(st, "/state/terminated");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(t) = terminated {
                reason = match str_at(t, "/reason") {
                    "" => match int_at(t, "/signal") {
                        0 => format!("ExitCode:{}", int_at(t, "/exitCode")),
                        sig => format!("Signal:{sig}"),
                    },
                    r => r.to_owned(),
                };
            } else if get(st, "/ready").and_then(Value::as_bool) == Some(true)
                && get(st, "/state/running").is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| str_at(c, "/type") == "Ready" && str_at(c, "/status") == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_owned();
        }
    }

    if deleting(pod) && str_at(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting(pod) && !matches!(phase, "Failed" | "Succeeded") {
        reason = "Terminating".to_owned();
    }

    PodSummary {
        ready,
        total,
        reason,
        restarts,
        last_restart,
    }
}

// ---------------------------------------------------------------------------
// Pod templates, replication controllers

pub(crate) struct PodTemplates;

impl Printer for PodTemplates {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Containers", "Names of each container in the template."),
            Column::s(
                "Images",
                "Images referenced by each container in the template.",
            ),
            Column::s("Pod Labels", "The labels for the pod template."),
        ]
    }

    fn cells(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        let (names, images) = layout_containers(arr_at(obj, "/template/spec/containers"));
        vec![
            name(obj).into(),
            names,
            images,
            format_labels(get(obj, "/template/metadata/labels")).into(),
        ]
    }
}

pub(crate) struct ReplicationControllers;

impl Printer for ReplicationControllers {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::int("Desired", "Replicas is the number of desired replicas."),
            Column::int(
                "Current",
                "Replicas is the most recently observed number of replicas.",
            ),
            Column::int(
                "Ready",
                "The number of ready replicas for this replication controller.",
            ),
            Column::age(),
            Column::containers(),
            Column::images(),
            Column::s(
                "Selector",
                "Selector is a label query over pods that should match the Replicas count.",
            )
            .wide(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let (names, images) = layout_containers(arr_at(obj, "/spec/template/spec/containers"));
        vec![
            name(obj).into(),
            opt_int(obj, "/spec/replicas").unwrap_or(1).into(),
            int_at(obj, "/status/replicas").into(),
            int_at(obj, "/status/readyReplicas").into(),
            age(obj, now),
            names,
            images,
            format_labels(get(obj, "/spec/selector")).into(),
        ]
    }
}

// ---------------------------------------------------------------------------
// Services, endpoints

pub(crate) struct Services;

/// Unique load-balancer ingress IPs (or hostnames), sorted, comma-joined.
pub(crate) fn load_balancer_ingress(status: &Value) -> String {
    let mut set: Vec<&str> = arr_at(status, "/ingress")
        .iter()
        .filter_map(|i| match (str_at(i, "/ip"), str_at(i, "/hostname")) {
            ("", "") => None,
            ("", h) => Some(h),
            (ip, _) => Some(ip),
        })
        .collect();
    set.sort_unstable();
    set.dedup();
    set.join(",")
}

fn service_external_ip(svc: &Value, type_: &str) -> String {
    let external: Vec<&str> = arr_at(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match type_ {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_owned()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let lb = get(svc, "/status/loadBalancer")
                .map(load_balancer_ingress)
                .unwrap_or_default();
            if !external.is_empty() {
                let mut all: Vec<&str> = Vec::new();
                if !lb.is_empty() {
                    all.extend(lb.split(','));
                }
                all.extend(external);
                return all.join(",");
            }
            if lb.is_empty() {
                "<pending>".to_owned()
            } else {
                lb
            }
        }
        "ExternalName" => str_at(svc, "/spec/externalName").to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

impl Printer for Services {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Type", "type determines how the Service is exposed."),
            Column::s("Cluster-IP", "clusterIP is the IP address of the service."),
            Column::s(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            Column::s(
                "Port(s)",
                "The list of ports that are exposed by this service.",
            ),
            Column::age(),
            Column::s(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector.",
            )
            .wide(),
        ]
    }

    fn cells(&self, svc: &Value, now: Timestamp) -> Vec<Value> {
        // An unset type is defaulted to ClusterIP by the API server.
        let type_ = match str_at(svc, "/spec/type") {
            "" => "ClusterIP",
            t => t,
        };
        let cluster_ip = match str_at(svc, "/spec/clusterIP") {
            "" => str_at(svc, "/spec/clusterIPs/0"),
            ip => ip,
        };
        let ports: Vec<String> = arr_at(svc, "/spec/ports")
            .iter()
            .map(|p| {
                let proto = match str_at(p, "/protocol") {
                    "" => "TCP",
                    p => p,
                };
                match int_at(p, "/nodePort") {
                    np if np > 0 => format!("{}:{np}/{proto}", int_at(p, "/port")),
                    _ => format!("{}/{proto}", int_at(p, "/port")),
                }
            })
            .collect();
        vec![
            name(svc).into(),
            type_.into(),
            or_none(cluster_ip).into(),
            service_external_ip(svc, type_).into(),
            or_none(&ports.join(",")).into(),
            age(svc, now),
            format_labels(get(svc, "/spec/selector")).into(),
        ]
    }
}

pub(crate) struct Endpoints;

/// `host:port` like Go's `net.JoinHostPort`.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn format_endpoints(obj: &Value) -> String {
    let subsets = arr_at(obj, "/subsets");
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addrs = arr_at(ss, "/addresses");
        let ports = arr_at(ss, "/ports");
        if ports.is_empty() {
            count += addrs.len();
            for a in addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(a, "/ip").to_owned());
            }
            continue;
        }
        for p in ports {
            count += addrs.len();
            for a in addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(str_at(a, "/ip"), int_at(p, "/port")));
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count - MAX)
    } else {
        ret
    }
}

impl Printer for Endpoints {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Endpoints",
                "The set of all endpoints is the union of all subsets.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            format_endpoints(obj).into(),
            age(obj, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// Nodes

pub(crate) struct Nodes;

impl Printer for Nodes {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Status", "The status of the node"),
            Column::s("Roles", "The roles of the node"),
            Column::age(),
            Column::s("Version", "Kubelet Version reported by the node."),
            Column::s("Internal-IP", "List of addresses reachable to the node.").wide(),
            Column::s("External-IP", "List of addresses reachable to the node.").wide(),
            Column::s("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).").wide(),
            Column::s("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).").wide(),
            Column::s("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).").wide(),
        ]
    }

    fn cells(&self, node: &Value, now: Timestamp) -> Vec<Value> {
        let mut status: Vec<String> = Vec::new();
        // The last condition of a type wins, as in upstream's map.
        if let Some(c) = arr_at(node, "/status/conditions")
            .iter()
            .rev()
            .find(|c| str_at(c, "/type") == "Ready")
        {
            status.push(
                if str_at(c, "/status") == "True" {
                    "Ready"
                } else {
                    "NotReady"
                }
                .to_owned(),
            );
        }
        if status.is_empty() {
            status.push("Unknown".to_owned());
        }
        if get(node, "/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
            status.push("SchedulingDisabled".to_owned());
        }
        let mut roles: Vec<&str> = Vec::new();
        if let Some(labels) = get(node, "/metadata/labels").and_then(Value::as_object) {
            for (k, v) in labels {
                if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                    if !role.is_empty() {
                        roles.push(role);
                    }
                } else if k == "kubernetes.io/role"
                    && let Some(v) = v.as_str().filter(|v| !v.is_empty())
                {
                    roles.push(v);
                }
            }
        }
        roles.sort_unstable();
        roles.dedup();
        let address = |t: &str| {
            arr_at(node, "/status/addresses")
                .iter()
                .find(|a| str_at(a, "/type") == t)
                .map(|a| str_at(a, "/address").to_owned())
                .unwrap_or_else(|| "<none>".to_owned())
        };
        let info = |k: &str| match str_at(node, &format!("/status/nodeInfo/{k}")) {
            "" => "<unknown>".to_owned(),
            v => v.to_owned(),
        };
        vec![
            name(node).into(),
            status.join(",").into(),
            or_none(&roles.join(",")).into(),
            age(node, now),
            str_at(node, "/status/nodeInfo/kubeletVersion").into(),
            address("InternalIP").into(),
            address("ExternalIP").into(),
            info("osImage").into(),
            info("kernelVersion").into(),
            info("containerRuntimeVersion").into(),
        ]
    }
}

// ---------------------------------------------------------------------------
// Events (core/v1 and events.k8s.io/v1 share the printer)

/// The event printer; `v1` selects the events.k8s.io/v1 field names.
pub(crate) struct Events {
    v1: bool,
}

pub(crate) const CORE_EVENTS: Events = Events { v1: false };
pub(crate) const EVENTS_V1: Events = Events { v1: true };

impl Printer for Events {
    fn columns(&self) -> Vec<Column> {
        let name = Column::name().wide();
        vec![
            Column::s("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
            Column::s("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
            Column::s("Reason", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
            Column::s("Object", "The object that this event is about."),
            Column::s("Subobject", "The path of the field of the involved object the event is about, if any.").wide(),
            Column::s("Source", "The component reporting this event. Should be a short machine understandable string.").wide(),
            Column::s("Message", "A human-readable description of the status of this operation."),
            Column::s("First Seen", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)").wide(),
            Column::s("Count", "The number of times this event has occurred.").wide(),
            name,
        ]
    }

    fn cells(&self, ev: &Value, now: Timestamp) -> Vec<Value> {
        let (first_p, last_p, count_p, regarding, message, component, host, controller) = if self.v1
        {
            (
                "/deprecatedFirstTimestamp",
                "/deprecatedLastTimestamp",
                "/deprecatedCount",
                "/regarding",
                "/note",
                "/deprecatedSource/component",
                "/deprecatedSource/host",
                "/reportingController",
            )
        } else {
            (
                "/firstTimestamp",
                "/lastTimestamp",
                "/count",
                "/involvedObject",
                "/message",
                "/source/component",
                "/source/host",
                "/reportingComponent",
            )
        };
        let first = match time_at(ev, first_p) {
            Some(t) => since(Some(t), now),
            None => since(time_at(ev, "/eventTime"), now),
        };
        let mut last = match time_at(ev, last_p) {
            Some(t) => since(Some(t), now),
            None => first.clone(),
        };
        let mut count = int_at(ev, count_p);
        if get(ev, "/series").is_some() {
            last = since(time_at(ev, "/series/lastObservedTime"), now);
            count = int_at(ev, "/series/count");
        } else if count == 0 {
            count = 1;
        }
        let kind = str_at(ev, &format!("{regarding}/kind")).to_lowercase();
        let target = match str_at(ev, &format!("{regarding}/name")) {
            "" => kind,
            n => format!("{kind}/{n}"),
        };
        let first_non_empty = |a: &str, b: &str| {
            if a.is_empty() {
                b.to_owned()
            } else {
                a.to_owned()
            }
        };
        let comp = first_non_empty(str_at(ev, component), str_at(ev, controller));
        let inst = first_non_empty(str_at(ev, host), str_at(ev, "/reportingInstance"));
        let source = if inst.is_empty() {
            comp
        } else {
            format!("{comp}, {inst}")
        };
        vec![
            last.into(),
            str_at(ev, "/type").into(),
            str_at(ev, "/reason").into(),
            target.into(),
            str_at(ev, &format!("{regarding}/fieldPath")).into(),
            source.into(),
            str_at(ev, message).trim().into(),
            first.into(),
            count.into(),
            name(ev).into(),
        ]
    }
}

// ---------------------------------------------------------------------------
// Namespaces, secrets, service accounts, config maps

pub(crate) struct Namespaces;

impl Printer for Namespaces {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Status", "The status of the namespace"),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, "/status/phase").into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct Secrets;

impl Printer for Secrets {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Type",
                "Used to facilitate programmatic handling of secret data.",
            ),
            Column::s("Data", "Data contains the secret data."),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, "/type").into(),
            len_at(obj, "/data").into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct ServiceAccounts;

impl Printer for ServiceAccounts {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Secrets",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            len_at(obj, "/secrets").into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct ConfigMaps;

impl Printer for ConfigMaps {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Data", "Data contains the configuration data."),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            (len_at(obj, "/data") + len_at(obj, "/binaryData")).into(),
            age(obj, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// Persistent volumes and claims

/// Upstream `GetAccessModesAsString`.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|x| x.as_str() == Some(m));
    let mut out = Vec::new();
    for (mode, short) in [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ] {
        if has(mode) {
            out.push(short);
        }
    }
    out.join(",")
}

const BETA_STORAGE_CLASS: &str = "/metadata/annotations/volume.beta.kubernetes.io~1storage-class";

pub(crate) struct PersistentVolumes;

impl Printer for PersistentVolumes {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Capacity", "capacity is the description of the persistent volume's resources and capacity."),
            Column::s("Access Modes", "accessModes contains all ways the volume can be mounted."),
            Column::s("Reclaim Policy", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
            Column::s("Status", "phase indicates if a volume is available, bound to a claim, or released by a claim."),
            Column::s("Claim", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
            Column::s("StorageClass", "StorageClass of the pv"),
            Column::s("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
            Column::s("Reason", "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."),
            Column::age(),
            Column::s("VolumeMode", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.").wide(),
        ]
    }

    fn cells(&self, pv: &Value, now: Timestamp) -> Vec<Value> {
        let claim = match get(pv, "/spec/claimRef") {
            Some(c) => format!("{}/{}", str_at(c, "/namespace"), str_at(c, "/name")),
            None => String::new(),
        };
        let phase = if deleting(pv) {
            "Terminating"
        } else {
            str_at(pv, "/status/phase")
        };
        let class =
            opt_str(pv, BETA_STORAGE_CLASS).unwrap_or_else(|| str_at(pv, "/spec/storageClassName"));
        vec![
            name(pv).into(),
            quantity(get(pv, "/spec/capacity/storage")).into(),
            access_modes(arr_at(pv, "/spec/accessModes")).into(),
            str_at(pv, "/spec/persistentVolumeReclaimPolicy").into(),
            phase.into(),
            claim.into(),
            class.into(),
            opt_str(pv, "/spec/volumeAttributesClassName")
                .unwrap_or("<unset>")
                .into(),
            str_at(pv, "/status/reason").into(),
            age(pv, now),
            opt_str(pv, "/spec/volumeMode").unwrap_or("<unset>").into(),
        ]
    }
}

pub(crate) struct PersistentVolumeClaims;

impl Printer for PersistentVolumeClaims {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Status",
                "phase represents the current phase of PersistentVolumeClaim.",
            ),
            Column::s(
                "Volume",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            Column::s(
                "Capacity",
                "capacity represents the actual resources of the underlying volume.",
            ),
            Column::s(
                "Access Modes",
                "accessModes contains the actual access modes the volume backing the PVC has.",
            ),
            Column::s("StorageClass", "StorageClass of the pvc"),
            Column::s("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
            Column::age(),
            Column::s(
                "VolumeMode",
                "volumeMode defines what type of volume is required by the claim.",
            )
            .wide(),
        ]
    }

    fn cells(&self, pvc: &Value, now: Timestamp) -> Vec<Value> {
        let phase = if deleting(pvc) {
            "Terminating"
        } else {
            str_at(pvc, "/status/phase")
        };
        let volume = str_at(pvc, "/spec/volumeName");
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            (
                quantity(get(pvc, "/status/capacity/storage")),
                access_modes(arr_at(pvc, "/status/accessModes")),
            )
        };
        let class = opt_str(pvc, BETA_STORAGE_CLASS)
            .unwrap_or_else(|| str_at(pvc, "/spec/storageClassName"));
        vec![
            name(pvc).into(),
            phase.into(),
            volume.into(),
            capacity.into(),
            modes.into(),
            class.into(),
            opt_str(pvc, "/spec/volumeAttributesClassName")
                .unwrap_or("<unset>")
                .into(),
            age(pvc, now),
            opt_str(pvc, "/spec/volumeMode").unwrap_or("<unset>").into(),
        ]
    }
}

// ---------------------------------------------------------------------------
// Component statuses, resource quotas

pub(crate) struct ComponentStatuses;

impl Printer for ComponentStatuses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Status", "Status of the component conditions"),
            Column::s("Message", "Message of the component conditions"),
            Column::s("Error", "Error of the component conditions"),
        ]
    }

    fn cells(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        let (mut status, mut message, mut error) = ("Unknown", "", "");
        if let Some(c) = arr_at(obj, "/conditions")
            .iter()
            .find(|c| str_at(c, "/type") == "Healthy")
        {
            status = if str_at(c, "/status") == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            };
            message = str_at(c, "/message");
            error = str_at(c, "/error");
        }
        vec![
            name(obj).into(),
            status.into(),
            message.into(),
            error.into(),
        ]
    }
}

pub(crate) struct ResourceQuotas;

impl Printer for ResourceQuotas {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Request",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            Column::s(
                "Limit",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let mut resources: Vec<&String> = get(obj, "/status/hard")
            .and_then(Value::as_object)
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        resources.sort();
        let mut requests = Vec::new();
        let mut limits = Vec::new();
        for r in resources {
            let used = quantity(get(obj, "/status/used").and_then(|u| u.get(r.as_str())));
            let hard = quantity(get(obj, "/status/hard").and_then(|h| h.get(r.as_str())));
            let text = format!("{r}: {used}/{hard}");
            let mut pieces = r.split('.');
            if pieces.next() == Some("limits") && pieces.next().is_some() {
                limits.push(text);
            } else {
                requests.push(text);
            }
        }
        vec![
            name(obj).into(),
            requests.join(", ").into(),
            limits.join(", ").into(),
            age(obj, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;

    fn pod(spec: Value, status: Value) -> Value {
        json!({
            "metadata": {"name": "web-0", "creationTimestamp": ago(3600)},
            "spec": spec,
            "status": status,
        })
    }

    fn one_container() -> Value {
        json!({"containers": [{"name": "app", "image": "nginx"}], "nodeName": "node-1"})
    }

    #[test]
    fn pod_columns() {
        assert_eq!(
            names(&Pods),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let wide: Vec<i32> = Pods.columns().iter().map(|c| c.priority).collect();
        assert_eq!(wide, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn pod_states() {
        let cases: Vec<(&str, Value, [&str; 4])> = vec![
            (
                "pending, unscheduled",
                pod(
                    json!({"containers": [{"name": "app"}]}),
                    json!({"phase": "Pending"}),
                ),
                ["0/1", "Pending", "0", "<none>"],
            ),
            (
                "container creating",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "containerStatuses": [
                        {"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
                    ]}),
                ),
                ["0/1", "ContainerCreating", "0", "<none>"],
            ),
            (
                "running",
                pod(
                    one_container(),
                    json!({"phase": "Running", "podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": [
                        {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": ago(3000)}}}
                    ]}),
                ),
                ["1/1", "Running", "0", "10.0.0.5"],
            ),
            (
                "crash loop with restarts",
                pod(
                    json!({"containers": [{"name": "a"}, {"name": "b"}]}),
                    json!({"phase": "Running", "podIPs": [{"ip": "fd00::5"}], "containerStatuses": [
                        {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                        {"name": "b", "ready": false, "restartCount": 3,
                         "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                         "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(300)}}}
                    ]}),
                ),
                ["1/2", "CrashLoopBackOff", "3 (5m ago)", "fd00::5"],
            ),
            (
                "init waiting",
                pod(
                    json!({"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Pending",
                        "initContainerStatuses": [{"name": "init", "ready": false, "restartCount": 0, "state": {"running": {}}}],
                        "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]
                    }),
                ),
                ["0/1", "Init:0/1", "0", "<none>"],
            ),
            (
                "second init container",
                pod(
                    json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Pending",
                        "initContainerStatuses": [
                            {"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                            {"name": "i2", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
                        ]
                    }),
                ),
                ["0/1", "Init:1/2", "0", "<none>"],
            ),
            (
                "init crash loop",
                pod(
                    json!({"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Pending",
                        "initContainerStatuses": [{"name": "init", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(65)}}}]
                    }),
                ),
                ["0/1", "Init:CrashLoopBackOff", "4 (65s ago)", "<none>"],
            ),
            (
                "init failed without reason",
                pod(
                    json!({"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Failed",
                        "initContainerStatuses": [{"name": "init", "restartCount": 0, "state": {"terminated": {"exitCode": 2}}}]
                    }),
                ),
                ["0/1", "Init:ExitCode:2", "0", "<none>"],
            ),
            (
                "init killed by signal",
                pod(
                    json!({"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Pending",
                        "initContainerStatuses": [{"name": "init", "restartCount": 0, "state": {"terminated": {"exitCode": 137, "signal": 9}}}]
                    }),
                ),
                ["0/1", "Init:Signal:9", "0", "<none>"],
            ),
            (
                "sidecar running counts as ready",
                pod(
                    json!({"initContainers": [{"name": "proxy", "restartPolicy": "Always"}], "containers": [{"name": "app"}]}),
                    json!({"phase": "Running",
                        "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                        "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 1, "state": {"running": {}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(7200)}}}],
                        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]
                    }),
                ),
                ["2/2", "Running", "1 (120m ago)", "<none>"],
            ),
            (
                "completed",
                pod(
                    one_container(),
                    json!({"phase": "Succeeded", "containerStatuses": [
                        {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                    ]}),
                ),
                ["0/1", "Completed", "0", "<none>"],
            ),
            (
                "completed with a running container, not ready",
                pod(
                    json!({"containers": [{"name": "a"}, {"name": "b"}]}),
                    json!({"phase": "Running", "containerStatuses": [
                        {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                        {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                    ]}),
                ),
                ["1/2", "NotReady", "0", "<none>"],
            ),
            (
                "error exit without reason",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "containerStatuses": [
                        {"name": "app", "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}
                    ]}),
                ),
                ["0/1", "ExitCode:3", "0", "<none>"],
            ),
            (
                "evicted",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "reason": "Evicted"}),
                ),
                ["0/1", "Evicted", "0", "<none>"],
            ),
            (
                "scheduling gated",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                ),
                ["0/1", "SchedulingGated", "0", "<none>"],
            ),
        ];
        for (what, obj, want) in cases {
            let r = row(&Pods, &obj);
            assert_eq!([r[1].as_str(), &r[2], &r[3], &r[5]], want, "{what}");
            assert_eq!(r[0], "web-0");
            assert_eq!(r[4], "60m", "{what}");
        }
    }

    #[test]
    fn pod_terminating_and_node_lost() {
        let mut p = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}
            ]}),
        );
        p["metadata"]["deletionTimestamp"] = json!(ago(10));
        assert_eq!(row(&Pods, &p)[2], "Terminating");
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(row(&Pods, &p)[2], "Unknown");
        // A finished pod being deleted keeps its phase-based status.
        let mut done = pod(
            one_container(),
            json!({"phase": "Succeeded", "containerStatuses": [
                {"name": "app", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
            ]}),
        );
        done["metadata"]["deletionTimestamp"] = json!(ago(10));
        assert_eq!(row(&Pods, &done)[2], "Completed");
        assert_eq!(
            Pods.row_conditions(&done).unwrap()[0]["reason"],
            "Succeeded"
        );
        assert!(Pods.row_conditions(&p).is_none());
    }

    #[test]
    fn pod_wide_cells() {
        let p = json!({
            "metadata": {"name": "p", "creationTimestamp": ago(59)},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}], "readinessGates": [{"conditionType": "x/one"}, {"conditionType": "x/two"}]},
            "status": {"phase": "Running", "podIP": "10.1.2.3", "nominatedNodeName": "n2",
                "conditions": [{"type": "x/one", "status": "True"}, {"type": "x/two", "status": "False"}]}
        });
        let r = row(&Pods, &p);
        assert_eq!(r[4], "59s");
        assert_eq!(&r[5..], ["10.1.2.3", "n1", "n2", "1/2"]);
        // Restarts is a string cell ("0"), as upstream sends it.
        assert_eq!(Pods.cells(&p, now())[3], json!("0"));
    }

    #[test]
    fn nodes() {
        assert_eq!(
            names(&Nodes),
            [
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        let node = |ready: Option<&str>, unschedulable: bool, labels: Value| {
            let mut n = json!({
                "metadata": {"name": "n1", "creationTimestamp": ago(2 * 86400 + 4 * 3600), "labels": labels},
                "spec": {"unschedulable": unschedulable},
                "status": {
                    "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "192.168.1.10"}],
                    "nodeInfo": {"kubeletVersion": "v1.33.1", "osImage": "Debian GNU/Linux 12 (bookworm)", "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0"}
                }
            });
            if let Some(s) = ready {
                n["status"]["conditions"] = json!([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": s}]);
            }
            n
        };
        let r = row(
            &Nodes,
            &node(
                Some("True"),
                false,
                json!({"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": ""}),
            ),
        );
        assert_eq!(
            r,
            [
                "n1",
                "Ready",
                "control-plane,master",
                "2d4h",
                "v1.33.1",
                "192.168.1.10",
                "<none>",
                "Debian GNU/Linux 12 (bookworm)",
                "6.1.0",
                "containerd://1.7.0"
            ]
        );
        let r = row(
            &Nodes,
            &node(
                Some("False"),
                false,
                json!({"kubernetes.io/role": "worker"}),
            ),
        );
        assert_eq!(r[1..3], ["NotReady", "worker"]);
        let r = row(&Nodes, &node(Some("Unknown"), true, json!({})));
        assert_eq!(r[1..3], ["NotReady,SchedulingDisabled", "<none>"]);
        let r = row(&Nodes, &node(None, true, json!({"kubernetes.io/role": ""})));
        assert_eq!(r[1..3], ["Unknown,SchedulingDisabled", "<none>"]);
        let r = row(&Nodes, &json!({"metadata": {"name": "bare"}}));
        assert_eq!(
            r,
            [
                "bare",
                "Unknown",
                "<none>",
                "<unknown>",
                "",
                "<none>",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]
        );
    }

    #[test]
    fn services() {
        assert_eq!(
            names(&Services),
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector"
            ]
        );
        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(600)},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                "selector": {"app": "web", "tier": "fe"}}
        });
        assert_eq!(
            row(&Services, &svc),
            [
                "web",
                "NodePort",
                "10.96.0.10",
                "<none>",
                "80:30080/TCP,53/UDP",
                "10m",
                "app=web,tier=fe"
            ]
        );
        let lb = json!({
            "metadata": {"name": "lb"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.11", "ports": [{"port": 443, "nodePort": 31443}]},
            "status": {"loadBalancer": {}}
        });
        assert_eq!(row(&Services, &lb)[3], "<pending>");
        let mut lb2 = lb.clone();
        lb2["status"]["loadBalancer"]["ingress"] =
            json!([{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}, {"ip": "203.0.113.9"}]);
        lb2["spec"]["externalIPs"] = json!(["198.51.100.1"]);
        assert_eq!(
            row(&Services, &lb2)[3],
            "203.0.113.9,lb.example.com,198.51.100.1"
        );
        let headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}});
        assert_eq!(
            row(&Services, &headless)[1..5],
            ["ClusterIP", "None", "<none>", "<none>"]
        );
        let ext = json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert_eq!(
            row(&Services, &ext)[1..5],
            ["ExternalName", "<none>", "db.example.com", "<none>"]
        );
    }

    #[test]
    fn endpoints() {
        let ep = json!({
            "metadata": {"name": "web"},
            "subsets": [
                {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
                {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 8080}]}
            ]
        });
        assert_eq!(
            row(&Endpoints, &ep)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
        );
        let few = json!({"metadata": {"name": "x"}, "subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 8080}]}]});
        assert_eq!(row(&Endpoints, &few)[1], "[fd00::1]:8080");
        let headless =
            json!({"metadata": {"name": "x"}, "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]});
        assert_eq!(row(&Endpoints, &headless)[1], "10.0.0.9");
        assert_eq!(
            row(&Endpoints, &json!({"metadata": {"name": "x"}}))[1],
            "<none>"
        );
    }

    #[test]
    fn core_events() {
        assert_eq!(
            names(&CORE_EVENTS),
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        let name_col = &CORE_EVENTS.columns()[9];
        assert_eq!((name_col.format.as_str(), name_col.priority), ("name", 1));
        let ev = json!({
            "metadata": {"name": "web-0.17f", "creationTimestamp": ago(600)},
            "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "type": "Warning", "message": " Back-off restarting failed container \n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 7
        });
        assert_eq!(
            row(&CORE_EVENTS, &ev),
            [
                "30s",
                "Warning",
                "BackOff",
                "pod/web-0",
                "spec.containers{app}",
                "kubelet, node-1",
                "Back-off restarting failed container",
                "10m",
                "7",
                "web-0.17f"
            ]
        );
        let new_style = json!({
            "metadata": {"name": "e2"},
            "involvedObject": {"kind": "Node"},
            "reason": "Starting", "type": "Normal", "message": "hi",
            "eventTime": "2025-06-01T11:55:00.000000Z",
            "reportingComponent": "kube-proxy", "reportingInstance": "n1"
        });
        assert_eq!(
            row(&CORE_EVENTS, &new_style),
            [
                "5m",
                "Normal",
                "Starting",
                "node",
                "",
                "kube-proxy, n1",
                "hi",
                "5m",
                "1",
                "e2"
            ]
        );
        let series = json!({
            "metadata": {"name": "e3"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "eventTime": ago(3600), "series": {"count": 12, "lastObservedTime": ago(125)},
            "source": {"component": "kubelet"}
        });
        let r = row(&CORE_EVENTS, &series);
        assert_eq!(
            [&r[0], &r[5], &r[7], &r[8]],
            ["2m5s", "kubelet", "60m", "12"]
        );
    }

    #[test]
    fn events_v1() {
        let ev = json!({
            "metadata": {"name": "e"},
            "regarding": {"kind": "Deployment", "name": "web"},
            "reason": "ScalingReplicaSet", "type": "Normal", "note": "Scaled up",
            "eventTime": ago(120), "reportingController": "deployment-controller", "reportingInstance": ""
        });
        assert_eq!(
            row(&EVENTS_V1, &ev),
            [
                "2m",
                "Normal",
                "ScalingReplicaSet",
                "deployment/web",
                "",
                "deployment-controller",
                "Scaled up",
                "2m",
                "1",
                "e"
            ]
        );
    }

    #[test]
    fn simple_core_objects() {
        let ns = json!({"metadata": {"name": "kube-system", "creationTimestamp": ago(400 * 86400)}, "status": {"phase": "Active"}});
        assert_eq!(row(&Namespaces, &ns), ["kube-system", "Active", "400d"]);
        let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": ago(765 * 86400)}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(
            ConfigMaps.cells(&cm, now()),
            vec![json!("cfg"), json!(3), json!("2y35d")]
        );
        let sec = json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            row(&Secrets, &sec),
            ["tls", "kubernetes.io/tls", "2", "<unknown>"]
        );
        let sa = json!({"metadata": {"name": "default"}, "secrets": [{"name": "x"}]});
        assert_eq!(row(&ServiceAccounts, &sa)[1], "1");
        let sa0 = json!({"metadata": {"name": "default"}});
        assert_eq!(row(&ServiceAccounts, &sa0)[1], "0");
    }

    #[test]
    fn persistent_volumes() {
        let pv = json!({
            "metadata": {"name": "pv1", "creationTimestamp": ago(3 * 3600 + 5 * 60)},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "default", "name": "data"},
                "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}
        });
        assert_eq!(
            row(&PersistentVolumes, &pv),
            [
                "pv1",
                "10Gi",
                "RWO,RWX",
                "Retain",
                "Bound",
                "default/data",
                "standard",
                "<unset>",
                "",
                "3h5m",
                "Filesystem"
            ]
        );
        let mut gone = pv.clone();
        gone["metadata"]["deletionTimestamp"] = json!(ago(1));
        gone["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "old"});
        let r = row(&PersistentVolumes, &gone);
        assert_eq!([&r[4], &r[6]], ["Terminating", "old"]);
    }

    #[test]
    fn persistent_volume_claims() {
        assert_eq!(
            names(&PersistentVolumeClaims),
            [
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "VolumeAttributesClass",
                "Age",
                "VolumeMode"
            ]
        );
        let bound = json!({
            "metadata": {"name": "data", "creationTimestamp": ago(86400)},
            "spec": {"volumeName": "pv1", "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOncePod"]}
        });
        assert_eq!(
            row(&PersistentVolumeClaims, &bound),
            [
                "data",
                "Bound",
                "pv1",
                "10Gi",
                "RWOP",
                "standard",
                "<unset>",
                "24h",
                "Filesystem"
            ]
        );
        let pending = json!({
            "metadata": {"name": "p"},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}, "volumeAttributesClassName": "gold"},
            "status": {"phase": "Pending"}
        });
        assert_eq!(
            row(&PersistentVolumeClaims, &pending),
            [
                "p",
                "Pending",
                "",
                "",
                "",
                "",
                "gold",
                "<unknown>",
                "<unset>"
            ]
        );
    }

    #[test]
    fn quotas_templates_rcs() {
        let rq = json!({
            "metadata": {"name": "q"},
            "status": {"hard": {"pods": "10", "requests.cpu": "4", "limits.memory": "8Gi", "limits.cpu": "8"},
                       "used": {"pods": "3", "requests.cpu": "500m", "limits.cpu": "1"}}
        });
        assert_eq!(
            row(&ResourceQuotas, &rq)[1..3],
            [
                "pods: 3/10, requests.cpu: 500m/4",
                "limits.cpu: 1/8, limits.memory: 0/8Gi"
            ]
        );
        let pt = json!({"metadata": {"name": "t"}, "template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx:1.27"}]}}});
        assert_eq!(
            row(&PodTemplates, &pt),
            ["t", "a,b", "busybox,nginx:1.27", "app=x"]
        );
        let rc = json!({"metadata": {"name": "rc"}, "spec": {"replicas": 3, "selector": {"app": "x"},
            "template": {"spec": {"containers": [{"name": "a", "image": "i"}]}}}, "status": {"replicas": 3, "readyReplicas": 2}});
        assert_eq!(
            ReplicationControllers.cells(&rc, now())[1..4],
            [json!(3), json!(3), json!(2)]
        );
        assert_eq!(row(&ReplicationControllers, &rc)[5..], ["a", "i", "app=x"]);
        let cs = json!({"metadata": {"name": "etcd-0"}, "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        assert_eq!(
            row(&ComponentStatuses, &cs),
            ["etcd-0", "Healthy", "ok", ""]
        );
    }
}

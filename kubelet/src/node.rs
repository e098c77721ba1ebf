//! Node registration and heartbeats: the Node object (capacity and allocatable, addresses,
//! nodeInfo, labels, conditions, images) and its Lease in `kube-node-lease`, renewed every
//! `lease_interval`. Status is computed as often, and patched only when it changed (heartbeat
//! times aside) or `status_report_interval` passed, as upstream's kubelet does
//! (`nodeStatusUpdateFrequency` 10 s, `nodeStatusReportFrequency` 5 min): each patch is a
//! durable write, and an idle node's writes are what wear an SD card (issue #31).
//!
//! Machine facts are read from /proc, /sys and statvfs here; nothing else in the kubelet
//! reads them.

use std::sync::Arc;

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k1s_api::quantity::{Format, Quantity, ResourceList};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::devices::DeviceManager;
use crate::eviction::pressure::Pressure;
use crate::images::ImageService;

/// The version the kubelet reports (the API server's minor, so kubectl's dispatcher picks a
/// matching client).
pub const KUBELET_VERSION: &str = "v1.33.0-k1s";

/// What the machine has.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub cpus: i64,
    pub memory_bytes: i64,
    pub ephemeral_bytes: i64,
    /// `hugepages-2Mi` → bytes.
    pub hugepages: Vec<(String, i64)>,
    pub hostname: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
    pub arch: String,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Machine {
    /// Reads this machine; `root_dir` is where ephemeral storage lives.
    pub fn detect(root_dir: &std::path::Path) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as i64);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<i64>().ok())
            })
            .map_or(0, |kib| kib * 1024);
        let ephemeral_bytes = nix::sys::statvfs::statvfs(root_dir)
            .map(|s| (s.blocks() as i64).saturating_mul(s.fragment_size() as i64))
            .unwrap_or(0);
        let mut hugepages = Vec::new();
        if let Ok(dir) = std::fs::read_dir("/sys/kernel/mm/hugepages") {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                let Some(kb) = name
                    .strip_prefix("hugepages-")
                    .and_then(|s| s.strip_suffix("kB"))
                    .and_then(|s| s.parse::<i64>().ok())
                else {
                    continue;
                };
                let n: i64 = read_trim(&format!("{}/nr_hugepages", e.path().display()))
                    .parse()
                    .unwrap_or(0);
                let unit = if kb >= 1024 * 1024 {
                    format!("{}Gi", kb / 1024 / 1024)
                } else {
                    format!("{}Mi", kb / 1024)
                };
                hugepages.push((format!("hugepages-{unit}"), n * kb * 1024));
            }
        }
        hugepages.sort();
        let uname = nix::sys::utsname::uname().ok();
        let os_image = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| "Linux".into());
        Self {
            cpus,
            memory_bytes,
            ephemeral_bytes,
            hugepages,
            hostname: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().to_string())
                .unwrap_or_default(),
            machine_id: read_trim("/etc/machine-id"),
            system_uuid: read_trim("/sys/class/dmi/id/product_uuid"),
            boot_id: read_trim("/proc/sys/kernel/random/boot_id"),
            kernel_version: uname
                .as_ref()
                .map(|u| u.release().to_string_lossy().to_string())
                .unwrap_or_default(),
            os_image,
            arch: go_arch(std::env::consts::ARCH).into(),
        }
    }

    /// `status.capacity`.
    pub fn capacity(&self, max_pods: u32) -> ResourceList {
        let mut c = ResourceList::new();
        c.insert("cpu", Quantity::from_value(self.cpus, Format::DecimalSI));
        c.insert(
            "memory",
            Quantity::from_value(self.memory_bytes, Format::BinarySI),
        );
        c.insert(
            "ephemeral-storage",
            Quantity::from_value(self.ephemeral_bytes, Format::BinarySI),
        );
        c.insert(
            "pods",
            Quantity::from_value(max_pods as i64, Format::DecimalSI),
        );
        for (name, bytes) in &self.hugepages {
            c.insert(name.clone(), Quantity::from_value(*bytes, Format::BinarySI));
        }
        c
    }
}

/// Go's GOARCH names, which `kubernetes.io/arch` uses.
fn go_arch(rust: &str) -> &str {
    match rust {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        "riscv64" => "riscv64",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        other => other,
    }
}

/// `status.allocatable`: capacity less kube-reserved, system-reserved and the hard eviction
/// threshold for memory, never below zero.
pub fn allocatable(capacity: &ResourceList, config: &Config) -> ResourceList {
    let mut a = capacity
        .sub(&config.kube_reserved)
        .sub(&config.system_reserved);
    if let Some(m) = a.get("memory").copied() {
        // A percentage threshold is of the node's memory capacity, as upstream's.
        let total = capacity.get("memory").map_or(0, |q| q.value() as i128);
        let reserve = config.eviction_hard.memory_reserve(total);
        let evict = Quantity::from_value(reserve as i64, Format::BinarySI);
        a.insert("memory", m - evict);
    }
    let names: Vec<String> = a.names().map(String::from).collect();
    for n in names {
        if a.get(&n).is_some_and(|q| q.sign() < 0) {
            a.insert(n, Quantity::default());
        }
    }
    a
}

/// The allocatable this node reports in its Node's status, read back from the API: what the
/// downward API gives a container for the limits it does not set (upstream reads its node
/// informer's copy the same way). Empty when the Node cannot be read (the caller then falls
/// back to zero, and a log line says why).
pub async fn reported_allocatable(client: &dyn Client, node_name: &str) -> ResourceList {
    let r = ResourceRef::new("", "v1", "nodes", None);
    match client.get(&r, node_name).await {
        Ok(node) => ResourceList::from_json_lenient(&node["status"]["allocatable"]),
        Err(e) => {
            tracing::warn!(node = node_name, error = %e, "reading the node's allocatable");
            ResourceList::new()
        }
    }
}

fn parse_taint(s: &str) -> Option<Value> {
    let (kv, effect) = s.rsplit_once(':')?;
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let mut t = json!({"key": key, "effect": effect});
    if !value.is_empty() {
        t["value"] = json!(value);
    }
    Some(t)
}

/// The Node object as this kubelet registers it.
pub fn node_object(config: &Config, machine: &Machine) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": config.node_name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": machine.arch,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": machine.arch,
    });
    for (k, v) in &config.labels {
        labels[k] = json!(v);
    }
    let taints: Vec<Value> = config
        .taints
        .iter()
        .filter_map(|t| parse_taint(t))
        .collect();
    // Without a pod CIDR of its own the node gets one from the controller manager's IPAM.
    let mut spec = if config.pod_cidr.is_empty() {
        json!({})
    } else {
        json!({"podCIDR": config.pod_cidr, "podCIDRs": [config.pod_cidr]})
    };
    if !taints.is_empty() {
        spec["taints"] = json!(taints);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": config.node_name,
            "labels": labels,
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": spec,
    })
}

/// The conditions, as upstream words them.
fn conditions(now: &str, ready: bool, pressure: Pressure) -> Value {
    let c = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let condition = |type_: &str, under: bool, yes: (&str, &str), no: (&str, &str)| {
        let (reason, message) = if under { yes } else { no };
        c(type_, if under { "True" } else { "False" }, reason, message)
    };
    json!([
        condition(
            "MemoryPressure",
            pressure.memory,
            (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available"
            ),
            (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available"
            ),
        ),
        condition(
            "DiskPressure",
            pressure.disk,
            ("KubeletHasDiskPressure", "kubelet has disk pressure"),
            ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ),
        condition(
            "PIDPressure",
            pressure.pid,
            (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available"
            ),
            (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available"
            ),
        ),
        if ready {
            c(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            )
        } else {
            c(
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime is starting",
            )
        },
    ])
}

/// `status` of the Node.
pub fn node_status(
    config: &Config,
    machine: &Machine,
    images: &dyn ImageService,
    devices: &DeviceManager,
    now: &str,
) -> Value {
    let mut capacity = machine.capacity(config.max_pods);
    let mut allocatable = allocatable(&capacity, config);
    // Device plugin resources: every device is capacity, the healthy ones allocatable.
    for (name, total, healthy) in devices.resources() {
        capacity.insert(
            name.clone(),
            Quantity::from_value(total as i64, Format::DecimalSI),
        );
        allocatable.insert(
            name,
            Quantity::from_value(healthy as i64, Format::DecimalSI),
        );
    }
    let mut imgs: Vec<Value> = images
        .list()
        .into_iter()
        .map(|i| json!({"names": [i.repo_digest, i.reference], "sizeBytes": i.size}))
        .collect();
    imgs.truncate(50);
    let signals = crate::eviction::pressure::observe(&config.root_dir, &config.images_dir());
    let pressure = crate::eviction::pressure::evaluate(&signals, &config.eviction_hard);
    if pressure != Pressure::default() {
        tracing::debug!(?pressure, ?signals, "the node is under pressure");
    }
    json!({
        "capacity": capacity.to_json(),
        "allocatable": allocatable.to_json(),
        "conditions": conditions(now, true, pressure),
        "addresses": [
            {"type": "InternalIP", "address": config.node_ip.to_string()},
            {"type": "Hostname", "address": config.node_name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
        "nodeInfo": {
            "machineID": machine.machine_id,
            "systemUUID": machine.system_uuid,
            "bootID": machine.boot_id,
            "kernelVersion": machine.kernel_version,
            "osImage": machine.os_image,
            "containerRuntimeVersion": format!("k1s://{}", env!("CARGO_PKG_VERSION")),
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": machine.arch,
        },
        "images": imgs,
    })
}

use k1s_api::time::now_micro_text as now_micro;

#[derive(Debug, thiserror::Error)]
#[error("registering node {node}: {message}")]
pub struct RegisterError {
    pub node: String,
    pub message: String,
}

/// Creates the Node, or updates the labels, taints and podCIDR of an existing one, then
/// reports its status.
pub async fn register(
    client: &dyn Client,
    config: &Config,
    machine: &Machine,
    images: &dyn ImageService,
    devices: &DeviceManager,
) -> Result<Value, RegisterError> {
    let err = |e: k1s_api::client::ClientError| RegisterError {
        node: config.node_name.clone(),
        message: e.to_string(),
    };
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let obj = node_object(config, machine);
    let mut previous = Value::Null;
    match client.get(&nodes, &config.node_name).await {
        Ok(existing) => {
            // Conditions keep their transition times across kubelet restarts.
            previous = existing["status"].clone();
            let mut patch = json!({"metadata": {"labels": obj["metadata"]["labels"]}});
            if existing["spec"]["podCIDR"].is_null() {
                patch["spec"] = obj["spec"].clone();
            }
            client
                .patch(
                    &nodes,
                    &config.node_name,
                    &Patch::Merge(patch),
                    None,
                    &WriteParams::default(),
                )
                .await
                .map_err(err)?;
        }
        Err(e) if e.is_not_found() => {
            client
                .create(&nodes, obj, &WriteParams::default())
                .await
                .map_err(err)?;
        }
        Err(e) => return Err(err(e)),
    }
    let status = compute_status(config, machine, images, devices, &previous);
    report_status(client, config, &status).await.map_err(err)?;
    Ok(status)
}

/// This node's pod CIDR: `explicit` (`--pod-cidr`) when given, which must match what the
/// Node already has; else the Node's `spec.podCIDR`, creating the Node first if it does
/// not exist and waiting until the controller manager's node IPAM has set it (logged every
/// 30 s while waiting). `None` when cancelled.
pub async fn resolve_pod_cidr(
    client: &dyn Client,
    config: &Config,
    machine: &Machine,
    explicit: Option<&str>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<String>, RegisterError> {
    let err = |message: String| RegisterError {
        node: config.node_name.clone(),
        message,
    };
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let started = std::time::Instant::now();
    let mut logged = None::<std::time::Instant>;
    loop {
        match client.get(&nodes, &config.node_name).await {
            Ok(node) => match (node["spec"]["podCIDR"].as_str(), explicit) {
                (Some(have), Some(want)) if have != want => {
                    return Err(err(format!(
                        "the Node has podCIDR {have}, but --pod-cidr is {want}: a pod CIDR \
                         cannot change; drop --pod-cidr (or delete the Node to start over)"
                    )));
                }
                (Some(have), _) => return Ok(Some(have.to_string())),
                (None, Some(want)) => return Ok(Some(want.to_string())),
                (None, None) => {}
            },
            Err(e) if e.is_not_found() => {
                if let Some(want) = explicit {
                    return Ok(Some(want.to_string()));
                }
                let mut c = config.clone();
                c.pod_cidr = String::new();
                match client
                    .create(&nodes, node_object(&c, machine), &WriteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_already_exists() => {}
                    Err(e) => return Err(err(e.to_string())),
                }
            }
            Err(e) => tracing::debug!(error = %e, "reading this node's pod CIDR"),
        }
        if logged.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(30)) {
            tracing::info!(
                node = %config.node_name,
                waited = ?started.elapsed(),
                "waiting for the controller manager to assign this node a pod CIDR (node IPAM; or give --pod-cidr)"
            );
            logged = Some(std::time::Instant::now());
        }
        tokio::select! {
            () = cancel.cancelled() => return Ok(None),
            () = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
        }
    }
}

/// This node's status now; conditions whose status did not change since `previous` keep its
/// `lastTransitionTime`.
pub fn compute_status(
    config: &Config,
    machine: &Machine,
    images: &dyn ImageService,
    devices: &DeviceManager,
    previous: &Value,
) -> Value {
    let mut status = node_status(
        config,
        machine,
        images,
        devices,
        &k1s_api::events::now_rfc3339(),
    );
    carry_transition_times(&mut status, previous);
    keep_foreign_extended_resources(&mut status, previous);
    status
}

/// Extended resources someone else put in the Node's capacity (`kubectl patch node
/// --subresource status`, the documented way to advertise a dongle; the conformance suite's
/// fake resources) stay in capacity and are allocatable too, as upstream's kubelet, which
/// copies capacity into allocatable.
fn keep_foreign_extended_resources(status: &mut Value, previous: &Value) {
    let Some(before) = previous["capacity"].as_object() else {
        return;
    };
    for (name, q) in before {
        if !k1s_api::resource::is_extended_resource(name) || !status["capacity"][name].is_null() {
            continue;
        }
        status["capacity"][name] = q.clone();
        status["allocatable"][name] = q.clone();
    }
}

/// Copies `lastTransitionTime` from `previous`'s condition of the same type when its status
/// is the same (upstream's setters only move it on a transition).
fn carry_transition_times(status: &mut Value, previous: &Value) {
    let Some(old) = previous["conditions"].as_array() else {
        return;
    };
    let Some(new) = status["conditions"].as_array_mut() else {
        return;
    };
    for c in new {
        let same = old
            .iter()
            .find(|o| o["type"] == c["type"] && o["status"] == c["status"]);
        if let Some(t) = same
            .map(|o| &o["lastTransitionTime"])
            .filter(|t| t.is_string())
        {
            c["lastTransitionTime"] = t.clone();
        }
    }
}

/// Whether `new` says something `old` did not, heartbeat times aside (upstream's
/// `nodeStatusHasChanged`).
fn status_changed(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(cs) = v["conditions"].as_array_mut() {
            for c in cs {
                if let Some(c) = c.as_object_mut() {
                    c.remove("lastHeartbeatTime");
                }
            }
        }
        v
    };
    strip(new) != strip(old)
}

/// Logs each condition whose status changed since `old` (a warning when the node comes under
/// pressure or stops being ready).
fn log_transitions(old: &Value, new: &Value) {
    let Some(conditions) = new["conditions"].as_array() else {
        return;
    };
    for c in conditions {
        let before = old["conditions"]
            .as_array()
            .and_then(|o| o.iter().find(|o| o["type"] == c["type"]))
            .map(|o| &o["status"]);
        if before == Some(&c["status"]) {
            continue;
        }
        let (type_, status) = (c["type"].as_str().unwrap_or(""), c["status"].as_str());
        let bad = if type_ == "Ready" {
            status != Some("True")
        } else {
            status == Some("True")
        };
        let reason = c["reason"].as_str().unwrap_or("");
        if bad {
            tracing::warn!(condition = type_, ?status, reason, "node condition changed");
        } else {
            tracing::info!(condition = type_, ?status, reason, "node condition changed");
        }
    }
}

/// Patches `status` of the Node.
pub async fn report_status(
    client: &dyn Client,
    config: &Config,
    status: &Value,
) -> Result<(), k1s_api::client::ClientError> {
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    client
        .patch(
            &nodes,
            &config.node_name,
            &Patch::Merge(json!({"status": status})),
            Some("status"),
            &WriteParams::default(),
        )
        .await
        .map(|_| ())
}

/// Renews the node's Lease every `lease_interval`; computes node status as often (and at
/// once when device plugin resources change) and reports it when it differs from the Node's
/// status in the API or `status_report_interval` passed since the last report, until
/// cancelled. `reported` is the status registration sent (the baseline when the Node cannot
/// be read).
/// The node's labels read there also go to admission ([`crate::pod::admission`]).
pub async fn heartbeat(
    deps: Arc<crate::Deps>,
    machine: Machine,
    reported: Value,
    cancel: CancellationToken,
) {
    let (client, config) = (deps.client.clone(), deps.config.clone());
    let (images, devices, admitted) = (&deps.images, &deps.devices, &deps.admitted);
    let mut reported = reported;
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let mut device_changes = devices.subscribe();
    let leases = ResourceRef::new(
        "coordination.k8s.io",
        "v1",
        "leases",
        Some("kube-node-lease"),
    );
    let mut last_status = std::time::Instant::now();
    loop {
        let now = now_micro();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": config.node_name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": config.node_name, "leaseDurationSeconds": 40, "renewTime": now},
        });
        let patch = json!({"spec": {"holderIdentity": config.node_name, "leaseDurationSeconds": 40, "renewTime": now}});
        let res = match client
            .patch(
                &leases,
                &config.node_name,
                &Patch::Merge(patch),
                None,
                &WriteParams::default(),
            )
            .await
        {
            Err(e) if e.is_not_found() => client
                .create(&leases, lease, &WriteParams::default())
                .await
                .map(|_| ()),
            other => other.map(|_| ()),
        };
        if let Err(e) = res {
            tracing::warn!(error = %e, node = %config.node_name, "renewing the node lease");
        }
        let renew_at = tokio::time::Instant::now() + config.lease_interval;
        // Each pass: after the Lease, or when device plugin resources changed.
        loop {
            // Compared with what the API holds now, as upstream's kubelet does: another writer
            // (the node lifecycle controller marking the node Unknown while this kubelet could
            // not reach the server) is corrected at once, not at the next 5-minute report.
            let node = client.get(&nodes, &config.node_name).await.ok();
            if let Some(n) = &node {
                crate::pod::admission::set_labels_from(admitted, n);
            }
            let baseline = match node {
                Some(node) if node["status"].is_object() => node["status"].clone(),
                _ => reported.clone(),
            };
            let status = compute_status(
                &config,
                &machine,
                images.as_ref(),
                devices.as_ref(),
                &baseline,
            );
            if status_changed(&status, &baseline)
                || last_status.elapsed() >= config.status_report_interval
            {
                match report_status(client.as_ref(), &config, &status).await {
                    Ok(()) => {
                        log_transitions(&baseline, &status);
                        reported = status;
                        last_status = std::time::Instant::now();
                    }
                    Err(e) => tracing::warn!(error = %e, "reporting node status"),
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(renew_at) => break,
                // The sender lives in `devices`, held here: this never ends in an error.
                _ = device_changes.changed() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_subtracts_reserved_and_eviction() {
        let mut config = Config::new("n", "/tmp".into(), "10.0.0.1".parse().unwrap());
        config
            .kube_reserved
            .insert("cpu", Quantity::parse("500m").unwrap());
        config
            .system_reserved
            .insert("memory", Quantity::parse("1Gi").unwrap());
        let m = Machine {
            cpus: 2,
            memory_bytes: 4 << 30,
            ephemeral_bytes: 10 << 30,
            ..Default::default()
        };
        let cap = m.capacity(110);
        let a = allocatable(&cap, &config);
        assert_eq!(a.get("cpu").unwrap().milli_value(), 1500);
        assert_eq!(
            a.get("memory").unwrap().value(),
            (3i64 << 30) - 100 * 1024 * 1024
        );
        assert_eq!(a.get("pods").unwrap().value(), 110);
        config
            .system_reserved
            .insert("cpu", Quantity::parse("8").unwrap());
        assert!(allocatable(&cap, &config).get("cpu").unwrap().is_zero());
    }

    #[test]
    fn transitions_kept_and_heartbeats_are_not_a_change() {
        let old =
            json!({"conditions": conditions("2026-01-01T00:00:00Z", true, Pressure::default())});
        let mut new =
            json!({"conditions": conditions("2026-01-01T00:00:10Z", true, Pressure::default())});
        carry_transition_times(&mut new, &old);
        for c in new["conditions"].as_array().unwrap() {
            assert_eq!(c["lastTransitionTime"], "2026-01-01T00:00:00Z");
            assert_eq!(c["lastHeartbeatTime"], "2026-01-01T00:00:10Z");
        }
        assert!(!status_changed(&new, &old));
        // A pressure transition is a change, and moves only that condition's time.
        let disk = Pressure {
            disk: true,
            ..Default::default()
        };
        let mut pressed = json!({"conditions": conditions("2026-01-01T00:00:20Z", true, disk)});
        carry_transition_times(&mut pressed, &new);
        assert!(status_changed(&pressed, &new));
        let times: Vec<(&str, &str)> = pressed["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap(),
                    c["lastTransitionTime"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(times.contains(&("DiskPressure", "2026-01-01T00:00:20Z")));
        assert!(times.contains(&("Ready", "2026-01-01T00:00:00Z")));
        // Anything else that differs is a change too.
        let mut more = new.clone();
        more["images"] = json!([{"names": ["busybox"], "sizeBytes": 1}]);
        assert!(status_changed(&more, &new));
        // No previous status: the times are now's.
        let mut first =
            json!({"conditions": conditions("2026-01-01T00:00:30Z", true, Pressure::default())});
        carry_transition_times(&mut first, &Value::Null);
        assert_eq!(
            first["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:30Z"
        );
    }

    #[test]
    fn node_object_labels_taints_and_cidr() {
        let mut config = Config::new("n1", "/tmp".into(), "10.0.0.1".parse().unwrap());
        config.labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            "true".into(),
        );
        config.taints = vec!["dedicated=gpu:NoSchedule".into(), "bad".into()];
        let m = Machine::detect(std::path::Path::new("/"));
        assert!(m.cpus >= 1 && m.memory_bytes > 0 && m.ephemeral_bytes > 0);
        let n = node_object(&config, &m);
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], "n1");
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/arch"], "amd64");
        assert_eq!(
            n["metadata"]["labels"]["node-role.kubernetes.io/control-plane"],
            "true"
        );
        assert_eq!(
            n["spec"]["taints"],
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
        );
        assert_eq!(n["spec"]["podCIDR"], "10.42.0.0/24");
    }
}

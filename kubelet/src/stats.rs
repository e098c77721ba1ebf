//! The kubelet's usage figures: the summary API (`GET /stats/summary`, statsapi v1alpha1, what
//! metrics-server and `kubectl get --raw /api/v1/nodes/NODE/proxy/stats/summary` read) and
//! the resource metrics (`GET /metrics/resource`, Prometheus text, what metrics-server scrapes
//! since 0.6).
//!
//! Sources, as cAdvisor and the CRI stats provider use them upstream:
//! - the node: `/proc/stat` (CPU), `/proc/meminfo` and `/proc/vmstat` (memory: working set =
//!   usage − inactive file pages), `statvfs` of the kubelet's directory (`fs`) and of the
//!   image store (`runtime.imageFs`), `kernel.pid_max` and the process count (`rlimit`), and
//!   the host's interfaces (`/sys/class/net/*/statistics`, without `lo` and the pods' veths);
//! - each pod and container: its cgroup ([`CgroupManager`]); a container's writable layer
//!   (`rootfs`) and log files (`logs`) by walking them; its emptyDir volumes (`volume`) the
//!   same way, the disk-backed ones counted in its `ephemeral-storage` (which the eviction
//!   manager reads); a pod's network from the host end of its veth (what the host end
//!   receives, the pod sent).
//!
//! `usageNanoCores` is a rate: like upstream's CRI stats provider, the provider keeps the
//! previous cumulative reading of each node, pod and container and reports the rate since
//! that reading; the first request after a start (or for a new container) has none.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::cgroups::{CgroupManager, Stats, resources::qos_class};
use crate::config::Config;

/// Builds summaries for one kubelet; cheap to share behind an `Arc`.
pub struct StatsProvider {
    config: Arc<Config>,
    cgroups: Arc<dyn CgroupManager>,
    /// The previous cumulative CPU reading (ns) of each node, pod and container, by key.
    cpu: Mutex<HashMap<String, (Instant, u64)>>,
}

/// RFC 3339 with seconds, as the summary's `time` and `startTime` fields carry it.
use k1s_api::time::format as rfc3339;

/// `Key: N kB` of `/proc/meminfo`, in bytes.
fn meminfo(text: &str, key: &str) -> Option<u64> {
    crate::eviction::pressure::meminfo_bytes(text, key).map(|b| b.max(0) as u64)
}

/// `key N` of `/proc/vmstat`.
fn vmstat(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Busy CPU time of the machine in ns: every `/proc/stat` `cpu` column but idle and iowait.
fn node_cpu_nanos(stat: &str, ticks_per_second: u64) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let cols: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|c| c.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let busy: u64 = cols
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| *v)
        .sum();
    Some(busy.saturating_mul(1_000_000_000) / ticks_per_second.max(1))
}

/// Bytes and inodes of the file system holding `path`, as `FsStats`.
fn fs_stats(path: &Path, now: &str) -> Value {
    let Ok(s) = nix::sys::statvfs::statvfs(path) else {
        return json!({"time": now});
    };
    let frsize = s.fragment_size();
    let capacity = s.blocks() * frsize;
    let available = s.blocks_available() * frsize;
    let free = s.blocks_free() * frsize;
    json!({
        "time": now,
        "availableBytes": available,
        "capacityBytes": capacity,
        "usedBytes": capacity.saturating_sub(free),
        "inodesFree": s.files_free(),
        "inodes": s.files(),
        "inodesUsed": s.files().saturating_sub(s.files_free()),
    })
}

/// Bytes and inodes used under `dir` (not following links, not crossing mounts), as
/// `du` counts them: allocated blocks.
fn disk_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return (0, 0);
    };
    let dev = top.dev();
    let (mut bytes, mut inodes) = (0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            bytes += m.blocks() * 512;
            inodes += 1;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    (bytes, inodes)
}

/// The counters of one interface (`/sys/class/net/NAME/statistics`); `swap` reads them
/// from the other end's point of view (a pod's traffic at the host end of its veth).
fn interface_stats(name: &str, swap: bool) -> Option<Value> {
    let dir = Path::new("/sys/class/net").join(name).join("statistics");
    let read = |f: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let (rx, tx) = if swap { ("tx", "rx") } else { ("rx", "tx") };
    Some(json!({
        "name": if swap { crate::network::bridge::POD_INTERFACE } else { name },
        "rxBytes": read(&format!("{rx}_bytes"))?,
        "rxErrors": read(&format!("{rx}_errors"))?,
        "txBytes": read(&format!("{tx}_bytes"))?,
        "txErrors": read(&format!("{tx}_errors"))?,
    }))
}

/// The interface of the default route (`/proc/net/route`), if any.
fn default_interface() -> Option<String> {
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    routes.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.len() > 2 && cols[1] == "00000000").then(|| cols[0].to_string())
    })
}

/// The node's `NetworkStats`: every interface of the host but `lo` and pod veths, the one of
/// the default route first (its counters are also the top-level ones).
fn node_network(now: &str) -> Value {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "lo" && !n.starts_with("veth"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if let Some(d) = default_interface()
        && let Some(i) = names.iter().position(|n| *n == d)
    {
        let first = names.remove(i);
        names.insert(0, first);
    }
    let interfaces: Vec<Value> = names
        .iter()
        .filter_map(|n| interface_stats(n, false))
        .collect();
    let mut out = interfaces.first().cloned().unwrap_or_else(|| json!({}));
    out["time"] = json!(now);
    out["interfaces"] = json!(interfaces);
    out
}

fn memory_stats(s: &Stats, now: &str, limit: Option<u64>) -> Value {
    let mut m = json!({
        "time": now,
        "usageBytes": s.memory_usage_bytes,
        "workingSetBytes": s.memory_working_set_bytes,
    });
    if let Some(limit) = limit {
        m["availableBytes"] = json!(limit.saturating_sub(s.memory_working_set_bytes));
    }
    m
}

impl StatsProvider {
    pub fn new(config: Arc<Config>, cgroups: Arc<dyn CgroupManager>) -> Self {
        Self {
            config,
            cgroups,
            cpu: Mutex::new(HashMap::new()),
        }
    }

    /// `CPUStats` from a cumulative reading: the rate since the previous reading under `key`.
    fn cpu_stats(&self, key: &str, total_nanos: u64, now: &str) -> Value {
        let at = Instant::now();
        let previous = self
            .cpu
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string(), (at, total_nanos));
        let mut cpu = json!({"time": now, "usageCoreNanoSeconds": total_nanos});
        if let Some((then, before)) = previous {
            let secs = at.duration_since(then).as_secs_f64();
            if secs > 0.0 && total_nanos >= before {
                cpu["usageNanoCores"] = json!(((total_nanos - before) as f64 / secs) as u64);
            }
        }
        cpu
    }

    fn node(&self, now: &str) -> Value {
        let meminfo_text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let vmstat_text = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
        let total = meminfo(&meminfo_text, "MemTotal:").unwrap_or(0);
        let free = meminfo(&meminfo_text, "MemFree:").unwrap_or(0);
        let inactive_file = meminfo(&meminfo_text, "Inactive(file):").unwrap_or(0);
        let usage = total.saturating_sub(free);
        let working_set = usage.saturating_sub(inactive_file);
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .map_or(100, |t| t as u64);
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let cpu_total = node_cpu_nanos(&stat, ticks).unwrap_or(0);
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .ok()
            .and_then(|u| u.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        let boot = jiff::Timestamp::now() - jiff::SignedDuration::from_secs_f64(uptime);
        let max_pid: Option<u64> = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|m| m.trim().parse().ok());
        let procs = nix::sys::sysinfo::sysinfo()
            .map(|i| i.process_count() as u64)
            .ok();
        let images = self.config.images_dir();
        let image_fs = fs_stats(
            if images.exists() {
                &images
            } else {
                &self.config.root_dir
            },
            now,
        );
        json!({
            "nodeName": self.config.node_name,
            "startTime": rfc3339(boot),
            "cpu": self.cpu_stats("node", cpu_total, now),
            "memory": {
                "time": now,
                "availableBytes": total.saturating_sub(working_set),
                "usageBytes": usage,
                "workingSetBytes": working_set,
                "rssBytes": meminfo(&meminfo_text, "AnonPages:").unwrap_or(0),
                "pageFaults": vmstat(&vmstat_text, "pgfault").unwrap_or(0),
                "majorPageFaults": vmstat(&vmstat_text, "pgmajfault").unwrap_or(0),
            },
            "network": node_network(now),
            "fs": fs_stats(&self.config.root_dir, now),
            "runtime": {"imageFs": image_fs.clone(), "containerFs": image_fs},
            "rlimit": {"time": now, "maxpid": max_pid, "curproc": procs},
        })
    }

    /// One pod's `PodStats`, from its containers that run (per `status.containerStatuses`).
    fn pod(&self, pod: &Value, now: &str) -> Option<Value> {
        let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone()).ok()?;
        let qos = qos_class(&typed);
        let uid = crate::pod::static_pods::runtime_uid(pod).to_string();
        let meta = &pod["metadata"];
        let (ns, name) = (
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default(),
        );
        let pod_cgroup = self.cgroups.pod_stats(&uid, qos).ok()?;
        let mut containers = Vec::new();
        let mut ephemeral = (0u64, 0u64);
        for cs in pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(started) = cs["state"]["running"]["startedAt"].as_str() else {
                continue;
            };
            let cname = cs["name"].as_str().unwrap_or_default();
            let Some(id) = cs["containerID"]
                .as_str()
                .and_then(|i| i.split("://").nth(1))
            else {
                continue;
            };
            let Ok(stats) = self.cgroups.container_stats(&uid, qos, id) else {
                continue;
            };
            let limit = typed
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == cname))
                .and_then(|c| {
                    c.resources
                        .as_ref()?
                        .limits
                        .as_ref()?
                        .get("memory")
                        .cloned()
                })
                .and_then(|q| k1s_api::quantity::Quantity::parse(&q.0).ok())
                .map(|q| q.value().max(0) as u64);
            let attempt = cs["restartCount"].as_i64().unwrap_or(0) as i32;
            let rootfs_dir = self
                .config
                .bundle_dir(&uid, false, cname, attempt)
                .join("upper");
            let (root_bytes, root_inodes) = disk_usage(&rootfs_dir);
            let logs_dir = self.config.container_logs_dir(ns, name, &uid, cname);
            let (log_bytes, log_inodes) = disk_usage(&logs_dir);
            ephemeral.0 += root_bytes + log_bytes;
            ephemeral.1 += root_inodes + log_inodes;
            let mut rootfs = fs_stats(&self.config.root_dir, now);
            rootfs["usedBytes"] = json!(root_bytes);
            rootfs["inodesUsed"] = json!(root_inodes);
            let mut logs = fs_stats(&self.config.logs_dir(), now);
            logs["usedBytes"] = json!(log_bytes);
            logs["inodesUsed"] = json!(log_inodes);
            containers.push(json!({
                "name": cname,
                "startTime": started,
                "cpu": self.cpu_stats(&format!("{uid}/{cname}/{id}"), stats.cpu_usage_nanos, now),
                "memory": memory_stats(&stats, now, limit),
                "rootfs": rootfs,
                "logs": logs,
            }));
        }
        // emptyDir volumes: disk-backed ones count as the pod's ephemeral storage.
        let mut volumes = Vec::new();
        for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
            let Some(vname) = v["name"].as_str() else {
                continue;
            };
            if v.get("emptyDir").is_none() {
                continue;
            }
            let dir = crate::volumes::pod_volumes_dir(&self.config.pods_dir(), &uid)
                .join(crate::volumes::EMPTY_DIR)
                .join(vname);
            let (bytes, inodes) = disk_usage(&dir);
            let in_memory = v["emptyDir"]["medium"] == "Memory";
            let mut vs = fs_stats(
                if in_memory {
                    &dir
                } else {
                    &self.config.root_dir
                },
                now,
            );
            vs["name"] = json!(vname);
            vs["usedBytes"] = json!(bytes);
            vs["inodesUsed"] = json!(inodes);
            if !in_memory {
                ephemeral.0 += bytes;
                ephemeral.1 += inodes;
            }
            volumes.push(vs);
        }
        let mut storage = fs_stats(&self.config.root_dir, now);
        storage["usedBytes"] = json!(ephemeral.0);
        storage["inodesUsed"] = json!(ephemeral.1);
        let mut out = json!({
            "podRef": {"name": name, "namespace": ns, "uid": meta["uid"]},
            "startTime": pod["status"]["startTime"],
            "containers": containers,
            "cpu": self.cpu_stats(&uid, pod_cgroup.cpu_usage_nanos, now),
            "memory": memory_stats(&pod_cgroup, now, None),
            "ephemeral-storage": storage,
            "process_stats": {"process_count": pod_cgroup.pids},
        });
        if !volumes.is_empty() {
            out["volume"] = json!(volumes);
        }
        let host_network = pod["spec"]["hostNetwork"].as_bool() == Some(true);
        if !host_network
            && let Some(mut net) =
                interface_stats(&crate::network::bridge::host_veth_name(&uid), true)
        {
            net["time"] = json!(now);
            net["interfaces"] = json!([net.clone()]);
            out["network"] = net;
        }
        Some(out)
    }

    /// The summary of the node and of `pods` (the pods bound to it, as the API has them; pods
    /// without a cgroup here are left out).
    pub fn summary(&self, pods: &[Value]) -> Value {
        let now = rfc3339(jiff::Timestamp::now());
        let pods: Vec<Value> = pods.iter().filter_map(|p| self.pod(p, &now)).collect();
        json!({"node": self.node(&now), "pods": pods})
    }
}

/// Seconds since the epoch, in ms, as the timestamp of a metric sample.
fn sample_ms(t: &Value) -> String {
    t.as_str()
        .and_then(k1s_api::time::parse)
        .map(|t| (t.as_second() * 1000).to_string())
        .unwrap_or_default()
}

fn label(v: &Value) -> String {
    v.as_str()
        .unwrap_or_default()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The resource metrics of a summary, in the Prometheus text format as the kubelet serves
/// them on `/metrics/resource` (the series metrics-server reads).
pub fn resource_metrics(summary: &Value) -> String {
    let mut out = String::new();
    let mut family = |name: &str, help: &str, kind: &str, samples: Vec<(String, f64, String)>| {
        out.push_str(&format!(
            "# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}\n"
        ));
        for (labels, value, ts) in samples {
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            };
            let ts = if ts.is_empty() {
                String::new()
            } else {
                format!(" {ts}")
            };
            out.push_str(&format!("{name}{labels} {value}{ts}\n"));
        }
    };
    let node = &summary["node"];
    let pods = summary["pods"].as_array().cloned().unwrap_or_default();
    let pod_labels = |p: &Value| {
        format!(
            "namespace=\"{}\",pod=\"{}\"",
            label(&p["podRef"]["namespace"]),
            label(&p["podRef"]["name"])
        )
    };
    let containers = |f: &dyn Fn(&Value) -> Option<(f64, String)>| -> Vec<(String, f64, String)> {
        pods.iter()
            .flat_map(|p| {
                p["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| {
                        let (v, ts) = f(c)?;
                        Some((
                            format!("container=\"{}\",{}", label(&c["name"]), pod_labels(p)),
                            v,
                            ts,
                        ))
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let cpu_seconds = |s: &Value| -> Option<(f64, String)> {
        Some((
            s["cpu"]["usageCoreNanoSeconds"].as_u64()? as f64 / 1e9,
            sample_ms(&s["cpu"]["time"]),
        ))
    };
    let working_set = |s: &Value| -> Option<(f64, String)> {
        Some((
            s["memory"]["workingSetBytes"].as_u64()? as f64,
            sample_ms(&s["memory"]["time"]),
        ))
    };
    family(
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the container in core-seconds",
        "counter",
        containers(&cpu_seconds),
    );
    family(
        "container_memory_working_set_bytes",
        "Current working set of the container in bytes",
        "gauge",
        containers(&working_set),
    );
    family(
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds",
        "gauge",
        containers(&|c| {
            let ms: f64 = sample_ms(&c["startTime"]).parse().ok()?;
            Some((ms / 1000.0, String::new()))
        }),
    );
    let node_sample = |f: &dyn Fn(&Value) -> Option<(f64, String)>| -> Vec<(String, f64, String)> {
        f(node)
            .map(|(v, ts)| (String::new(), v, ts))
            .into_iter()
            .collect()
    };
    family(
        "node_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the node in core-seconds",
        "counter",
        node_sample(&cpu_seconds),
    );
    family(
        "node_memory_working_set_bytes",
        "Current working set of the node in bytes",
        "gauge",
        node_sample(&working_set),
    );
    let per_pod = |f: &dyn Fn(&Value) -> Option<(f64, String)>| -> Vec<(String, f64, String)> {
        pods.iter()
            .filter_map(|p| f(p).map(|(v, ts)| (pod_labels(p), v, ts)))
            .collect()
    };
    family(
        "pod_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the pod in core-seconds",
        "counter",
        per_pod(&cpu_seconds),
    );
    family(
        "pod_memory_working_set_bytes",
        "Current working set of the pod in bytes",
        "gauge",
        per_pod(&working_set),
    );
    family(
        "resource_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        "gauge",
        vec![(String::new(), 0.0, String::new())],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_parsers() {
        let stat = "cpu  100 5 50 1000 20 3 2 10 0 0\ncpu0 1 2 3 4\n";
        // busy = 100 + 5 + 50 + 3 + 2 + 10 = 170 ticks = 1.7 s at 100 Hz.
        assert_eq!(node_cpu_nanos(stat, 100), Some(1_700_000_000));
        assert_eq!(node_cpu_nanos("intr 1\n", 100), None);
        let mi = "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  100 kB\n";
        assert_eq!(meminfo(mi, "MemTotal:"), Some(1_024_000));
        assert_eq!(meminfo(mi, "Inactive(file):"), Some(102_400));
        assert_eq!(meminfo(mi, "Cached:"), None);
        let vm = "pgfault 42\npgmajfault 7\npgfault_x 9\n";
        assert_eq!(vmstat(vm, "pgfault"), Some(42));
        assert_eq!(vmstat(vm, "pgmajfault"), Some(7));
    }

    #[test]
    fn disk_usage_counts_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), vec![1u8; 10_000]).unwrap();
        let (bytes, inodes) = disk_usage(dir.path());
        assert_eq!(inodes, 2);
        assert!(bytes >= 10_000, "{bytes}");
        assert_eq!(disk_usage(&dir.path().join("missing")), (0, 0));
    }

    #[test]
    fn resource_metrics_from_a_summary() {
        let summary = json!({
            "node": {
                "cpu": {"time": "2026-11-22T10:00:00Z", "usageCoreNanoSeconds": 2_500_000_000u64},
                "memory": {"time": "2026-11-22T10:00:00Z", "workingSetBytes": 1000},
            },
            "pods": [{
                "podRef": {"name": "web", "namespace": "default", "uid": "u"},
                "cpu": {"time": "2026-11-22T10:00:00Z", "usageCoreNanoSeconds": 500_000_000},
                "memory": {"time": "2026-11-22T10:00:00Z", "workingSetBytes": 300},
                "containers": [{
                    "name": "c\"1",
                    "startTime": "2026-11-22T09:00:00Z",
                    "cpu": {"time": "2026-11-22T10:00:00Z", "usageCoreNanoSeconds": 250_000_000},
                    "memory": {"time": "2026-11-22T10:00:00Z", "workingSetBytes": 200},
                }],
            }],
        });
        let text = resource_metrics(&summary);
        let ts = "1795341600000";
        for line in [
            format!("node_cpu_usage_seconds_total 2.5 {ts}"),
            format!("node_memory_working_set_bytes 1000 {ts}"),
            format!("pod_cpu_usage_seconds_total{{namespace=\"default\",pod=\"web\"}} 0.5 {ts}"),
            format!("pod_memory_working_set_bytes{{namespace=\"default\",pod=\"web\"}} 300 {ts}"),
            format!(
                "container_cpu_usage_seconds_total{{container=\"c\\\"1\",namespace=\"default\",pod=\"web\"}} 0.25 {ts}"
            ),
            "container_start_time_seconds{container=\"c\\\"1\",namespace=\"default\",pod=\"web\"} 1795338000".to_string(),
            "resource_scrape_error 0".to_string(),
            "# TYPE container_memory_working_set_bytes gauge".to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn cpu_rate_comes_from_the_previous_reading() {
        let dir = tempfile::tempdir().unwrap();
        let config = Arc::new(Config::new(
            "n",
            dir.path().to_path_buf(),
            std::net::Ipv4Addr::LOCALHOST.into(),
        ));
        let p = StatsProvider::new(
            config,
            Arc::new(crate::cgroups::fake::FakeCgroupManager::new()),
        );
        let first = p.cpu_stats("k", 1_000, "t");
        assert!(first.get("usageNanoCores").is_none(), "{first}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = p.cpu_stats("k", 1_000 + 20_000_000, "t");
        let rate = second["usageNanoCores"].as_u64().unwrap();
        // 20 ms of CPU over at least 20 ms: at most one core.
        assert!(rate > 0 && rate <= 1_000_000_000, "{second}");
        assert_eq!(second["usageCoreNanoSeconds"], 20_001_000);
    }
}

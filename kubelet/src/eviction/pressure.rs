//! Node pressure: the signals of upstream's eviction manager read from this host
//! (`memory.available`, `nodefs.available`, `nodefs.inodesFree`, `imagefs.available`,
//! `imagefs.inodesFree`, `pid.available`), compared with the hard eviction thresholds
//! (`--eviction-hard`, upstream's syntax and defaults), giving the node's MemoryPressure,
//! DiskPressure and PIDPressure conditions. The node lifecycle controller turns those into
//! `node.kubernetes.io/*-pressure` taints, so the scheduler stops placing pods there, and
//! the kubelet refuses new pods as upstream's eviction manager does ([`admit`]).
//!
//! Evicting running pods under pressure is [`crate::eviction`]'s. Not done (yet): soft
//! thresholds with grace periods.

use std::collections::BTreeMap;
use std::path::Path;

use k1s_api::quantity::Quantity;

/// The signals a threshold may name.
pub const SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

/// A threshold: an absolute amount, or a percentage of the signal's capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Amount(i128),
    Percent(f64),
}

impl Threshold {
    /// The amount this threshold stands for, of `capacity`.
    pub fn amount(self, capacity: i128) -> i128 {
        match self {
            Threshold::Amount(a) => a,
            Threshold::Percent(p) => (capacity as f64 * p / 100.0) as i128,
        }
    }

    /// Whether `available` (of `capacity`) is below this threshold.
    pub(crate) fn crossed(self, available: i128, capacity: i128) -> bool {
        match self {
            Threshold::Amount(a) => available < a,
            Threshold::Percent(p) => (available as f64) < capacity as f64 * p / 100.0,
        }
    }
}

/// Hard eviction thresholds by signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds(BTreeMap<String, Threshold>);

impl Default for Thresholds {
    /// Upstream's Linux defaults.
    fn default() -> Self {
        Thresholds(
            [
                ("memory.available", Threshold::Amount(100 * 1024 * 1024)),
                ("nodefs.available", Threshold::Percent(10.0)),
                ("nodefs.inodesFree", Threshold::Percent(5.0)),
                ("imagefs.available", Threshold::Percent(15.0)),
                ("imagefs.inodesFree", Threshold::Percent(5.0)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        )
    }
}

/// Why `--eviction-hard` does not parse.
#[derive(Debug, thiserror::Error)]
pub enum ThresholdError {
    #[error("{0:?} is not SIGNAL<QUANTITY or SIGNAL<PERCENT%")]
    Syntax(String),
    #[error("unknown signal {0:?}; known: {known}", known = SIGNALS.join(", "))]
    UnknownSignal(String),
    #[error("{signal}: {value:?} is not a percentage 0-100%")]
    Percent { signal: String, value: String },
    #[error("{signal}: {value:?} is not a quantity: {source}")]
    Quantity {
        signal: String,
        value: String,
        source: k1s_api::quantity::QuantityError,
    },
    #[error("{signal}: {value:?} is negative")]
    Negative { signal: String, value: String },
}

impl Thresholds {
    /// Parses `--eviction-hard` (`memory.available<500Mi,nodefs.available<10%`). Signals it
    /// does not name keep their defaults, as upstream merges them since 1.31.
    pub fn parse(s: &str) -> Result<Self, ThresholdError> {
        let mut out = Self::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (signal, value) = part
                .split_once('<')
                .ok_or_else(|| ThresholdError::Syntax(part.to_string()))?;
            let signal = signal.trim();
            if !SIGNALS.contains(&signal) {
                return Err(ThresholdError::UnknownSignal(signal.to_string()));
            }
            let value = value.trim();
            let named = || (signal.to_string(), value.to_string());
            let threshold = if let Some(p) = value.strip_suffix('%') {
                match p.parse::<f64>() {
                    Ok(p) if (0.0..=100.0).contains(&p) => Threshold::Percent(p),
                    _ => {
                        let (signal, value) = named();
                        return Err(ThresholdError::Percent { signal, value });
                    }
                }
            } else {
                let q = Quantity::parse(value).map_err(|source| {
                    let (signal, value) = named();
                    ThresholdError::Quantity {
                        signal,
                        value,
                        source,
                    }
                })?;
                if q.sign() < 0 {
                    let (signal, value) = named();
                    return Err(ThresholdError::Negative { signal, value });
                }
                Threshold::Amount(q.value() as i128)
            };
            out.0.insert(signal.to_owned(), threshold);
        }
        Ok(out)
    }

    pub fn get(&self, signal: &str) -> Option<Threshold> {
        self.0.get(signal).copied()
    }

    /// The memory the threshold keeps back from pods (for allocatable), in bytes.
    pub fn memory_reserve(&self, capacity: i128) -> i128 {
        self.get("memory.available")
            .map_or(0, |t| t.amount(capacity))
    }
}

/// One signal's reading: how much is available of how much.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    pub available: i128,
    pub capacity: i128,
}

/// The readings by signal.
pub type Signals = BTreeMap<&'static str, Reading>;

/// Which conditions hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

/// Compares `signals` with `thresholds`; a signal without a reading or a threshold is no
/// pressure.
pub fn evaluate(signals: &Signals, thresholds: &Thresholds) -> Pressure {
    let crossed = |signal: &str| match (signals.get(signal), thresholds.get(signal)) {
        (Some(r), Some(t)) => t.crossed(r.available, r.capacity),
        _ => false,
    };
    Pressure {
        memory: crossed("memory.available"),
        disk: [
            "nodefs.available",
            "nodefs.inodesFree",
            "imagefs.available",
            "imagefs.inodesFree",
        ]
        .into_iter()
        .any(crossed),
        pid: crossed("pid.available"),
    }
}

/// `Key: N kB` of `/proc/meminfo`, in bytes.
pub(crate) fn meminfo_bytes(meminfo: &str, key: &str) -> Option<i128> {
    let line = meminfo.lines().find(|l| l.starts_with(key))?;
    let kib: i128 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn fs_readings(path: &Path, bytes: &'static str, inodes: &'static str, out: &mut Signals) {
    let Ok(s) = nix::sys::statvfs::statvfs(path) else {
        return;
    };
    let frsize = s.fragment_size() as i128;
    out.insert(
        bytes,
        Reading {
            available: s.blocks_available() as i128 * frsize,
            capacity: s.blocks() as i128 * frsize,
        },
    );
    if s.files() > 0 {
        out.insert(
            inodes,
            Reading {
                available: s.files_available() as i128,
                capacity: s.files() as i128,
            },
        );
    }
}

/// Reads the signals: memory from `/proc/meminfo` (MemAvailable), the node file system
/// from `root` (the kubelet's directory), the image file system from `images`, and PIDs
/// from `kernel.pid_max` less the processes running.
pub fn observe(root: &Path, images: &Path) -> Signals {
    let mut out = Signals::new();
    if let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo")
        && let (Some(available), Some(capacity)) = (
            meminfo_bytes(&meminfo, "MemAvailable:"),
            meminfo_bytes(&meminfo, "MemTotal:"),
        )
    {
        out.insert(
            "memory.available",
            Reading {
                available,
                capacity,
            },
        );
    }
    fs_readings(root, "nodefs.available", "nodefs.inodesFree", &mut out);
    let images = if images.exists() { images } else { root };
    fs_readings(images, "imagefs.available", "imagefs.inodesFree", &mut out);
    if let Ok(max) = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        && let Ok(max) = max.trim().parse::<i128>()
        && let Ok(info) = nix::sys::sysinfo::sysinfo()
    {
        out.insert(
            "pid.available",
            Reading {
                available: max - info.process_count() as i128,
                capacity: max,
            },
        );
    }
    out
}

/// Upstream's SystemCriticalPriority: pods at or above it are admitted under pressure and
/// never evicted.
pub(crate) const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Whether a new pod may start under `pressure`, as upstream's eviction manager admits:
/// critical pods (static pods, priority at or above system-critical) always; under memory
/// pressure alone, pods that are not BestEffort, or BestEffort pods that tolerate the
/// memory-pressure taint; under any other pressure, none. The refusal is upstream's message
/// (the pod is then Failed with reason `Evicted`).
pub fn admit(
    pod: &k8s_openapi::api::core::v1::Pod,
    pressure: Pressure,
) -> Result<(), PressureRejection> {
    let conditions: Vec<&str> = [
        (pressure.memory, "MemoryPressure"),
        (pressure.disk, "DiskPressure"),
        (pressure.pid, "PIDPressure"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if conditions.is_empty() {
        return Ok(());
    }
    let static_pod = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(crate::pod::static_pods::SOURCE_ANNOTATION));
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    if static_pod || priority >= SYSTEM_CRITICAL_PRIORITY {
        return Ok(());
    }
    if conditions == ["MemoryPressure"] {
        use crate::cgroups::{QosClass, resources::qos_class};
        if qos_class(pod) != QosClass::BestEffort {
            return Ok(());
        }
        let tolerates = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .any(|t| {
                let key_ok = match t.key.as_deref() {
                    None | Some("") => t.operator.as_deref() == Some("Exists"),
                    Some(k) => k == "node.kubernetes.io/memory-pressure",
                };
                let effect_ok = matches!(t.effect.as_deref(), None | Some("") | Some("NoSchedule"));
                key_ok && effect_ok
            });
        if tolerates {
            return Ok(());
        }
    }
    Err(PressureRejection { conditions })
}

/// A pod refused under node pressure; the Display is upstream's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("The node had condition: [{}]. ", conditions.join(" "))]
pub struct PressureRejection {
    /// `MemoryPressure`, `DiskPressure`, `PIDPressure`: the ones the node has.
    pub conditions: Vec<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_syntax_over_the_defaults() {
        let t = Thresholds::parse("memory.available<1Gi, nodefs.available<20%").unwrap();
        assert_eq!(t.get("memory.available"), Some(Threshold::Amount(1 << 30)));
        assert_eq!(t.get("nodefs.available"), Some(Threshold::Percent(20.0)));
        // Unnamed signals keep their defaults.
        assert_eq!(t.get("imagefs.available"), Some(Threshold::Percent(15.0)));
        assert_eq!(t.get("pid.available"), None);
        assert_eq!(Thresholds::parse("").unwrap(), Thresholds::default());
        for (bad, want) in [
            (
                "memory.available",
                "\"memory.available\" is not SIGNAL<QUANTITY or SIGNAL<PERCENT%",
            ),
            (
                "memory.free<1Gi",
                "unknown signal \"memory.free\"; known: memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available",
            ),
            (
                "nodefs.available<120%",
                "nodefs.available: \"120%\" is not a percentage 0-100%",
            ),
            (
                "memory.available<-1Gi",
                "memory.available: \"-1Gi\" is negative",
            ),
        ] {
            let e = Thresholds::parse(bad).unwrap_err();
            assert_eq!(e.to_string(), want, "{bad}");
        }
        let e = Thresholds::parse("memory.available<lots").unwrap_err();
        assert!(matches!(e, ThresholdError::Quantity { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("memory.available: \"lots\" is not a quantity: "),
            "{e}"
        );
    }

    #[test]
    fn pressure_from_readings() {
        let reading = |available, capacity| Reading {
            available,
            capacity,
        };
        let mut s = Signals::new();
        s.insert("memory.available", reading(200 << 20, 8 << 30));
        s.insert("nodefs.available", reading(50, 1000));
        s.insert("imagefs.available", reading(500, 1000));
        s.insert("pid.available", reading(10, 4_194_304));
        let t = Thresholds::default();
        // 5% of the node file system left is below the 10% threshold; no pid threshold.
        assert_eq!(
            evaluate(&s, &t),
            Pressure {
                memory: false,
                disk: true,
                pid: false
            }
        );
        let t = Thresholds::parse("memory.available<1Gi,nodefs.available<1%,pid.available<100")
            .unwrap();
        assert_eq!(
            evaluate(&s, &t),
            Pressure {
                memory: true,
                disk: false,
                pid: true
            }
        );
        assert_eq!(evaluate(&Signals::new(), &t), Pressure::default());
    }

    #[test]
    fn memory_reserve_for_allocatable() {
        assert_eq!(Thresholds::default().memory_reserve(8 << 30), 100 << 20);
        let t = Thresholds::parse("memory.available<10%").unwrap();
        assert_eq!(t.memory_reserve(1000), 100);
    }

    #[test]
    fn admission_under_pressure_as_upstream() {
        use serde_json::json;
        let pod = |v: serde_json::Value| -> k8s_openapi::api::core::v1::Pod {
            serde_json::from_value(v).unwrap()
        };
        let best_effort = pod(json!({"spec": {"containers": [{"name": "c"}]}}));
        let burstable = pod(json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"memory": "1Mi"}}}]}}));
        let tolerant = pod(
            json!({"spec": {"containers": [{"name": "c"}], "tolerations": [
            {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}]}}),
        );
        let critical =
            pod(json!({"spec": {"containers": [{"name": "c"}], "priority": 2000001000}}));
        let static_pod = pod(
            json!({"metadata": {"annotations": {"kubernetes.io/config.source": "file"}},
            "spec": {"containers": [{"name": "c"}]}}),
        );
        let none = Pressure::default();
        let memory = Pressure {
            memory: true,
            ..none
        };
        let disk = Pressure { disk: true, ..none };
        let both = Pressure {
            memory: true,
            disk: true,
            pid: false,
        };
        assert!(admit(&best_effort, none).is_ok());
        assert_eq!(
            admit(&best_effort, memory).unwrap_err().to_string(),
            "The node had condition: [MemoryPressure]. "
        );
        assert!(admit(&burstable, memory).is_ok());
        assert!(admit(&tolerant, memory).is_ok());
        assert_eq!(
            admit(&burstable, disk).unwrap_err().to_string(),
            "The node had condition: [DiskPressure]. "
        );
        assert_eq!(
            admit(&tolerant, both).unwrap_err().to_string(),
            "The node had condition: [MemoryPressure DiskPressure]. "
        );
        assert!(admit(&critical, both).is_ok());
        assert!(admit(&static_pod, both).is_ok());
    }

    #[test]
    fn this_host_has_readings() {
        let dir = tempfile::tempdir().unwrap();
        let s = observe(dir.path(), &dir.path().join("images"));
        for signal in ["memory.available", "nodefs.available", "imagefs.available"] {
            let r = s[signal];
            assert!(
                r.capacity > 0 && r.available <= r.capacity,
                "{signal}: {r:?}"
            );
        }
    }
}

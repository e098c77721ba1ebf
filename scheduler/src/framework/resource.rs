//! Resource arithmetic in the scheduler's integer form: what a pod requests (the shared
//! [`k1s_api::resource`] arithmetic: containers, init containers and sidecars, overhead) and
//! what a node offers.

use std::collections::BTreeMap;

use k1s_api::quantity::{Format, Quantity as K1sQuantity, ResourceList};
use k1s_api::resource::{self, Options};
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

/// CPU (millicores) counted for a container without a CPU request when scoring.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory (bytes) counted for a container without a memory request when scoring.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of every resource the scheduler tracks. `scalar` holds hugepages, extended
/// resources (`example.com/gpu`) and `attachable-volumes-*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    pub scalar: BTreeMap<String, i64>,
}

/// Whether `name` is tracked in [`Resource::scalar`].
pub fn is_scalar_resource(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
        || name.starts_with("attachable-volumes-")
        || is_extended_resource(name)
}

pub use k1s_api::resource::is_extended_resource;

fn parse_amount(name: &str, q: &Quantity) -> i64 {
    let Ok(parsed) = k1s_api::quantity::Quantity::parse(q.0.trim()) else {
        return 0;
    };
    let r = if name == CPU {
        parsed.milli_value()
    } else {
        parsed.value()
    };
    r.max(0)
}

impl Resource {
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Self {
        let mut r = Resource::default();
        for (name, q) in list.into_iter().flatten() {
            r.set(name, parse_amount(name, q));
        }
        r
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }

    pub fn set(&mut self, name: &str, v: i64) {
        match name {
            CPU => self.milli_cpu = v,
            MEMORY => self.memory = v,
            EPHEMERAL_STORAGE => self.ephemeral_storage = v,
            PODS => self.allowed_pod_number = v,
            other if is_scalar_resource(other) => {
                self.scalar.insert(other.to_owned(), v);
            }
            _ => {}
        }
    }

    pub fn add(&mut self, o: &Resource) {
        self.milli_cpu += o.milli_cpu;
        self.memory += o.memory;
        self.ephemeral_storage += o.ephemeral_storage;
        self.allowed_pod_number += o.allowed_pod_number;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    pub fn sub(&mut self, o: &Resource) {
        self.milli_cpu -= o.milli_cpu;
        self.memory -= o.memory;
        self.ephemeral_storage -= o.ephemeral_storage;
        self.allowed_pod_number -= o.allowed_pod_number;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
    }

    /// Each resource set to the larger of the two.
    pub fn set_max(&mut self, o: &Resource) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(o.allowed_pod_number);
        for (k, v) in &o.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }

    /// A node's allocatable resources (its capacity when allocatable is not reported).
    pub fn allocatable_of(node: &Node) -> Self {
        let status = node.status.as_ref();
        let list = status
            .and_then(|s| s.allocatable.as_ref())
            .or_else(|| status.and_then(|s| s.capacity.as_ref()));
        Resource::from_list(list)
    }
}

/// What a container without a request counts for, when scoring (upstream's
/// `NonMissingContainerRequests`: 100m CPU, 200Mi memory).
fn non_missing() -> &'static ResourceList {
    static DEFAULTS: std::sync::LazyLock<ResourceList> = std::sync::LazyLock::new(|| {
        [
            (
                CPU.to_string(),
                K1sQuantity::from_milli(DEFAULT_MILLI_CPU_REQUEST),
            ),
            (
                MEMORY.to_string(),
                K1sQuantity::from_value(DEFAULT_MEMORY_REQUEST, Format::BinarySI),
            ),
        ]
        .into_iter()
        .collect()
    });
    &DEFAULTS
}

impl Resource {
    /// The amounts of an exact resource list (CPU in millicores; negatives count as zero).
    pub fn from_resource_list(list: &ResourceList) -> Self {
        let mut r = Resource::default();
        for (name, q) in &list.0 {
            let v = if name == CPU {
                q.milli_value()
            } else {
                q.value()
            };
            r.set(name, v.max(0));
        }
        r
    }
}

/// What a pod requests: `(requests, non-zero cpu, non-zero memory)`, from
/// [`k1s_api::resource::pod_requests`] (containers, the largest init container use, sidecars,
/// overhead). The non-zero figures count 100m CPU and 200Mi memory for containers that do
/// not request them, for scoring.
pub fn pod_requests(pod: &Pod) -> (Resource, i64, i64) {
    let reqs = resource::pod_requests(pod, &Options::default());
    // Where every container requests cpu and memory the defaults change nothing: one pass.
    let requests_both = |c: &Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .is_some_and(|m| m.contains_key(CPU) && m.contains_key(MEMORY))
    };
    let complete = pod.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .all(requests_both)
    });
    let non_zero = if complete {
        reqs.clone()
    } else {
        resource::pod_requests(
            pod,
            &Options {
                non_missing: Some(non_missing()),
                ..Options::default()
            },
        )
    };
    let nz = |name: &str, milli: bool| {
        non_zero
            .get(name)
            .map_or(0, |q| if milli { q.milli_value() } else { q.value() })
    };
    (
        Resource::from_resource_list(&reqs),
        nz(CPU, true),
        nz(MEMORY, false),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{PodBuilder, res};

    #[test]
    fn pod_requests_as_upstream() {
        struct Case {
            name: &'static str,
            pod: Pod,
            cpu: i64,
            mem: i64,
            nz_cpu: i64,
        }
        let cases = vec![
            Case {
                name: "no requests",
                pod: PodBuilder::new("p").container(&[]).build(),
                cpu: 0,
                mem: 0,
                nz_cpu: 100,
            },
            Case {
                name: "sum of containers",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1"), ("memory", "1Gi")])
                    .container(&[("cpu", "500m")])
                    .build(),
                cpu: 1500,
                mem: 1 << 30,
                nz_cpu: 1500,
            },
            Case {
                name: "every container requests cpu and memory (one pass)",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1"), ("memory", "1Gi")])
                    .init_container(&[("cpu", "2"), ("memory", "1Mi")], false)
                    .build(),
                cpu: 2000,
                mem: 1 << 30,
                nz_cpu: 2000,
            },
            Case {
                name: "init container larger than containers",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .init_container(&[("cpu", "3")], false)
                    .build(),
                cpu: 3000,
                mem: 0,
                nz_cpu: 3000,
            },
            Case {
                name: "sidecar adds to containers and to later init containers",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .init_container(&[("cpu", "1")], true)
                    .init_container(&[("cpu", "2500m")], false)
                    .build(),
                cpu: 3500,
                mem: 0,
                nz_cpu: 3500,
            },
            Case {
                name: "overhead",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .overhead(&[("cpu", "250m"), ("memory", "10")])
                    .build(),
                cpu: 1250,
                mem: 10,
                nz_cpu: 1250,
            },
        ];
        for c in cases {
            let (r, nz_cpu, _) = pod_requests(&c.pod);
            assert_eq!(r.milli_cpu, c.cpu, "{}", c.name);
            assert_eq!(r.memory, c.mem, "{}", c.name);
            assert_eq!(nz_cpu, c.nz_cpu, "{}", c.name);
        }
        let r = Resource::from_list(Some(&res(&[
            ("example.com/gpu", "2"),
            ("hugepages-2Mi", "4Mi"),
        ])));
        assert_eq!(r.get("example.com/gpu"), 2);
        assert_eq!(r.get("hugepages-2Mi"), 4 << 20);
        assert!(!is_extended_resource("kubernetes.io/foo"));
    }
}

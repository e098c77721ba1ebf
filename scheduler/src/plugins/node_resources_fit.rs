//! NodeResourcesFit: Filter checks that the node has room for the pod's requests (cpu,
//! memory, ephemeral-storage, pod count, hugepages and extended resources); Score ranks by
//! LeastAllocated (default), MostAllocated or RequestedToCapacityRatio.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::framework::interface::*;
use crate::framework::resource::is_extended_resource;
use crate::framework::{
    Code, CycleState, FrameworkError, MAX_NODE_SCORE, NodeInfo, PodInfo, Status,
};

use super::resource_allocation::{ResourceSpec, allocatable_and_requested, default_resources};
use crate::plugin_names as names;

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Args {
    pub ignored_resources: Vec<String>,
    pub ignored_resource_groups: Vec<String>,
    pub scoring_strategy: Option<ScoringStrategy>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScoringStrategy {
    #[serde(rename = "type")]
    pub kind: String,
    pub resources: Vec<ResourceSpec>,
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatio>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestedToCapacityRatio {
    pub shape: Vec<UtilizationShapePoint>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UtilizationShapePoint {
    pub utilization: i32,
    pub score: i32,
}

#[derive(Debug, Clone, PartialEq)]
enum Strategy {
    LeastAllocated,
    MostAllocated,
    /// Shape points with scores already scaled to 0..=100.
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

/// One resource the node lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientResource {
    pub name: String,
    pub reason: String,
    pub requested: i64,
    pub used: i64,
    pub capacity: i64,
    /// The pod asks for more than the node has at all.
    pub unresolvable: bool,
}

#[derive(Debug)]
pub struct NodeResourcesFit {
    ignored: Vec<String>,
    ignored_groups: Vec<String>,
    strategy: Strategy,
    resources: Vec<ResourceSpec>,
}

impl Default for NodeResourcesFit {
    fn default() -> Self {
        Self {
            ignored: Vec::new(),
            ignored_groups: Vec::new(),
            strategy: Strategy::LeastAllocated,
            resources: default_resources(),
        }
    }
}

fn invalid(message: impl Into<String>) -> FrameworkError {
    FrameworkError::InvalidArgs {
        plugin: names::NODE_RESOURCES_FIT.into(),
        message: message.into(),
    }
}

impl NodeResourcesFit {
    pub fn new(args: Option<&serde_json::Value>) -> Result<Self, FrameworkError> {
        let args: Args = match args {
            Some(v) if !v.is_null() => {
                serde_json::from_value(v.clone()).map_err(|e| invalid(e.to_string()))?
            }
            _ => Args::default(),
        };
        let mut p = Self {
            ignored: args.ignored_resources,
            ignored_groups: args.ignored_resource_groups,
            ..Default::default()
        };
        if let Some(s) = args.scoring_strategy {
            if !s.resources.is_empty() {
                for r in &s.resources {
                    if !(1..=100).contains(&r.weight) {
                        return Err(invalid(format!(
                            "resource {:?} weight {} not in 1..=100",
                            r.name, r.weight
                        )));
                    }
                }
                p.resources = s.resources;
            }
            p.strategy = match s.kind.as_str() {
                "" | "LeastAllocated" => Strategy::LeastAllocated,
                "MostAllocated" => Strategy::MostAllocated,
                "RequestedToCapacityRatio" => {
                    let shape = s.requested_to_capacity_ratio.unwrap_or_default().shape;
                    if shape.is_empty() {
                        return Err(invalid("requestedToCapacityRatio shape must not be empty"));
                    }
                    let mut last = -1;
                    for pt in &shape {
                        if !(0..=100).contains(&pt.utilization) || pt.utilization <= last {
                            return Err(invalid("shape utilization must increase within 0..=100"));
                        }
                        if !(0..=10).contains(&pt.score) {
                            return Err(invalid("shape score must be within 0..=10"));
                        }
                        last = pt.utilization;
                    }
                    Strategy::RequestedToCapacityRatio(
                        shape
                            .iter()
                            .map(|p| {
                                (
                                    i64::from(p.utilization),
                                    i64::from(p.score) * MAX_NODE_SCORE / 10,
                                )
                            })
                            .collect(),
                    )
                }
                other => return Err(invalid(format!("unknown scoring strategy type {other:?}"))),
            };
        }
        Ok(p)
    }

    fn ignored(&self, name: &str) -> bool {
        is_extended_resource(name)
            && (self.ignored.iter().any(|i| i == name)
                || name
                    .split_once('/')
                    .is_some_and(|(g, _)| self.ignored_groups.iter().any(|i| i == g)))
    }

    /// Everything the node lacks for the pod, in upstream's order.
    pub fn insufficient_resources(
        &self,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Vec<InsufficientResource> {
        let mut out = Vec::new();
        let allowed = node.allocatable.allowed_pod_number;
        let used = node.pods.len() as i64;
        if used + 1 > allowed {
            out.push(InsufficientResource {
                name: "pods".into(),
                reason: "Too many pods".into(),
                requested: 1,
                used,
                capacity: allowed,
                unresolvable: allowed < 1,
            });
        }
        let req = &pod.requests;
        if req.is_zero() {
            return out;
        }
        let mut check = |name: &str, want: i64, have: i64, used: i64| {
            if want > 0 && want > have - used {
                out.push(InsufficientResource {
                    name: name.into(),
                    reason: format!("Insufficient {name}"),
                    requested: want,
                    used,
                    capacity: have,
                    unresolvable: want > have,
                });
            }
        };
        let a = &node.allocatable;
        let u = &node.requested;
        check("cpu", req.milli_cpu, a.milli_cpu, u.milli_cpu);
        check("memory", req.memory, a.memory, u.memory);
        check(
            "ephemeral-storage",
            req.ephemeral_storage,
            a.ephemeral_storage,
            u.ephemeral_storage,
        );
        for (name, want) in &req.scalar {
            if self.ignored(name) {
                continue;
            }
            check(name, *want, a.get(name), u.get(name));
        }
        out
    }

    fn score_with(&self, pod: &PodInfo, node: &NodeInfo) -> i64 {
        let mut node_score = 0i64;
        let mut weight_sum = 0i64;
        for r in &self.resources {
            let (alloc, req) = allocatable_and_requested(node, pod, &r.name, false);
            if alloc == 0 {
                continue;
            }
            let s = match &self.strategy {
                Strategy::LeastAllocated => {
                    if req > alloc {
                        0
                    } else {
                        (alloc - req) * MAX_NODE_SCORE / alloc
                    }
                }
                Strategy::MostAllocated => req.min(alloc) * MAX_NODE_SCORE / alloc,
                Strategy::RequestedToCapacityRatio(shape) => {
                    let util = if req > alloc { 100 } else { req * 100 / alloc };
                    broken_linear(shape, util)
                }
            };
            node_score += s * r.weight;
            weight_sum += r.weight;
        }
        if weight_sum == 0 {
            return 0;
        }
        match self.strategy {
            Strategy::RequestedToCapacityRatio(_) => {
                (node_score as f64 / weight_sum as f64).round() as i64
            }
            _ => node_score / weight_sum,
        }
    }
}

/// Upstream `buildBrokenLinearFunction`: linear interpolation between shape points.
fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, s)) in shape.iter().enumerate() {
        if p <= u {
            if i == 0 {
                return s;
            }
            let (pu, ps) = shape[i - 1];
            return ps + (s - ps) * (p - pu) / (u - pu);
        }
    }
    shape.last().map(|x| x.1).unwrap_or(0)
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        names::NODE_RESOURCES_FIT
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (
                EventResource::Pod,
                &[ActionType::Delete, ActionType::Update],
            ),
            (EventResource::Node, &[ActionType::Add, ActionType::Update]),
        ])
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        Some(self)
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let ins = self.insufficient_resources(pod, node);
        if ins.is_empty() {
            return Status::success();
        }
        let code = if ins.iter().any(|i| i.unresolvable) {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Status::with_reasons(code, ins.into_iter().map(|i| i.reason).collect())
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        (self.score_with(pod, node), Status::success())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn node_resources_fit_filter() {
        let node = || {
            NodeBuilder::new("n").allocatable(&[
                ("cpu", "10"),
                ("memory", "20"),
                ("pods", "32"),
                ("ephemeral-storage", "20"),
                ("example.com/gpu", "2"),
                ("hugepages-2Mi", "4Mi"),
            ])
        };
        let used = || {
            PodBuilder::new("e")
                .container(&[("cpu", "5"), ("memory", "19")])
                .node("n")
                .build()
        };
        struct Case {
            name: &'static str,
            pod: PodBuilder,
            existing: Vec<k8s_openapi::api::core::v1::Pod>,
            want: Code,
            reasons: Vec<&'static str>,
        }
        let cases = vec![
            Case {
                name: "no resources requested always fits",
                pod: PodBuilder::new("p").container(&[]),
                existing: vec![used()],
                want: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "too many resources fails",
                pod: PodBuilder::new("p").container(&[("cpu", "6"), ("memory", "2")]),
                existing: vec![used()],
                want: Code::Unschedulable,
                reasons: vec!["Insufficient cpu", "Insufficient memory"],
            },
            Case {
                name: "init container counted",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .init_container(&[("cpu", "6")], false),
                existing: vec![used()],
                want: Code::Unschedulable,
                reasons: vec!["Insufficient cpu"],
            },
            Case {
                name: "fits after existing",
                pod: PodBuilder::new("p").container(&[("cpu", "5"), ("memory", "1")]),
                existing: vec![used()],
                want: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "more than allocatable is unresolvable",
                pod: PodBuilder::new("p").container(&[("cpu", "11")]),
                existing: vec![],
                want: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient cpu"],
            },
            Case {
                name: "extended resource",
                pod: PodBuilder::new("p").container(&[("example.com/gpu", "3")]),
                existing: vec![],
                want: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient example.com/gpu"],
            },
            Case {
                name: "extended resource fits",
                pod: PodBuilder::new("p").container(&[("example.com/gpu", "2")]),
                existing: vec![],
                want: Code::Success,
                reasons: vec![],
            },
            Case {
                name: "unknown extended resource",
                pod: PodBuilder::new("p").container(&[("example.com/fpga", "1")]),
                existing: vec![],
                want: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient example.com/fpga"],
            },
            Case {
                name: "hugepages",
                pod: PodBuilder::new("p").container(&[("hugepages-2Mi", "6Mi")]),
                existing: vec![],
                want: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient hugepages-2Mi"],
            },
            Case {
                name: "ephemeral storage",
                pod: PodBuilder::new("p").container(&[("ephemeral-storage", "25")]),
                existing: vec![],
                want: Code::UnschedulableAndUnresolvable,
                reasons: vec!["Insufficient ephemeral-storage"],
            },
            Case {
                name: "overhead counted",
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "4")])
                    .overhead(&[("cpu", "2")]),
                existing: vec![used()],
                want: Code::Unschedulable,
                reasons: vec!["Insufficient cpu"],
            },
        ];
        for c in cases {
            let ni = node_info(node().build(), c.existing);
            let s = NodeResourcesFit::default().filter(&CycleState::new(), &c.pod.info(), &ni);
            assert_eq!(s.code(), c.want, "{}", c.name);
            assert_eq!(s.reasons(), c.reasons, "{}", c.name);
        }
        // Pod count.
        let ni = node_info(
            NodeBuilder::new("n")
                .allocatable(&[("cpu", "1"), ("pods", "1")])
                .build(),
            vec![PodBuilder::new("e").node("n").build()],
        );
        let s = NodeResourcesFit::default().filter(
            &CycleState::new(),
            &PodBuilder::new("p").info(),
            &ni,
        );
        assert_eq!(s.reasons(), ["Too many pods"]);
        // Ignored resource groups.
        let p = NodeResourcesFit::new(Some(
            &serde_json::json!({"ignoredResourceGroups": ["example.com"]}),
        ))
        .unwrap();
        let s = p.filter(
            &CycleState::new(),
            &PodBuilder::new("p")
                .container(&[("example.com/fpga", "1")])
                .info(),
            &node_info(node().build(), vec![]),
        );
        assert!(s.is_success());
    }

    #[test]
    fn node_resources_fit_score() {
        let node = |cpu: &str, mem: &str| {
            NodeBuilder::new("n").allocatable(&[("cpu", cpu), ("memory", mem), ("pods", "110")])
        };
        let pod = || {
            PodBuilder::new("p")
                .container(&[("cpu", "3"), ("memory", "5000")])
                .info()
        };
        let existing = || {
            vec![
                PodBuilder::new("e")
                    .container(&[("cpu", "3"), ("memory", "5000")])
                    .node("n")
                    .build(),
            ]
        };
        let cases: Vec<(&str, serde_json::Value, i64)> = vec![
            // cpu (10000-6000)*100/10000 = 40, memory (20000-10000)*100/20000 = 50 → 45
            ("least allocated", serde_json::json!(null), 45),
            (
                "most allocated",
                serde_json::json!({"scoringStrategy": {"type": "MostAllocated"}}),
                55,
            ),
            (
                "requested to capacity ratio",
                serde_json::json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}}),
                55,
            ),
            (
                "weighted resources",
                serde_json::json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}}),
                42,
            ),
        ];
        for (name, args, want) in cases {
            let p = NodeResourcesFit::new(Some(&args)).unwrap();
            let ni = node_info(node("10", "20000").build(), existing());
            assert_eq!(p.score(&CycleState::new(), &pod(), &ni).0, want, "{name}");
        }
        assert!(
            NodeResourcesFit::new(Some(
                &serde_json::json!({"scoringStrategy": {"type": "Bogus"}})
            ))
            .is_err()
        );
        // Pods without requests count the non-zero defaults.
        let ni = node_info(node("1", "1Gi").build(), vec![]);
        let s = NodeResourcesFit::default()
            .score(
                &CycleState::new(),
                &PodBuilder::new("p").container(&[]).info(),
                &ni,
            )
            .0;
        // cpu (1000-100)*100/1000 = 90, memory (1024-200)*100/1024 = 80 → 85
        assert_eq!(s, 85);
    }
}

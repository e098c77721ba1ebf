//! NodeResourcesBalancedAllocation: prefers nodes whose resource fractions (requested /
//! allocatable, with the pod) are close to each other: score = (1 - std deviation) × 100.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::framework::interface::*;
use crate::framework::{
    CycleState, FrameworkError, MAX_NODE_SCORE, NodeInfo, PodInfo, Snapshot, Status,
};

use super::resource_allocation::{
    ResourceSpec, allocatable_and_requested, default_resources, pod_request,
};
use crate::plugin_names as names;

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Args {
    pub resources: Vec<ResourceSpec>,
}

#[derive(Debug)]
pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        Self {
            resources: default_resources(),
        }
    }
}

impl BalancedAllocation {
    pub fn new(args: Option<&serde_json::Value>) -> Result<Self, FrameworkError> {
        let args: Args = match args {
            Some(v) if !v.is_null() => {
                serde_json::from_value(v.clone()).map_err(|e| FrameworkError::InvalidArgs {
                    plugin: names::NODE_RESOURCES_BALANCED_ALLOCATION.into(),
                    message: e.to_string(),
                })?
            }
            _ => Args::default(),
        };
        let mut p = Self::default();
        if !args.resources.is_empty() {
            p.resources = args.resources;
        }
        Ok(p)
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        names::NODE_RESOURCES_BALANCED_ALLOCATION
    }
    fn as_pre_score(self: Arc<Self>) -> Option<Arc<dyn PreScorePlugin>> {
        Some(self)
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        Some(self)
    }
}

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        // Best-effort pods change no balance.
        if self
            .resources
            .iter()
            .all(|r| pod_request(pod, &r.name, true) == 0)
        {
            Status::skip()
        } else {
            Status::success()
        }
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let mut fractions = Vec::with_capacity(self.resources.len());
        for r in &self.resources {
            let (alloc, req) = allocatable_and_requested(node, pod, &r.name, true);
            if alloc == 0 {
                continue;
            }
            fractions.push((req as f64 / alloc as f64).min(1.0));
        }
        let std = match fractions.len() {
            0 | 1 => 0.0,
            2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
            n => {
                let mean = fractions.iter().sum::<f64>() / n as f64;
                (fractions
                    .iter()
                    .map(|f| (f - mean) * (f - mean))
                    .sum::<f64>()
                    / n as f64)
                    .sqrt()
            }
        };
        (
            ((1.0 - std) * MAX_NODE_SCORE as f64) as i64,
            Status::success(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn balanced_allocation_score() {
        let cases = [
            // cpu 3000/4000 = .75, mem 5000/10000 = .5 → std .125 → 87
            (
                "unbalanced",
                &[("cpu", "3"), ("memory", "5000")][..],
                &[("cpu", "4"), ("memory", "10000")][..],
                87,
            ),
            (
                "balanced",
                &[("cpu", "2"), ("memory", "5000")][..],
                &[("cpu", "4"), ("memory", "10000")][..],
                100,
            ),
            (
                "over capacity caps at 1",
                &[("cpu", "8"), ("memory", "5000")][..],
                &[("cpu", "4"), ("memory", "10000")][..],
                75,
            ),
        ];
        for (name, req, alloc, want) in cases {
            let ni = node_info(NodeBuilder::new("n").allocatable(alloc).build(), vec![]);
            let pod = PodBuilder::new("p").container(req).info();
            assert_eq!(
                BalancedAllocation::default()
                    .score(&CycleState::new(), &pod, &ni)
                    .0,
                want,
                "{name}"
            );
        }
        let mut st = CycleState::new();
        let s = BalancedAllocation::default().pre_score(
            &mut st,
            &PodBuilder::new("p").container(&[]).info(),
            &[],
            &Snapshot::default(),
        );
        assert!(s.is_skip());
    }
}

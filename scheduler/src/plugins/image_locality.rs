//! ImageLocality: prefers nodes that already have the pod's images, weighted by image size
//! and by how many nodes have the image (to avoid piling onto one node).

use std::sync::Arc;

use crate::framework::interface::*;
use crate::framework::node_info::normalize_image;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeInfo, PodInfo, Snapshot, Status};

use crate::plugin_names as names;

const MB: i64 = 1024 * 1024;
const MIN_THRESHOLD: i64 = 23 * MB;
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;
const STATE_KEY: &str = "PreScoreImageLocality";

#[derive(Debug, Clone)]
struct State {
    total_nodes: usize,
    /// The pod's images with the number of nodes that have them.
    images: Vec<(String, usize)>,
}

#[derive(Debug, Default)]
pub struct ImageLocality;

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        names::IMAGE_LOCALITY
    }
    fn as_pre_score(self: Arc<Self>) -> Option<Arc<dyn PreScorePlugin>> {
        Some(self)
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        Some(self)
    }
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        snap: &Snapshot,
    ) -> Status {
        let spec = pod.pod.spec.as_ref();
        let images = spec
            .into_iter()
            .flat_map(|s| {
                s.init_containers
                    .iter()
                    .flatten()
                    .chain(s.containers.iter())
            })
            .map(|c| {
                let n = normalize_image(c.image.as_deref().unwrap_or(""));
                let count = snap.image_nodes.get(&n).copied().unwrap_or(0);
                (n, count)
            })
            .collect::<Vec<_>>();
        // No node has any of the images: every node would score 0, so Score need not run (the
        // common case of a cluster whose nodes report no images, as hollow nodes do).
        if images.iter().all(|(_, count)| *count == 0) {
            return Status::skip();
        }
        state.write(
            STATE_KEY,
            State {
                total_nodes: snap.len(),
                images,
            },
        );
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(st) = state.read::<State>(STATE_KEY) else {
            return (0, Status::error("reading PreScoreImageLocality state"));
        };
        let total = st.total_nodes.max(1) as f64;
        let sum: i64 = st
            .images
            .iter()
            .filter_map(|(i, count)| node.image_sizes.get(i).map(|s| (*s, *count)))
            .map(|(size, count)| (size as f64 * (count as f64 / total)) as i64)
            .sum();
        (
            calculate_priority(sum, st.images.len() as i64),
            Status::success(),
        )
    }
}

fn calculate_priority(sum: i64, num_containers: i64) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD * num_containers.max(1);
    let s = sum.clamp(MIN_THRESHOLD, max);
    MAX_NODE_SCORE * (s - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::node_info::Snapshot;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn image_locality_score() {
        let snap = Snapshot::new(
            vec![
                node_info(
                    NodeBuilder::new("n1")
                        .image("gcr.io/big:v1", 500 * MB)
                        .image("gcr.io/small:v1", 10 * MB)
                        .build(),
                    vec![],
                ),
                node_info(
                    NodeBuilder::new("n2")
                        .image("gcr.io/big:v1", 500 * MB)
                        .build(),
                    vec![],
                ),
                node_info(NodeBuilder::new("n3").build(), vec![]),
                node_info(NodeBuilder::new("n4").build(), vec![]),
            ],
            Default::default(),
        );
        let cases = [
            // No node has the image: Score is skipped, which scores every node 0 (below).
            (
                "image on no node",
                PodBuilder::new("p").image("gcr.io/nowhere:v1"),
                "n1",
                0,
            ),
            // 500MB × 2/4 nodes = 250MB → 100 × (250-23)/(1000-23) = 23
            (
                "big image on half the nodes",
                PodBuilder::new("p").image("gcr.io/big:v1"),
                "n1",
                23,
            ),
            (
                "image absent",
                PodBuilder::new("p").image("gcr.io/big:v1"),
                "n3",
                0,
            ),
            (
                "small image below threshold",
                PodBuilder::new("p").image("gcr.io/small:v1"),
                "n1",
                0,
            ),
            // two containers: max threshold 2000MB → 100 × (250-23)/(2000-23) = 11
            (
                "two containers",
                PodBuilder::new("p")
                    .image("gcr.io/big:v1")
                    .image("gcr.io/small:v1"),
                "n2",
                11,
            ),
        ];
        for (name, pod, node, want) in cases {
            let pod = pod.info();
            let mut st = CycleState::new();
            let pre = ImageLocality.pre_score(&mut st, &pod, &snap.nodes, &snap);
            let got = if pre.code() == Code::Skip {
                // What a skipped plugin adds to every node's total.
                0
            } else {
                ImageLocality.score(&st, &pod, snap.get(node).unwrap()).0
            };
            assert_eq!(got, want, "{name}");
            // Skipped exactly when no node has any of the pod's images.
            let anywhere = pod.pod.spec.iter().flat_map(|s| &s.containers).any(|c| {
                let image = normalize_image(c.image.as_deref().unwrap_or(""));
                snap.image_nodes.contains_key(&image)
            });
            assert_eq!(pre.code() == Code::Skip, !anywhere, "{name}");
        }
    }
}

//! Node IPAM, as kube-controller-manager's range allocator (`--allocate-node-cidrs`): every
//! Node without `spec.podCIDR` gets the first free subnet of `--cluster-cidr` of size
//! `--node-cidr-mask-size` (a /24 of 10.42.0.0/16 by default), set once (the API server
//! refuses to change it afterwards). Which subnets are taken is read from the Nodes
//! themselves, so a deleted Node's subnet is free again and a restart loses nothing; a node
//! whose kubelet chose its own `--pod-cidr` inside the range keeps it and it counts as taken.
//! When the range is exhausted the Node is left without one, with a warning Event
//! (`CIDRNotAvailable`, as upstream).

use std::collections::BTreeSet;
use std::sync::Arc;

use k1s_api::client::{Client, ClientError, Patch, ResourceRef};
use k1s_api::net::Ipv4Net;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::ObjectKey;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

#[derive(Debug, thiserror::Error)]
pub enum NodeIpamError {
    #[error("setting the pod CIDR of node {node}: {source}")]
    Patch {
        node: String,
        #[source]
        source: ClientError,
    },
}

/// The range and the size of each node's share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub cluster_cidr: Ipv4Net,
    pub node_mask: u8,
}

/// Runs the allocator until `cancel`.
pub async fn run(client: Arc<dyn Client>, config: Config, cancel: CancellationToken) {
    let ctrl = Controller::new(
        "node-ipam",
        client.clone(),
        ResourceRef::new("", "v1", "nodes", None),
        watcher::Config::default(),
    );
    let nodes = ctrl.store();
    ctrl.run(
        Arc::new(NodeIpam {
            client,
            nodes,
            config,
        }),
        cancel,
    )
    .await;
}

struct NodeIpam {
    client: Arc<dyn Client>,
    nodes: Store,
    config: Config,
}

/// The node's pod CIDR, parsed; `None` when unset or not IPv4.
fn pod_cidr(node: &Value) -> Option<Ipv4Net> {
    node["spec"]["podCIDR"].as_str()?.parse().ok()
}

/// The first subnet of the range that no Node holds (nor overlaps).
pub fn free_subnet(config: &Config, nodes: &[Arc<Value>]) -> Option<Ipv4Net> {
    let taken: BTreeSet<Ipv4Net> = nodes.iter().filter_map(|n| pod_cidr(n)).collect();
    config
        .cluster_cidr
        .subnets(config.node_mask)
        .find(|s| !taken.iter().any(|t| t.contains_net(s) || s.contains_net(t)))
}

#[async_trait::async_trait]
impl Reconcile for NodeIpam {
    type Error = NodeIpamError;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, NodeIpamError> {
        let Some(node) = self.nodes.get(key) else {
            return Ok(Action::await_change());
        };
        if !node["spec"]["podCIDR"].is_null() || !node["metadata"]["deletionTimestamp"].is_null() {
            return Ok(Action::await_change());
        }
        let Some(subnet) = free_subnet(&self.config, &self.nodes.list()) else {
            tracing::warn!(node = %key.name, range = %self.config.cluster_cidr, "no pod CIDR left for the node");
            let source = k1s_api::events::Source {
                component: "node-ipam-controller".into(),
                host: None,
            };
            let about = k1s_api::events::Involved {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: key.name.clone(),
                uid: node["metadata"]["uid"].as_str().unwrap_or_default().into(),
                ..Default::default()
            };
            k1s_api::events::record(
                &*self.client,
                &source,
                &about,
                "Warning",
                "CIDRNotAvailable",
                "Allocate",
                &format!(
                    "Node {} status is now: CIDRNotAvailable (no /{} left in {})",
                    key.name, self.config.node_mask, self.config.cluster_cidr
                ),
            )
            .await;
            return Ok(Action::requeue(std::time::Duration::from_secs(30)));
        };
        let nodes = ResourceRef::new("", "v1", "nodes", None);
        let patch = Patch::Merge(json!({"spec": {
            "podCIDR": subnet.to_string(), "podCIDRs": [subnet.to_string()]}}));
        match self
            .client
            .patch(&nodes, &key.name, &patch, None, &Default::default())
            .await
        {
            Ok(_) => {
                tracing::info!(node = %key.name, pod_cidr = %subnet, "pod CIDR assigned");
                Ok(Action::await_change())
            }
            // Gone, or set meanwhile (the API server refuses a second value): its own event
            // brings the current state.
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(Action::await_change()),
            Err(source) => Err(NodeIpamError::Patch {
                node: key.name.clone(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cidr: Option<&str>) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": "n"}, "spec": {"podCIDR": cidr}}))
    }

    #[test]
    fn first_free_subnet_skipping_taken_and_overlapping_ones() {
        let config = Config {
            cluster_cidr: "10.42.0.0/16".parse().unwrap(),
            node_mask: 24,
        };
        assert_eq!(
            free_subnet(&config, &[]).unwrap().to_string(),
            "10.42.0.0/24"
        );
        let nodes = [
            node(Some("10.42.0.0/24")),
            node(Some("10.42.1.0/25")),
            node(None),
            node(Some("192.168.0.0/24")),
        ];
        assert_eq!(
            free_subnet(&config, &nodes).unwrap().to_string(),
            "10.42.2.0/24"
        );
        let tiny = Config {
            cluster_cidr: "10.42.0.0/23".parse().unwrap(),
            node_mask: 24,
        };
        assert!(free_subnet(&tiny, &nodes[..2]).is_none(), "exhausted");
    }
}

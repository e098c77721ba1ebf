//! Load balancers without a cloud, as k3s's ServiceLB and KubeSolo do: a `type: LoadBalancer`
//! Service (without a `loadBalancerClass`, which belongs to another implementation such as
//! MetalLB) gets the addresses of the eligible nodes as `status.loadBalancer.ingress`, and
//! every node's service proxy serves those addresses like externalIPs, so `NODE-IP:port`
//! reaches the Service.
//!
//! Eligible: Ready nodes without the `node.kubernetes.io/exclude-from-external-load-balancers`
//! label; a node's ExternalIP addresses if it has any, else its InternalIP ones (k3s's
//! order). A Service that stops being a load balancer has its ingress cleared, as upstream's
//! service controller does. `--disable servicelb` turns this controller off.

use std::collections::BTreeSet;
use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ResourceRef};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::ObjectKey;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// The label that keeps a node out of load balancers (upstream's).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

#[derive(Debug, thiserror::Error)]
pub enum ServiceLbError {
    #[error("updating the load balancer status of service {key}: {source}")]
    Status {
        key: String,
        #[source]
        source: ClientError,
    },
}

/// Runs the controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "servicelb",
        client.clone(),
        ResourceRef::new("", "v1", "services", None),
        watcher::Config::default(),
    );
    let services = ctrl.store();
    let all = services.clone();
    // Any node change can change every load balancer's addresses.
    let nodes = ctrl.watches(
        ResourceRef::new("", "v1", "nodes", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |_node: &Value, _| {
            all.list()
                .iter()
                .filter(|s| s["spec"]["type"] == "LoadBalancer")
                .filter_map(|s| ObjectKey::of(s))
                .collect()
        }),
    );
    ctrl.run(
        Arc::new(ServiceLb {
            client,
            services,
            nodes,
        }),
        cancel,
    )
    .await;
}

struct ServiceLb {
    client: Arc<dyn Client>,
    services: Store,
    nodes: Store,
}

/// The ingress addresses of the eligible nodes, sorted.
pub fn ingress(nodes: &[Arc<Value>]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for n in nodes {
        let ready = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let excluded = n["metadata"]["labels"].get(EXCLUDE_LABEL).is_some();
        if !ready || excluded {
            continue;
        }
        let addresses: Vec<&Value> = n["status"]["addresses"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let of = |kind: &str| -> Vec<String> {
            addresses
                .iter()
                .filter(|a| a["type"] == kind)
                .filter_map(|a| a["address"].as_str().map(String::from))
                .collect()
        };
        let external = of("ExternalIP");
        out.extend(if external.is_empty() {
            of("InternalIP")
        } else {
            external
        });
    }
    out.into_iter().collect()
}

#[async_trait::async_trait]
impl Reconcile for ServiceLb {
    type Error = ServiceLbError;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ServiceLbError> {
        let Some(svc) = self.services.get(key) else {
            return Ok(Action::await_change());
        };
        let spec = &svc["spec"];
        if !spec["loadBalancerClass"].is_null() {
            return Ok(Action::await_change());
        }
        let want: Vec<Value> = if spec["type"] == "LoadBalancer" {
            ingress(&self.nodes.list())
                .into_iter()
                .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
                .collect()
        } else {
            Vec::new()
        };
        let have = svc["status"]["loadBalancer"]["ingress"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if have == want {
            return Ok(Action::await_change());
        }
        let mut updated = (*svc).clone();
        updated["status"]["loadBalancer"] = if want.is_empty() {
            json!({})
        } else {
            json!({ "ingress": want })
        };
        let r = ResourceRef::new("", "v1", "services", key.namespace.as_deref());
        k1s_runtime::write::update_status(&*self.client, &r, updated)
            .await
            .map_err(|source| ServiceLbError::Status {
                key: key.to_string(),
                source,
            })?;
        Ok(Action::await_change())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool, addrs: &[(&str, &str)], labels: Value) -> Arc<Value> {
        Arc::new(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "addresses": addrs.iter().map(|(t, a)| json!({"type": t, "address": a})).collect::<Vec<_>>(),
            }
        }))
    }

    #[test]
    fn eligible_nodes_and_their_addresses() {
        let nodes = [
            node(
                "a",
                true,
                &[("InternalIP", "192.0.2.2"), ("Hostname", "a")],
                json!({}),
            ),
            node(
                "b",
                true,
                &[("InternalIP", "10.0.0.3"), ("ExternalIP", "198.51.100.3")],
                json!({}),
            ),
            node("c", false, &[("InternalIP", "192.0.2.4")], json!({})),
            node(
                "d",
                true,
                &[("InternalIP", "192.0.2.5")],
                json!({EXCLUDE_LABEL: ""}),
            ),
            node("e", true, &[("InternalIP", "192.0.2.2")], json!({})),
        ];
        assert_eq!(ingress(&nodes), ["192.0.2.2", "198.51.100.3"]);
    }
}

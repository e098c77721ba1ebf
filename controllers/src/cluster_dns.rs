//! The `kube-dns` Service's endpoints: one per node whose DNS server has announced itself
//! (Node annotation [`ADDRESS_ANNOTATION`], set by the node once its informers have synced),
//! with `nodeName`, so that with the Service's `internalTrafficPolicy: Local` each node's
//! service proxy sends its pods' queries to its own server.
//!
//! Kept as one EndpointSlice ([`dns::SLICE`], owned by the Service, so it goes with it) and,
//! for readers of the older API (`kubectl get endpoints`), an Endpoints object of the
//! Service's name. Only a Service without a selector is handled: one that selects pods is
//! the EndpointSlice controller's (a user who replaced k1s's DNS with CoreDNS pods). Off
//! with `--disable dns`.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use k1s_api::dns::{self, ADDRESS_ANNOTATION};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::ObjectKey;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

#[derive(Debug, thiserror::Error)]
pub enum ClusterDnsError {
    #[error("writing the {what} of the kube-dns Service: {source}")]
    Write {
        what: &'static str,
        #[source]
        source: ClientError,
    },
}

/// Runs the controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "cluster-dns",
        client.clone(),
        ResourceRef::new("", "v1", "services", Some(dns::NAMESPACE)),
        watcher::Config::default(),
    );
    let services = ctrl.store();
    let key = ObjectKey::new(Some(dns::NAMESPACE), dns::SERVICE);
    let k = key.clone();
    let nodes = ctrl.watches(
        ResourceRef::new("", "v1", "nodes", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |_node: &Value, _| vec![k.clone()]),
    );
    let slices = ctrl.watches(
        ResourceRef::new(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            Some(dns::NAMESPACE),
        ),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |_s: &Value, _| vec![key.clone()]),
    );
    ctrl.run(
        Arc::new(ClusterDns {
            client,
            services,
            nodes,
            slices,
        }),
        cancel,
    )
    .await;
}

struct ClusterDns {
    client: Arc<dyn Client>,
    services: Store,
    nodes: Store,
    slices: Store,
}

/// (node name, address) of every node that announced its DNS server, sorted by name.
pub fn servers(nodes: &[Arc<Value>]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            let name = n["metadata"]["name"].as_str()?;
            let addr = n["metadata"]["annotations"][ADDRESS_ANNOTATION].as_str()?;
            addr.parse::<std::net::Ipv4Addr>().ok()?;
            Some((name.to_string(), addr.to_string()))
        })
        .collect();
    out.sort();
    out
}

/// The Service's ports as endpoint ports (the target port where it is a number).
fn ports(svc: &Value) -> Vec<Value> {
    svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p["targetPort"].as_i64().or(p["port"].as_i64()).unwrap_or(0);
            json!({"name": p["name"], "protocol": p["protocol"].as_str().unwrap_or("TCP"), "port": port})
        })
        .collect()
}

/// The EndpointSlice for `svc` and `servers`.
pub fn slice(svc: &Value, servers: &[(String, String)]) -> Value {
    let endpoints: Vec<Value> = servers
        .iter()
        .map(|(node, ip)| {
            json!({
                "addresses": [ip],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": node,
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": dns::SLICE, "namespace": dns::NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": dns::SERVICE,
                "endpointslice.kubernetes.io/managed-by": dns::SLICE_MANAGER,
                dns::MANAGED_BY.0: dns::MANAGED_BY.1,
            },
            "ownerReferences": [owner(svc)],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports(svc),
    })
}

/// The Endpoints object for `svc` and `servers`.
pub fn endpoints(svc: &Value, servers: &[(String, String)]) -> Value {
    let addresses: Vec<Value> = servers
        .iter()
        .map(|(node, ip)| json!({"ip": ip, "nodeName": node}))
        .collect();
    let subsets = if addresses.is_empty() {
        json!([])
    } else {
        let ports: Vec<Value> = ports(svc);
        json!([{"addresses": addresses, "ports": ports}])
    };
    json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {
            "name": dns::SERVICE, "namespace": dns::NAMESPACE,
            "labels": {dns::MANAGED_BY.0: dns::MANAGED_BY.1},
        },
        "subsets": subsets,
    })
}

fn owner(svc: &Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "name": svc["metadata"]["name"], "uid": svc["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": true,
    })
}

/// Creates `want`, or replaces `have` when what matters differs (`fields`).
async fn put(
    client: &dyn Client,
    r: &ResourceRef,
    have: Option<Value>,
    mut want: Value,
    fields: &[&str],
    what: &'static str,
) -> Result<(), ClusterDnsError> {
    let err = |source| ClusterDnsError::Write { what, source };
    let params = WriteParams::default();
    match have {
        None => match client.create(r, want, &params).await {
            Ok(_) => Ok(()),
            // Created meanwhile: its own event brings us back.
            Err(e) if e.is_already_exists() => Ok(()),
            Err(e) => Err(err(e)),
        },
        Some(have) => {
            let same = fields.iter().all(|f| have[f] == want[f])
                && have["metadata"]["labels"] == want["metadata"]["labels"];
            if same {
                return Ok(());
            }
            want["metadata"]["resourceVersion"] = have["metadata"]["resourceVersion"].clone();
            match client.update(r, want, None, &params).await {
                Ok(_) => Ok(()),
                Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
                Err(e) => Err(err(e)),
            }
        }
    }
}

#[async_trait::async_trait]
impl Reconcile for ClusterDns {
    type Error = ClusterDnsError;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ClusterDnsError> {
        if key.name != dns::SERVICE {
            return Ok(Action::await_change());
        }
        let Some(svc) = self.services.get(key) else {
            // The slice goes with its owner (garbage collector).
            return Ok(Action::await_change());
        };
        if !svc["spec"]["selector"].is_null() || svc["spec"]["type"] == "ExternalName" {
            return Ok(Action::await_change());
        }
        let servers = servers(&self.nodes.list());
        let slices = ResourceRef::new(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            Some(dns::NAMESPACE),
        );
        let have = self
            .slices
            .get(&ObjectKey::new(Some(dns::NAMESPACE), dns::SLICE))
            .map(|s| (*s).clone());
        put(
            &*self.client,
            &slices,
            have,
            slice(&svc, &servers),
            &["endpoints", "ports"],
            "EndpointSlice",
        )
        .await?;
        let eps_ref = ResourceRef::new("", "v1", "endpoints", Some(dns::NAMESPACE));
        let have = match self.client.get(&eps_ref, dns::SERVICE).await {
            Ok(v) => Some(v),
            Err(e) if e.is_not_found() => None,
            Err(source) => {
                return Err(ClusterDnsError::Write {
                    what: "Endpoints",
                    source,
                });
            }
        };
        put(
            &*self.client,
            &eps_ref,
            have,
            endpoints(&svc, &servers),
            &["subsets"],
            "Endpoints",
        )
        .await?;
        Ok(Action::await_change())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, addr: Option<&str>) -> Arc<Value> {
        let mut n = json!({"metadata": {"name": name}});
        if let Some(a) = addr {
            n["metadata"]["annotations"] = json!({ADDRESS_ANNOTATION: a});
        }
        Arc::new(n)
    }

    #[test]
    fn announced_servers_become_endpoints_with_their_node() {
        let nodes = [
            node("b", Some("10.42.1.1")),
            node("a", Some("10.42.0.1")),
            node("c", None),
            node("d", Some("not an address")),
        ];
        let s = servers(&nodes);
        assert_eq!(
            s,
            [
                ("a".into(), "10.42.0.1".into()),
                ("b".into(), "10.42.1.1".into())
            ]
        );
        let mut svc = dns::service("10.43.0.10".parse().unwrap());
        svc["metadata"]["uid"] = json!("u1");
        let sl = slice(&svc, &s);
        assert_eq!(sl["endpoints"][1]["nodeName"], "b");
        assert_eq!(sl["endpoints"][0]["addresses"][0], "10.42.0.1");
        assert_eq!(sl["ports"].as_array().unwrap().len(), 3);
        assert_eq!(
            sl["ports"][0],
            json!({"name": "dns", "protocol": "UDP", "port": 53})
        );
        assert_eq!(sl["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(
            sl["metadata"]["labels"]["kubernetes.io/service-name"],
            "kube-dns"
        );
        let eps = endpoints(&svc, &s);
        assert_eq!(eps["subsets"][0]["addresses"][1]["ip"], "10.42.1.1");
        assert_eq!(endpoints(&svc, &[])["subsets"], json!([]));
    }
}

//! The Endpoints controller, as upstream's `pkg/controller/endpoint`: for every Service with a
//! selector, an Endpoints object of the same name listing the selected pods.
//!
//! - A pod counts once it has an IP of the Service's family and is not terminal; a terminating
//!   pod only with `publishNotReadyAddresses`.
//! - Ready pods (or all, with `publishNotReadyAddresses`) go to `addresses`, the others to
//!   `notReadyAddresses`; each with `nodeName`, a `targetRef` to the pod, and `hostname` when
//!   the pod's `subdomain` names the Service.
//! - Ports: one per Service port whose `targetPort` (a number, or a container port's name)
//!   resolves for that pod; a headless Service without ports lists bare addresses. Subsets are
//!   repacked (addresses with the same ports together).
//! - Labels are the Service's, plus `service.kubernetes.io/headless` for a headless Service.
//!
//! Services without a selector (such as `default/kubernetes`, which the API server keeps) are
//! not this controller's: their Endpoints are left alone. The Endpoints of a deleted Service
//! are deleted. The helpers shared with [`crate::endpointslice`] live here.

use std::collections::BTreeMap;
use std::sync::Arc;

use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use k1s_api::selector::LabelSelector;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Seen, Store, watcher};

pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";

#[derive(Debug, thiserror::Error)]
pub enum EndpointsError {
    #[error("endpoints {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

fn endpoints(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "endpoints", ns)
}

pub(crate) fn services() -> ResourceRef {
    ResourceRef::new("", "v1", "services", None)
}

/// The Service's selector as a label selector; `None` when it has none (not managed).
pub fn service_selector(svc: &Value) -> Option<LabelSelector> {
    let sel = svc["spec"]["selector"].as_object()?;
    let text: Vec<String> = sel
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    LabelSelector::parse(&text.join(",")).ok()
}

/// Whether the controllers keep endpoints for this Service.
pub fn is_managed(svc: &Value) -> bool {
    svc["spec"]["type"] != "ExternalName" && service_selector(svc).is_some()
}

pub fn is_headless(svc: &Value) -> bool {
    svc["spec"]["clusterIP"] == "None"
}

/// Upstream's `IsPodReady`.
pub fn is_pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Upstream's `ShouldPodBeInEndpoints`.
pub fn should_be_in_endpoints(pod: &Value, include_terminating: bool) -> bool {
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    if pod_ips(pod).is_empty() {
        return false;
    }
    include_terminating || !key::is_deleting(pod)
}

fn pod_ips(pod: &Value) -> Vec<String> {
    let mut ips: Vec<String> = pod["status"]["podIPs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["ip"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if ips.is_empty()
        && let Some(ip) = pod["status"]["podIP"].as_str().filter(|i| !i.is_empty())
    {
        ips.push(ip.to_owned());
    }
    ips
}

/// The Service's address family (`IPv4` or `IPv6`).
pub fn service_family(svc: &Value) -> &str {
    svc["spec"]["ipFamilies"][0].as_str().unwrap_or("IPv4")
}

/// The pod's IP of `family`.
pub fn pod_ip_for(pod: &Value, family: &str) -> Option<String> {
    pod_ips(pod)
        .into_iter()
        .find(|ip| ip.contains(':') == (family == "IPv6"))
}

/// Upstream's `ShouldSetHostname`.
pub fn hostname_for(pod: &Value, svc: &Value) -> Option<String> {
    let h = pod["spec"]["hostname"].as_str().filter(|h| !h.is_empty())?;
    (pod["spec"]["subdomain"].as_str() == Some(key::name(svc))
        && key::namespace(pod) == key::namespace(svc))
    .then(|| h.to_owned())
}

/// The container port a Service port's `targetPort` names on this pod (upstream's
/// `FindPort`); `None` when a named port is not found.
pub fn find_port(pod: &Value, svc_port: &Value) -> Option<i64> {
    let protocol = svc_port["protocol"].as_str().unwrap_or("TCP");
    match &svc_port["targetPort"] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) if s.parse::<i64>().is_ok() => s.parse().ok(),
        Value::String(name) => {
            let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
            // Sidecars (restartable init containers) serve ports too.
            let sidecars = pod["spec"]["initContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["restartPolicy"] == "Always");
            containers
                .chain(sidecars)
                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                .find(|p| {
                    p["name"].as_str() == Some(name.as_str())
                        && p["protocol"].as_str().unwrap_or("TCP") == protocol
                })
                .and_then(|p| p["containerPort"].as_i64())
        }
        _ => svc_port["port"].as_i64(),
    }
}

/// The endpoint ports of `pod` for the Service's ports (unresolvable ones left out).
pub fn endpoint_ports(pod: &Value, svc: &Value) -> Vec<Value> {
    svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            let port = find_port(pod, sp)?;
            let mut p = json!({"port": port, "protocol": sp["protocol"].as_str().unwrap_or("TCP")});
            if let Some(n) = sp["name"].as_str().filter(|n| !n.is_empty()) {
                p["name"] = json!(n);
            }
            if let Some(a) = sp["appProtocol"].as_str() {
                p["appProtocol"] = json!(a);
            }
            Some(p)
        })
        .collect()
}

/// A `targetRef` to the pod.
pub fn target_ref(pod: &Value) -> Value {
    json!({"kind": "Pod", "namespace": key::namespace(pod).unwrap_or(""),
           "name": key::name(pod), "uid": key::uid(pod)})
}

/// The labels the Service's endpoints carry: the Service's minus `reserved`, plus headless.
pub fn endpoint_labels(svc: &Value, reserved: &[&str]) -> Map<String, Value> {
    let mut labels: Map<String, Value> = svc["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.retain(|k, _| !reserved.contains(&k.as_str()) && k != LABEL_HEADLESS);
    if is_headless(svc) {
        labels.insert(LABEL_HEADLESS.into(), json!(""));
    }
    labels
}

/// The pods a Service selects, in its namespace.
pub fn selected_pods(svc: &Value, pods: &Store) -> Vec<Arc<Value>> {
    let Some(sel) = service_selector(svc) else {
        return Vec::new();
    };
    let ns = key::namespace(svc).unwrap_or("default");
    pods.list_namespace(ns)
        .into_iter()
        .filter(|p| sel.matches_json(p))
        .collect()
}

/// One EndpointSubset being built: the addresses that share a port list.
struct Subset {
    ready: Vec<Value>,
    not_ready: Vec<Value>,
    ports: Vec<Value>,
}

/// The Endpoints subsets for the Service and pods, repacked and sorted.
pub fn subsets(svc: &Value, pods: &[Arc<Value>]) -> Vec<Value> {
    let publish = svc["spec"]["publishNotReadyAddresses"] == true;
    let family = service_family(svc);
    let has_ports = svc["spec"]["ports"]
        .as_array()
        .is_some_and(|p| !p.is_empty());
    // (ip, pod uid, ready) → (address, ports)
    let mut by_address: BTreeMap<(String, String, bool), (Value, Vec<Value>)> = BTreeMap::new();
    for pod in pods {
        if !should_be_in_endpoints(pod, publish) {
            continue;
        }
        let Some(ip) = pod_ip_for(pod, family) else {
            continue;
        };
        let mut addr = json!({"ip": ip, "targetRef": target_ref(pod)});
        if let Some(h) = hostname_for(pod, svc) {
            addr["hostname"] = json!(h);
        }
        if let Some(n) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
            addr["nodeName"] = json!(n);
        }
        let ready = publish || is_pod_ready(pod);
        let ports = endpoint_ports(pod, svc);
        if has_ports && ports.is_empty() {
            continue;
        }
        if !has_ports && !is_headless(svc) {
            continue;
        }
        by_address.insert((ip, key::uid(pod).to_owned(), ready), (addr, ports));
    }
    // Repack: addresses with the same ports share a subset.
    let mut by_ports: BTreeMap<String, Subset> = BTreeMap::new();
    for ((_, _, ready), (addr, mut ports)) in by_address {
        ports.sort_by_key(|p| {
            (
                p["name"].as_str().unwrap_or("").to_owned(),
                p["port"].as_i64(),
            )
        });
        let k = serde_json::to_string(&ports).unwrap_or_default();
        let entry = by_ports.entry(k).or_insert_with(|| Subset {
            ready: Vec::new(),
            not_ready: Vec::new(),
            ports,
        });
        if ready {
            entry.ready.push(addr);
        } else {
            entry.not_ready.push(addr);
        }
    }
    by_ports
        .into_values()
        .map(
            |Subset {
                 ready,
                 not_ready,
                 ports,
             }| {
                let mut s = json!({});
                if !ready.is_empty() {
                    s["addresses"] = json!(ready);
                }
                if !not_ready.is_empty() {
                    s["notReadyAddresses"] = json!(not_ready);
                }
                if !ports.is_empty() {
                    s["ports"] = json!(ports);
                }
                s
            },
        )
        .collect()
}

/// Maps a pod to the Services in its namespace that select it, and those whose current
/// endpoints list it (so a pod relabelled away is removed).
pub fn pod_to_services(
    pod: &Value,
    services: &Store,
    listed_in: impl Fn(&str) -> Vec<ObjectKey>,
) -> Vec<ObjectKey> {
    let Some(ns) = key::namespace(pod) else {
        return Vec::new();
    };
    let mut keys: Vec<ObjectKey> = services
        .list_namespace(ns)
        .iter()
        .filter(|s| service_selector(s).is_some_and(|sel| sel.matches_json(pod)))
        .filter_map(|s| ObjectKey::of(s))
        .collect();
    keys.extend(listed_in(ns));
    keys.sort();
    keys.dedup();
    keys
}

/// Runs the Endpoints controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "endpoints",
        client.clone(),
        services(),
        watcher::Config::default(),
    )
    .workers(3);
    let svc_store = ctrl.store();
    let ep_store = ctrl.watches(
        endpoints(None),
        watcher::Config::default(),
        Vec::new(),
        // Recreated when deleted; other changes to them are not watched (as upstream).
        Arc::new(|e: &Value, seen| match seen {
            Seen::Deleted => ObjectKey::of(e).into_iter().collect(),
            _ => Vec::new(),
        }),
    );
    let (svcs, eps) = (svc_store.clone(), ep_store.clone());
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |p: &Value, _| {
            let (uid, name) = (key::uid(p).to_owned(), key::name(p).to_owned());
            pod_to_services(p, &svcs, |ns| {
                eps.list_namespace(ns)
                    .iter()
                    .filter(|e| lists_pod(e, &uid, &name))
                    .filter_map(|e| ObjectKey::of(e))
                    .collect()
            })
        }),
    );
    let reconciler = Arc::new(Endpoints {
        client,
        services: svc_store,
        endpoints: ep_store,
        pods: pod_store,
    });
    ctrl.run(reconciler, cancel).await;
}

fn lists_pod(ep: &Value, uid: &str, name: &str) -> bool {
    ep["subsets"].as_array().into_iter().flatten().any(|s| {
        ["addresses", "notReadyAddresses"].iter().any(|f| {
            s[*f].as_array().into_iter().flatten().any(|a| {
                a["targetRef"]["uid"].as_str() == Some(uid)
                    || a["targetRef"]["name"].as_str() == Some(name)
            })
        })
    })
}

struct Endpoints {
    client: Arc<dyn Client>,
    services: Store,
    endpoints: Store,
    pods: Store,
}

#[async_trait::async_trait]
impl Reconcile for Endpoints {
    type Error = EndpointsError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, EndpointsError> {
        let ns = k.namespace.clone().unwrap_or_default();
        let api = |source| EndpointsError::Api {
            key: k.to_string(),
            source,
        };
        let existing = self.endpoints.get(k);
        let Some(svc) = self.services.get(k) else {
            // The Service is gone: so are its Endpoints.
            if existing.is_some() {
                match self
                    .client
                    .delete(&endpoints(Some(&ns)), &k.name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(api(e)),
                }
            }
            return Ok(Action::await_change());
        };
        if !is_managed(&svc) {
            return Ok(Action::await_change());
        }
        let pods = selected_pods(&svc, &self.pods);
        let subsets = subsets(&svc, &pods);
        let labels = endpoint_labels(&svc, &[]);
        match existing {
            Some(cur) => {
                let cur_subsets = cur["subsets"].as_array().cloned().unwrap_or_default();
                let cur_labels = cur["metadata"]["labels"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                if cur_subsets == subsets && cur_labels == labels {
                    return Ok(Action::await_change());
                }
                let mut next = (*cur).clone();
                next["metadata"]["labels"] = Value::Object(labels);
                if subsets.is_empty() {
                    if let Some(o) = next.as_object_mut() {
                        o.remove("subsets");
                    }
                } else {
                    next["subsets"] = json!(subsets);
                }
                match self
                    .client
                    .update(&endpoints(Some(&ns)), next, None, &WriteParams::default())
                    .await
                {
                    Ok(_) => Ok(Action::await_change()),
                    Err(e) if e.is_not_found() => Ok(Action::await_change()),
                    Err(e) => Err(api(e)),
                }
            }
            None => {
                let mut ep = json!({"apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"name": k.name, "namespace": ns, "labels": labels}});
                if !subsets.is_empty() {
                    ep["subsets"] = json!(subsets);
                }
                match self
                    .client
                    .create(&endpoints(Some(&ns)), ep, &WriteParams::default())
                    .await
                {
                    Ok(_) => Ok(Action::await_change()),
                    // The cache is behind; the watch brings it and a conflict-free retry.
                    Err(e) => Err(api(e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ip: &str, ready: bool) -> Arc<Value> {
        Arc::new(
            json!({"metadata": {"name": name, "namespace": "d", "uid": format!("u-{name}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}),
        )
    }

    fn svc(ports: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "d", "labels": {"team": "a"}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.43.0.10", "ports": ports}})
    }

    #[test]
    fn ready_and_not_ready_addresses_with_named_ports() {
        let s = svc(json!([{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}]));
        let got = subsets(
            &s,
            &[pod("b", "10.0.0.2", false), pod("a", "10.0.0.1", true)],
        );
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0]["ports"],
            json!([{"name": "web", "port": 8080, "protocol": "TCP"}])
        );
        assert_eq!(got[0]["addresses"][0]["ip"], "10.0.0.1");
        assert_eq!(got[0]["addresses"][0]["nodeName"], "n1");
        assert_eq!(got[0]["addresses"][0]["targetRef"]["name"], "a");
        assert_eq!(got[0]["notReadyAddresses"][0]["ip"], "10.0.0.2");
        // publishNotReadyAddresses: every address is ready.
        let mut p = s.clone();
        p["spec"]["publishNotReadyAddresses"] = json!(true);
        let got = subsets(&p, &[pod("b", "10.0.0.2", false)]);
        assert!(
            got[0]["notReadyAddresses"].is_null() && got[0]["addresses"][0]["ip"] == "10.0.0.2"
        );
    }

    #[test]
    fn unresolved_ports_terminal_and_ipless_pods_are_left_out() {
        let s = svc(json!([{"name": "x", "port": 80, "targetPort": "nope"}]));
        assert!(subsets(&s, &[pod("a", "10.0.0.1", true)]).is_empty());
        let s = svc(json!([{"port": 80, "targetPort": 9090}]));
        let mut done = (*pod("a", "10.0.0.1", true)).clone();
        done["status"]["phase"] = json!("Succeeded");
        let mut ipless = (*pod("b", "", true)).clone();
        ipless["status"]["podIPs"] = json!([]);
        let mut terminating = (*pod("c", "10.0.0.3", true)).clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert!(
            subsets(
                &s,
                &[Arc::new(done), Arc::new(ipless), Arc::new(terminating)]
            )
            .is_empty()
        );
        let got = subsets(&s, &[pod("a", "10.0.0.1", true)]);
        assert_eq!(got[0]["ports"], json!([{"port": 9090, "protocol": "TCP"}]));
    }

    #[test]
    fn headless_without_ports_lists_addresses_with_hostnames() {
        let mut s = svc(json!([]));
        s["spec"]["clusterIP"] = json!("None");
        let mut p = (*pod("a", "10.0.0.1", true)).clone();
        p["spec"]["hostname"] = json!("a-0");
        p["spec"]["subdomain"] = json!("web");
        let got = subsets(&s, &[Arc::new(p)]);
        assert_eq!(got[0]["addresses"][0]["hostname"], "a-0");
        assert!(got[0]["ports"].is_null());
        assert_eq!(endpoint_labels(&s, &[])[LABEL_HEADLESS], "");
        // A ClusterIP Service without ports has no endpoints.
        assert!(subsets(&svc(json!([])), &[pod("a", "10.0.0.1", true)]).is_empty());
    }

    #[test]
    fn services_without_selectors_are_not_managed() {
        assert!(!is_managed(&json!({"spec": {"ports": [{"port": 443}]}})));
        assert!(!is_managed(
            &json!({"spec": {"type": "ExternalName", "selector": {"a": "b"}}})
        ));
        assert!(is_managed(&svc(json!([]))));
    }
}

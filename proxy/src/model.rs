//! What the proxy programs, decided from the API objects: each Service port with its
//! addresses and policies ([`ServicePort`]) and the endpoints that serve it ([`Endpoint`]),
//! read from the Service and its EndpointSlices. Pure functions, table-tested; no rules here.
//!
//! The choices follow kube-proxy: a Service port is identified by namespace, name, port name
//! and protocol; its endpoints are the EndpointSlice endpoints (labelled
//! `kubernetes.io/service-name`) whose slice port has the same name and protocol; traffic goes
//! to ready endpoints, and only when there is none to those that are serving and terminating
//! (KEP-1669). ExternalName and headless Services are not proxied.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A transport protocol a Service port can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// From the API's `TCP`/`UDP`/`SCTP` (absent means TCP, as defaulting does).
    pub fn parse(s: Option<&str>) -> Option<Self> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(Self::Tcp),
            "UDP" => Some(Self::Udp),
            "SCTP" => Some(Self::Sctp),
            _ => None,
        }
    }

    /// nftables' name of the protocol.
    pub fn nft(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }
}

/// Which Service port: namespace, Service name, port name and protocol.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortName {
    pub namespace: String,
    pub name: String,
    pub port: String,
    pub protocol: Protocol,
}

impl fmt::Display for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.namespace,
            self.name,
            self.protocol.nft(),
            self.port
        )
    }
}

/// One port of a Service, as the proxy programs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub id: PortName,
    /// The IPv4 ClusterIPs (none for a headless Service, which is not proxied).
    pub cluster_ips: Vec<Ipv4Addr>,
    pub port: u16,
    /// The NodePort, for NodePort and LoadBalancer Services.
    pub node_port: Option<u16>,
    /// `spec.externalIPs` and the IPv4 addresses of `status.loadBalancer.ingress`: traffic to
    /// them is external traffic.
    pub external_ips: Vec<Ipv4Addr>,
    /// `sessionAffinity: ClientIP`: its timeout in seconds.
    pub affinity_seconds: Option<u32>,
    /// `externalTrafficPolicy: Local` (external traffic only to this node's endpoints, client
    /// address kept).
    pub external_local: bool,
    /// `internalTrafficPolicy: Local`.
    pub internal_local: bool,
    /// `spec.healthCheckNodePort` (set for `externalTrafficPolicy: Local` load balancers).
    pub health_check_node_port: Option<u16>,
}

impl ServicePort {
    /// A plain ClusterIP port (no NodePort, no external addresses, Cluster policies, no
    /// affinity), to adjust field by field.
    pub fn cluster_ip(id: PortName, cluster_ip: Ipv4Addr, port: u16) -> Self {
        Self {
            id,
            cluster_ips: vec![cluster_ip],
            port,
            node_port: None,
            external_ips: Vec::new(),
            affinity_seconds: None,
            external_local: false,
            internal_local: false,
            health_check_node_port: None,
        }
    }

    /// Whether the port receives external traffic (NodePort, externalIPs, load balancer).
    pub fn has_external(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty()
    }
}

/// One endpoint of a Service port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// On this node.
    pub local: bool,
    /// On another node (its `nodeName` names one): it never reaches itself through this
    /// node, so it needs no hairpin masquerade here.
    pub elsewhere: bool,
}

/// The default session affinity timeout (`service.spec.sessionAffinityConfig` unset): 3 h.
pub const DEFAULT_AFFINITY_SECONDS: u32 = 10_800;

/// The proxied ports of a Service (none for ExternalName and headless Services).
pub fn service_ports(svc: &Service) -> Vec<ServicePort> {
    let Some(spec) = &svc.spec else {
        return Vec::new();
    };
    if spec.type_.as_deref() == Some("ExternalName") {
        return Vec::new();
    }
    let mut cluster_ips: Vec<Ipv4Addr> = spec
        .cluster_ips
        .iter()
        .flatten()
        .chain(spec.cluster_ip.iter())
        .filter_map(|ip| ip.parse().ok())
        .collect();
    cluster_ips.sort();
    cluster_ips.dedup();
    if cluster_ips.is_empty() {
        return Vec::new();
    }
    let mut external_ips: Vec<Ipv4Addr> = spec
        .external_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    if spec.type_.as_deref() == Some("LoadBalancer") {
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        external_ips.extend(
            ingress
                .into_iter()
                .flatten()
                .filter_map(|i| i.ip.as_deref()?.parse::<Ipv4Addr>().ok()),
        );
    }
    external_ips.sort();
    external_ips.dedup();
    let affinity_seconds = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_AFFINITY_SECONDS)
    });
    let node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    spec.ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(ServicePort {
                id: PortName {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    port: p.name.clone().unwrap_or_default(),
                    protocol: Protocol::parse(p.protocol.as_deref())?,
                },
                cluster_ips: cluster_ips.clone(),
                port: u16::try_from(p.port).ok()?,
                node_port: p
                    .node_port
                    .filter(|_| node_ports)
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0),
                external_ips: external_ips.clone(),
                affinity_seconds,
                external_local: spec.external_traffic_policy.as_deref() == Some("Local"),
                internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
                health_check_node_port: spec
                    .health_check_node_port
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0),
            })
        })
        .collect()
}

/// The endpoints of each port of a Service, from its EndpointSlices, keyed by port name and
/// protocol; `node` is this node's name (for [`Endpoint::local`]).
pub fn endpoints<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    node: &str,
) -> BTreeMap<(String, Protocol), BTreeSet<Endpoint>> {
    let mut out: BTreeMap<(String, Protocol), BTreeSet<Endpoint>> = BTreeMap::new();
    for slice in slices {
        if slice.address_type != "IPv4" {
            continue;
        }
        for p in slice.ports.iter().flatten() {
            let (Some(port), Some(protocol)) = (
                p.port.and_then(|n| u16::try_from(n).ok()),
                Protocol::parse(p.protocol.as_deref()),
            ) else {
                continue;
            };
            let set = out
                .entry((p.name.clone().unwrap_or_default(), protocol))
                .or_default();
            for e in &slice.endpoints {
                let c = e.conditions.as_ref();
                // Unset conditions are read as upstream's consumers read them: ready unless
                // said otherwise, serving as ready, terminating as false.
                let ready = c.and_then(|c| c.ready).unwrap_or(true);
                let serving = c.and_then(|c| c.serving).unwrap_or(ready);
                let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
                let local = e.node_name.as_deref() == Some(node);
                let elsewhere = e.node_name.as_deref().is_some_and(|n| n != node);
                for ip in e.addresses.iter().filter_map(|a| a.parse().ok()) {
                    set.insert(Endpoint {
                        ip,
                        port,
                        ready,
                        serving,
                        terminating,
                        local,
                        elsewhere,
                    });
                }
            }
        }
    }
    // One endpoint per address and port: a pod listed twice (slices overlap while the
    // controller moves endpoints) keeps its most usable state.
    for set in out.values_mut() {
        let mut best: BTreeMap<(Ipv4Addr, u16), Endpoint> = BTreeMap::new();
        for e in std::mem::take(set) {
            let k = (e.ip, e.port);
            match best.get(&k) {
                Some(b) if (b.ready, b.serving) >= (e.ready, e.serving) => {}
                _ => {
                    best.insert(k, e);
                }
            }
        }
        *set = best.into_values().collect();
    }
    out
}

/// A container port published on the node (`hostPort`), as the CNI portmap plugin does it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPort {
    pub namespace: String,
    pub pod: String,
    /// Only traffic to this node address (`hostIP`); `None`: every node address.
    pub host_ip: Option<Ipv4Addr>,
    pub host_port: u16,
    pub protocol: Protocol,
    pub pod_ip: Ipv4Addr,
    pub container_port: u16,
}

/// The hostPorts of a pod that has its address and is not finished (a pod on the host's
/// network needs none: its ports are the host's).
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let (Some(spec), Some(status)) = (&pod.spec, &pod.status) else {
        return Vec::new();
    };
    if spec.host_network == Some(true)
        || matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
    {
        return Vec::new();
    }
    let Some(pod_ip) = status.pod_ip.as_deref().and_then(|ip| ip.parse().ok()) else {
        return Vec::new();
    };
    // Sidecars (init containers that keep running) publish ports too.
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut out: Vec<HostPort> = spec
        .containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(HostPort {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                pod: pod.metadata.name.clone().unwrap_or_default(),
                host_ip: p
                    .host_ip
                    .as_deref()
                    .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
                    .filter(|ip| !ip.is_unspecified()),
                host_port: p
                    .host_port
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0)?,
                protocol: Protocol::parse(p.protocol.as_deref())?,
                pod_ip,
                container_port: u16::try_from(p.container_port).ok()?,
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The endpoints traffic goes to among `all` (already restricted to local ones where the
/// policy says so): the ready ones, else the serving and terminating ones.
pub fn usable(all: &[Endpoint]) -> Vec<Endpoint> {
    let ready: Vec<Endpoint> = all.iter().filter(|e| e.ready).cloned().collect();
    if !ready.is_empty() {
        return ready;
    }
    all.iter()
        .filter(|e| e.serving && e.terminating)
        .cloned()
        .collect()
}

/// Where a Service port's traffic goes: the usable endpoints anywhere ([`usable`] of all) and
/// on this node ([`usable`] of the local ones; not always a subset: with ready endpoints
/// elsewhere, this node may have only terminating ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    pub cluster: Vec<Endpoint>,
    pub local: Vec<Endpoint>,
}

impl Targets {
    pub fn of(all: &[Endpoint]) -> Self {
        let local: Vec<Endpoint> = all.iter().filter(|e| e.local).cloned().collect();
        Self {
            cluster: usable(all),
            local: usable(&local),
        }
    }

    /// Every address some rule DNATs to that can be a pod on this node (hairpin traffic to
    /// them is masqueraded): a pod reaching itself through a Service does so through its own
    /// node, so endpoints on other nodes need no hairpin element here (with 100,000
    /// endpoints in a cluster, most of the table's elements otherwise). An endpoint without
    /// `nodeName` counts as possibly local.
    pub fn hairpin_addresses(&self) -> BTreeSet<Ipv4Addr> {
        self.cluster
            .iter()
            .chain(&self.local)
            .filter(|e| !e.elsewhere)
            .map(|e| e.ip)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    fn slice(v: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn ports_of_each_service_type() {
        let cases = [
            (
                json!({"metadata": {"name": "web", "namespace": "ns"},
                       "spec": {"type": "ClusterIP", "clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"],
                                "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "dns", "port": 53, "protocol": "UDP"}]}}),
                vec![("ns/web/tcp/http", 80, None), ("ns/web/udp/dns", 53, None)],
            ),
            (
                json!({"metadata": {"name": "np", "namespace": "ns"},
                       "spec": {"type": "NodePort", "clusterIP": "10.43.0.10",
                                "ports": [{"port": 80, "nodePort": 30080}]}}),
                vec![("ns/np/tcp/", 80, Some(30080))],
            ),
            // ExternalName and headless Services are not proxied.
            (
                json!({"metadata": {"name": "x", "namespace": "ns"},
                       "spec": {"type": "ExternalName", "externalName": "example.org"}}),
                vec![],
            ),
            (
                json!({"metadata": {"name": "h", "namespace": "ns"},
                       "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
                vec![],
            ),
            // A nodePort left on a ClusterIP Service (a type change) is not served.
            (
                json!({"metadata": {"name": "c", "namespace": "ns"},
                       "spec": {"type": "ClusterIP", "clusterIP": "10.43.0.11",
                                "ports": [{"port": 80, "nodePort": 30081}]}}),
                vec![("ns/c/tcp/", 80, None)],
            ),
        ];
        for (s, want) in cases {
            let got: Vec<(String, u16, Option<u16>)> = service_ports(&svc(s))
                .into_iter()
                .map(|p| (p.id.to_string(), p.port, p.node_port))
                .collect();
            let want: Vec<(String, u16, Option<u16>)> = want
                .into_iter()
                .map(|(a, b, c)| (a.to_string(), b, c))
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn policies_affinity_and_external_addresses() {
        let p = &service_ports(&svc(json!({
            "metadata": {"name": "lb", "namespace": "ns"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.43.0.12", "externalIPs": ["192.0.2.7"],
                     "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
                     "healthCheckNodePort": 31000, "sessionAffinity": "ClientIP",
                     "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
                     "ports": [{"port": 443, "nodePort": 30443}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}}
        })))[0];
        assert_eq!(
            p.external_ips,
            [
                "192.0.2.1".parse::<Ipv4Addr>().unwrap(),
                "192.0.2.7".parse().unwrap()
            ]
        );
        assert!(p.external_local && p.internal_local && p.has_external());
        assert_eq!(p.affinity_seconds, Some(30));
        assert_eq!(p.health_check_node_port, Some(31000));
        let d = &service_ports(&svc(json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"clusterIP": "10.43.0.13", "sessionAffinity": "ClientIP", "ports": [{"port": 1}]}
        })))[0];
        assert_eq!(d.affinity_seconds, Some(DEFAULT_AFFINITY_SECONDS));
        assert!(!d.has_external());
    }

    #[test]
    fn host_ports_of_running_pods() {
        let pod = |phase: &str, host_network: bool| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"hostNetwork": host_network, "containers": [{"name": "c", "ports": [
                    {"containerPort": 8080, "hostPort": 80},
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "192.0.2.1"},
                    {"containerPort": 9000}
                ]}], "initContainers": [{"name": "s", "restartPolicy": "Always",
                    "ports": [{"containerPort": 81, "hostPort": 8081, "hostIP": "0.0.0.0"}]}]},
                "status": {"phase": phase, "podIP": "10.42.0.9"}
            }))
            .unwrap()
        };
        let hp = host_ports(&pod("Running", false));
        let got: Vec<(Option<Ipv4Addr>, u16, Protocol, u16)> = hp
            .iter()
            .map(|h| (h.host_ip, h.host_port, h.protocol, h.container_port))
            .collect();
        assert_eq!(
            got,
            [
                (None, 80, Protocol::Tcp, 8080),
                (None, 8081, Protocol::Tcp, 81),
                (Some("192.0.2.1".parse().unwrap()), 53, Protocol::Udp, 53),
            ]
        );
        assert!(host_ports(&pod("Succeeded", false)).is_empty());
        assert!(host_ports(&pod("Running", true)).is_empty());
    }

    #[test]
    fn endpoints_by_port_name_and_protocol_with_conditions() {
        let a = slice(json!({
            "metadata": {"name": "web-a", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.42.0.5"], "conditions": {"ready": true}, "nodeName": "n1"},
                {"addresses": ["10.42.0.6"], "conditions": {"ready": false, "serving": true, "terminating": true}, "nodeName": "n2"},
                {"addresses": ["10.42.0.7"], "conditions": {"ready": false}},
            ]
        }));
        // Overlapping slice listing .5 again, not ready: the ready state wins.
        let b = slice(json!({
            "metadata": {"name": "web-b", "namespace": "ns"},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.42.0.5"], "conditions": {"ready": false}}]
        }));
        let v6 = slice(json!({
            "metadata": {"name": "web-c", "namespace": "ns"},
            "addressType": "IPv6",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["fd00::1"]}]
        }));
        let eps = endpoints([&a, &b, &v6], "n1");
        let http: Vec<Endpoint> = eps[&("http".to_string(), Protocol::Tcp)]
            .iter()
            .cloned()
            .collect();
        assert_eq!(http.len(), 3);
        assert!(http[0].ready && http[0].local);
        assert!(!http[1].ready && http[1].terminating && !http[1].local);
        // On n2 (elsewhere) or on no node named (possibly here).
        assert!(!http[0].elsewhere && http[1].elsewhere && !http[2].elsewhere);
        // Ready ones only while there are some; then serving-and-terminating ones.
        assert_eq!(usable(&http), vec![http[0].clone()]);
        assert_eq!(usable(&http[1..]), vec![http[1].clone()]);
        assert!(usable(&http[2..]).is_empty());
    }
}

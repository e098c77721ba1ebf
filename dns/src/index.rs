//! The cluster's names as the DNS server sees them: Services and their endpoints, kept from
//! the informers' changes ([`Index::apply_service`], [`Index::apply_slice`]) and read by the
//! answering code ([`crate::answer`]).
//!
//! What is kept is only what the records need (addresses, ports, endpoint host names,
//! readiness), not the API objects: about 200 bytes per ClusterIP Service. The reverse
//! (PTR) map is updated in place per object, so that a change costs the size of that
//! object, not of the cluster.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// `namespace/name` of a Service (lower case, as DNS compares names).
pub type ServiceKey = (String, String);

/// What a Service answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A ClusterIP (or NodePort/LoadBalancer) Service: its cluster IPs.
    ClusterIp(Vec<IpAddr>),
    /// `clusterIP: None`: the addresses of its endpoints.
    Headless,
    /// `type: ExternalName`: a CNAME to this name.
    ExternalName(String),
}

/// One port of a Service, for SRV records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// The port's name (lower case); unnamed ports have no SRV record.
    pub name: String,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    pub kind: Kind,
    pub ports: Vec<Port>,
    /// `publishNotReadyAddresses`: endpoints are answered whether ready or not.
    pub publish_not_ready: bool,
}

/// One endpoint address of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: IpAddr,
    /// The endpoint's `hostname` (lower case), from a pod's `hostname` + `subdomain`.
    pub hostname: Option<String>,
    pub ready: bool,
    /// The slice's ports (every endpoint of a slice has the same).
    pub ports: Vec<Port>,
}

impl Endpoint {
    /// The label this endpoint is known by under its Service: its host name, or its address
    /// with dashes (`10-42-0-7`), as CoreDNS names endpoints without one.
    pub fn label(&self) -> String {
        match &self.hostname {
            Some(h) => h.clone(),
            None => dashed(self.ip),
        }
    }
}

/// An address with dashes for dots (IPv4) or colons (IPv6), the form pod and endpoint
/// names use.
pub fn dashed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string().replace('.', "-"),
        IpAddr::V6(v6) => v6.to_string().replace(':', "-"),
    }
}

/// Who put an address in the reverse map.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Owner {
    Service(ServiceKey),
    /// namespace, slice name.
    Slice(String, String),
}

/// The cluster's records.
#[derive(Debug, Default)]
pub struct Index {
    services: HashMap<ServiceKey, ServiceRecord>,
    /// Endpoints by Service, then by slice name.
    slices: HashMap<ServiceKey, BTreeMap<String, Vec<Endpoint>>>,
    /// Each slice's Service, to find it again when the slice is deleted or relabelled.
    slice_service: HashMap<(String, String), ServiceKey>,
    /// Number of Services per namespace: `NS.svc.ZONE` exists while it has one.
    namespaces: HashMap<String, usize>,
    /// Reverse names: address → (owner, fully qualified name without the trailing dot).
    ptr: HashMap<IpAddr, Vec<(Owner, String)>>,
    /// The addresses each owner put in `ptr`.
    ptr_of: HashMap<Owner, Vec<IpAddr>>,
    zone: String,
}

impl Index {
    /// An empty index for `zone` (`cluster.local`).
    pub fn new(zone: &str) -> Self {
        Self {
            zone: zone.trim_end_matches('.').to_ascii_lowercase(),
            ..Self::default()
        }
    }

    pub fn zone(&self) -> &str {
        &self.zone
    }

    pub fn service(&self, namespace: &str, name: &str) -> Option<&ServiceRecord> {
        self.services
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// The Service's endpoints across its slices, each address once (the first slice's
    /// view of it wins), in a stable order.
    pub fn endpoints(&self, namespace: &str, name: &str) -> Vec<&Endpoint> {
        let mut out: Vec<&Endpoint> = Vec::new();
        let key = (namespace.to_string(), name.to_string());
        for eps in self.slices.get(&key).into_iter().flat_map(|s| s.values()) {
            for e in eps {
                if !out.iter().any(|o| o.ip == e.ip) {
                    out.push(e);
                }
            }
        }
        out
    }

    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.namespaces.contains_key(namespace)
    }

    /// The names an address has (PTR), sorted.
    pub fn reverse(&self, ip: IpAddr) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .ptr
            .get(&ip)
            .into_iter()
            .flatten()
            .map(|(_, n)| n.as_str())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// How many Services and endpoints are known (for metrics).
    pub fn counts(&self) -> (usize, usize) {
        let eps = self
            .slices
            .values()
            .flat_map(|s| s.values())
            .map(Vec::len)
            .sum();
        (self.services.len(), eps)
    }

    /// A Service added or modified (`Some`), or deleted (`None`).
    pub fn apply_service(&mut self, namespace: &str, name: &str, svc: Option<&Service>) {
        let key = (namespace.to_ascii_lowercase(), name.to_ascii_lowercase());
        let record = svc.map(service_record);
        let fqdn = format!("{}.{}.svc.{}", key.1, key.0, self.zone);
        let owner = Owner::Service(key.clone());
        match record {
            Some(r) => {
                let ips = match &r.kind {
                    Kind::ClusterIp(ips) => ips.iter().map(|ip| (*ip, fqdn.clone())).collect(),
                    _ => Vec::new(),
                };
                self.set_ptr(&owner, ips);
                if self.services.insert(key.clone(), r).is_none() {
                    *self.namespaces.entry(key.0).or_default() += 1;
                }
            }
            None => {
                self.set_ptr(&owner, Vec::new());
                if self.services.remove(&key).is_some()
                    && let Some(n) = self.namespaces.get_mut(&key.0)
                {
                    *n -= 1;
                    if *n == 0 {
                        self.namespaces.remove(&key.0);
                    }
                }
            }
        }
    }

    /// An EndpointSlice added or modified (`Some`), or deleted (`None`).
    pub fn apply_slice(&mut self, namespace: &str, name: &str, slice: Option<&EndpointSlice>) {
        let slice_key = (namespace.to_ascii_lowercase(), name.to_string());
        // Out of its old Service first (a slice's label may change, or the slice go).
        if let Some(old) = self.slice_service.remove(&slice_key)
            && let Some(by_slice) = self.slices.get_mut(&old)
        {
            by_slice.remove(name);
            if by_slice.is_empty() {
                self.slices.remove(&old);
            }
        }
        let owner = Owner::Slice(slice_key.0.clone(), slice_key.1.clone());
        let Some((service, endpoints)) = slice.and_then(slice_endpoints) else {
            self.set_ptr(&owner, Vec::new());
            return;
        };
        let svc_key = (slice_key.0.clone(), service);
        let ptrs = endpoints
            .iter()
            .map(|e| {
                let name = format!(
                    "{}.{}.{}.svc.{}",
                    e.label(),
                    svc_key.1,
                    svc_key.0,
                    self.zone
                );
                (e.ip, name)
            })
            .collect();
        self.set_ptr(&owner, ptrs);
        self.slices
            .entry(svc_key.clone())
            .or_default()
            .insert(name.to_string(), endpoints);
        self.slice_service.insert(slice_key, svc_key);
    }

    fn set_ptr(&mut self, owner: &Owner, entries: Vec<(IpAddr, String)>) {
        for ip in self.ptr_of.remove(owner).unwrap_or_default() {
            if let Some(v) = self.ptr.get_mut(&ip) {
                v.retain(|(o, _)| o != owner);
                if v.is_empty() {
                    self.ptr.remove(&ip);
                }
            }
        }
        if entries.is_empty() {
            return;
        }
        let mut ips = Vec::with_capacity(entries.len());
        for (ip, name) in entries {
            ips.push(ip);
            self.ptr.entry(ip).or_default().push((owner.clone(), name));
        }
        self.ptr_of.insert(owner.clone(), ips);
    }
}

/// What of a Service the records need.
fn service_record(svc: &Service) -> ServiceRecord {
    let spec = svc.spec.clone().unwrap_or_default();
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        Kind::ExternalName(
            spec.external_name
                .unwrap_or_default()
                .trim_end_matches('.')
                .to_ascii_lowercase(),
        )
    } else if spec.cluster_ip.as_deref() == Some("None") {
        Kind::Headless
    } else {
        let mut ips: Vec<IpAddr> = spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|s| s.parse().ok())
            .collect();
        ips.dedup();
        ips.sort_by_key(|ip| ip.is_ipv6());
        let mut seen = Vec::new();
        ips.retain(|ip| {
            let new = !seen.contains(ip);
            seen.push(*ip);
            new
        });
        Kind::ClusterIp(ips)
    };
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(Port {
                name: p.name.clone().unwrap_or_default().to_ascii_lowercase(),
                protocol: p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                port: u16::try_from(p.port).ok()?,
            })
        })
        .collect();
    ServiceRecord {
        kind,
        ports,
        publish_not_ready: spec.publish_not_ready_addresses == Some(true),
    }
}

/// The Service a slice belongs to (its `kubernetes.io/service-name` label) and its
/// endpoints; `None` for a slice of no Service.
fn slice_endpoints(slice: &EndpointSlice) -> Option<(String, Vec<Endpoint>)> {
    let service = slice
        .metadata
        .labels
        .as_ref()?
        .get("kubernetes.io/service-name")?
        .to_ascii_lowercase();
    let ports: Vec<Port> = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(Port {
                name: p.name.clone().unwrap_or_default().to_ascii_lowercase(),
                protocol: p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                port: u16::try_from(p.port?).ok()?,
            })
        })
        .collect();
    let mut out = Vec::new();
    for e in &slice.endpoints {
        // A nil `ready` means ready (the API's documented reading).
        let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
        for a in &e.addresses {
            let Ok(ip) = a.parse::<IpAddr>() else {
                continue;
            };
            out.push(Endpoint {
                ip,
                hostname: e.hostname.as_ref().map(|h| h.to_ascii_lowercase()),
                ready,
                ports: ports.clone(),
            });
        }
    }
    Some((service, out))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub fn svc(ns: &str, name: &str, spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": spec,
        }))
        .unwrap()
    }

    pub fn slice(ns: &str, name: &str, service: &str, body: serde_json::Value) -> EndpointSlice {
        let mut v = json!({
            "metadata": {"namespace": ns, "name": name,
                "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [],
        });
        for (k, val) in body.as_object().unwrap() {
            v[k] = val.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn services_and_reverse_names_follow_changes() {
        let mut ix = Index::new("cluster.local.");
        let s = svc(
            "Default",
            "Web",
            json!({"clusterIP": "10.43.0.5", "clusterIPs": ["10.43.0.5"],
            "ports": [{"name": "HTTP", "port": 80}]}),
        );
        ix.apply_service("Default", "Web", Some(&s));
        let r = ix.service("default", "web").unwrap();
        assert_eq!(r.kind, Kind::ClusterIp(vec!["10.43.0.5".parse().unwrap()]));
        assert_eq!(r.ports[0].name, "http");
        assert_eq!(r.ports[0].protocol, "tcp");
        assert!(ix.has_namespace("default"));
        assert_eq!(
            ix.reverse("10.43.0.5".parse().unwrap()),
            ["web.default.svc.cluster.local"]
        );
        // A new address replaces the old one in the reverse map.
        let s2 = svc("default", "web", json!({"clusterIP": "10.43.0.6"}));
        ix.apply_service("default", "web", Some(&s2));
        assert!(ix.reverse("10.43.0.5".parse().unwrap()).is_empty());
        assert_eq!(ix.reverse("10.43.0.6".parse().unwrap()).len(), 1);
        ix.apply_service("default", "web", None);
        assert!(ix.service("default", "web").is_none());
        assert!(!ix.has_namespace("default"));
        assert!(ix.reverse("10.43.0.6".parse().unwrap()).is_empty());
        assert_eq!(ix.counts(), (0, 0));
    }

    #[test]
    fn headless_external_name_and_dual_stack() {
        let mut ix = Index::new("cluster.local");
        let h = svc(
            "ns",
            "h",
            json!({"clusterIP": "None", "publishNotReadyAddresses": true}),
        );
        ix.apply_service("ns", "h", Some(&h));
        assert_eq!(ix.service("ns", "h").unwrap().kind, Kind::Headless);
        assert!(ix.service("ns", "h").unwrap().publish_not_ready);
        let e = svc(
            "ns",
            "e",
            json!({"type": "ExternalName", "externalName": "Example.COM."}),
        );
        ix.apply_service("ns", "e", Some(&e));
        assert_eq!(
            ix.service("ns", "e").unwrap().kind,
            Kind::ExternalName("example.com".into())
        );
        let d = svc(
            "ns",
            "d",
            json!({"clusterIP": "fd00::5", "clusterIPs": ["fd00::5", "10.43.0.9"]}),
        );
        ix.apply_service("ns", "d", Some(&d));
        assert_eq!(
            ix.service("ns", "d").unwrap().kind,
            Kind::ClusterIp(vec![
                "10.43.0.9".parse().unwrap(),
                "fd00::5".parse().unwrap()
            ])
        );
    }

    #[test]
    fn slices_join_their_service_and_leave_it() {
        let mut ix = Index::new("cluster.local");
        let sl = slice(
            "ns",
            "h-abc",
            "h",
            json!({
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.42.0.7"], "hostname": "web-0", "conditions": {"ready": true}},
                {"addresses": ["10.42.0.8"], "conditions": {"ready": false}},
                {"addresses": ["10.42.0.9"]},
            ]}),
        );
        ix.apply_slice("ns", "h-abc", Some(&sl));
        let eps = ix.endpoints("ns", "h");
        assert_eq!(eps.len(), 3);
        assert_eq!(eps[0].label(), "web-0");
        assert_eq!(eps[1].label(), "10-42-0-8");
        assert!(!eps[1].ready);
        assert!(eps[2].ready, "nil ready is ready");
        assert_eq!(eps[0].ports[0].port, 8080);
        assert_eq!(
            ix.reverse("10.42.0.7".parse().unwrap()),
            ["web-0.h.ns.svc.cluster.local"]
        );
        // A second slice with the same address: listed once.
        let sl2 = slice(
            "ns",
            "h-def",
            "h",
            json!({
            "endpoints": [{"addresses": ["10.42.0.7"]}, {"addresses": ["10.42.0.10"]}]}),
        );
        ix.apply_slice("ns", "h-def", Some(&sl2));
        assert_eq!(ix.endpoints("ns", "h").len(), 4);
        // Relabelled to another Service: gone from the first.
        let moved = slice(
            "ns",
            "h-def",
            "other",
            json!({"endpoints": [{"addresses": ["10.42.0.10"]}]}),
        );
        ix.apply_slice("ns", "h-def", Some(&moved));
        assert_eq!(ix.endpoints("ns", "h").len(), 3);
        assert_eq!(ix.endpoints("ns", "other").len(), 1);
        ix.apply_slice("ns", "h-abc", None);
        ix.apply_slice("ns", "h-def", None);
        assert!(ix.endpoints("ns", "h").is_empty());
        assert!(ix.reverse("10.42.0.7".parse().unwrap()).is_empty());
        assert_eq!(ix.counts(), (0, 0));
    }
}

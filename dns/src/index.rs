//! The cluster's names as the DNS server sees them: Services and their endpoints, kept from
//! the informers' changes ([`Index::apply_service`], [`Index::apply_slice`]) and read by the
//! answering code ([`crate::answer`]).
//!
//! What is kept is only what the records need (addresses, ports, endpoint host names,
//! readiness), not the API objects: about 200 bytes per ClusterIP Service. The reverse
//! (PTR) map is updated in place per object, so that a change costs the size of that
//! object, not of the cluster.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// A port's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    fn parse(s: Option<&str>) -> Self {
        match s {
            Some("UDP") => Protocol::Udp,
            Some("SCTP") => Protocol::Sctp,
            _ => Protocol::Tcp,
        }
    }

    /// The SRV label's form: `tcp`, `udp`, `sctp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// One port of a Service or an EndpointSlice, for SRV records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// The port's name (lower case); unnamed ports (empty) have no SRV record.
    pub name: Box<str>,
    pub protocol: Protocol,
    pub port: u16,
}

/// A Service's cluster IPs, one per family (kept inline: no allocation per Service).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClusterIps {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

impl ClusterIps {
    /// IPv4 first.
    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.v4
            .map(IpAddr::V4)
            .into_iter()
            .chain(self.v6.map(IpAddr::V6))
    }
}

/// What a Service answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A ClusterIP (or NodePort/LoadBalancer) Service: its cluster IPs.
    ClusterIp(ClusterIps),
    /// `clusterIP: None`: the addresses of its endpoints.
    Headless,
    /// `type: ExternalName`: a CNAME to this name (lower case, no final dot).
    ExternalName(Box<str>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    pub kind: Kind,
    pub ports: Box<[Port]>,
    /// `publishNotReadyAddresses`: endpoints are answered whether ready or not.
    pub publish_not_ready: bool,
}

/// One endpoint address as stored (the slice holds the ports).
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoredEndpoint {
    ip: IpAddr,
    hostname: Option<Box<str>>,
    ready: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SliceRecord {
    ports: Box<[Port]>,
    endpoints: Box<[StoredEndpoint]>,
}

/// One endpoint address of a Service, as the answers read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint<'a> {
    pub ip: IpAddr,
    /// The endpoint's `hostname` (lower case), from a pod's `hostname` + `subdomain`.
    pub hostname: Option<&'a str>,
    pub ready: bool,
    /// The slice's ports.
    pub ports: &'a [Port],
}

impl Endpoint<'_> {
    /// The label this endpoint is known by under its Service: its host name, or its address
    /// with dashes (`10-42-0-7`), as CoreDNS names endpoints without one.
    pub fn label(&self) -> String {
        match self.hostname {
            Some(h) => h.to_string(),
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

/// A Service's key: `name.namespace`, lower case, the order its DNS name has.
fn key(namespace: &str, name: &str) -> String {
    format!(
        "{}.{}",
        name.to_ascii_lowercase(),
        namespace.to_ascii_lowercase()
    )
}

/// An endpoint's reverse name: its Service (shared key), the slice that lists it, and its
/// host name when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EndpointPtr {
    service: Arc<str>,
    slice: Arc<str>,
    hostname: Option<Box<str>>,
}

/// The cluster's records.
#[derive(Debug, Default)]
pub struct Index {
    /// By `name.namespace`; the key is shared with the reverse maps.
    services: HashMap<Arc<str>, ServiceRecord>,
    /// Endpoints by Service key, then by slice (`namespace/slice-name`).
    slices: HashMap<Arc<str>, BTreeMap<Arc<str>, SliceRecord>>,
    /// Each slice's Service, to find it again when the slice is deleted or relabelled.
    slice_service: HashMap<Arc<str>, Arc<str>>,
    /// Number of Services per namespace: `NS.svc.ZONE` exists while it has one.
    namespaces: HashMap<Box<str>, u32>,
    /// Reverse names of cluster IPs (the API server gives each to one Service).
    service_ptr: HashMap<IpAddr, Arc<str>>,
    /// Reverse names of endpoint addresses (a pod may back several Services).
    endpoint_ptr: HashMap<IpAddr, Vec<EndpointPtr>>,
    zone: String,
    /// Changes applied so far: answers made from an older generation are stale.
    generation: u64,
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

    /// Moves on with every change applied.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn service(&self, namespace: &str, name: &str) -> Option<&ServiceRecord> {
        self.services.get(key(namespace, name).as_str())
    }

    /// The Service's endpoints across its slices, each address once (the first slice's
    /// view of it wins), in a stable order.
    pub fn endpoints(&self, namespace: &str, name: &str) -> Vec<Endpoint<'_>> {
        let mut out: Vec<Endpoint<'_>> = Vec::new();
        for slice in self
            .slices
            .get(key(namespace, name).as_str())
            .into_iter()
            .flat_map(|s| s.values())
        {
            for e in slice.endpoints.iter() {
                if !out.iter().any(|o| o.ip == e.ip) {
                    out.push(Endpoint {
                        ip: e.ip,
                        hostname: e.hostname.as_deref(),
                        ready: e.ready,
                        ports: &slice.ports,
                    });
                }
            }
        }
        out
    }

    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.namespaces.contains_key(namespace)
    }

    /// The names an address has (PTR), fully qualified without the final dot, sorted.
    pub fn reverse(&self, ip: IpAddr) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(k) = self.service_ptr.get(&ip) {
            out.push(format!("{k}.svc.{}", self.zone));
        }
        for p in self.endpoint_ptr.get(&ip).into_iter().flatten() {
            let label = match &p.hostname {
                Some(h) => h.to_string(),
                None => dashed(ip),
            };
            out.push(format!("{label}.{}.svc.{}", p.service, self.zone));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// How many Services and endpoint addresses are known (for metrics).
    pub fn counts(&self) -> (usize, usize) {
        let eps = self
            .slices
            .values()
            .flat_map(|s| s.values())
            .map(|s| s.endpoints.len())
            .sum();
        (self.services.len(), eps)
    }

    /// A Service added or modified (`Some`), or deleted (`None`).
    pub fn apply_service(&mut self, namespace: &str, name: &str, svc: Option<&Service>) {
        self.generation += 1;
        let k = key(namespace, name);
        let old = self.services.remove_entry(k.as_str());
        if let Some((_, r)) = &old
            && let Kind::ClusterIp(ips) = &r.kind
        {
            for ip in ips.iter() {
                self.service_ptr.remove(&ip);
            }
        }
        let Some(svc) = svc else {
            if old.is_some() {
                let ns = namespace.to_ascii_lowercase();
                if let Some(n) = self.namespaces.get_mut(ns.as_str()) {
                    *n -= 1;
                    if *n == 0 {
                        self.namespaces.remove(ns.as_str());
                    }
                }
            }
            return;
        };
        let shared: Arc<str> = match old {
            Some((k, _)) => k,
            None => {
                *self
                    .namespaces
                    .entry(namespace.to_ascii_lowercase().into_boxed_str())
                    .or_default() += 1;
                Arc::from(k)
            }
        };
        let record = service_record(svc);
        if let Kind::ClusterIp(ips) = &record.kind {
            for ip in ips.iter() {
                self.service_ptr.insert(ip, shared.clone());
            }
        }
        self.services.insert(shared, record);
    }

    /// An EndpointSlice added or modified (`Some`), or deleted (`None`).
    pub fn apply_slice(&mut self, namespace: &str, name: &str, slice: Option<&EndpointSlice>) {
        self.generation += 1;
        let slice_key = format!("{}/{name}", namespace.to_ascii_lowercase());
        // Out of its old Service first (a slice's label may change, or the slice go).
        let mut shared_slice: Option<Arc<str>> = None;
        if let Some((sk, old_svc)) = self.slice_service.remove_entry(slice_key.as_str()) {
            if let Some(by_slice) = self.slices.get_mut(&old_svc) {
                if let Some(old) = by_slice.remove(&sk) {
                    for e in old.endpoints.iter() {
                        if let Some(v) = self.endpoint_ptr.get_mut(&e.ip) {
                            v.retain(|p| p.slice != sk);
                            if v.is_empty() {
                                self.endpoint_ptr.remove(&e.ip);
                            }
                        }
                    }
                }
                if by_slice.is_empty() {
                    self.slices.remove(&old_svc);
                }
            }
            shared_slice = Some(sk);
        }
        let Some((service, record)) = slice.and_then(slice_record) else {
            return;
        };
        let svc_key: Arc<str> = Arc::from(key(namespace, &service));
        // Share the Service's key when the Service is known, and the slices' otherwise.
        let svc_key = self
            .services
            .get_key_value(&svc_key)
            .map(|(k, _)| k.clone())
            .or_else(|| self.slices.get_key_value(&svc_key).map(|(k, _)| k.clone()))
            .unwrap_or(svc_key);
        let sk = shared_slice.unwrap_or_else(|| Arc::from(slice_key));
        for e in record.endpoints.iter() {
            self.endpoint_ptr
                .entry(e.ip)
                .or_default()
                .push(EndpointPtr {
                    service: svc_key.clone(),
                    slice: sk.clone(),
                    hostname: e.hostname.clone(),
                });
        }
        self.slices
            .entry(svc_key.clone())
            .or_default()
            .insert(sk.clone(), record);
        self.slice_service.insert(sk, svc_key);
    }
}

fn ports<'a>(
    ports: impl Iterator<Item = (Option<&'a String>, Option<&'a str>, Option<i32>)>,
) -> Box<[Port]> {
    ports
        .filter_map(|(name, protocol, port)| {
            Some(Port {
                name: name
                    .map(|n| n.to_ascii_lowercase())
                    .unwrap_or_default()
                    .into_boxed_str(),
                protocol: Protocol::parse(protocol),
                port: u16::try_from(port?).ok()?,
            })
        })
        .collect()
}

/// What of a Service the records need.
fn service_record(svc: &Service) -> ServiceRecord {
    let Some(spec) = svc.spec.as_ref() else {
        return ServiceRecord {
            kind: Kind::ClusterIp(ClusterIps::default()),
            ports: Box::new([]),
            publish_not_ready: false,
        };
    };
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        Kind::ExternalName(
            spec.external_name
                .as_deref()
                .unwrap_or_default()
                .trim_end_matches('.')
                .to_ascii_lowercase()
                .into_boxed_str(),
        )
    } else if spec.cluster_ip.as_deref() == Some("None") {
        Kind::Headless
    } else {
        let mut ips = ClusterIps::default();
        for ip in spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|s| s.parse::<IpAddr>().ok())
        {
            match ip {
                IpAddr::V4(v4) if ips.v4.is_none() => ips.v4 = Some(v4),
                IpAddr::V6(v6) if ips.v6.is_none() => ips.v6 = Some(v6),
                _ => {}
            }
        }
        Kind::ClusterIp(ips)
    };
    ServiceRecord {
        kind,
        ports: ports(
            spec.ports
                .iter()
                .flatten()
                .map(|p| (p.name.as_ref(), p.protocol.as_deref(), Some(p.port))),
        ),
        publish_not_ready: spec.publish_not_ready_addresses == Some(true),
    }
}

/// The Service a slice belongs to (its `kubernetes.io/service-name` label) and its
/// endpoints; `None` for a slice of no Service.
fn slice_record(slice: &EndpointSlice) -> Option<(String, SliceRecord)> {
    let service = slice
        .metadata
        .labels
        .as_ref()?
        .get("kubernetes.io/service-name")?
        .clone();
    let mut endpoints = Vec::new();
    for e in &slice.endpoints {
        // A nil `ready` means ready (the API's documented reading).
        let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
        for a in &e.addresses {
            let Ok(ip) = a.parse::<IpAddr>() else {
                continue;
            };
            endpoints.push(StoredEndpoint {
                ip,
                hostname: e
                    .hostname
                    .as_ref()
                    .map(|h| h.to_ascii_lowercase().into_boxed_str()),
                ready,
            });
        }
    }
    Some((
        service,
        SliceRecord {
            ports: ports(
                slice
                    .ports
                    .iter()
                    .flatten()
                    .map(|p| (p.name.as_ref(), p.protocol.as_deref(), p.port)),
            ),
            endpoints: endpoints.into_boxed_slice(),
        },
    ))
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
        assert_eq!(
            r.kind.clone(),
            Kind::ClusterIp(ClusterIps {
                v4: Some("10.43.0.5".parse().unwrap()),
                v6: None
            })
        );
        assert_eq!(&*r.ports[0].name, "http");
        assert_eq!(r.ports[0].protocol.as_str(), "tcp");
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
            Kind::ClusterIp(ClusterIps {
                v4: Some("10.43.0.9".parse().unwrap()),
                v6: Some("fd00::5".parse().unwrap())
            })
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

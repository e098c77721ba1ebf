//! What NetworkPolicy means for this node's pods, decided from the API objects: which local
//! pods are isolated for ingress and for egress, by which policies, and what each policy's
//! rules allow (peer addresses and ports). Pure: [`Cluster`] in, [`Plan`] out.
//!
//! The semantics are upstream's (`networking.k8s.io/v1`):
//! - a pod is isolated for a direction when a policy of its namespace selects it and lists
//!   that direction in `policyTypes` (empty `policyTypes`: Ingress, plus Egress when the
//!   policy has egress rules); an isolated pod takes what the union of those policies' rules
//!   allows, a pod no policy selects takes everything;
//! - a rule with no peers matches every peer, with no ports every port; a peer is a pod
//!   selector (the policy's namespace), a namespace selector (every pod of the namespaces it
//!   picks; a namespace always carries `kubernetes.io/metadata.name`), both (pods of those
//!   namespaces), or an `ipBlock` minus its `except`s;
//! - ports are numbers (with `endPort` a range) or names, resolved against the container
//!   ports of the pod receiving the traffic (the selected pod for ingress, each peer pod for
//!   egress); a protocol defaults to TCP;
//! - a selector that does not parse matches nothing; host-network pods and pods without an
//!   address or that have finished are neither subjects nor peers.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k1s_api::selector::LabelSelector;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::ranges::{Cidr, Ranges};

/// The label every namespace carries with its own name (upstream sets it; it is assumed
/// here too, for namespaces stored before it was).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A layer-4 protocol a policy port names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// TCP when unset; `None` for a protocol that is not one of the three.
    pub fn parse(s: Option<&str>) -> Option<Protocol> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The nftables name (`meta l4proto tcp`).
    pub fn nft(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// What a pod contributes: its address, labels, node and named container ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub ip: Ipv4Addr,
    pub labels: BTreeMap<String, String>,
    /// `(name, protocol, port)` of each named container port.
    pub named_ports: Vec<(String, Protocol, u16)>,
}

impl PodInfo {
    /// `None` for a pod policies do not apply to: host network, no IPv4 address yet, or
    /// finished (its address may already be another pod's).
    pub fn of(pod: &Pod) -> Option<PodInfo> {
        let spec = pod.spec.as_ref()?;
        if spec.host_network == Some(true) {
            return None;
        }
        let status = pod.status.as_ref()?;
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            return None;
        }
        let ip = status
            .pod_ips
            .iter()
            .flatten()
            .map(|p| p.ip.as_str())
            .chain(status.pod_ip.as_deref())
            .find_map(|s| s.parse::<Ipv4Addr>().ok())?;
        let mut named_ports = Vec::new();
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            for p in c.ports.iter().flatten() {
                if let (Some(name), Some(proto), Ok(port)) = (
                    p.name.as_deref(),
                    Protocol::parse(p.protocol.as_deref()),
                    u16::try_from(p.container_port),
                ) {
                    named_ports.push((name.to_string(), proto, port));
                }
            }
        }
        Some(PodInfo {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            node: spec.node_name.clone().unwrap_or_default(),
            ip,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            named_ports,
        })
    }

    fn port_named(&self, name: &str, proto: Protocol) -> Option<u16> {
        self.named_ports
            .iter()
            .find(|(n, p, _)| n == name && *p == proto)
            .map(|(_, _, port)| *port)
    }
}

/// The cluster as the policies see it.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Pods by namespace/name.
    pub pods: BTreeMap<(String, String), PodInfo>,
    /// Namespace labels by name.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Policies by namespace/name.
    pub policies: BTreeMap<(String, String), NetworkPolicy>,
}

/// Ingress (traffic to the selected pods) or egress (traffic from them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    Ingress,
    Egress,
}

/// One port clause of a rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PortMatch {
    /// Any port of the protocol (a clause with no port).
    Protocol(Protocol),
    /// A port or `port..=endPort`.
    Range(Protocol, u16, u16),
    /// A named port: the key of its resolution in [`Plan::named_ports`].
    Named(SetKey),
}

/// What a shared set stands for, as text (the policy's namespace and the peers or selector
/// it was computed from). Policies that say the same thing share one set, so a pod that
/// comes or goes changes one set's elements, not one per policy.
pub type SetKey = String;

/// One rule of a policy in one direction: traffic from (ingress) or to (egress) `peers`, on
/// `ports`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePlan {
    /// The key of the peers' addresses in [`Plan::peer_sets`]; `None`: every peer.
    pub peers: Option<SetKey>,
    /// Empty: every port.
    pub ports: Vec<PortMatch>,
}

/// One policy in one direction, for the local pods it selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPlan {
    pub namespace: String,
    pub name: String,
    pub direction: Direction,
    pub rules: Vec<RulePlan>,
}

/// What this node enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub policies: Vec<PolicyPlan>,
    /// Each isolated local pod and the policies (indexes into `policies`) that allow its
    /// traffic in that direction.
    pub ingress: BTreeMap<Ipv4Addr, Vec<usize>>,
    pub egress: BTreeMap<Ipv4Addr, Vec<usize>>,
    /// The addresses of each distinct peer list.
    pub peer_sets: BTreeMap<SetKey, Ranges>,
    /// Each distinct named port, resolved: the `(pod address, protocol, port)` triples it
    /// stands for (none when no pod has a port of that name: the clause matches nothing).
    pub named_ports: BTreeMap<SetKey, BTreeSet<(Ipv4Addr, Protocol, u16)>>,
}

/// A selector as a matcher; `None` when it does not parse (it then matches nothing).
fn selector(sel: &ApiLabelSelector) -> Option<LabelSelector> {
    k1s_api::volume::label_selector(sel)
}

/// The directions a policy covers (upstream's defaulting when `policyTypes` is empty).
fn directions(p: &NetworkPolicy) -> Vec<Direction> {
    let spec = p.spec.as_ref();
    let types = spec.and_then(|s| s.policy_types.as_ref());
    match types {
        Some(t) if !t.is_empty() => {
            let mut out = Vec::new();
            if t.iter().any(|t| t == "Ingress") {
                out.push(Direction::Ingress);
            }
            if t.iter().any(|t| t == "Egress") {
                out.push(Direction::Egress);
            }
            out
        }
        _ => {
            let mut out = vec![Direction::Ingress];
            if spec
                .and_then(|s| s.egress.as_ref())
                .is_some_and(|e| !e.is_empty())
            {
                out.push(Direction::Egress);
            }
            out
        }
    }
}

/// Deterministic text of a piece of a policy (for set keys).
fn text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The cluster indexed for one plan: pods by namespace, namespace labels (with the name
/// label) for every namespace that exists or holds pods.
struct Index<'a> {
    by_ns: BTreeMap<&'a str, Vec<&'a PodInfo>>,
    ns_labels: BTreeMap<&'a str, BTreeMap<String, String>>,
}

impl<'a> Index<'a> {
    fn new(c: &'a Cluster) -> Self {
        let mut by_ns: BTreeMap<&str, Vec<&PodInfo>> = BTreeMap::new();
        for p in c.pods.values() {
            by_ns.entry(p.namespace.as_str()).or_default().push(p);
        }
        let mut ns_labels: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
        for (ns, labels) in &c.namespaces {
            ns_labels.insert(ns.as_str(), labels.clone());
        }
        for ns in by_ns.keys() {
            ns_labels.entry(ns).or_default();
        }
        for (ns, labels) in &mut ns_labels {
            labels.insert(NAMESPACE_NAME_LABEL.to_string(), ns.to_string());
        }
        Index { by_ns, ns_labels }
    }

    /// The pods of `ns` matching `sel` (`None`: all of them).
    fn pods_in(&self, ns: &str, sel: Option<&LabelSelector>) -> Vec<&'a PodInfo> {
        self.by_ns
            .get(ns)
            .into_iter()
            .flatten()
            .copied()
            .filter(|p| sel.is_none_or(|s| s.matches(&p.labels)))
            .collect()
    }

    /// The pods a peer stands for (selectors only; `ipBlock` is not about pods).
    fn peer_pods(&self, policy_ns: &str, peer: &NetworkPolicyPeer) -> Vec<&'a PodInfo> {
        if peer.ip_block.is_some()
            || (peer.pod_selector.is_none() && peer.namespace_selector.is_none())
        {
            return Vec::new();
        }
        let pods = match peer.pod_selector.as_ref().map(selector) {
            None => None,
            Some(None) => return Vec::new(),
            Some(Some(s)) => Some(s),
        };
        let namespaces: Vec<&str> = match &peer.namespace_selector {
            None => vec![policy_ns],
            Some(sel) => {
                let Some(s) = selector(sel) else {
                    return Vec::new();
                };
                self.ns_labels
                    .iter()
                    .filter(|(_, labels)| s.matches(labels))
                    .map(|(ns, _)| *ns)
                    .collect()
            }
        };
        namespaces
            .into_iter()
            .flat_map(|ns| self.pods_in(ns, pods.as_ref()))
            .collect()
    }

    /// The addresses a rule's peers stand for.
    fn peer_ranges(&self, policy_ns: &str, peers: &[NetworkPolicyPeer]) -> Ranges {
        let mut out = Ranges::default();
        for peer in peers {
            if let Some(block) = &peer.ip_block {
                let Some(cidr) = Cidr::parse(&block.cidr) else {
                    continue;
                };
                let mut r = Ranges::default();
                r.add_cidr(cidr);
                for e in block.except.iter().flatten().filter_map(|e| Cidr::parse(e)) {
                    r.remove_cidr(e);
                }
                out.union(&r);
            } else {
                let pods = Ranges::from_ranges(
                    self.peer_pods(policy_ns, peer)
                        .into_iter()
                        .map(|p| (p.ip, p.ip)),
                );
                out.union(&pods);
            }
        }
        out
    }
}

/// A rule's peers and ports, whichever the direction.
type Clause<'p> = (
    Option<&'p Vec<NetworkPolicyPeer>>,
    Option<&'p Vec<NetworkPolicyPort>>,
);

/// One policy's view while it is planned.
struct Subject<'p, 'a> {
    ns: &'p str,
    dir: Direction,
    /// The local pods it selects, and the selector's text (for named-port keys).
    selected: &'p [&'a PodInfo],
    selector_text: String,
}

impl Cluster {
    /// One port clause; `None` for one that can never match (a protocol k1s does not know,
    /// a port out of range).
    fn port_match(
        &self,
        index: &Index<'_>,
        plan: &mut Plan,
        subject: &Subject<'_, '_>,
        peers: Option<&Vec<NetworkPolicyPeer>>,
        port: &NetworkPolicyPort,
    ) -> Option<PortMatch> {
        let proto = Protocol::parse(port.protocol.as_deref())?;
        Some(match &port.port {
            None => PortMatch::Protocol(proto),
            Some(IntOrString::Int(n)) => {
                let first = u16::try_from(*n).ok().filter(|p| *p > 0)?;
                let last = match port.end_port {
                    Some(e) => u16::try_from(e).ok().filter(|e| *e >= first)?,
                    None => first,
                };
                PortMatch::Range(proto, first, last)
            }
            Some(IntOrString::String(name)) => match name.parse::<u16>() {
                // "80" as a string is a number to upstream's intstr too.
                Ok(n) if n > 0 => PortMatch::Range(proto, n, n),
                _ => {
                    // Named ports resolve on the pods that receive: the selected ones for
                    // ingress, the peer pods (every pod when no peers) for egress.
                    let key = match subject.dir {
                        Direction::Ingress => {
                            format!(
                                "in {} {} {name} {proto:?}",
                                subject.ns, subject.selector_text
                            )
                        }
                        Direction::Egress => format!(
                            "out {} {} {name} {proto:?}",
                            subject.ns,
                            peers.map(text).unwrap_or_default()
                        ),
                    };
                    if !plan.named_ports.contains_key(&key) {
                        let receivers: Vec<&PodInfo> = match (subject.dir, peers) {
                            (Direction::Ingress, _) => subject.selected.to_vec(),
                            (Direction::Egress, None) => self.pods.values().collect(),
                            (Direction::Egress, Some(list)) => list
                                .iter()
                                .flat_map(|peer| index.peer_pods(subject.ns, peer))
                                .collect(),
                        };
                        let triples = receivers
                            .iter()
                            .filter_map(|p| p.port_named(name, proto).map(|n| (p.ip, proto, n)))
                            .collect();
                        plan.named_ports.insert(key.clone(), triples);
                    }
                    PortMatch::Named(key)
                }
            },
        })
    }

    /// What this node (`node`) enforces.
    pub fn plan(&self, node: &str) -> Plan {
        let index = Index::new(self);
        let mut plan = Plan::default();
        for ((ns, name), policy) in &self.policies {
            let Some(spec) = &policy.spec else { continue };
            // An absent podSelector is the empty one: every pod of the namespace.
            let pod_selector = spec
                .pod_selector
                .as_ref()
                .map_or(Some(LabelSelector::default()), selector);
            let selected: Vec<&PodInfo> = match &pod_selector {
                None => Vec::new(),
                Some(s) => index
                    .pods_in(ns, Some(s))
                    .into_iter()
                    .filter(|p| p.node == node)
                    .collect(),
            };
            if selected.is_empty() {
                continue;
            }
            for dir in directions(policy) {
                let subject = Subject {
                    ns,
                    dir,
                    selected: &selected,
                    selector_text: text(&spec.pod_selector),
                };
                let clauses: Vec<Clause<'_>> = match dir {
                    Direction::Ingress => spec
                        .ingress
                        .iter()
                        .flatten()
                        .map(|r| (r.from.as_ref(), r.ports.as_ref()))
                        .collect(),
                    Direction::Egress => spec
                        .egress
                        .iter()
                        .flatten()
                        .map(|r| (r.to.as_ref(), r.ports.as_ref()))
                        .collect(),
                };
                let mut rules = Vec::new();
                for (peers, ports) in clauses {
                    let peers = peers.filter(|p| !p.is_empty());
                    let mut matches = Vec::new();
                    for port in ports.into_iter().flatten() {
                        if let Some(m) = self.port_match(&index, &mut plan, &subject, peers, port) {
                            matches.push(m);
                        }
                    }
                    // Every clause unusable: the rule allows nothing (as upstream, a rule
                    // whose ports cannot match is not a rule for every port).
                    if ports.is_some_and(|p| !p.is_empty()) && matches.is_empty() {
                        continue;
                    }
                    let peers = peers.map(|list| {
                        let key = format!("{ns} {}", text(list));
                        if !plan.peer_sets.contains_key(&key) {
                            let ranges = index.peer_ranges(ns, list);
                            plan.peer_sets.insert(key.clone(), ranges);
                        }
                        key
                    });
                    rules.push(RulePlan {
                        peers,
                        ports: matches,
                    });
                }
                let i = plan.policies.len();
                plan.policies.push(PolicyPlan {
                    namespace: ns.clone(),
                    name: name.clone(),
                    direction: dir,
                    rules,
                });
                let pods = match dir {
                    Direction::Ingress => &mut plan.ingress,
                    Direction::Egress => &mut plan.egress,
                };
                for p in &selected {
                    pods.entry(p.ip).or_default().push(i);
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests;

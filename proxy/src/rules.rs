//! The rules: the proxy's table as a [`Ruleset`], built from the model. [`base`] is the part
//! that does not depend on Services (hooks, dispatch through verdict maps, masquerade, the
//! checks that reject or drop); [`service_port`] is one Service port's fragment (its chains
//! and map elements) and [`host_port`] one pod hostPort's, so a change to one Service or pod
//! rebuilds only its fragment.
//!
//! The entry points are kube-proxy's nftables mode (KEP-3866), in a table of k1s's own; the
//! dispatch differs (see `dispatch` for why):
//! - `nat-prerouting`/`nat-output` jump to `services`, which looks up
//!   `daddr . l4proto . dport` in the `service-ips` map (ClusterIPs, externalIPs, load-balancer
//!   addresses) and `l4proto . dport` in `service-nodeports` for local destinations (and the
//!   same for hostPorts: `hostports-ip`, `hostports-any`).
//! - A ClusterIP leads to `svc-…`: traffic not from the cluster CIDR is marked for masquerade,
//!   then it goes to `pick-svc-N` (N: the number of endpoints), which DNATs to the endpoint the
//!   `svc-endpoints` map holds for the packet's address, protocol, port and a random number
//!   below N (`numgen random mod N`): the endpoints are map elements, so a Service costs two
//!   rules whatever its size (see [`dispatch`] for why). A client stuck to an endpoint
//!   (`sessionAffinity: ClientIP`, a dynamic set per endpoint with the affinity timeout) is
//!   dispatched by rules of the Service's own instead. A pod reaching itself (hairpin) is
//!   masqueraded in postrouting through the shared [`HAIRPIN`] set.
//! - External traffic (NodePort, externalIPs, load balancer) leads to `ext-…`: with
//!   `externalTrafficPolicy: Cluster` it is masqueraded and dispatched to every endpoint
//!   (`pick-ext-N`, maps `ext-endpoints` by address and `ext-endpoints-np` by NodePort); with
//!   `Local` the client's address is kept and only this node's endpoints serve it (traffic from
//!   the node itself still reaches any endpoint, masqueraded: `pick-any-N`).
//! - Ports without usable endpoints are not in the dispatch maps but in `no-endpoint-…` maps,
//!   which filter chains consult before DNAT to reject new connections at once (ICMP).
//!   Traffic to a ClusterIP's unserved port is rejected, to an unallocated address of the
//!   service CIDR dropped (`cluster-ips-check`, after DNAT).
//! - NodePorts answer on every local address, 127.0.0.1 included (as kube-proxy's iptables
//!   mode with `--iptables-localhost-nodeports`); packets for 127.0.0.0/8 that arrive from
//!   other hosts are dropped (the CVE-2020-8558 mitigation).

use std::net::Ipv4Addr;

use sha2::{Digest, Sha256};

use crate::model::{Endpoint, HostPort, ServicePort, Targets};
use crate::nft::ruleset::Ruleset;

/// The fwmark bit that asks `masquerading` to masquerade a packet (kube-proxy's too).
pub const MASQUERADE_MARK: &str = "0x4000";

/// What the rules depend on besides the Services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesConfig {
    /// The service CIDR (`10.43.0.0/16`): unallocated addresses in it are dropped.
    pub service_cidr: String,
    /// The cluster (pod) CIDR: traffic from outside it to a ClusterIP is masqueraded.
    pub cluster_cidr: String,
    /// NodePorts on 127.0.0.1 too.
    pub localhost_nodeports: bool,
}

// Names of the fixed sets, maps and chains.
const CLUSTER_IPS: &str = "cluster-ips";
const SERVICE_IPS: &str = "service-ips";
const SERVICE_NODEPORTS: &str = "service-nodeports";
const NO_ENDPOINT_SERVICES: &str = "no-endpoint-services";
const NO_ENDPOINT_NODEPORTS: &str = "no-endpoint-nodeports";
const HOSTPORTS_IP: &str = "hostports-ip";
const HOSTPORTS_ANY: &str = "hostports-any";
/// `EP . EP` for every endpoint some Service DNATs to: a packet whose source is the address
/// it was DNATed to (a pod reaching itself through a Service) is masqueraded, so the reply
/// comes back through the node. One element per pod, shared by its Services: the proxier
/// counts references.
pub const HAIRPIN: &str = "hairpin";
const MARK_FOR_MASQUERADE: &str = "mark-for-masquerade";
const REJECT_CHAIN: &str = "reject-chain";

/// Endpoint counts dispatched through the endpoint maps (`pick-…-1` … `pick-…-MAX_PICK`); a
/// Service port with more endpoints (or with session affinity) gets rules of its own. Each
/// pick chain's rules are bindings of the maps, and the kernel checks every binding of a map
/// for each element added to it: few chains keep adding endpoints cheap.
pub const MAX_PICK: usize = 32;

/// The endpoint maps: a packet's key (destination address or NodePort, protocol, port, and
/// a random number below the endpoint count) → the endpoint's address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A ClusterIP's endpoints (internal traffic policy), by cluster IP.
    Svc,
    /// External traffic's endpoints (external traffic policy), by external address or NodePort.
    Ext,
    /// Every endpoint, for traffic from the node itself to a `Local` Service's external
    /// addresses and NodePort.
    Any,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Svc => "svc",
            Role::Ext => "ext",
            Role::Any => "any",
        }
    }
    /// The map keyed by destination address.
    fn by_address(self) -> String {
        format!("{}-endpoints", self.name())
    }
    /// The map keyed by NodePort (none for ClusterIPs).
    fn by_node_port(self) -> Option<String> {
        (self != Role::Svc).then(|| format!("{}-endpoints-np", self.name()))
    }
    fn pick_chain(self, n: usize) -> String {
        format!("pick-{}-{n}", self.name())
    }
}

/// The Service-independent part of the table.
pub fn base(cfg: &RulesConfig) -> Ruleset {
    let mut r = Ruleset::default();
    r.declare(
        CLUSTER_IPS,
        false,
        "type ipv4_addr ; comment \"Active ClusterIPs\" ;",
        true,
    );
    let by_address = "type ipv4_addr . inet_proto . inet_service : verdict ;";
    let by_port = "type inet_proto . inet_service : verdict ;";
    r.declare(SERVICE_IPS, true, by_address, true);
    r.declare(SERVICE_NODEPORTS, true, by_port, true);
    r.declare(NO_ENDPOINT_SERVICES, true, by_address, true);
    r.declare(NO_ENDPOINT_NODEPORTS, true, by_port, true);
    r.declare(HOSTPORTS_IP, true, by_address, true);
    r.declare(HOSTPORTS_ANY, true, by_port, true);
    r.declare(HAIRPIN, false, "type ipv4_addr . ipv4_addr ;", true);
    let by_address_eps =
        "typeof ip daddr . meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport ;";
    let by_port_eps =
        "typeof meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport ;";
    for role in [Role::Svc, Role::Ext, Role::Any] {
        r.declare(&role.by_address(), true, by_address_eps, true);
        if let Some(np) = role.by_node_port() {
            r.declare(&np, true, by_port_eps, true);
        }
        for n in 1..=MAX_PICK {
            let chain = role.pick_chain(n);
            r.rule(
                &chain,
                format!(
                    "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod {n} map @{}",
                    role.by_address()
                ),
            );
            if let Some(np) = role.by_node_port() {
                r.rule(
                    &chain,
                    format!("dnat ip to meta l4proto . th dport . numgen random mod {n} map @{np}"),
                );
            }
        }
    }

    // The base chains: filter hooks before DNAT (-110) reject new connections to ports
    // without endpoints; after DNAT (-90, and forward) catch what no Service took; nat hooks
    // dispatch and masquerade.
    const BASE: &[(&str, &str, &[&str])] = &[
        (
            "filter-prerouting",
            "type filter hook prerouting priority -110",
            &[],
        ),
        (
            "filter-input",
            "type filter hook input priority -110",
            &[
                "ct state new jump nodeport-endpoints-check",
                "ct state new jump service-endpoints-check",
            ],
        ),
        (
            "filter-forward",
            "type filter hook forward priority -110",
            &[
                "ct state new jump service-endpoints-check",
                "ct state new jump cluster-ips-check",
            ],
        ),
        (
            "filter-output",
            "type filter hook output priority -110",
            &["ct state new jump service-endpoints-check"],
        ),
        (
            "filter-output-post-dnat",
            "type filter hook output priority -90",
            &["ct state new jump cluster-ips-check"],
        ),
        (
            "nat-prerouting",
            "type nat hook prerouting priority dstnat",
            &["jump services"],
        ),
        (
            "nat-output",
            "type nat hook output priority -100",
            &["jump services"],
        ),
        (
            "nat-postrouting",
            "type nat hook postrouting priority srcnat",
            &[
                "ip saddr . ip daddr @hairpin jump mark-for-masquerade",
                "jump masquerading",
            ],
        ),
    ];
    for (chain, hook, rules) in BASE {
        r.base_chain(chain, hook);
        for rule in *rules {
            r.rule(chain, *rule);
        }
    }
    if cfg.localhost_nodeports {
        r.rule(
            "filter-prerouting",
            "iifname != \"lo\" ip daddr 127.0.0.0/8 drop comment \"localhost NodePorts only from this host (CVE-2020-8558)\"",
        );
    }

    r.rule(
        "services",
        format!("ip daddr . meta l4proto . th dport vmap @{SERVICE_IPS}"),
    );
    let loopback = if cfg.localhost_nodeports {
        ""
    } else {
        "ip daddr != 127.0.0.0/8 "
    };
    r.rule(
        "services",
        format!("ip daddr . meta l4proto . th dport vmap @{HOSTPORTS_IP}"),
    );
    r.rule(
        "services",
        format!("fib daddr type local {loopback}meta l4proto . th dport vmap @{HOSTPORTS_ANY}"),
    );
    r.rule(
        "services",
        format!("fib daddr type local {loopback}meta l4proto . th dport vmap @{SERVICE_NODEPORTS}"),
    );
    r.rule(
        "service-endpoints-check",
        format!("ip daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}"),
    );
    r.rule(
        "nodeport-endpoints-check",
        format!(
            "fib daddr type local {loopback}meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}"
        ),
    );
    r.rule(
        "cluster-ips-check",
        format!("ip daddr @{CLUSTER_IPS} reject comment \"ClusterIP port not served\""),
    );
    r.rule(
        "cluster-ips-check",
        format!(
            "ip daddr {} drop comment \"unallocated ClusterIP\"",
            cfg.service_cidr
        ),
    );
    r.rule(
        MARK_FOR_MASQUERADE,
        format!("meta mark set meta mark or {MASQUERADE_MARK}"),
    );
    r.rule(
        "masquerading",
        format!("meta mark & {MASQUERADE_MARK} == 0 return"),
    );
    r.rule(
        "masquerading",
        format!("meta mark set meta mark xor {MASQUERADE_MARK}"),
    );
    r.rule("masquerading", "masquerade fully-random");
    r.rule(REJECT_CHAIN, "reject");
    r
}

/// A short stable hash that keeps generated names unique whatever the text after it.
fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// The names of one Service port's chains and sets.
struct Names {
    id: String,
    h: String,
}

impl Names {
    fn new(port: &ServicePort) -> Self {
        let id = port.id.to_string();
        Self { h: hash(&id), id }
    }
    fn service(&self) -> String {
        format!("svc-{}-{}", self.h, self.id)
    }
    fn external(&self) -> String {
        format!("ext-{}-{}", self.h, self.id)
    }
    fn cluster(&self) -> String {
        format!("cluster-{}-{}", self.h, self.id)
    }
    fn affinity(&self, e: &Endpoint) -> String {
        let full = format!("{}__{}/{}", self.id, e.ip, e.port);
        format!("aff-{}-{full}", hash(&full))
    }
}

/// Whether `eps` are dispatched through the endpoint maps (see [`dispatch`]).
fn uses_maps(port: &ServicePort, eps: &[Endpoint]) -> bool {
    port.affinity_seconds.is_none() && !eps.is_empty() && eps.len() <= MAX_PICK
}

/// The elements of `role`'s maps for `eps`: one per endpoint and key (each address and the
/// NodePort the traffic can come to), numbered as `numgen random mod N` draws.
fn endpoint_elements(r: &mut Ruleset, port: &ServicePort, eps: &[Endpoint], role: Role) {
    let proto = port.id.protocol.nft();
    let addresses: &[Ipv4Addr] = match role {
        Role::Svc => &port.cluster_ips,
        Role::Ext | Role::Any => &port.external_ips,
    };
    let (by_address, by_node_port) = (role.by_address(), role.by_node_port());
    // The keys' common prefixes, written once (a full sync writes ~10 per endpoint).
    let prefixes: Vec<String> = addresses
        .iter()
        .map(|ip| format!("{ip} . {proto} . {} . ", port.port))
        .collect();
    let np_prefix = port.node_port.map(|np| format!("{proto} . {np} . "));
    for (i, e) in eps.iter().enumerate() {
        let to = format!("{} . {}", e.ip, e.port);
        let index = i.to_string();
        for prefix in &prefixes {
            r.element(&by_address, [prefix.as_str(), &index].concat(), to.clone());
        }
        if let (Some(map), Some(prefix)) = (&by_node_port, &np_prefix) {
            r.element(map, [prefix.as_str(), &index].concat(), to);
        }
    }
}

/// Sends what reaches `chain` to one of `eps`, for the packets `role` names: a `goto` to the
/// pick chain of their count and an element of the role's maps per endpoint and key (the
/// addresses and NodePort the traffic can come to), so the kernel holds a Service port's
/// endpoints as map elements, not as rules. Plain rules instead for a port with session
/// affinity or more than [`MAX_PICK`] endpoints: a client in an endpoint's affinity set goes
/// back to it (refreshing its entry); otherwise rule j takes the connection with
/// probability 1/(N-j), which makes every endpoint equally likely.
///
/// Why maps: rules cost the kernel ~1 µs per expression and ~4 µs per rule to load, so
/// 10,000 Services of 10 endpoints as rules (110,000) took 1.2–1.5 s to program even
/// without `nft` (docs/benchmarks.md, proxy); an inline `vmap { … }` or a set per Service is a
/// kernel object each, and sets are found by a walk of the table's list.
fn dispatch(
    r: &mut Ruleset,
    chain: &str,
    port: &ServicePort,
    n: &Names,
    eps: &[Endpoint],
    role: Role,
) {
    if uses_maps(port, eps) {
        r.rule(chain, format!("goto {}", role.pick_chain(eps.len())));
        endpoint_elements(r, port, eps, role);
        return;
    }
    let proto = port.id.protocol.nft();
    let to = |e: &Endpoint| {
        let stick = match port.affinity_seconds {
            Some(_) => format!("update @{} {{ ip saddr }} ", n.affinity(e)),
            None => String::new(),
        };
        format!("meta l4proto {proto} {stick}dnat to {}:{}", e.ip, e.port)
    };
    if let Some(t) = port.affinity_seconds {
        for e in eps {
            let set = n.affinity(e);
            r.declare(
                &set,
                false,
                &format!("type ipv4_addr ; flags dynamic,timeout ; timeout {t}s ;"),
                false,
            );
            r.rule(chain, format!("ip saddr @{set} {}", to(e)));
        }
    }
    let k = eps.len();
    for (j, e) in eps.iter().enumerate() {
        if j + 1 == k {
            r.rule(chain, to(e));
        } else {
            r.rule(chain, format!("numgen random mod {} 0 {}", k - j, to(e)));
        }
    }
}

/// One Service port's chains and map elements, `targets` being where its traffic can go
/// ([`Targets::of`] its endpoints).
pub fn service_port(port: &ServicePort, targets: &Targets, cfg: &RulesConfig) -> Ruleset {
    let mut r = Ruleset::default();
    let n = Names::new(port);
    let proto = port.id.protocol.nft();
    let (cluster, local) = (&targets.cluster, &targets.local);
    let internal = if port.internal_local { local } else { cluster };

    for ip in &port.cluster_ips {
        r.element(CLUSTER_IPS, ip.to_string(), "");
    }
    let svc = n.service();
    if internal.is_empty() {
        for ip in &port.cluster_ips {
            r.element(
                NO_ENDPOINT_SERVICES,
                format!("{ip} . {proto} . {}", port.port),
                format!("goto {REJECT_CHAIN}"),
            );
        }
    } else {
        r.rule(
            &svc,
            format!(
                "ip saddr != {} jump {MARK_FOR_MASQUERADE}",
                cfg.cluster_cidr
            ),
        );
        dispatch(&mut r, &svc, port, &n, internal, Role::Svc);
        for ip in &port.cluster_ips {
            r.element(
                SERVICE_IPS,
                format!("{ip} . {proto} . {}", port.port),
                format!("goto {svc}"),
            );
        }
    }

    if port.has_external() {
        let ext = n.external();
        // Where external traffic can go at all: with Local, traffic from this node still
        // reaches any endpoint, so only a Service with no endpoint anywhere rejects it.
        let reachable = !cluster.is_empty();
        if reachable && port.external_local {
            // Traffic from this node itself goes to any endpoint, masqueraded.
            let to_any = if uses_maps(port, cluster) {
                endpoint_elements(&mut r, port, cluster, Role::Any);
                Role::Any.pick_chain(cluster.len())
            } else {
                let c = n.cluster();
                dispatch(&mut r, &c, port, &n, cluster, Role::Any);
                c
            };
            r.rule(
                &ext,
                format!("fib saddr type local jump {MARK_FOR_MASQUERADE}"),
            );
            r.rule(&ext, format!("fib saddr type local goto {to_any}"));
            if local.is_empty() {
                r.rule(&ext, "drop comment \"no local endpoints\"");
            } else {
                dispatch(&mut r, &ext, port, &n, local, Role::Ext);
            }
        } else if reachable {
            r.rule(&ext, format!("jump {MARK_FOR_MASQUERADE}"));
            dispatch(&mut r, &ext, port, &n, cluster, Role::Ext);
        }
        let (ips_map, ports_map, verdict) = if reachable {
            (SERVICE_IPS, SERVICE_NODEPORTS, format!("goto {ext}"))
        } else {
            (
                NO_ENDPOINT_SERVICES,
                NO_ENDPOINT_NODEPORTS,
                format!("goto {REJECT_CHAIN}"),
            )
        };
        for ip in &port.external_ips {
            r.element(ips_map, format!("{ip} . {proto} . {}", port.port), &verdict);
        }
        if let Some(np) = port.node_port {
            r.element(ports_map, format!("{proto} . {np}"), &verdict);
        }
    }
    r
}

/// A pod's hostPort: traffic to the node's address (or `hostIP`) and port DNATed to the
/// pod, masqueraded when it comes from the pod itself (hairpin) or from 127.0.0.1.
pub fn host_port(hp: &HostPort) -> Ruleset {
    let mut r = Ruleset::default();
    let proto = hp.protocol.nft();
    let id = format!(
        "{}/{}/{proto}/{}",
        hp.namespace,
        hp.pod,
        hp.host_ip
            .map(|ip| format!("{ip}:{}", hp.host_port))
            .unwrap_or_else(|| hp.host_port.to_string())
    )
    .replace(':', "_");
    let chain = format!("hp-{}-{id}", hash(&id));
    r.rule(
        &chain,
        format!("ip saddr 127.0.0.0/8 jump {MARK_FOR_MASQUERADE}"),
    );
    r.rule(
        &chain,
        format!("ip saddr {} jump {MARK_FOR_MASQUERADE}", hp.pod_ip),
    );
    r.rule(
        &chain,
        format!(
            "meta l4proto {proto} dnat to {}:{}",
            hp.pod_ip, hp.container_port
        ),
    );
    match hp.host_ip {
        Some(ip) => r.element(
            HOSTPORTS_IP,
            format!("{ip} . {proto} . {}", hp.host_port),
            format!("goto {chain}"),
        ),
        None => r.element(
            HOSTPORTS_ANY,
            format!("{proto} . {}", hp.host_port),
            format!("goto {chain}"),
        ),
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PortName, Protocol};
    use crate::nft::ruleset::{Table, Tx};
    use std::collections::BTreeSet;

    /// A port's rules from all of its endpoints.
    fn port_rules(port: &ServicePort, endpoints: &[Endpoint], cfg: &RulesConfig) -> Ruleset {
        service_port(port, &Targets::of(endpoints), cfg)
    }

    fn cfg() -> RulesConfig {
        RulesConfig {
            service_cidr: "10.43.0.0/16".into(),
            cluster_cidr: "10.42.0.0/16".into(),
            localhost_nodeports: true,
        }
    }

    fn port(name: &str) -> ServicePort {
        let id = PortName {
            namespace: "ns".into(),
            name: name.into(),
            port: "http".into(),
            protocol: Protocol::Tcp,
        };
        ServicePort::cluster_ip(id, "10.43.0.20".parse().unwrap(), 80)
    }

    fn ep(ip: &str, ready: bool, local: bool) -> Endpoint {
        Endpoint {
            ip: ip.parse().unwrap(),
            port: 8080,
            ready,
            serving: ready,
            terminating: false,
            local,
            elsewhere: !local,
        }
    }

    fn render(r: &Ruleset) -> String {
        let t = Table {
            family: "ip",
            name: "k1s-proxy".into(),
        };
        Tx::diff(&t, &Ruleset::default(), r).unwrap().render()
    }

    #[test]
    fn cluster_ip_with_two_endpoints() {
        let r = port_rules(
            &port("web"),
            &[ep("10.42.0.5", true, true), ep("10.42.0.6", true, false)],
            &cfg(),
        );
        // Chains and elements come sorted by name; the hash is of the port's identity. The
        // endpoints are elements of the ClusterIP endpoint map, numbered for `numgen`.
        let want = "\
add chain ip k1s-proxy svc-c7a03e88-ns/web/tcp/http
add rule ip k1s-proxy svc-c7a03e88-ns/web/tcp/http ip saddr != 10.42.0.0/16 jump mark-for-masquerade
add rule ip k1s-proxy svc-c7a03e88-ns/web/tcp/http goto pick-svc-2
add element ip k1s-proxy cluster-ips { 10.43.0.20 }
add element ip k1s-proxy service-ips { 10.43.0.20 . tcp . 80 : goto svc-c7a03e88-ns/web/tcp/http }
add element ip k1s-proxy svc-endpoints { 10.43.0.20 . tcp . 80 . 0 : 10.42.0.5 . 8080 }
add element ip k1s-proxy svc-endpoints { 10.43.0.20 . tcp . 80 . 1 : 10.42.0.6 . 8080 }
";
        assert_eq!(render(&r), want);
        // Only the endpoint on this node can reach itself through it.
        assert_eq!(
            Targets::of(&[ep("10.42.0.5", true, true), ep("10.42.0.6", true, false)])
                .hairpin_addresses(),
            BTreeSet::from(["10.42.0.5".parse().unwrap()])
        );
    }

    #[test]
    fn the_base_has_a_pick_chain_per_endpoint_count() {
        let b = base(&cfg());
        assert_eq!(
            b.chains["pick-svc-3"].rules,
            [
                "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 3 map @svc-endpoints"
            ]
        );
        assert_eq!(
            b.chains["pick-ext-1"].rules[1],
            "dnat ip to meta l4proto . th dport . numgen random mod 1 map @ext-endpoints-np"
        );
        assert!(b.chains.contains_key(&format!("pick-any-{MAX_PICK}")));
        assert!(!b.chains.contains_key(&format!("pick-any-{}", MAX_PICK + 1)));
    }

    #[test]
    fn more_endpoints_than_the_pick_chains_cover_get_rules_of_their_own() {
        let eps: Vec<Endpoint> = (0..=MAX_PICK)
            .map(|i| ep(&format!("10.42.1.{i}"), true, false))
            .collect();
        let r = port_rules(&port("big"), &eps, &cfg());
        let rules = &chain(&r, "svc-");
        assert_eq!(rules.len(), 1 + eps.len());
        // 1/N, then 1/(N-1) of the rest, …, then the last: each endpoint equally likely.
        assert!(rules[1].starts_with(&format!("numgen random mod {} 0 ", MAX_PICK + 1)));
        assert!(rules[2].starts_with(&format!("numgen random mod {} 0 ", MAX_PICK)));
        assert_eq!(
            rules.last().unwrap(),
            &format!("meta l4proto tcp dnat to 10.42.1.{MAX_PICK}:8080")
        );
        assert!(!r.elements.contains_key("svc-endpoints"));
    }

    #[test]
    fn no_usable_endpoint_rejects_and_terminating_ones_serve_as_a_last_resort() {
        let r = port_rules(&port("web"), &[ep("10.42.0.5", false, true)], &cfg());
        assert!(r.chains.is_empty());
        assert_eq!(
            r.elements["no-endpoint-services"]["10.43.0.20 . tcp . 80"],
            "goto reject-chain"
        );
        let mut t = ep("10.42.0.5", false, true);
        t.serving = true;
        t.terminating = true;
        let r = port_rules(&port("web"), std::slice::from_ref(&t), &cfg());
        assert!(r.elements.contains_key("service-ips"));
        assert!(!r.elements.contains_key("no-endpoint-services"));
        assert_eq!(Targets::of(&[t.clone()]).cluster, [t]);
    }

    fn chain<'a>(r: &'a Ruleset, prefix: &str) -> &'a Vec<String> {
        &r.chains
            .iter()
            .find(|(k, _)| k.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} chain in {:?}", r.chains.keys()))
            .1
            .rules
    }

    #[test]
    fn node_port_external_policies() {
        let mut p = port("np");
        p.node_port = Some(30080);
        p.external_ips = vec!["192.0.2.10".parse().unwrap()];
        let eps = [ep("10.42.0.5", true, false)];
        let r = port_rules(&p, &eps, &cfg());
        let ext = chain(&r, "ext-");
        assert_eq!(ext, &["jump mark-for-masquerade", "goto pick-ext-1"]);
        assert!(r.elements["service-nodeports"]["tcp . 30080"].starts_with("goto ext-"));
        assert!(r.elements["service-ips"]["192.0.2.10 . tcp . 80"].starts_with("goto ext-"));
        assert_eq!(
            r.elements["ext-endpoints-np"]["tcp . 30080 . 0"],
            "10.42.0.5 . 8080"
        );
        assert_eq!(
            r.elements["ext-endpoints"]["192.0.2.10 . tcp . 80 . 0"],
            "10.42.0.5 . 8080"
        );
        // Local with no local endpoint: this host's own traffic goes anywhere, others dropped.
        p.external_local = true;
        let r = port_rules(&p, &eps, &cfg());
        let ext = chain(&r, "ext-");
        assert_eq!(
            ext,
            &[
                "fib saddr type local jump mark-for-masquerade",
                "fib saddr type local goto pick-any-1",
                "drop comment \"no local endpoints\""
            ]
        );
        assert_eq!(
            r.elements["any-endpoints-np"]["tcp . 30080 . 0"],
            "10.42.0.5 . 8080"
        );
        assert!(!r.elements.contains_key("ext-endpoints-np"));
        // Local with a local endpoint: dispatched among this node's, the client address kept.
        let r = port_rules(&p, &[ep("10.42.0.7", true, true), eps[0].clone()], &cfg());
        assert_eq!(chain(&r, "ext-")[2], "goto pick-ext-1");
        assert_eq!(
            r.elements["ext-endpoints-np"]["tcp . 30080 . 0"],
            "10.42.0.7 . 8080"
        );
        assert_eq!(r.elements["any-endpoints-np"].len(), 2);
        // The same with internal Local too: the node's own traffic still reaches any endpoint.
        p.internal_local = true;
        let r = port_rules(&p, &[ep("10.42.0.7", true, true), eps[0].clone()], &cfg());
        assert_eq!(chain(&r, "ext-")[1], "fib saddr type local goto pick-any-2");
        assert_eq!(chain(&r, "svc-")[1], "goto pick-svc-1");
        // With session affinity, rules of the port's own, in a chain for the node's traffic.
        p.affinity_seconds = Some(60);
        let r = port_rules(&p, &[ep("10.42.0.7", true, true), eps[0].clone()], &cfg());
        assert!(chain(&r, "ext-")[1].starts_with("fib saddr type local goto cluster-"));
        assert_eq!(chain(&r, "cluster-").len(), 4);
        // No endpoint at all: rejected on the NodePort too.
        let r = port_rules(&p, &[], &cfg());
        assert_eq!(
            r.elements["no-endpoint-nodeports"]["tcp . 30080"],
            "goto reject-chain"
        );
    }

    #[test]
    fn internal_local_uses_local_endpoints_only() {
        let mut p = port("il");
        p.internal_local = true;
        let r = port_rules(&p, &[ep("10.42.0.6", true, false)], &cfg());
        assert!(r.elements.contains_key("no-endpoint-services"));
        let r = port_rules(
            &p,
            &[ep("10.42.0.6", true, false), ep("10.42.0.5", true, true)],
            &cfg(),
        );
        assert_eq!(chain(&r, "svc-")[1], "goto pick-svc-1");
        assert_eq!(r.elements["svc-endpoints"].len(), 1);
        assert_eq!(
            r.elements["svc-endpoints"]["10.43.0.20 . tcp . 80 . 0"],
            "10.42.0.5 . 8080"
        );
    }

    #[test]
    fn host_ports_by_address_or_on_every_address() {
        let mut hp = HostPort {
            namespace: "ns".into(),
            pod: "p".into(),
            host_ip: None,
            host_port: 8080,
            protocol: Protocol::Tcp,
            pod_ip: "10.42.0.9".parse().unwrap(),
            container_port: 80,
        };
        let r = host_port(&hp);
        let (chain, c) = r.chains.iter().next().unwrap();
        assert!(chain.ends_with("-ns/p/tcp/8080"), "{chain}");
        assert_eq!(c.rules[2], "meta l4proto tcp dnat to 10.42.0.9:80");
        assert_eq!(
            r.elements["hostports-any"]["tcp . 8080"],
            format!("goto {chain}")
        );
        hp.host_ip = Some("192.0.2.1".parse().unwrap());
        hp.protocol = Protocol::Udp;
        let r = host_port(&hp);
        let (chain, _) = r.chains.iter().next().unwrap();
        assert!(chain.ends_with("-ns/p/udp/192.0.2.1_8080"), "{chain}");
        assert!(r.elements["hostports-ip"].contains_key("192.0.2.1 . udp . 8080"));
    }

    #[test]
    fn session_affinity_sticks_through_dynamic_sets() {
        let mut p = port("aff");
        p.affinity_seconds = Some(30);
        let r = port_rules(
            &p,
            &[ep("10.42.0.5", true, true), ep("10.42.0.6", true, true)],
            &cfg(),
        );
        let sets: Vec<&String> = r.sets.keys().collect();
        assert_eq!(sets.len(), 2);
        assert!(r.sets[sets[0]].declaration.contains("timeout 30s"));
        assert!(!r.sets[sets[0]].managed);
        let svc = chain(&r, "svc-");
        // A client in an endpoint's set goes back to it (refreshing its entry); a new one is
        // dispatched and remembered.
        assert!(svc[1].starts_with("ip saddr @aff-"), "{svc:?}");
        assert!(svc[1].contains("update @aff-") && svc[1].ends_with("dnat to 10.42.0.5:8080"));
        assert!(svc[3].starts_with("numgen random mod 2 0 meta l4proto tcp update @aff-"));
    }
}

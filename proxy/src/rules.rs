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
//!   then rules pick an endpoint at random (`numgen random mod N-j`) and DNAT, or go back to the
//!   one a client is stuck to (`sessionAffinity: ClientIP`, a dynamic set per endpoint with the
//!   affinity timeout). A pod reaching itself (hairpin) is masqueraded in postrouting through
//!   the shared [`HAIRPIN`] set.
//! - External traffic (NodePort, externalIPs, load balancer) leads to `ext-…`: with
//!   `externalTrafficPolicy: Cluster` it is masqueraded and dispatched to every endpoint; with
//!   `Local` the client's address is kept and only this node's endpoints serve it (traffic from
//!   the node itself still reaches any endpoint, masqueraded).
//! - Ports without usable endpoints are not in the dispatch maps but in `no-endpoint-…` maps,
//!   which filter chains consult before DNAT to reject new connections at once (ICMP).
//!   Traffic to a ClusterIP's unserved port is rejected, to an unallocated address of the
//!   service CIDR dropped (`cluster-ips-check`, after DNAT).
//! - NodePorts answer on every local address, 127.0.0.1 included (as kube-proxy's iptables
//!   mode with `--iptables-localhost-nodeports`); packets for 127.0.0.0/8 that arrive from
//!   other hosts are dropped (the CVE-2020-8558 mitigation).

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

/// The rules that pick one of `eps` and DNAT to it: a client stuck to an endpoint
/// (`sessionAffinity: ClientIP`) goes back to it; otherwise rule j takes the connection with
/// probability 1/(N-j), which makes every endpoint equally likely. Plain rules rather than a
/// `numgen … vmap { … }` or a chain per endpoint: each anonymous set and each chain is a
/// kernel object, and at 10,000 Services they made a full sync take minutes and every
/// partial one hundreds of milliseconds (docs/benchmarks.md, proxy).
fn dispatch(r: &mut Ruleset, chain: &str, port: &ServicePort, n: &Names, eps: &[Endpoint]) {
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
        dispatch(&mut r, &svc, port, &n, internal);
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
            let to_cluster = if port.internal_local {
                let c = n.cluster();
                dispatch(&mut r, &c, port, &n, cluster);
                c
            } else {
                svc.clone()
            };
            r.rule(
                &ext,
                format!("fib saddr type local jump {MARK_FOR_MASQUERADE}"),
            );
            r.rule(&ext, format!("fib saddr type local goto {to_cluster}"));
            if local.is_empty() {
                r.rule(&ext, "drop comment \"no local endpoints\"");
            } else {
                dispatch(&mut r, &ext, port, &n, local);
            }
        } else if reachable {
            r.rule(&ext, format!("jump {MARK_FOR_MASQUERADE}"));
            dispatch(&mut r, &ext, port, &n, cluster);
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
        // Chains and elements come sorted by name; the hash is of the port's identity.
        let want = "\
add chain ip k1s-proxy svc-c7a03e88-ns/web/tcp/http
add rule ip k1s-proxy svc-c7a03e88-ns/web/tcp/http ip saddr != 10.42.0.0/16 jump mark-for-masquerade
add rule ip k1s-proxy svc-c7a03e88-ns/web/tcp/http numgen random mod 2 0 meta l4proto tcp dnat to 10.42.0.5:8080
add rule ip k1s-proxy svc-c7a03e88-ns/web/tcp/http meta l4proto tcp dnat to 10.42.0.6:8080
add element ip k1s-proxy cluster-ips { 10.43.0.20 }
add element ip k1s-proxy service-ips { 10.43.0.20 . tcp . 80 : goto svc-c7a03e88-ns/web/tcp/http }
";
        assert_eq!(render(&r), want);
        let three = [
            ep("10.42.0.5", true, true),
            ep("10.42.0.6", true, false),
            ep("10.42.0.7", true, false),
        ];
        let r = port_rules(&port("web"), &three, &cfg());
        let rules = &r.chains.values().next().unwrap().rules;
        // 1/3, then 1/2 of the rest, then the last: each endpoint equally likely.
        assert!(rules[1].starts_with("numgen random mod 3 0 "));
        assert!(rules[2].starts_with("numgen random mod 2 0 "));
        assert_eq!(rules[3], "meta l4proto tcp dnat to 10.42.0.7:8080");
        assert_eq!(Targets::of(&three).addresses().len(), 3);
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
        assert_eq!(ext[0], "jump mark-for-masquerade");
        assert_eq!(ext[1], "meta l4proto tcp dnat to 10.42.0.5:8080");
        assert!(r.elements["service-nodeports"]["tcp . 30080"].starts_with("goto ext-"));
        assert!(r.elements["service-ips"]["192.0.2.10 . tcp . 80"].starts_with("goto ext-"));
        // Local with no local endpoint: this host's own traffic goes anywhere, others dropped.
        p.external_local = true;
        let r = port_rules(&p, &eps, &cfg());
        let ext = chain(&r, "ext-");
        assert_eq!(ext.len(), 3);
        assert!(ext[1].starts_with("fib saddr type local goto svc-"));
        assert!(ext[2].starts_with("drop"));
        // Local with a local endpoint: dispatched among this node's, the client address kept.
        let r = port_rules(&p, &[ep("10.42.0.7", true, true), eps[0].clone()], &cfg());
        let ext = chain(&r, "ext-");
        assert_eq!(ext[2], "meta l4proto tcp dnat to 10.42.0.7:8080");
        // Local with internal Local too: the node's own traffic needs a cluster-wide chain.
        p.internal_local = true;
        let r = port_rules(&p, &[ep("10.42.0.7", true, true), eps[0].clone()], &cfg());
        assert!(chain(&r, "ext-")[1].starts_with("fib saddr type local goto cluster-"));
        assert_eq!(chain(&r, "cluster-").len(), 2);
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
        assert_eq!(
            chain(&r, "svc-")[1],
            "meta l4proto tcp dnat to 10.42.0.5:8080"
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

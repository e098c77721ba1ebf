//! The policy table as a [`Ruleset`], built from a [`Plan`].
//!
//! Two base chains on the forward hook, one per direction, each of which must accept a
//! packet (a `drop` in either is final; an `accept` ends only its own chain):
//! - `egress` looks the source up in the `egress-pods` verdict map: an isolated local pod
//!   goes to its chain `pod-out-…`, which jumps to the chain of each policy selecting it
//!   (`pol-…-out`) and drops what none of them accepted;
//! - `ingress` does the same with the destination (`ingress-pods`, `pod-in-…`, `pol-…-in`).
//!
//! A policy chain has one rule per rule clause and port clause: the peers are an interval set
//! of addresses (`peers-…`), a named port a set of `address . protocol . port` triples
//! (`port-…`). Sets are named after what they stand for (the policy's namespace and the peer
//! list or selector), so policies that say the same thing share one, and a pod coming or
//! going changes set elements, not
//! rules. Packets of connections already accepted (`ct state established,related`) pass
//! both chains, as in upstream's implementations: a policy applies to new connections.
//!
//! Where no rule looks, by design: traffic between a pod and its own node (the forward hook
//! does not see it: kubelet probes, the node's cluster DNS server and its API server are
//! always reachable from and to local pods), and a pod's traffic to itself (it never leaves
//! the pod). Both as in upstream's implementations, which allow node-local traffic.

use std::net::Ipv4Addr;

use k1s_nft::ruleset::Ruleset;
use sha2::{Digest, Sha256};

use crate::model::{Direction, Plan, PortMatch, RulePlan};

pub const INGRESS_MAP: &str = "ingress-pods";
pub const EGRESS_MAP: &str = "egress-pods";

/// A short stable hash that keeps generated names unique.
fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(5).map(|b| format!("{b:02x}")).collect()
}

fn suffix(d: Direction) -> &'static str {
    match d {
        Direction::Ingress => "in",
        Direction::Egress => "out",
    }
}

/// The chain of one isolated pod in one direction (`pod-in-10-42-0-5`).
fn pod_chain(d: Direction, ip: Ipv4Addr) -> String {
    format!("pod-{}-{}", suffix(d), ip.to_string().replace('.', "-"))
}

/// The part that does not depend on policies.
fn base() -> Ruleset {
    let mut r = Ruleset::default();
    for (chain, map, field) in [
        ("egress", EGRESS_MAP, "saddr"),
        ("ingress", INGRESS_MAP, "daddr"),
    ] {
        r.base_chain(
            chain,
            "type filter hook forward priority filter; policy accept",
        );
        r.rule(chain, "ct state established,related accept");
        r.rule(chain, format!("ip {field} vmap @{map}"));
        r.declare(map, true, "type ipv4_addr : verdict ;", true);
    }
    r
}

/// The name of a shared set of peers (`peers-…`) or of a named port (`port-…`).
fn set_name(kind: &str, key: &str) -> String {
    format!("{kind}-{}", hash(key))
}

fn port_expr(m: &PortMatch) -> String {
    match m {
        PortMatch::Protocol(p) => format!("meta l4proto {}", p.nft()),
        PortMatch::Range(p, a, b) if a == b => format!("meta l4proto {} th dport {a}", p.nft()),
        PortMatch::Range(p, a, b) => format!("meta l4proto {} th dport {a}-{b}", p.nft()),
        PortMatch::Named(key) => format!(
            "ip daddr . meta l4proto . th dport @{}",
            set_name("port", key)
        ),
    }
}

/// One policy's chain for one direction.
fn policy(r: &mut Ruleset, chain: &str, id: &str, d: Direction, rules: &[RulePlan]) {
    r.chain(chain);
    let comment = format!("comment \"{}\"", id.chars().take(100).collect::<String>());
    let field = match d {
        Direction::Ingress => "saddr",
        Direction::Egress => "daddr",
    };
    for rule in rules {
        let peers = match &rule.peers {
            None => String::new(),
            Some(key) => format!("ip {field} @{} ", set_name("peers", key)),
        };
        if rule.ports.is_empty() {
            r.rule(chain, format!("{peers}accept {comment}"));
        }
        for m in &rule.ports {
            r.rule(chain, format!("{peers}{} accept {comment}", port_expr(m)));
        }
    }
}

/// The whole table for `plan`.
pub fn ruleset(plan: &Plan) -> Ruleset {
    let mut r = base();
    for (key, ranges) in &plan.peer_sets {
        let set = set_name("peers", key);
        r.declare(&set, false, "type ipv4_addr ; flags interval ;", true);
        for e in ranges.elements() {
            r.element(&set, e, "");
        }
    }
    for (key, triples) in &plan.named_ports {
        let set = set_name("port", key);
        r.declare(
            &set,
            false,
            "type ipv4_addr . inet_proto . inet_service ;",
            true,
        );
        for (ip, p, n) in triples {
            r.element(&set, format!("{ip} . {} . {n}", p.nft()), "");
        }
    }
    let chains: Vec<String> = plan
        .policies
        .iter()
        .map(|p| {
            let id = format!("{}/{}", p.namespace, p.name);
            let chain = format!("pol-{}-{}", hash(&id), suffix(p.direction));
            policy(&mut r, &chain, &id, p.direction, &p.rules);
            chain
        })
        .collect();
    for (d, pods, map) in [
        (Direction::Ingress, &plan.ingress, INGRESS_MAP),
        (Direction::Egress, &plan.egress, EGRESS_MAP),
    ] {
        for (ip, policies) in pods {
            let chain = pod_chain(d, *ip);
            for i in policies {
                r.rule(&chain, format!("jump {}", chains[*i]));
            }
            r.rule(&chain, "drop");
            r.element(map, ip.to_string(), format!("goto {chain}"));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PolicyPlan;
    use crate::model::Protocol;
    use crate::ranges::{Cidr, Ranges};
    use std::collections::BTreeMap;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn an_isolated_pod_gets_a_chain_that_tries_its_policies_then_drops() {
        let mut peers = Ranges::default();
        peers.add_cidr(Cidr::parse("10.0.0.0/8").unwrap());
        peers.remove_cidr(Cidr::parse("10.1.0.0/16").unwrap());
        let plan = Plan {
            policies: vec![
                PolicyPlan {
                    namespace: "x".into(),
                    name: "allow".into(),
                    direction: Direction::Ingress,
                    rules: vec![RulePlan {
                        peers: Some("x peers".into()),
                        ports: vec![
                            PortMatch::Range(Protocol::Tcp, 80, 80),
                            PortMatch::Range(Protocol::Udp, 81, 90),
                            PortMatch::Named("x serve".into()),
                        ],
                    }],
                },
                PolicyPlan {
                    namespace: "x".into(),
                    name: "deny".into(),
                    direction: Direction::Egress,
                    rules: vec![],
                },
            ],
            ingress: BTreeMap::from([(ip("10.42.0.5"), vec![0])]),
            egress: BTreeMap::from([(ip("10.42.0.5"), vec![1])]),
            peer_sets: BTreeMap::from([("x peers".into(), peers)]),
            named_ports: BTreeMap::from([(
                "x serve".into(),
                [(ip("10.42.0.5"), Protocol::Tcp, 8080)].into(),
            )]),
        };
        let r = ruleset(&plan);
        let pod_in = &r.chains["pod-in-10-42-0-5"].rules;
        assert_eq!(pod_in.len(), 2);
        assert!(pod_in[0].starts_with("jump pol-") && pod_in[0].ends_with("-in"));
        assert_eq!(pod_in[1], "drop");
        assert_eq!(r.chains["pod-out-10-42-0-5"].rules.last().unwrap(), "drop");
        let pol = &r.chains[pod_in[0].trim_start_matches("jump ")].rules;
        assert_eq!(pol.len(), 3);
        let peers = format!("ip saddr @{} ", set_name("peers", "x peers"));
        assert!(pol[0].starts_with(&peers), "{pol:?}");
        assert!(
            pol[0].ends_with("meta l4proto tcp th dport 80 accept comment \"x/allow\""),
            "{pol:?}"
        );
        assert!(
            pol[1].contains("meta l4proto udp th dport 81-90 accept"),
            "{pol:?}"
        );
        assert!(
            pol[2].contains("ip daddr . meta l4proto . th dport @port-"),
            "{pol:?}"
        );
        let peers_set = set_name("peers", "x peers");
        assert_eq!(
            r.elements[peers_set.as_str()]
                .keys()
                .cloned()
                .collect::<Vec<_>>(),
            ["10.0.0.0-10.0.255.255", "10.2.0.0-10.255.255.255"]
        );
        let named = set_name("port", "x serve");
        assert!(r.elements[named.as_str()].contains_key("10.42.0.5 . tcp . 8080"));
        assert_eq!(
            r.elements[INGRESS_MAP]["10.42.0.5"],
            "goto pod-in-10-42-0-5"
        );
        // A policy with no rules in a direction allows nothing: an empty chain.
        let deny = r.chains["pod-out-10-42-0-5"].rules[0].trim_start_matches("jump ");
        assert!(r.chains[deny].rules.is_empty());
    }

    #[test]
    fn no_policies_leave_only_the_base_chains() {
        let r = ruleset(&Plan::default());
        assert_eq!(
            r.chains.keys().cloned().collect::<Vec<_>>(),
            ["egress", "ingress"]
        );
        assert!(
            r.chains["ingress"]
                .hook
                .as_deref()
                .unwrap()
                .contains("hook forward")
        );
    }
}

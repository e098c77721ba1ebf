//! The rules against the real kernel: a full transaction and then partial ones, each applied
//! twice — with `nft -f -` in one network namespace of the test's own and compiled to
//! netlink ([`NftNetlink`]) in another — and read back with `nft list`. Proves that what the
//! golden tests fix is what nf_tables accepts, that the order of a partial transaction never
//! deletes what is still referenced, and that the netlink path builds the same table as nft,
//! expression for expression (`nft --debug=netlink list`). Skipped (visibly) where `nft` or
//! root is missing.

use std::process::Command;

use k1s_proxy::model::{Endpoint, HostPort, PortName, Protocol, ServicePort, Targets};
use k1s_proxy::nft::Nft;
use k1s_proxy::nft::ruleset::{Ruleset, Table, Tx};
use k1s_proxy::nft::testing::{Netns, normalized_listing};
use k1s_proxy::rules::{self, RulesConfig};

const TABLE: [&str; 3] = ["table", "ip", "k1s-proxy"];

fn netns(suffix: &str) -> Option<Netns> {
    Netns::new(&format!("k1s-proxy-kernel-{suffix}"))
}

/// One namespace programmed with `nft`, one over netlink: every transaction goes to both,
/// and both tables must then list the same, expressions included.
struct Both {
    text: Netns,
    netlink: Netns,
}

impl Both {
    async fn apply(&self, script: &str) {
        self.text.nft().apply(script).await.unwrap();
        self.netlink.netlink().apply(script).await.unwrap();
        for debug in [false, true] {
            assert_eq!(
                normalized_listing(&self.netlink.list(&TABLE, debug)),
                normalized_listing(&self.text.list(&TABLE, debug)),
                "netlink and nft built different tables (debug listing: {debug}) after:\n{script}"
            );
        }
    }
    fn list(&self) -> String {
        self.text.list(&TABLE, false)
    }
}

fn port(name: &str, protocol: Protocol, ip: &str) -> ServicePort {
    let id = PortName {
        namespace: "default".into(),
        name: name.into(),
        port: "p".into(),
        protocol,
    };
    ServicePort::cluster_ip(id, ip.parse().unwrap(), 80)
}

fn ep(ip: &str, local: bool) -> Endpoint {
    Endpoint {
        ip: ip.parse().unwrap(),
        port: 8080,
        ready: true,
        serving: true,
        terminating: false,
        local,
        elsewhere: !local,
    }
}

/// A port's rules from all of its endpoints.
fn port_rules(port: &ServicePort, endpoints: &[Endpoint], cfg: &RulesConfig) -> Ruleset {
    rules::service_port(port, &Targets::of(endpoints), cfg)
}

fn cfg() -> RulesConfig {
    RulesConfig {
        service_cidr: "10.43.0.0/16".into(),
        cluster_cidr: "10.42.0.0/16".into(),
        localhost_nodeports: true,
    }
}

/// Every shape of fragment: plain, NodePort + externalIP with each external policy,
/// internal Local, affinity, UDP, SCTP, no endpoints.
fn fragments(round: u32) -> Vec<Ruleset> {
    let mut out = Vec::new();
    let two = [ep("10.42.0.5", true), ep("10.42.1.6", false)];
    out.push(port_rules(
        &port("web", Protocol::Tcp, "10.43.0.20"),
        &two,
        &cfg(),
    ));
    let mut np = port("np", Protocol::Tcp, "10.43.0.21");
    np.node_port = Some(30080);
    np.external_ips = vec!["192.0.2.10".parse().unwrap()];
    out.push(port_rules(&np, &two, &cfg()));
    np.id.name = "np-local".into();
    np.cluster_ips = vec!["10.43.0.26".parse().unwrap()];
    np.external_ips = vec!["192.0.2.11".parse().unwrap()];
    np.node_port = Some(30081);
    np.external_local = true;
    out.push(port_rules(&np, &two[1..], &cfg()));
    let mut il = port("il", Protocol::Tcp, "10.43.0.22");
    il.internal_local = true;
    out.push(port_rules(&il, &two, &cfg()));
    let mut aff = port("aff", Protocol::Tcp, "10.43.0.23");
    aff.affinity_seconds = Some(if round == 0 { 10_800 } else { 60 });
    out.push(port_rules(&aff, &two, &cfg()));
    out.push(port_rules(
        &port("dns", Protocol::Udp, "10.43.0.10"),
        &two[..1],
        &cfg(),
    ));
    out.push(port_rules(
        &port("sctp", Protocol::Sctp, "10.43.0.24"),
        &two,
        &cfg(),
    ));
    // Endpoints come and go between rounds.
    let none: &[Endpoint] = if round == 0 { &[] } else { &two };
    out.push(port_rules(
        &port("empty", Protocol::Tcp, "10.43.0.25"),
        none,
        &cfg(),
    ));
    let mut hp = HostPort {
        namespace: "default".into(),
        pod: "hp".into(),
        host_ip: None,
        host_port: 8080,
        protocol: Protocol::Tcp,
        pod_ip: "10.42.0.5".parse().unwrap(),
        container_port: 80,
    };
    out.push(rules::host_port(&hp));
    hp.host_ip = Some("192.0.2.1".parse().unwrap());
    hp.protocol = Protocol::Udp;
    out.push(rules::host_port(&hp));
    out
}

#[tokio::test]
async fn full_and_partial_transactions_load_into_the_kernel() {
    let root = nix_is_root();
    if !root || Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIPPED: needs root and the nft program");
        return;
    }
    let ns = Both {
        text: netns("text").expect("ip netns add"),
        netlink: netns("netlink").expect("ip netns add"),
    };
    let table = Table {
        family: "ip",
        name: "k1s-proxy".into(),
    };
    let base = rules::base(&cfg());
    let first = fragments(0);
    let mut all = base.clone();
    for f in &first {
        all.merge(f);
    }
    ns.apply(&Tx::full(&table, "k1s test", &all).render()).await;
    let listed = ns.list();
    assert!(
        listed.contains("10.43.0.25 . tcp . 80 : goto reject-chain"),
        "{listed}"
    );
    assert!(listed.contains("numgen random mod 2"), "{listed}");

    // Round 1: endpoints for "empty" (a partial sync, as one transaction over every
    // fragment), then the affinity timeout changed, which needs a full sync.
    let mut second = fragments(0);
    second[7] = fragments(1)[7].clone();
    let mut tx = Tx::default();
    for (old, new) in first.iter().zip(&second) {
        tx.extend(Tx::diff(&table, old, new).unwrap());
    }
    ns.apply(&tx.render()).await;
    let listed = ns.list();
    assert!(!listed.contains("reject-chain }"), "{listed}");
    let third = fragments(1);
    assert!(Tx::diff(&table, &second[4], &third[4]).is_none());
    let mut all = base.clone();
    for f in &third {
        all.merge(f);
    }
    ns.apply(&Tx::full(&table, "k1s test", &all).render()).await;
    let second = third;
    let listed = ns.list();
    assert!(!listed.contains("reject-chain }"), "{listed}");
    assert!(listed.contains("timeout 1m"), "{listed}");

    // Every Service deleted: only the base remains, nothing dangling.
    for f in &second {
        ns.apply(&Tx::diff(&table, f, &Ruleset::default()).unwrap().render())
            .await;
    }
    let listed = ns.list();
    assert!(!listed.contains("ep-"), "{listed}");
    assert!(!listed.contains("10.43.0.2"), "{listed}");
    // A second full sync over an existing table replaces it (a restart).
    ns.apply(&Tx::full(&table, "k1s test", &all).render()).await;
    assert_eq!(ns.list().matches("chain nat-prerouting").count(), 1);
    k1s_proxy::remove_table(&ns.text.nft(), "k1s-proxy")
        .await
        .unwrap();
    k1s_proxy::remove_table(&ns.netlink.netlink(), "k1s-proxy")
        .await
        .unwrap();
    assert!(ns.text.list(&TABLE, false).is_empty());
    assert!(ns.netlink.list(&TABLE, false).is_empty());
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

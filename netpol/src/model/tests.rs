use super::*;
use serde_json::{Value, json};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn pod(ns: &str, name: &str, node: &str, addr: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [
            {"name": "serve-80-tcp", "containerPort": 80},
            {"name": "serve-81-udp", "containerPort": 81, "protocol": "UDP"}
        ]}]},
        "status": {"phase": "Running", "podIP": addr}
    }))
    .unwrap()
}

fn policy(ns: &str, name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "spec": spec}))
        .unwrap()
}

/// x/a 10.0.0.1 (n1), x/b 10.0.0.2 (n1), y/a 10.0.1.1 (n2), z/c 10.0.2.1 (n1);
/// namespace y labelled `team: blue`.
fn cluster(policies: Vec<NetworkPolicy>) -> Cluster {
    let mut c = Cluster::default();
    for p in [
        pod("x", "a", "n1", "10.0.0.1", json!({"pod": "a"})),
        pod("x", "b", "n1", "10.0.0.2", json!({"pod": "b"})),
        pod("y", "a", "n2", "10.0.1.1", json!({"pod": "a"})),
        pod("z", "c", "n1", "10.0.2.1", json!({"pod": "c"})),
    ] {
        let info = PodInfo::of(&p).unwrap();
        c.pods
            .insert((info.namespace.clone(), info.name.clone()), info);
    }
    c.namespaces.insert("x".into(), BTreeMap::new());
    c.namespaces
        .insert("y".into(), BTreeMap::from([("team".into(), "blue".into())]));
    c.namespaces.insert("z".into(), BTreeMap::new());
    for p in policies {
        c.policies.insert(
            (
                p.metadata.namespace.clone().unwrap(),
                p.metadata.name.clone().unwrap(),
            ),
            p,
        );
    }
    c
}

fn peers(plan: &Plan, i: usize) -> Vec<String> {
    plan.policies[i].rules[0]
        .peers
        .as_ref()
        .map(|k| plan.peer_sets[k].elements().collect())
        .unwrap_or_default()
}

fn named<'p>(plan: &'p Plan, m: &PortMatch) -> &'p BTreeSet<(Ipv4Addr, Protocol, u16)> {
    let PortMatch::Named(key) = m else {
        panic!("{m:?} is not a named port")
    };
    &plan.named_ports[key]
}

#[test]
fn no_policy_isolates_nothing() {
    let plan = cluster(vec![]).plan("n1");
    assert!(plan.ingress.is_empty() && plan.egress.is_empty());
}

#[test]
fn default_deny_isolates_the_namespaces_local_pods_for_ingress_only() {
    let plan = cluster(vec![policy("x", "deny", json!({"podSelector": {}}))]).plan("n1");
    assert_eq!(
        plan.ingress.keys().copied().collect::<Vec<_>>(),
        [ip("10.0.0.1"), ip("10.0.0.2")]
    );
    assert!(plan.egress.is_empty());
    assert!(plan.policies[0].rules.is_empty());
    // On the other node, x has no pods: nothing to do there.
    assert!(
        cluster(vec![policy("x", "deny", json!({"podSelector": {}}))])
            .plan("n2")
            .policies
            .is_empty()
    );
}

#[test]
fn policy_types_default_to_egress_too_when_there_are_egress_rules() {
    let p = policy(
        "x",
        "p",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "egress": [{}]}),
    );
    let plan = cluster(vec![p]).plan("n1");
    assert_eq!(
        plan.ingress.keys().copied().collect::<Vec<_>>(),
        [ip("10.0.0.1")]
    );
    assert_eq!(
        plan.egress.keys().copied().collect::<Vec<_>>(),
        [ip("10.0.0.1")]
    );
    let egress_only = policy(
        "x",
        "e",
        json!({"podSelector": {}, "policyTypes": ["Egress"]}),
    );
    let plan = cluster(vec![egress_only]).plan("n1");
    assert!(plan.ingress.is_empty());
    assert_eq!(plan.egress.len(), 2);
}

#[test]
fn pod_and_namespace_selectors_pick_peers() {
    let by_pod = policy(
        "x",
        "p",
        json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}]}),
    );
    // Only x/a: a pod selector alone stays in the policy's namespace.
    assert_eq!(peers(&cluster(vec![by_pod]).plan("n1"), 0), ["10.0.0.1"]);

    let by_ns = policy(
        "x",
        "p",
        json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}]}),
    );
    assert_eq!(peers(&cluster(vec![by_ns]).plan("n1"), 0), ["10.0.1.1"]);

    let by_name = policy(
        "x",
        "p",
        json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["z", "y"]}]}}]}]}),
    );
    assert_eq!(
        peers(&cluster(vec![by_name]).plan("n1"), 0),
        ["10.0.1.1", "10.0.2.1"]
    );

    let both = policy(
        "x",
        "p",
        json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "a"}}}]}]}),
    );
    assert_eq!(
        peers(&cluster(vec![both]).plan("n1"), 0),
        ["10.0.0.1", "10.0.1.1"]
    );

    // A selector that does not parse matches nothing (the rule then allows nothing).
    let bad = policy(
        "x",
        "p",
        json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchExpressions": [
            {"key": "pod", "operator": "In", "values": []}]}}]}]}),
    );
    let plan = cluster(vec![bad]).plan("n1");
    assert!(peers(&plan, 0).is_empty());
}

#[test]
fn ip_blocks_take_their_excepts_out() {
    let p = policy(
        "x",
        "p",
        json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [
            {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}}]}]}),
    );
    assert_eq!(
        peers(&cluster(vec![p]).plan("n1"), 0),
        ["10.0.0.0-10.0.0.255", "10.0.2.0-10.0.255.255"]
    );
}

#[test]
fn ports_by_number_range_and_name() {
    let p = policy(
        "x",
        "p",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"ports": [
            {"port": 80},
            {"port": 8000, "endPort": 8080, "protocol": "UDP"},
            {"port": "serve-81-udp", "protocol": "UDP"},
            {"port": "serve-81-udp"},
            {"protocol": "SCTP"}
        ]}]}),
    );
    let plan = cluster(vec![p]).plan("n1");
    let ports = &plan.policies[0].rules[0].ports;
    assert_eq!(ports[0], PortMatch::Range(Protocol::Tcp, 80, 80));
    assert_eq!(ports[1], PortMatch::Range(Protocol::Udp, 8000, 8080));
    assert_eq!(
        named(&plan, &ports[2]),
        &BTreeSet::from([(ip("10.0.0.1"), Protocol::Udp, 81)])
    );
    // The name with the wrong protocol resolves to nothing.
    assert!(named(&plan, &ports[3]).is_empty());
    assert_eq!(ports[4], PortMatch::Protocol(Protocol::Sctp));
}

#[test]
fn egress_named_ports_resolve_on_the_peer_pods() {
    let p = policy(
        "x",
        "p",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"], "egress": [{
            "to": [{"namespaceSelector": {}}], "ports": [{"port": "serve-80-tcp"}]}]}),
    );
    let plan = cluster(vec![p]).plan("n1");
    let triples = named(&plan, &plan.policies[0].rules[0].ports[0]);
    assert_eq!(
        triples.len(),
        4,
        "every pod of every namespace: {triples:?}"
    );
    assert!(triples.contains(&(ip("10.0.1.1"), Protocol::Tcp, 80)));
}

#[test]
fn a_rule_whose_ports_cannot_match_allows_nothing() {
    let p = policy(
        "x",
        "p",
        json!({"podSelector": {}, "ingress": [{"ports": [{"port": 70000}]}]}),
    );
    let plan = cluster(vec![p]).plan("n1");
    assert!(plan.policies[0].rules.is_empty());
}

#[test]
fn host_network_finished_and_unaddressed_pods_are_left_out() {
    let mut host: Pod = pod("x", "h", "n1", "192.168.1.2", json!({}));
    host.spec.as_mut().unwrap().host_network = Some(true);
    assert!(PodInfo::of(&host).is_none());
    let mut done = pod("x", "d", "n1", "10.0.0.9", json!({}));
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(PodInfo::of(&done).is_none());
    let mut pending = pod("x", "p", "n1", "10.0.0.9", json!({}));
    pending.status.as_mut().unwrap().pod_ip = None;
    assert!(PodInfo::of(&pending).is_none());
}

#[test]
fn policies_that_say_the_same_share_their_sets() {
    let from_b = json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}],
        "ports": [{"port": "serve-80-tcp"}]}]});
    let plan = cluster(vec![
        policy("x", "one", from_b.clone()),
        policy("x", "two", from_b.clone()),
        policy("z", "three", from_b),
    ])
    .plan("n1");
    assert_eq!(plan.policies.len(), 3);
    // x's two share; z's selector means z's pods.
    assert_eq!(plan.peer_sets.len(), 2);
    assert_eq!(plan.named_ports.len(), 2);
}

#[test]
fn several_policies_add_up_per_pod() {
    let a = policy(
        "x",
        "a",
        json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}),
    );
    let b = policy(
        "x",
        "b",
        json!({"podSelector": {"matchLabels": {"pod": "b"}}, "ingress": [{"ports": [{"port": 81}]}]}),
    );
    let plan = cluster(vec![a, b]).plan("n1");
    assert_eq!(plan.ingress[&ip("10.0.0.1")].len(), 1);
    assert_eq!(plan.ingress[&ip("10.0.0.2")].len(), 2);
}

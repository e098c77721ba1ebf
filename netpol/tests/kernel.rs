//! The policy rules against the real kernel: whole tables and the partial transactions
//! between them, each applied with `nft -f -` inside a network namespace of the test's own
//! and read back with `nft list`. Proves that what nf_tables accepts is what the unit tests
//! fix, including interval sets whose ranges are replaced and chains deleted while a map
//! element still named them a moment before. Skipped (visibly) where `nft` or root is missing.

use std::process::Command;

use k1s_netpol::model::{Cluster, PodInfo};
use k1s_netpol::rules;
use k1s_nft::ruleset::{Table, Tx};
use k1s_nft::{Nft, NftCommand};
use serde_json::{Value, json};

struct Netns(String);

impl Netns {
    fn new() -> Option<Netns> {
        let name = format!("k1s-netpol-kernel-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Netns(name))
    }
    fn nft(&self) -> NftCommand {
        NftCommand {
            command: ["nsenter", &format!("--net=/run/netns/{}", self.0), "nft"]
                .map(String::from)
                .to_vec(),
        }
    }
    fn list(&self) -> String {
        let out = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.0))
            .args(["nft", "list", "table", "ip", "k1s-policy"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn add_pod(c: &mut Cluster, ns: &str, name: &str, ip: &str, labels: Value) {
    let pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [
            {"name": "serve-80-tcp", "containerPort": 80}]}]},
        "status": {"phase": "Running", "podIP": ip}
    }))
    .unwrap();
    let info = PodInfo::of(&pod).unwrap();
    c.pods.insert((ns.into(), name.into()), info);
}

fn add_policy(c: &mut Cluster, ns: &str, name: &str, spec: Value) {
    let p =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "spec": spec}))
            .unwrap();
    c.policies.insert((ns.into(), name.into()), p);
}

#[tokio::test]
async fn full_and_partial_transactions_are_accepted_by_the_kernel() {
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIP: nft is not installed (apt-get install nftables)");
        return;
    }
    let Some(ns) = Netns::new() else {
        eprintln!("SKIP: cannot create a network namespace (not root?)");
        return;
    };
    let nft = ns.nft();
    let table = Table {
        family: "ip",
        name: "k1s-policy".into(),
    };
    let mut c = Cluster::default();
    add_pod(&mut c, "x", "a", "10.42.0.5", json!({"pod": "a"}));
    add_pod(&mut c, "x", "b", "10.42.0.6", json!({"pod": "b"}));
    add_pod(&mut c, "y", "b", "10.42.1.6", json!({"pod": "b"}));
    add_policy(
        &mut c,
        "x",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    );
    add_policy(
        &mut c,
        "x",
        "allow",
        json!({"podSelector": {"matchLabels": {"pod": "a"}},
          "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "b"}}},
                                {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}}],
                       "ports": [{"port": "serve-80-tcp"}, {"port": 81, "endPort": 90, "protocol": "UDP"}, {"protocol": "SCTP"}]}],
          "egress": [{"to": [{"podSelector": {}}], "ports": [{"port": "serve-80-tcp"}]}, {}]}),
    );
    let first = rules::ruleset(&c.plan("n1"));
    nft.apply(&Tx::full(&table, "k1s network policy", &first).render())
        .await
        .unwrap();
    let listed = ns.list();
    assert!(
        listed.contains("10.42.0.5 : goto pod-in-10-42-0-5"),
        "{listed}"
    );
    assert!(listed.contains("192.168.0.0/24"), "{listed}");
    assert!(listed.contains("10.42.0.5 . tcp . 80"), "{listed}");
    assert!(listed.contains("udp dport 81-90"), "{listed}");

    // A peer joins (the interval set's ranges are replaced), a pod goes, a policy goes.
    add_pod(&mut c, "y", "b2", "10.42.1.7", json!({"pod": "b"}));
    c.pods.remove(&("x".into(), "b".into()));
    let second = rules::ruleset(&c.plan("n1"));
    let tx = Tx::diff(&table, &first, &second).unwrap();
    nft.apply(&tx.render()).await.unwrap();
    let listed = ns.list();
    assert!(listed.contains("10.42.1.6/31"), "{listed}");
    assert!(!listed.contains("pod-in-10-42-0-6"), "{listed}");

    c.policies.remove(&("x".into(), "allow".into()));
    let third = rules::ruleset(&c.plan("n1"));
    nft.apply(&Tx::diff(&table, &second, &third).unwrap().render())
        .await
        .unwrap();
    let listed = ns.list();
    assert!(!listed.contains("192.168.0.0"), "{listed}");
    assert!(listed.contains("goto pod-in-10-42-0-5"), "{listed}");

    // Back to nothing, then the table removed.
    c.policies.clear();
    let empty = rules::ruleset(&c.plan("n1"));
    nft.apply(&Tx::diff(&table, &third, &empty).unwrap().render())
        .await
        .unwrap();
    assert!(!ns.list().contains("pod-in"));
    k1s_netpol::remove_table(&nft, "k1s-policy").await.unwrap();
    assert!(ns.list().is_empty());
}

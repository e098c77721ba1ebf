//! End to end, issue #28: several nodes, one pod network, per backend. The server (a node
//! too) on the host, agents in network namespaces of their own: for `host-gw` on one "LAN"
//! bridge with the server (veth pairs), for `vxlan` on another subnet behind a router
//! namespace (where host-gw cannot work). Node IPAM gives each node its pod CIDR from the
//! test's `--cluster-cidr`, the backend connects them, and pod traffic across nodes keeps
//! its addresses; then a second agent joins and one Deployment spread over the three nodes
//! reaches itself pod to pod and through one Service. Real binary, containers and kernel;
//! needs root, nft and nsenter (skips visibly otherwise).

use std::process::Command;

use k1s_tests::host::{HostCleanup, Images, start_with_kubelet, wait_for_teardown};
use k1s_tests::lan::{HOST_GW, Lan, LanAgent, VXLAN, Variant, node_flags, wait_node_ready};
use k1s_tests::{Cluster, eventually};
use serde_json::Value;

fn json(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

fn web_pod(name: &str, node: &str, image: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "labels": {{"app": "web"}}}},
          "spec": {{"nodeName": "{node}", "terminationGracePeriodSeconds": 1,
            "containers": [{{"name": "c", "image": "{image}", "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c",
              "mkdir -p /www/cgi-bin && echo {name} > /www/index.html && dd if=/dev/zero of=/www/big bs=1024 count=256 2>/dev/null && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www"]}}]}}}}"#
    )
}

/// The client address busybox httpd's CGI saw (`[::ffff:10.250.0.2]` → `10.250.0.2`).
fn remote_addr(s: &str) -> String {
    s.trim_start_matches("[::ffff:")
        .trim_end_matches(']')
        .to_string()
}

/// An HTTP GET from inside `pod` with busybox `wget` (the body; "" on failure).
fn get_from(c: &Cluster, pod: &str, url: &str) -> String {
    let out = c.run(&[
        "exec", pod, "--", "timeout", "5", "wget", "-q", "-O", "-", url,
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Deployment of `nodes` replicas, one per node (required anti-affinity), behind a
/// Service: every pod reaches every other by address and all of them through the Service.
fn spread_deployment_reaches_itself(c: &Cluster, image: &str, nodes: usize) {
    let deployment = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "spread"},
        "spec": {"replicas": nodes, "selector": {"matchLabels": {"app": "spread"}},
            "template": {"metadata": {"labels": {"app": "spread"}},
                "spec": {"terminationGracePeriodSeconds": 1,
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                    "containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"]}]}}}});
    c.ok_stdin(&["create", "-f", "-"], &deployment.to_string());
    c.ok(&["rollout", "status", "deployment/spread", "--timeout=180s"]);
    let list = json(c, &["get", "pods", "-l", "app=spread", "-o", "json"]);
    let pods: Vec<(String, String, String)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["status"]["podIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let nodes_used: std::collections::BTreeSet<&String> = pods.iter().map(|p| &p.2).collect();
    assert_eq!(nodes_used.len(), nodes, "{pods:?}");
    for (from, _, _) in &pods {
        for (to, ip, _) in &pods {
            if from != to {
                eventually(&format!("{from} to reach {to}"), 30, || {
                    get_from(c, from, &format!("http://{ip}:8080/")) == *to
                });
            }
        }
    }
    c.ok(&[
        "expose",
        "deployment",
        "spread",
        "--port=80",
        "--target-port=8080",
    ]);
    let svc_ip = json(c, &["get", "service", "spread", "-o", "json"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    for (from, _, _) in &pods {
        let mut seen = std::collections::BTreeSet::new();
        eventually(
            &format!("every endpoint through the Service from {from}"),
            60,
            || {
                seen.insert(get_from(c, from, &format!("http://{svc_ip}/")));
                pods.iter().all(|(p, _, _)| seen.contains(p))
            },
        );
    }
    eprintln!(
        "{} pods on {nodes} nodes reach each other and the Service",
        pods.len()
    );
    c.ok(&["delete", "deployment", "spread"]);
    c.ok(&["delete", "service", "spread"]);
    eventually("the spread pods gone", 60, || {
        c.ok(&["get", "pods", "-l", "app=spread", "-o", "name"])
            .trim()
            .is_empty()
    });
}

#[test]
fn host_gw_pods_on_two_nodes_reach_each_other_with_their_own_addresses() {
    two_nodes(&HOST_GW, 1200 + std::process::id() % 200);
}

#[test]
fn vxlan_pods_on_two_nodes_in_different_subnets_reach_each_other() {
    two_nodes(&VXLAN, 1400 + std::process::id() % 200);
}

fn two_nodes(v: &Variant, n: u32) {
    let Some(images) = Images::start() else {
        return;
    };
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIP: nft is not installed (apt-get install nftables)");
        return;
    }
    let lan = Lan::create(n, v);
    let server_table = format!("k1s-proxy-m{n}");
    let server_tag = format!("m{}server", v.backend.replace('-', ""));
    let agent_tag = format!("m{}agent", v.backend.replace('-', ""));
    let (server_node, agent_node) = (format!("node-{server_tag}"), format!("node-{agent_tag}"));
    let server_flags = node_flags(&images, &server_tag, &server_table, v, n);
    let _server_cleanup = HostCleanup(server_flags.clone());
    let server_flags = lan.server_flags(server_flags);
    let Some(mut c) = start_with_kubelet(&server_tag, &server_flags) else {
        return;
    };
    let prefix = v.cluster_cidr.trim_end_matches("0.0/16");
    let server_json = json(&c, &["get", "node", &server_node, "-o", "json"]);
    let server_cidr = server_json["spec"]["podCIDR"].as_str().unwrap().to_string();
    assert!(server_cidr.starts_with(prefix), "{server_cidr}");

    // The agent, in its namespace, joining over the LAN.
    let agent_flags = node_flags(&images, &agent_tag, "k1s-proxy", v, n);
    let _agent_cleanup = HostCleanup(agent_flags.clone());
    let lan_agent = LanAgent::new(&lan, &c, &images, agent_flags);
    let mut agent = lan_agent.spawn();
    let agent_cidr = wait_node_ready(&c, &agent_node);
    assert_ne!(agent_cidr, server_cidr, "each node its own pod CIDR");
    assert!(agent_cidr.starts_with(prefix), "{agent_cidr}");

    let image = images.busybox();
    c.ok_stdin(
        &["create", "-f", "-"],
        &web_pod("on-server", &server_node, &image),
    );
    c.ok_stdin(
        &["create", "-f", "-"],
        &web_pod("on-agent", &agent_node, &image),
    );
    for p in ["on-server", "on-agent"] {
        c.ok(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{p}"),
            "--timeout=120s",
        ]);
    }
    let pod_ip = |p: &str| {
        json(&c, &["get", "pod", p, "-o", "json"])["status"]["podIP"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (server_pod, agent_pod) = (pod_ip("on-server"), pod_ip("on-agent"));

    // Each node routes the other's pod CIDR (the agent's default route leads to the server,
    // so traffic would flow one way without the agent's own route).
    for (netns, cidr) in [
        (None, &agent_cidr),
        (Some(lan.netns.as_str()), &server_cidr),
    ] {
        eventually("the backend's route to the other node's pods", 30, || {
            let mut cmd = Command::new("ip");
            if let Some(ns) = netns {
                cmd.args(["-n", ns]);
            }
            let out = cmd
                .args(["-4", "route", "show", "proto", "75"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.starts_with(cidr.as_str()))
        });
    }
    // VXLAN's headers come out of the pods' MTU (the LAN's is 1500).
    let mtu = c.ok(&["exec", "on-agent", "--", "cat", "/sys/class/net/eth0/mtu"]);
    let want = if v.backend == "vxlan" { "1450" } else { "1500" };
    assert_eq!(mtu.trim(), want);
    // Pod to pod across nodes, both ways, and node to pod.
    eventually("the server's pod to reach the agent's", 30, || {
        get_from(&c, "on-server", &format!("http://{agent_pod}:8080/")) == "on-agent"
    });
    assert_eq!(
        get_from(&c, "on-agent", &format!("http://{server_pod}:8080/")),
        "on-server"
    );
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "3",
            &format!("http://{agent_pod}:8080/"),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "on-agent");
    // Each side sees the other's own address (no masquerade inside the cluster).
    assert_eq!(
        remote_addr(&get_from(
            &c,
            "on-server",
            &format!("http://{agent_pod}:8080/cgi-bin/ip")
        )),
        server_pod
    );
    assert_eq!(
        remote_addr(&get_from(
            &c,
            "on-agent",
            &format!("http://{server_pod}:8080/cgi-bin/ip")
        )),
        agent_pod
    );

    // Full-size packets cross the tunnel (256 KiB, both ways).
    for (from, to) in [("on-server", &agent_pod), ("on-agent", &server_pod)] {
        let out = c.run(&[
            "exec",
            from,
            "--",
            "sh",
            "-c",
            &format!("timeout 10 wget -q -O - http://{to}:8080/big | wc -c"),
        ]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "262144",
            "{from}"
        );
    }

    // A Service with an endpoint on each node, from both nodes' pods.
    c.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    let svc_ip = json(&c, &["get", "service", "web", "-o", "json"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    for from in ["on-server", "on-agent"] {
        let mut seen = std::collections::BTreeSet::new();
        eventually("both endpoints through the Service", 60, || {
            seen.insert(get_from(&c, from, &format!("http://{svc_ip}/")));
            seen.contains("on-server") && seen.contains("on-agent")
        });
    }

    // A second agent: one Deployment spread over the three nodes behind one Service; every
    // pod reaches every other, directly and through the Service.
    let (netns2, _) = lan.add_agent();
    let agent2_tag = format!("{agent_tag}2");
    let agent2_flags = node_flags(&images, &agent2_tag, "k1s-proxy", v, n);
    let _agent2_cleanup = HostCleanup(agent2_flags.clone());
    let lan_agent2 = LanAgent::in_netns(&lan, &netns2, "agent2", &c, &images, agent2_flags);
    let agent2 = lan_agent2.spawn();
    wait_node_ready(&c, &format!("node-{agent2_tag}"));
    spread_deployment_reaches_itself(&c, &image, 3);
    drop(agent2);

    let mut last_pods = vec!["on-server", "on-agent"];
    if !v.routed {
        // A node deleted and joined again: IPAM gives it a pod CIDR again, the server routes
        // to it again, and its new pod is reached across nodes.
        c.ok(&["delete", "pod", "on-agent", "--timeout=60s"]);
        c.ok(&["delete", "node", &agent_node]);
        eventually(
            "the server's route to the deleted node withdrawn",
            30,
            || {
                let out = Command::new("ip")
                    .args(["-4", "route", "show", "proto", "75"])
                    .output()
                    .unwrap();
                !String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| l.starts_with(agent_cidr.as_str()))
            },
        );
        agent.terminate();
        agent = lan_agent.spawn();
        wait_node_ready(&c, &agent_node);
        c.ok_stdin(
            &["create", "-f", "-"],
            &web_pod("on-agent-again", &agent_node, &image),
        );
        c.ok(&[
            "wait",
            "--for=condition=Ready",
            "pod/on-agent-again",
            "--timeout=120s",
        ]);
        let again = pod_ip("on-agent-again");
        eventually(
            "the server's pod to reach the re-added node's pod",
            30,
            || get_from(&c, "on-server", &format!("http://{again}:8080/")) == "on-agent-again",
        );
        eprintln!("the re-added node's pod {again} answers across nodes");
        last_pods = vec!["on-server", "on-agent-again"];
    }
    for p in last_pods {
        c.ok(&["delete", "pod", p, "--wait=false"]);
    }
    wait_for_teardown(&c.data_dir());
    drop(agent);
    c.server.terminate();
}

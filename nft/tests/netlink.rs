//! The netlink path against the real kernel, inside network namespaces of the test's own:
//! the same transactions applied with `nft -f -` in one namespace and compiled to netlink in
//! another must list the same table, expressions included; the kernel's refusals name the
//! line; text the compiler does not cover still applies (through `nft`). Skipped (visibly)
//! where root or `nft` is missing.

use std::process::Command;

use k1s_nft::testing::{Netns, normalized_listing};
use k1s_nft::{Nft, NftCommand, NftError, NftNetlink};

fn netns(suffix: &str) -> Netns {
    Netns::new(&format!("k1s-nft-netlink-{suffix}")).expect("ip netns add")
}

fn runnable() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root || Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIPPED: needs root and the nft program");
        return false;
    }
    true
}

/// Every statement the compiler covers, in base and regular chains, sets and maps of each
/// key type, elements with and without verdicts.
const FULL: &str = r#"add table ip t
delete table ip t
add table ip t { comment "k1s test" ; }
add set ip t cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add map ip t service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip t nodeports { type inet_proto . inet_service : verdict ; }
add set ip t hairpin { type ipv4_addr . ipv4_addr ; }
add set ip t aff { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add map ip t by-port { type inet_service : verdict ; }
add map ip t eps { typeof ip daddr . meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport ; size 65536 ; }
add map ip t eps-port { typeof meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport ; }
add chain ip t filter-prerouting { type filter hook prerouting priority -110 ; }
add chain ip t filter-input { type filter hook input priority filter ; }
add chain ip t nat-prerouting { type nat hook prerouting priority dstnat ; }
add chain ip t nat-output { type nat hook output priority -100 ; }
add chain ip t nat-postrouting { type nat hook postrouting priority srcnat ; }
add chain ip t services
add chain ip t mark-for-masq
add chain ip t masquerading
add chain ip t svc-a
add chain ip t svc-b
add chain ip t reject-chain
add chain ip t pick-2
add rule ip t filter-prerouting iifname != "lo" ip daddr 127.0.0.0/8 drop comment "localhost NodePorts only from this host (CVE-2020-8558)"
add rule ip t filter-input ct state new ip daddr @cluster-ips reject comment "ClusterIP port not served"
add rule ip t filter-input ct state established,related accept
add rule ip t filter-input ip daddr 10.43.0.0/16 drop comment "unallocated ClusterIP"
add rule ip t filter-input oifname "k1sbr0" ip saddr 10.40.0.0/13 accept
add rule ip t nat-prerouting jump services
add rule ip t nat-output jump services
add rule ip t services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip t services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @nodeports
add rule ip t services th dport vmap @by-port
add rule ip t nat-postrouting ip saddr . ip daddr @hairpin jump mark-for-masq
add rule ip t nat-postrouting jump masquerading
add rule ip t mark-for-masq meta mark set meta mark or 0x4000
add rule ip t masquerading meta mark & 0x4000 == 0 return
add rule ip t masquerading meta mark set meta mark xor 0x4000
add rule ip t masquerading masquerade fully-random
add rule ip t svc-a ip saddr != 10.42.0.0/16 jump mark-for-masq
add rule ip t svc-a ip saddr @aff meta l4proto tcp update @aff { ip saddr } dnat to 10.42.0.5:8080
add rule ip t svc-a numgen random mod 2 0 meta l4proto tcp update @aff { ip saddr } dnat to 10.42.0.5:8080
add rule ip t svc-a meta l4proto tcp dnat to 10.42.1.6:8080
add rule ip t svc-b fib saddr type local jump mark-for-masq
add rule ip t svc-b fib saddr type local goto svc-a
add rule ip t svc-b ip saddr 10.42.0.9 jump mark-for-masq
add rule ip t svc-b meta l4proto udp dnat to 10.42.0.9:53
add rule ip t svc-b meta l4proto 132 dnat to 10.42.0.9
add rule ip t svc-b meta l4proto tcp accept
add rule ip t svc-b drop comment "no local endpoints"
add rule ip t reject-chain reject
add rule ip t pick-2 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @eps
add rule ip t pick-2 dnat ip to meta l4proto . th dport . numgen random mod 2 map @eps-port
add rule ip t svc-a goto pick-2
add element ip t eps { 10.43.0.20 . tcp . 80 . 0 : 10.42.0.5 . 8080 }
add element ip t eps { 10.43.0.20 . tcp . 80 . 1 : 10.42.1.6 . 8080 }
add element ip t eps-port { tcp . 30080 . 1 : 10.42.0.6 . 8080 }
add element ip t cluster-ips { 10.43.0.20 }
add element ip t cluster-ips { 10.43.0.21 }
add element ip t service-ips { 10.43.0.20 . tcp . 80 : goto svc-a }
add element ip t service-ips { 10.43.0.21 . udp . 53 : goto svc-b }
add element ip t service-ips { 10.43.0.22 . sctp . 9 : goto reject-chain }
add element ip t nodeports { tcp . 30080 : goto svc-b }
add element ip t hairpin { 10.42.0.5 . 10.42.0.5 }
add element ip t by-port { 8443 : jump svc-b }
"#;

/// A partial transaction on that table: flushed and rewritten chains, deleted elements,
/// deleted chains and sets.
const PARTIAL: &str = r#"add chain ip t svc-c
delete element ip t service-ips { 10.43.0.21 . udp . 53 }
delete element ip t cluster-ips { 10.43.0.21 }
delete element ip t nodeports { tcp . 30080 }
delete element ip t by-port { 8443 }
delete element ip t eps { 10.43.0.20 . tcp . 80 . 1 }
flush chain ip t svc-a
add rule ip t svc-a meta l4proto tcp dnat to 10.42.2.7:8080
add rule ip t svc-c meta l4proto udp dnat to 10.42.0.9:53
flush chain ip t services
add rule ip t services ip daddr . meta l4proto . th dport vmap @service-ips
add element ip t service-ips { 10.43.0.23 . udp . 53 : goto svc-c }
add element ip t eps { 10.43.0.20 . tcp . 80 . 1 : 10.42.3.3 . 8443 }
add element ip t eps-port { udp . 30053 . 0 : 10.42.0.9 . 53 }
flush chain ip t svc-b
delete chain ip t svc-b
delete map ip t by-port
"#;

#[tokio::test]
async fn netlink_builds_the_table_nft_builds() {
    if !runnable() {
        return;
    }
    let text = netns("text");
    let netlink = netns("netlink");
    for script in [FULL, PARTIAL, FULL] {
        text.nft().apply(script).await.unwrap();
        netlink.netlink().apply(script).await.unwrap();
        for debug in [false, true] {
            let want = normalized_listing(&text.list(&["ruleset"], debug));
            assert!(want.contains("table ip t"), "{want}");
            assert_eq!(
                normalized_listing(&netlink.list(&["ruleset"], debug)),
                want,
                "after:\n{script}"
            );
        }
    }
    netlink.netlink().delete_table("ip", "t").await.unwrap();
    assert_eq!(netlink.list(&["ruleset"], false), "");
}

#[tokio::test]
async fn refusals_name_the_line_and_apply_nothing() {
    if !runnable() {
        return;
    }
    let ns = netns("refused");
    let nl = ns.netlink();
    nl.apply("add table ip t\nadd chain ip t c\n")
        .await
        .unwrap();
    let err = nl
        .apply("add chain ip t d\nadd rule ip t c jump missing\n")
        .await
        .unwrap_err();
    let NftError::Rejected(msg) = err else {
        panic!("{err}")
    };
    assert!(
        msg.starts_with("add rule ip t c jump missing: "),
        "the message names the line: {msg}"
    );
    // The batch is one transaction: the chain added before the refused rule is not there.
    assert!(
        !ns.list(&["ruleset"], false).contains("chain d"),
        "{}",
        ns.list(&["ruleset"], false)
    );
}

#[tokio::test]
async fn text_it_does_not_compile_goes_to_nft() {
    if !runnable() {
        return;
    }
    let ns = netns("fallback");
    let nl = ns.netlink();
    nl.apply(
        "add table ip t\nadd set ip t s { type ipv4_addr ; flags interval ; }\n\
         add element ip t s { 10.0.0.0/8 }\nadd chain ip t c\nadd rule ip t c ip saddr @s counter accept\n",
    )
    .await
    .unwrap();
    let listed = ns.list(&["ruleset"], false);
    assert!(
        listed.contains("10.0.0.0/8") && listed.contains("counter"),
        "{listed}"
    );
    // Without nft, the same text is refused with what to install.
    let no_nft = NftNetlink::new(
        Some(format!("/run/netns/{}", ns.0).into()),
        NftCommand {
            command: vec!["/nonexistent/nft".into()],
        },
    );
    let err = no_nft.apply("add rule ip t c counter\n").await.unwrap_err();
    assert!(matches!(err, NftError::Missing), "{err}");
}

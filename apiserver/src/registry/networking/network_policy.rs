//! NetworkPolicies (`networking.k8s.io/v1`): upstream's defaulting (`SetDefaults_NetworkPolicy`
//! and `SetDefaults_NetworkPolicyPort`) and the spec checks of `ValidateNetworkPolicy` as of
//! Kubernetes 1.33, with its field paths and messages. The name and the rest of the metadata
//! are checked by the generic write path, as for every namespaced kind; the policy is only
//! stored here, enforcing it is the network components' business.

use std::net::Ipv6Addr;

use serde_json::{Value, json};

use crate::rest::label_selector::{self, Options};

type Causes = Vec<(String, String)>;

const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// The rule lists of a spec and the name of each rule's peer list.
const RULES: [(&str, &str); 2] = [("ingress", "from"), ("egress", "to")];

/// The defaults upstream's decoding gives a policy: `policyTypes` from the rules when unset
/// (`Ingress`, and `Egress` when there are egress rules), `TCP` for every rule port without a
/// protocol, and the empty `podSelector` (every pod) a missing one serializes as.
pub fn apply_defaults(np: &mut Value) {
    let Some(spec) = np
        .as_object_mut()
        .map(|m| m.entry("spec").or_insert(Value::Null))
    else {
        return;
    };
    if spec.is_null() {
        *spec = json!({});
    }
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    if spec.get("podSelector").is_none_or(Value::is_null) {
        spec.insert("podSelector".into(), json!({}));
    }
    for (list, _) in RULES {
        let rules = spec.get_mut(list).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten() {
            let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                if port.get("protocol").is_none_or(Value::is_null) {
                    port.insert("protocol".into(), json!("TCP"));
                }
            }
        }
    }
    let unset = |v: Option<&Value>| v.and_then(Value::as_array).is_none_or(Vec::is_empty);
    if unset(spec.get("policyTypes")) {
        let mut types = vec![json!("Ingress")];
        if !unset(spec.get("egress")) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

fn invalid(path: String, value: &Value, msg: &str, out: &mut Causes) {
    out.push((path, format!("Invalid value: {value}: {msg}")));
}

fn unsupported(path: String, value: &Value, allowed: &[&str], out: &mut Causes) {
    let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    let msg = format!(
        "Unsupported value: {value}: supported values: {}",
        list.join(", ")
    );
    out.push((path, msg));
}

/// Upstream's `ValidateNetworkPolicySpec`; `old` is the stored policy on update.
pub fn validate(np: &Value, old: Option<&Value>, out: &mut Causes) {
    // A stored pod selector that fails today's label value check keeps the update from
    // checking selector values at all, as upstream's ValidationOptionsForNetworking does.
    let old_selector_invalid = old.is_some_and(|o| {
        let mut errs = Vec::new();
        label_selector::validate("", &o["spec"]["podSelector"], Options::default(), &mut errs);
        !errs.is_empty()
    });
    let opts = Options {
        allow_invalid_values: old_selector_invalid,
    };
    let spec = &np["spec"];
    label_selector::validate("spec.podSelector", &spec["podSelector"], opts, out);
    for (list, peers) in RULES {
        for (i, rule) in items(&spec[list]).iter().enumerate() {
            let at = format!("spec.{list}[{i}]");
            for (j, p) in items(&rule["ports"]).iter().enumerate() {
                port(&format!("{at}.ports[{j}]"), p, out);
            }
            for (j, p) in items(&rule[peers]).iter().enumerate() {
                peer(format!("{at}.{peers}[{j}]"), p, opts, out);
            }
        }
    }
    let types = items(&spec["policyTypes"]);
    if types.len() > POLICY_TYPES.len() {
        // Upstream prints the list as Go source.
        let list: Vec<String> = types.iter().map(Value::to_string).collect();
        out.push((
            "spec.policyTypes".into(),
            format!(
                "Invalid value: []networking.PolicyType{{{}}}: may not specify more than two policyTypes",
                list.join(", ")
            ),
        ));
        return;
    }
    for (i, t) in types.iter().enumerate() {
        if !t.as_str().is_some_and(|t| POLICY_TYPES.contains(&t)) {
            unsupported(format!("spec.policyTypes[{i}]"), t, POLICY_TYPES, out);
        }
    }
}

/// Upstream's `ValidateNetworkPolicyPort`: a known protocol, a port number or IANA service
/// name, and an `endPort` only after a numeric `port` it does not precede.
fn port(at: &str, p: &Value, out: &mut Causes) {
    let protocol = &p["protocol"];
    if !protocol.is_null() && !protocol.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) {
        unsupported(format!("{at}.protocol"), protocol, PROTOCOLS, out);
    }
    let end = &p["endPort"];
    let end_path = || format!("{at}.endPort");
    match &p["port"] {
        Value::Null => {
            if !end.is_null() {
                let msg = "may not be specified when `port` is not specified";
                invalid(end_path(), end, msg, out);
            }
        }
        Value::String(name) => {
            if !end.is_null() {
                let msg = "may not be specified when `port` is non-numeric";
                invalid(end_path(), end, msg, out);
            }
            for msg in port_name_errors(name) {
                invalid(format!("{at}.port"), &p["port"], &msg, out);
            }
        }
        number => {
            let n = number.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                invalid(format!("{at}.port"), number, PORT_RANGE, out);
            }
            if let Some(e) = end.as_i64() {
                if e < n {
                    invalid(
                        end_path(),
                        end,
                        "must be greater than or equal to `port`",
                        out,
                    );
                }
                if !(1..=65535).contains(&e) {
                    invalid(end_path(), end, PORT_RANGE, out);
                }
            }
        }
    }
}

/// Upstream's `IsValidPortName` (an IANA_SVC_NAME): every rule `name` breaks.
fn port_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters".to_owned());
    }
    let charset = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    if name.is_empty() || !name.bytes().all(charset) {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// Upstream's `ValidateNetworkPolicyPeer`: pod and/or namespace selectors, or an ipBlock
/// alone.
fn peer(at: String, p: &Value, opts: Options, out: &mut Causes) {
    let mut kinds = 0;
    for sel in ["podSelector", "namespaceSelector"] {
        if !p[sel].is_null() {
            kinds += 1;
            label_selector::validate(&format!("{at}.{sel}"), &p[sel], opts, out);
        }
    }
    let block = &p["ipBlock"];
    if !block.is_null() {
        kinds += 1;
        ip_block(&format!("{at}.ipBlock"), block, out);
    }
    if kinds == 0 {
        out.push((at, "Required value: must specify a peer".into()));
    } else if kinds > 1 && !block.is_null() {
        let msg = "Forbidden: may not specify both ipBlock and another peer";
        out.push((at, msg.into()));
    }
}

/// Upstream's `ValidateIPBlock`: `cidr` is a CIDR and each of `except` a CIDR strictly
/// inside it.
fn ip_block(at: &str, block: &Value, out: &mut Causes) {
    const NOT_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
    let cidr = block["cidr"].as_str().unwrap_or_default();
    if cidr.is_empty() {
        out.push((format!("{at}.cidr"), "Required value".into()));
        return;
    }
    let Some(outer) = Cidr::parse(cidr) else {
        invalid(format!("{at}.cidr"), &block["cidr"], NOT_CIDR, out);
        return;
    };
    for (i, e) in items(&block["except"]).iter().enumerate() {
        let path = format!("{at}.except[{i}]");
        match e.as_str().and_then(Cidr::parse) {
            None => invalid(path, e, NOT_CIDR, out),
            Some(inner) if !outer.strictly_contains(&inner) => {
                invalid(path, e, "must be a strict subset of `cidr`", out);
            }
            Some(_) => {}
        }
    }
}

/// A network as upstream's legacy CIDR fields parse it (`ParseCIDRSloppy`, without the
/// strict checks of the StrictIPCIDRValidation gate, off in 1.33): IPv4 octets may have
/// leading zeros, and host bits may be set (they are masked off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    v6: bool,
    /// The network address, host bits cleared; IPv4 in the low 32 bits.
    addr: u128,
    len: u32,
}

impl Cidr {
    fn parse(s: &str) -> Option<Cidr> {
        let (ip, len) = s.split_once('/')?;
        let (v6, addr, bits) = match parse_ipv4_sloppy(ip) {
            Some(a) => (false, u128::from(a), 32),
            None => (true, u128::from(ip.parse::<Ipv6Addr>().ok()?), 128),
        };
        if len.is_empty() || len.len() > 6 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let len: u32 = len.parse().ok().filter(|&l| l <= bits)?;
        Some(Cidr {
            v6,
            addr: addr & mask(len, bits),
            len,
        })
    }

    /// Whether `inner` lies inside this network and is smaller than it.
    fn strictly_contains(&self, inner: &Cidr) -> bool {
        let bits = if self.v6 { 128 } else { 32 };
        self.v6 == inner.v6
            && inner.len > self.len
            && inner.addr & mask(self.len, bits) == self.addr
    }
}

/// The netmask of a `len`-bit prefix of a `bits`-bit address.
fn mask(len: u32, bits: u32) -> u128 {
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if len == 0 {
        0
    } else {
        (all << (bits - len)) & all
    }
}

/// A dotted-quad IPv4 address, allowing octets with leading zeros as upstream's sloppy
/// parser does (`010` is ten).
fn parse_ipv4_sloppy(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    parts.iter().try_fold(0u32, |acc, part| {
        if part.is_empty() || part.len() > 8 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let octet: u32 = part.parse().ok().filter(|&o| o <= 255)?;
        Some(acc << 8 | octet)
    })
}

pub struct NetworkPolicy;

impl crate::registry::strategy::Strategy for NetworkPolicy {
    fn defaults(&self, obj: &mut Value) {
        apply_defaults(obj);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validate(obj, old, causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(spec: Value) -> Value {
        let mut np = json!({"metadata": {"name": "np"}, "spec": spec});
        apply_defaults(&mut np);
        np["spec"].take()
    }

    #[test]
    fn policy_types_default_from_the_rules() {
        let s = defaulted(json!({"podSelector": {}}));
        assert_eq!(s["policyTypes"], json!(["Ingress"]));
        let s = defaulted(json!({"ingress": [{}], "egress": [{"to": [{"podSelector": {}}]}]}));
        assert_eq!(s["policyTypes"], json!(["Ingress", "Egress"]));
        // An empty egress list is no egress rule.
        let s = defaulted(json!({"egress": []}));
        assert_eq!(s["policyTypes"], json!(["Ingress"]));
        // Given types stay, even egress-only ones beside ingress rules.
        let s = defaulted(json!({"ingress": [{}], "policyTypes": ["Egress"]}));
        assert_eq!(s["policyTypes"], json!(["Egress"]));
        // An empty list is unset.
        let s = defaulted(json!({"egress": [{}], "policyTypes": []}));
        assert_eq!(s["policyTypes"], json!(["Ingress", "Egress"]));
    }

    #[test]
    fn missing_spec_and_selector_default_to_every_pod() {
        let mut np = json!({"metadata": {"name": "np"}});
        apply_defaults(&mut np);
        assert_eq!(
            np["spec"],
            json!({"podSelector": {}, "policyTypes": ["Ingress"]})
        );
        let s = defaulted(json!({"podSelector": {"matchLabels": {"a": "b"}}}));
        assert_eq!(s["podSelector"], json!({"matchLabels": {"a": "b"}}));
    }

    #[test]
    fn rule_ports_default_to_tcp() {
        let s = defaulted(json!({
            "ingress": [{"ports": [{"port": 80}, {"protocol": "UDP", "port": 53}]}, {"from": []}],
            "egress": [{"ports": [{}]}]}));
        assert_eq!(s["ingress"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(s["ingress"][0]["ports"][1]["protocol"], "UDP");
        assert_eq!(s["egress"][0]["ports"][0]["protocol"], "TCP");
        // Rules without ports get none.
        assert!(s["ingress"][1].get("ports").is_none());
    }

    /// The causes of a policy with `spec`, defaulted first as the write path does.
    fn causes(spec: Value) -> Causes {
        let np = json!({"spec": defaulted(spec)});
        let mut out = Vec::new();
        validate(&np, None, &mut out);
        out
    }

    /// The one cause of `spec`, as `(path, message)`.
    fn only(spec: Value) -> (String, String) {
        let c = causes(spec);
        assert_eq!(c.len(), 1, "{c:?}");
        c.into_iter().next().unwrap_or_default()
    }

    #[test]
    fn valid_policies_pass() {
        for spec in [
            json!({}),
            json!({"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [
                    {"podSelector": {"matchLabels": {"app": "api"}}, "namespaceSelector": {}},
                    {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.3.4/32"]}}],
                    "ports": [{"port": 5432}, {"port": "metrics", "protocol": "UDP"},
                        {"port": 30000, "endPort": 32767, "protocol": "SCTP"}, {"port": 80, "endPort": 80}]}],
                "egress": [{"to": [{"ipBlock": {"cidr": "fd00::/64", "except": ["fd00::1:0/112"]}}]}, {}]}),
            // Sloppy forms the legacy field still takes.
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "010.0.0.1/8", "except": ["10.0.0.0/16"]}}]}]}),
        ] {
            assert!(
                causes(spec.clone()).is_empty(),
                "{spec}: {:?}",
                causes(spec.clone())
            );
        }
    }

    #[test]
    fn bad_pod_selector() {
        let (path, msg) =
            only(json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}));
        assert_eq!(path, "spec.podSelector.matchExpressions[0].operator");
        assert_eq!(msg, "Invalid value: \"Is\": not a valid selector operator");
    }

    #[test]
    fn bad_protocol() {
        let (path, msg) = only(json!({"egress": [{"ports": [{"protocol": "ICMP"}]}]}));
        assert_eq!(path, "spec.egress[0].ports[0].protocol");
        assert_eq!(
            msg,
            "Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\""
        );
    }

    #[test]
    fn port_numbers_in_range() {
        let (path, msg) = only(json!({"ingress": [{"ports": [{"port": 0}]}]}));
        assert_eq!(path, "spec.ingress[0].ports[0].port");
        assert_eq!(
            msg,
            "Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        let (path, msg) = only(json!({"ingress": [{"ports": [{"port": 65536}]}]}));
        assert_eq!(path, "spec.ingress[0].ports[0].port");
        assert_eq!(
            msg,
            "Invalid value: 65536: must be between 1 and 65535, inclusive"
        );
    }

    #[test]
    fn port_names_are_iana_service_names() {
        let c = causes(json!({"ingress": [{"ports": [{"port": "-Web--Server-Name-"}]}]}));
        let msgs: Vec<&str> = c.iter().map(|(_, m)| m.as_str()).collect();
        assert!(c.iter().all(|(p, _)| p == "spec.ingress[0].ports[0].port"));
        assert_eq!(
            msgs,
            [
                "Invalid value: \"-Web--Server-Name-\": must be no more than 15 characters",
                "Invalid value: \"-Web--Server-Name-\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "Invalid value: \"-Web--Server-Name-\": must not contain consecutive hyphens",
                "Invalid value: \"-Web--Server-Name-\": must not begin or end with a hyphen",
            ]
        );
        let (_, msg) = only(json!({"ingress": [{"ports": [{"port": "8080"}]}]}));
        assert_eq!(
            msg,
            "Invalid value: \"8080\": must contain at least one letter (a-z)"
        );
    }

    #[test]
    fn end_port_rules() {
        let (path, msg) = only(json!({"egress": [{"ports": [{"port": 100, "endPort": 99}]}]}));
        assert_eq!(path, "spec.egress[0].ports[0].endPort");
        assert_eq!(
            msg,
            "Invalid value: 99: must be greater than or equal to `port`"
        );
        let (path, msg) = only(json!({"egress": [{"ports": [{"port": 100, "endPort": 70000}]}]}));
        assert_eq!(path, "spec.egress[0].ports[0].endPort");
        assert_eq!(
            msg,
            "Invalid value: 70000: must be between 1 and 65535, inclusive"
        );
        let (path, msg) = only(json!({"egress": [{"ports": [{"port": "dns", "endPort": 60}]}]}));
        assert_eq!(path, "spec.egress[0].ports[0].endPort");
        assert_eq!(
            msg,
            "Invalid value: 60: may not be specified when `port` is non-numeric"
        );
        let (path, msg) = only(json!({"egress": [{"ports": [{"endPort": 60}]}]}));
        assert_eq!(path, "spec.egress[0].ports[0].endPort");
        assert_eq!(
            msg,
            "Invalid value: 60: may not be specified when `port` is not specified"
        );
    }

    #[test]
    fn a_peer_names_something() {
        let (path, msg) = only(json!({"ingress": [{"from": [{"podSelector": {}}, {}]}]}));
        assert_eq!(path, "spec.ingress[0].from[1]");
        assert_eq!(msg, "Required value: must specify a peer");
    }

    #[test]
    fn ip_block_stands_alone() {
        let (path, msg) = only(json!({"egress": [{"to": [
            {"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}]}]}));
        assert_eq!(path, "spec.egress[0].to[0]");
        assert_eq!(
            msg,
            "Forbidden: may not specify both ipBlock and another peer"
        );
    }

    #[test]
    fn peer_selectors_are_checked() {
        let (path, _) = only(json!({"ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "bad value!"}}}]}]}));
        assert_eq!(
            path,
            "spec.ingress[0].from[0].namespaceSelector.matchLabels"
        );
    }

    #[test]
    fn ip_block_cidrs() {
        let (path, msg) = only(json!({"ingress": [{"from": [{"ipBlock": {"cidr": ""}}]}]}));
        assert_eq!(path, "spec.ingress[0].from[0].ipBlock.cidr");
        assert_eq!(msg, "Required value");
        for bad in [
            "10.0.0.0",
            "10.0.0.256/8",
            "10.0.0.0/33",
            "10.0.0.0/",
            "fd00::/129",
            "x/8",
        ] {
            let (path, msg) = only(json!({"ingress": [{"from": [{"ipBlock": {"cidr": bad}}]}]}));
            assert_eq!(path, "spec.ingress[0].from[0].ipBlock.cidr", "{bad}");
            assert_eq!(
                msg,
                format!(
                    "Invalid value: \"{bad}\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
                )
            );
        }
        let (path, msg) = only(json!({"ingress": [{"from": [
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "nope"]}}]}]}));
        assert_eq!(path, "spec.ingress[0].from[0].ipBlock.except[1]");
        assert!(msg.starts_with("Invalid value: \"nope\": must be a valid CIDR value"));
    }

    #[test]
    fn except_is_a_strict_subset() {
        for bad in ["10.0.0.0/8", "10.0.0.0/7", "11.0.0.0/16", "fd00::/112"] {
            let (path, msg) = only(json!({"egress": [{"to": [
                {"ipBlock": {"cidr": "10.0.0.0/8", "except": [bad]}}]}]}));
            assert_eq!(path, "spec.egress[0].to[0].ipBlock.except[0]", "{bad}");
            assert_eq!(
                msg,
                format!("Invalid value: \"{bad}\": must be a strict subset of `cidr`")
            );
        }
    }

    #[test]
    fn policy_types() {
        let (path, msg) = only(json!({"policyTypes": ["Ingress", "Sideways"]}));
        assert_eq!(path, "spec.policyTypes[1]");
        assert_eq!(
            msg,
            "Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\""
        );
        let (path, msg) = only(json!({"policyTypes": ["Ingress", "Egress", "Ingress"]}));
        assert_eq!(path, "spec.policyTypes");
        assert_eq!(
            msg,
            "Invalid value: []networking.PolicyType{\"Ingress\", \"Egress\", \"Ingress\"}: may not specify more than two policyTypes"
        );
    }

    #[test]
    fn update_keeps_an_old_invalid_selector_value() {
        let bad = json!({"spec": {"podSelector": {"matchExpressions": [
            {"key": "a", "operator": "In", "values": ["no good"]}]}}});
        let mut out = Vec::new();
        validate(&bad, None, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].0, "spec.podSelector.matchExpressions[0].values[0]");
        out.clear();
        validate(&bad, Some(&bad), &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn cidr_parsing() {
        let c = |s: &str| Cidr::parse(s);
        assert_eq!(
            c("10.1.2.3/8"),
            Some(Cidr {
                v6: false,
                addr: 10 << 24,
                len: 8
            })
        );
        assert_eq!(c("0.0.0.0/0").map(|n| n.len), Some(0));
        assert_eq!(c("::/0").map(|n| (n.v6, n.addr)), Some((true, 0)));
        assert!(c("1.2.3/8").is_none());
        assert!(c("1.2.3.4/+8").is_none());
        assert!(c("fe80::1%eth0/64").is_none());
        let all = c("0.0.0.0/0").unwrap_or_else(|| unreachable!());
        assert!(all.strictly_contains(&c("255.255.255.255/32").unwrap_or(all)));
    }
}

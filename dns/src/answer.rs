//! Answers for names in the cluster zone, as the Kubernetes DNS specification (schema
//! 1.1.0) lays them out, from an [`Index`]:
//!
//! | name | records |
//! |---|---|
//! | `SVC.NS.svc.ZONE` | A/AAAA of a ClusterIP Service; one A per endpoint of a headless one; CNAME of an ExternalName one; SRV per named port |
//! | `_PORT._PROTO.SVC.NS.svc.ZONE` | SRV to the Service, or to each endpoint of a headless one, with its A/AAAA as additional records |
//! | `HOST.SVC.NS.svc.ZONE` | A/AAAA of the endpoint with that host name (or dashed address) |
//! | `A-B-C-D.NS.pod.ZONE` | A of that address (CoreDNS's `pods insecure`, k3s's default) |
//! | `dns-version.ZONE` | TXT `1.1.0` |
//! | `ZONE` | SOA and NS; `ns.dns.ZONE` is the DNS Service's address |
//! | `D.C.B.A.in-addr.arpa`, ip6.arpa | PTR of a Service's cluster IP or an endpoint's address |
//!
//! A name under the zone that holds nothing is NXDOMAIN; a name that exists without records
//! of the asked type (or an empty non-terminal such as `svc.ZONE`) is NODATA; both carry the
//! zone's SOA so resolvers cache the negative answer for its minimum TTL. Reverse names of
//! addresses the cluster does not know, and names outside the zone, are not answered here
//! ([`Outcome::Forward`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use crate::index::{Endpoint, Index, Kind};

/// The schema version answered at `dns-version.ZONE`.
pub const SCHEMA_VERSION: &str = "1.1.0";

/// What to do with a query.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Answered from the cluster's records.
    Local(Local),
    /// Not a cluster name: ask the upstream resolvers.
    Forward,
}

/// An authoritative answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Local {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    pub additionals: Vec<Record>,
    /// An ExternalName's target, to be resolved for the same type and appended (as
    /// CoreDNS does, so that stub resolvers that do not chase CNAMEs get addresses).
    pub chase: Option<Name>,
}

/// Settings of the answers.
#[derive(Debug, Clone)]
pub struct Zone {
    /// TTL of every cluster record and the SOA minimum (negative caching).
    pub ttl: u32,
    /// The DNS Service's address, answered for `ns.dns.ZONE`.
    pub dns_ip: Option<IpAddr>,
}

/// Answers `name`/`qtype` from `index`.
pub fn answer(index: &Index, zone: &Zone, name: &Name, qtype: RecordType) -> Outcome {
    let lower = name.to_lowercase().to_ascii();
    let lower = lower.trim_end_matches('.');
    if let Some(ip) = reverse_ip(lower) {
        let names = index.reverse(ip);
        if names.is_empty() {
            return Outcome::Forward;
        }
        let mut l = Local::default();
        if matches!(qtype, RecordType::PTR | RecordType::ANY) {
            for n in names {
                if let Ok(target) = fqdn(&n) {
                    l.answers.push(Record::from_rdata(
                        name.clone(),
                        zone.ttl,
                        RData::PTR(PTR(target)),
                    ));
                }
            }
        } else {
            l.authority.push(soa(index, zone));
        }
        return Outcome::Local(l);
    }
    let z = index.zone();
    let rel = if lower == z {
        ""
    } else if let Some(r) = lower.strip_suffix(z).and_then(|r| r.strip_suffix('.')) {
        r
    } else {
        return Outcome::Forward;
    };
    let labels: Vec<&str> = if rel.is_empty() {
        Vec::new()
    } else {
        rel.rsplit('.').collect()
    };
    let mut b = Builder {
        index,
        zone,
        name,
        qtype,
        out: Local::default(),
        exists: false,
    };
    b.lookup(&labels);
    Outcome::Local(b.finish())
}

struct Builder<'a> {
    index: &'a Index,
    zone: &'a Zone,
    name: &'a Name,
    qtype: RecordType,
    out: Local,
    /// Whether the name exists (NODATA rather than NXDOMAIN when nothing matched the type).
    exists: bool,
}

impl<'a> Builder<'a> {
    /// `labels` from the zone down: `["svc", "default", "web"]`.
    fn lookup(&mut self, labels: &[&str]) {
        match labels {
            [] => {
                self.exists = true;
                if self.wants(RecordType::SOA) {
                    let soa = soa(self.index, self.zone);
                    self.out.answers.push(soa);
                }
                if self.wants(RecordType::NS)
                    && let Ok(ns) = fqdn(&format!("ns.dns.{}", self.index.zone()))
                {
                    self.push(RData::NS(NS(ns)));
                }
            }
            ["dns-version"] => {
                self.exists = true;
                if self.wants(RecordType::TXT) {
                    self.push(RData::TXT(TXT::new(vec![SCHEMA_VERSION.into()])));
                }
            }
            ["dns"] | ["svc"] | ["pod"] => self.exists = true,
            ["dns", "ns"] => {
                if let Some(ip) = self.zone.dns_ip {
                    self.exists = true;
                    self.address(ip);
                }
            }
            ["svc", ns] | ["pod", ns] => self.exists = self.index.has_namespace(ns),
            ["pod", _ns, ip] => {
                if let Some(ip) = undashed(ip) {
                    self.exists = true;
                    self.address(ip);
                }
            }
            ["svc", ns, svc] => self.service(ns, svc),
            ["svc", ns, svc, proto] if proto.starts_with('_') => {
                // `_tcp.SVC…`: an empty non-terminal when a port of that protocol exists.
                let proto = &proto[1..];
                self.exists = self
                    .index
                    .service(ns, svc)
                    .is_some_and(|s| s.ports.iter().any(|p| p.protocol.as_str() == proto));
            }
            ["svc", ns, svc, host] => self.endpoint(ns, svc, host),
            ["svc", ns, svc, proto, port] if proto.starts_with('_') && port.starts_with('_') => {
                self.srv(ns, svc, &proto[1..], &port[1..]);
            }
            _ => {}
        }
    }

    fn wants(&self, t: RecordType) -> bool {
        self.qtype == t || self.qtype == RecordType::ANY
    }

    fn push(&mut self, rdata: RData) {
        self.out
            .answers
            .push(Record::from_rdata(self.name.clone(), self.zone.ttl, rdata));
    }

    fn address(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(v4) if self.wants(RecordType::A) => self.push(RData::A(A(v4))),
            IpAddr::V6(v6) if self.wants(RecordType::AAAA) => self.push(RData::AAAA(AAAA(v6))),
            _ => {}
        }
    }

    fn service(&mut self, ns: &str, svc: &str) {
        let Some(s) = self.index.service(ns, svc) else {
            return;
        };
        self.exists = true;
        match &s.kind {
            Kind::ClusterIp(ips) => {
                for ip in ips.iter() {
                    self.address(ip);
                }
            }
            Kind::Headless => {
                for e in self.ready_endpoints(ns, svc) {
                    self.address(e.ip);
                }
            }
            Kind::ExternalName(target) => {
                if let Ok(t) = fqdn(target) {
                    self.push(RData::CNAME(CNAME(t.clone())));
                    if self.qtype != RecordType::CNAME {
                        self.out.chase = Some(t);
                    }
                }
                return;
            }
        }
        if self.wants(RecordType::SRV) {
            let named: Vec<(String, String)> = s
                .ports
                .iter()
                .filter(|p| !p.name.is_empty())
                .map(|p| (p.protocol.as_str().to_string(), p.name.to_string()))
                .collect();
            for (proto, port) in named {
                self.srv(ns, svc, &proto, &port);
            }
        }
    }

    /// `HOST.SVC.NS.svc.ZONE`: the endpoint of a Service with that label.
    fn endpoint(&mut self, ns: &str, svc: &str, host: &str) {
        if self.index.service(ns, svc).is_none() {
            return;
        }
        let found: Vec<IpAddr> = self
            .ready_endpoints(ns, svc)
            .iter()
            .filter(|e| e.label() == host)
            .map(|e| e.ip)
            .collect();
        if !found.is_empty() {
            self.exists = true;
        }
        for ip in found {
            self.address(ip);
        }
    }

    /// SRV records of a named port: one to the Service name, or one per endpoint of a
    /// headless Service, with the targets' addresses as additional records.
    fn srv(&mut self, ns: &str, svc: &str, proto: &str, port: &str) {
        let Some(s) = self.index.service(ns, svc) else {
            return;
        };
        let zone = self.index.zone();
        let base = format!("{svc}.{ns}.svc.{zone}");
        let mut targets: Vec<(u16, String, Vec<IpAddr>)> = Vec::new();
        match &s.kind {
            Kind::ClusterIp(ips) => {
                if let Some(p) = s
                    .ports
                    .iter()
                    .find(|p| &*p.name == port && p.protocol.as_str() == proto)
                {
                    targets.push((p.port, base.clone(), ips.iter().collect()));
                }
            }
            Kind::Headless => {
                for e in self.ready_endpoints(ns, svc) {
                    if let Some(p) = e
                        .ports
                        .iter()
                        .find(|p| &*p.name == port && p.protocol.as_str() == proto)
                    {
                        targets.push((p.port, format!("{}.{base}", e.label()), vec![e.ip]));
                    }
                }
            }
            Kind::ExternalName(_) => {}
        }
        if targets.is_empty() {
            return;
        }
        self.exists = true;
        if !self.wants(RecordType::SRV) {
            return;
        }
        let weight = u16::try_from(100 / targets.len()).unwrap_or(1).max(1);
        for (port, target, ips) in targets {
            let Ok(t) = fqdn(&target) else { continue };
            self.push(RData::SRV(SRV::new(0, weight, port, t.clone())));
            for ip in ips {
                let rdata = match ip {
                    IpAddr::V4(v4) => RData::A(A(v4)),
                    IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
                };
                self.out
                    .additionals
                    .push(Record::from_rdata(t.clone(), self.zone.ttl, rdata));
            }
        }
    }

    fn ready_endpoints(&self, ns: &str, svc: &str) -> Vec<Endpoint<'a>> {
        let all = self
            .index
            .service(ns, svc)
            .is_some_and(|s| s.publish_not_ready);
        self.index
            .endpoints(ns, svc)
            .into_iter()
            .filter(|e| all || e.ready)
            .collect()
    }

    fn finish(mut self) -> Local {
        if self.out.answers.is_empty() {
            self.out.rcode = if self.exists {
                ResponseCode::NoError
            } else {
                ResponseCode::NXDomain
            };
            self.out.authority.push(soa(self.index, self.zone));
            self.out.additionals.clear();
        }
        self.out
    }
}

/// The zone's SOA, whose minimum is the negative-caching TTL.
fn soa(index: &Index, zone: &Zone) -> Record {
    let z = index.zone();
    let apex = fqdn(z).unwrap_or_else(|_| Name::root());
    let mname = fqdn(&format!("ns.dns.{z}")).unwrap_or_else(|_| Name::root());
    let rname = fqdn(&format!("hostmaster.{z}")).unwrap_or_else(|_| Name::root());
    // The serial moves with time so secondaries (none here) would refresh; resolvers only
    // read the minimum.
    let serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(1);
    let rdata = SOA::new(mname, rname, serial, 7200, 1800, 86400, zone.ttl);
    Record::from_rdata(apex, zone.ttl, RData::SOA(rdata))
}

fn fqdn(s: &str) -> Result<Name, hickory_proto::ProtoError> {
    let mut n = Name::from_str(s)?;
    n.set_fqdn(true);
    Ok(n)
}

/// `10-42-0-7` → 10.42.0.7; IPv6 with dashes for colons.
fn undashed(label: &str) -> Option<IpAddr> {
    if let Ok(v4) = label.replace('-', ".").parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    label
        .replace('-', ":")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// The address of a reverse name (`7.0.42.10.in-addr.arpa`, nibbles under `ip6.arpa`).
fn reverse_ip(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let mut octets: Vec<u8> = Vec::with_capacity(4);
        for l in rest.split('.') {
            octets.push(l.parse().ok()?);
        }
        if octets.len() != 4 {
            return None;
        }
        octets.reverse();
        return Some(IpAddr::V4(Ipv4Addr::new(
            octets[0], octets[1], octets[2], octets[3],
        )));
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<&str> = rest.split('.').collect();
    if nibbles.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, n) in nibbles.iter().rev().enumerate() {
        let v = u8::from_str_radix(n, 16).ok()?;
        if n.len() != 1 {
            return None;
        }
        bytes[i / 2] |= if i % 2 == 0 { v << 4 } else { v };
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::dashed;
    use crate::index::tests::{slice, svc};
    use serde_json::json;

    fn index() -> Index {
        let mut ix = Index::new("cluster.local");
        let s = svc(
            "default",
            "web",
            json!({"clusterIP": "10.43.0.5",
            "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}, {"port": 81}]}),
        );
        ix.apply_service("default", "web", Some(&s));
        let h = svc(
            "default",
            "h",
            json!({"clusterIP": "None",
            "ports": [{"name": "http", "port": 80}]}),
        );
        ix.apply_service("default", "h", Some(&h));
        ix.apply_slice("default", "h-1", Some(&slice("default", "h-1", "h", json!({
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.42.0.7"], "hostname": "web-0", "conditions": {"ready": true}},
                {"addresses": ["10.42.0.8"], "conditions": {"ready": true}},
                {"addresses": ["10.42.0.9"], "conditions": {"ready": false}},
            ]}))));
        let e = svc(
            "default",
            "ext",
            json!({"type": "ExternalName", "externalName": "example.org"}),
        );
        ix.apply_service("default", "ext", Some(&e));
        ix
    }

    fn zone() -> Zone {
        Zone {
            ttl: 5,
            dns_ip: Some("10.43.0.10".parse().unwrap()),
        }
    }

    fn ask(ix: &Index, name: &str, t: RecordType) -> Local {
        match answer(ix, &zone(), &Name::from_ascii(name).unwrap(), t) {
            Outcome::Local(l) => l,
            Outcome::Forward => panic!("{name} forwarded"),
        }
    }

    fn data(l: &Local) -> Vec<String> {
        l.answers.iter().map(|r| r.data().to_string()).collect()
    }

    #[test]
    fn cluster_ip_services() {
        let ix = index();
        let l = ask(&ix, "web.default.svc.cluster.local.", RecordType::A);
        assert_eq!(l.rcode, ResponseCode::NoError);
        assert_eq!(data(&l), ["10.43.0.5"]);
        assert_eq!(l.answers[0].ttl(), 5);
        // Case is ignored, and the answer carries the name as asked.
        let l = ask(&ix, "WEB.Default.SVC.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["10.43.0.5"]);
        assert_eq!(
            l.answers[0].name().to_ascii(),
            "WEB.Default.SVC.cluster.local."
        );
        // NODATA for a type the name has not, with the SOA.
        let l = ask(&ix, "web.default.svc.cluster.local.", RecordType::AAAA);
        assert_eq!(l.rcode, ResponseCode::NoError);
        assert!(l.answers.is_empty());
        assert_eq!(l.authority[0].record_type(), RecordType::SOA);
        // NXDOMAIN for a Service that is not there, and for a namespace without Services.
        for n in [
            "nope.default.svc.cluster.local.",
            "web.other.svc.cluster.local.",
            "x.y.z.cluster.local.",
        ] {
            let l = ask(&ix, n, RecordType::A);
            assert_eq!(l.rcode, ResponseCode::NXDomain, "{n}");
            assert_eq!(l.authority.len(), 1);
        }
        // Empty non-terminals exist.
        for n in [
            "svc.cluster.local.",
            "default.svc.cluster.local.",
            "_tcp.web.default.svc.cluster.local.",
        ] {
            let l = ask(&ix, n, RecordType::A);
            assert_eq!(l.rcode, ResponseCode::NoError, "{n}");
        }
    }

    #[test]
    fn srv_for_named_ports() {
        let ix = index();
        let l = ask(
            &ix,
            "_http._tcp.web.default.svc.cluster.local.",
            RecordType::SRV,
        );
        assert_eq!(data(&l), ["0 100 80 web.default.svc.cluster.local."]);
        assert_eq!(l.additionals[0].data().to_string(), "10.43.0.5");
        let l = ask(
            &ix,
            "_dns._udp.web.default.svc.cluster.local.",
            RecordType::SRV,
        );
        assert_eq!(data(&l), ["0 100 53 web.default.svc.cluster.local."]);
        // Wrong protocol: no such name.
        let l = ask(
            &ix,
            "_dns._tcp.web.default.svc.cluster.local.",
            RecordType::SRV,
        );
        assert_eq!(l.rcode, ResponseCode::NXDomain);
        // SRV at the Service's own name lists every named port.
        let l = ask(&ix, "web.default.svc.cluster.local.", RecordType::SRV);
        assert_eq!(l.answers.len(), 2);
    }

    #[test]
    fn headless_services_and_their_endpoints() {
        let ix = index();
        let l = ask(&ix, "h.default.svc.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["10.42.0.7", "10.42.0.8"], "ready endpoints only");
        let l = ask(&ix, "web-0.h.default.svc.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["10.42.0.7"]);
        let l = ask(&ix, "10-42-0-8.h.default.svc.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["10.42.0.8"]);
        let l = ask(&ix, "10-42-0-9.h.default.svc.cluster.local.", RecordType::A);
        assert_eq!(l.rcode, ResponseCode::NXDomain, "not ready");
        let l = ask(
            &ix,
            "_http._tcp.h.default.svc.cluster.local.",
            RecordType::SRV,
        );
        assert_eq!(
            data(&l),
            [
                "0 50 8080 web-0.h.default.svc.cluster.local.",
                "0 50 8080 10-42-0-8.h.default.svc.cluster.local."
            ]
        );
        assert_eq!(l.additionals.len(), 2);
    }

    #[test]
    fn external_names_pods_version_and_apex() {
        let ix = index();
        let l = ask(&ix, "ext.default.svc.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["example.org."]);
        assert_eq!(l.chase, Some(Name::from_str("example.org.").unwrap()));
        let l = ask(&ix, "ext.default.svc.cluster.local.", RecordType::CNAME);
        assert_eq!(l.chase, None);
        let l = ask(&ix, "10-42-0-99.default.pod.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["10.42.0.99"]);
        let l = ask(&ix, "fd00--1.default.pod.cluster.local.", RecordType::AAAA);
        assert_eq!(data(&l), ["fd00::1"]);
        let l = ask(&ix, "not-an-ip.default.pod.cluster.local.", RecordType::A);
        assert_eq!(l.rcode, ResponseCode::NXDomain);
        let l = ask(&ix, "dns-version.cluster.local.", RecordType::TXT);
        assert_eq!(data(&l), ["1.1.0"]);
        let l = ask(&ix, "cluster.local.", RecordType::SOA);
        assert_eq!(l.answers[0].record_type(), RecordType::SOA);
        let l = ask(&ix, "cluster.local.", RecordType::NS);
        assert_eq!(data(&l), ["ns.dns.cluster.local."]);
        let l = ask(&ix, "ns.dns.cluster.local.", RecordType::A);
        assert_eq!(data(&l), ["10.43.0.10"]);
    }

    #[test]
    fn reverse_names_and_forwarding() {
        let ix = index();
        let l = ask(&ix, "5.0.43.10.in-addr.arpa.", RecordType::PTR);
        assert_eq!(data(&l), ["web.default.svc.cluster.local."]);
        let l = ask(&ix, "7.0.42.10.in-addr.arpa.", RecordType::PTR);
        assert_eq!(data(&l), ["web-0.h.default.svc.cluster.local."]);
        for (n, t) in [
            ("1.1.168.192.in-addr.arpa.", RecordType::PTR),
            ("example.org.", RecordType::A),
            ("cluster.local.example.org.", RecordType::A),
            ("xcluster.local.", RecordType::A),
        ] {
            assert_eq!(
                answer(&ix, &zone(), &Name::from_str(n).unwrap(), t),
                Outcome::Forward,
                "{n}"
            );
        }
    }

    #[test]
    fn reverse_name_parsing() {
        assert_eq!(
            reverse_ip("4.3.2.1.in-addr.arpa"),
            Some("1.2.3.4".parse().unwrap())
        );
        assert_eq!(reverse_ip("3.2.1.in-addr.arpa"), None);
        assert_eq!(reverse_ip("300.2.1.1.in-addr.arpa"), None);
        let v6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa";
        assert_eq!(reverse_ip(v6), Some("fd00::1".parse().unwrap()));
        for ip in ["10.42.0.7", "fd00::1"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(undashed(&dashed(ip)), Some(ip));
        }
    }
}

//! What the parts of the cluster DNS agree on (and the kubelet's `resolv.conf` reading): the
//! `kube-dns` Service that the server keeps,
//! the Node annotation with which a node's DNS server says where it answers, and the
//! controller's EndpointSlice that joins the two (`k1s-dns`, `controllers::cluster_dns`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde_json::{Value, json};

/// The Service's namespace and name (upstream's, so tools that look for it find it).
pub const NAMESPACE: &str = "kube-system";
pub const SERVICE: &str = "kube-dns";
/// The Node annotation with the address the node's DNS server answers on.
pub const ADDRESS_ANNOTATION: &str = "dns.k1s.io/address";
/// The label on the objects k1s keeps for its DNS (Service, EndpointSlice, Endpoints).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "k1s");
/// The EndpointSlice the controller keeps, and its `endpointslice.kubernetes.io/managed-by`.
pub const SLICE: &str = "kube-dns-k1s";
pub const SLICE_MANAGER: &str = "k1s.io/cluster-dns";
/// The DNS port and the metrics port (CoreDNS's).
pub const PORT: u16 = 53;
pub const METRICS_PORT: u16 = 9153;

/// The DNS Service's address: the tenth of the service CIDR (`10.43.0.10` of
/// `10.43.0.0/16`), as k3s and kubeadm choose; `None` when the CIDR has no tenth address.
pub fn service_ip(service_cidr: &str) -> Option<IpAddr> {
    let (net, len) = service_cidr.split_once('/')?;
    let net: Ipv4Addr = net.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if len > 28 {
        return None;
    }
    Some(IpAddr::V4(Ipv4Addr::from(u32::from(net) + 10)))
}

/// The `kube-dns` Service at `ip`: no selector (the controller lists the nodes' servers),
/// `internalTrafficPolicy: Local` (a pod asks its own node).
pub fn service(ip: IpAddr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {
            "k8s-app": "kube-dns",
            "kubernetes.io/cluster-service": "true",
            "kubernetes.io/name": "KubeDNS",
            MANAGED_BY.0: MANAGED_BY.1,
        }},
        "spec": {
            "clusterIP": ip.to_string(),
            "clusterIPs": [ip.to_string()],
            "internalTrafficPolicy": "Local",
            "ports": [
                {"name": "dns", "port": PORT, "protocol": "UDP", "targetPort": PORT},
                {"name": "dns-tcp", "port": PORT, "protocol": "TCP", "targetPort": PORT},
                {"name": "metrics", "port": METRICS_PORT, "protocol": "TCP", "targetPort": METRICS_PORT},
            ],
        },
    })
}

/// What a `resolv.conf` says: read by the cluster DNS (where to forward) and the kubelet
/// (`dnsPolicy: Default` pods, the host's search domains).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<IpAddr>,
    pub search: Vec<String>,
    pub options: Vec<String>,
}

impl ResolvConf {
    /// Parses the file's `nameserver`, `search`/`domain` and `options` lines (the last
    /// `search` or `domain` line wins, as in glibc; comments start with `#` or `;`).
    pub fn parse(text: &str) -> Self {
        let mut out = Self::default();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // A scoped IPv6 address (`fe80::1%eth0`) cannot be used from elsewhere.
                    if let Some(ip) = words.next().and_then(|w| w.parse().ok()) {
                        out.nameservers.push(ip);
                    }
                }
                Some("search") | Some("domain") => {
                    out.search = words.map(String::from).collect();
                }
                Some("options") => out.options.extend(words.map(String::from)),
                _ => {}
            }
        }
        out
    }

    /// The nameservers a pod can reach (not loopback).
    pub fn reachable(&self) -> Vec<IpAddr> {
        self.nameservers
            .iter()
            .copied()
            .filter(|ip| !ip.is_loopback())
            .collect()
    }

    /// The resolvers to forward to on port 53.
    pub fn upstreams(&self) -> Vec<SocketAddr> {
        self.nameservers
            .iter()
            .map(|ip| SocketAddr::new(*ip, 53))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resolv_conf() {
        let c = ResolvConf::parse(
            "# generated\nnameserver 127.0.0.53\nnameserver 192.0.2.1 # x\nnameserver fe80::1%eth0\n\
             domain a.example\nsearch b.example c.example\noptions edns0 trust-ad\n; c\n",
        );
        assert_eq!(c.nameservers.len(), 2);
        assert_eq!(c.reachable(), vec!["192.0.2.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(c.search, ["b.example", "c.example"]);
        assert_eq!(c.options, ["edns0", "trust-ad"]);
        assert_eq!(c.upstreams()[1].to_string(), "192.0.2.1:53");
    }

    #[test]
    fn tenth_address() {
        assert_eq!(
            service_ip("10.43.0.0/16"),
            Some("10.43.0.10".parse().unwrap())
        );
        assert_eq!(
            service_ip("10.96.0.0/12"),
            Some("10.96.0.10".parse().unwrap())
        );
        assert_eq!(service_ip("10.0.0.0/30"), None);
        assert_eq!(service_ip("nonsense"), None);
        assert_eq!(
            service(service_ip("10.43.0.0/16").unwrap())["spec"]["clusterIP"],
            "10.43.0.10"
        );
    }
}

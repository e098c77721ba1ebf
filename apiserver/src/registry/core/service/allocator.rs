//! Service ClusterIP and NodePort allocation (upstream's `ipallocator` and `portallocator`),
//! as the Service strategy's side effects.
//!
//! Each allocated IP or port is a key in the store (`/registry/k1s/serviceips/<ip>`,
//! `/registry/k1s/nodeports/<port>`), claimed with a create, so two API servers on one etcd
//! never hand out the same address. A claim is taken before the Service is written and
//! released when the Service goes (or its create fails).

use std::net::Ipv4Addr;

use bytes::Bytes;
use k1s_store::StoreError;
use rand::Rng;
use serde_json::{Value, json};

use crate::registry::side_effects::{Claims, Context, Outcome, SideEffects};
use crate::status::ApiError;

const IP_PREFIX: &str = "/registry/k1s/serviceips/";
const PORT_PREFIX: &str = "/registry/k1s/nodeports/";
/// Random probes before a linear scan for a free address.
const RANDOM_TRIES: usize = 32;

/// The service network: `--service-cidr` and `--service-node-port-range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceNetwork {
    pub base: Ipv4Addr,
    pub prefix: u8,
    pub node_ports: (u16, u16),
}

impl Default for ServiceNetwork {
    fn default() -> Self {
        Self {
            base: Ipv4Addr::new(10, 43, 0, 0),
            prefix: 16,
            node_ports: (30000, 32767),
        }
    }
}

/// A `--service-cidr` or `--service-node-port-range` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    #[error("{0:?} is not a CIDR such as 10.43.0.0/16")]
    NotCidr(String),
    #[error("{0:?}: only IPv4 service CIDRs are supported")]
    NotIpv4(String),
    #[error("{0:?}: the prefix length must be between 8 and 30")]
    Prefix(String),
    #[error("{0:?} is not a port range such as 30000-32767")]
    PortRange(String),
}

impl ServiceNetwork {
    /// Parses `a.b.c.d/n` and `lo-hi`.
    pub fn parse(cidr: &str, ports: &str) -> Result<Self, NetworkError> {
        let (ip, prefix) = cidr
            .split_once('/')
            .ok_or_else(|| NetworkError::NotCidr(cidr.to_owned()))?;
        let ip: Ipv4Addr = ip
            .parse()
            .map_err(|_| NetworkError::NotIpv4(cidr.to_owned()))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| (8..=30).contains(p))
            .ok_or_else(|| NetworkError::Prefix(cidr.to_owned()))?;
        let mask = u32::MAX << (32 - prefix);
        let (lo, hi) = ports
            .split_once('-')
            .and_then(|(a, b)| Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?)))
            .filter(|(a, b)| a < b)
            .ok_or_else(|| NetworkError::PortRange(ports.to_owned()))?;
        Ok(Self {
            base: Ipv4Addr::from(u32::from(ip) & mask),
            prefix,
            node_ports: (lo, hi),
        })
    }

    fn size(&self) -> u32 {
        1u32 << (32 - self.prefix)
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - self.prefix);
        u32::from(ip) & mask == u32::from(self.base)
    }

    /// The first usable address: the `kubernetes` Service's ClusterIP.
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + 1)
    }
}

fn invalid(name: &str, field: &str, msg: String) -> ApiError {
    ApiError::invalid("Service", name, vec![(field.to_owned(), msg)])
}

async fn claim(cx: &dyn Context, key: String) -> Result<bool, ApiError> {
    match cx.store().create(&key, Bytes::from_static(b"{}")).await {
        Ok(_) => Ok(true),
        Err(StoreError::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn release(cx: &dyn Context, key: String) {
    if let Err(e) = cx.store().delete(&key, None).await
        && !matches!(e, StoreError::NotFound { .. })
    {
        tracing::warn!(key, error = %e, "could not release a service address");
    }
}

async fn claim_ip(
    cx: &dyn Context,
    name: &str,
    requested: Option<Ipv4Addr>,
) -> Result<Ipv4Addr, ApiError> {
    let net = cx.service_network();
    if let Some(ip) = requested {
        if !net.contains(ip) || ip == net.base {
            return Err(invalid(
                name,
                "spec.clusterIPs",
                format!(
                    "Invalid value: {:?}: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}/{}",
                    vec![ip.to_string()],
                    net.base,
                    net.prefix
                ),
            ));
        }
        if !claim(cx, format!("{IP_PREFIX}{ip}")).await? {
            return Err(invalid(
                name,
                "spec.clusterIPs",
                format!(
                    "Invalid value: {:?}: failed to allocate IP {ip}: provided IP is already allocated",
                    vec![ip.to_string()]
                ),
            ));
        }
        return Ok(ip);
    }
    let size = net.size();
    // Skip the network address and the first IP (reserved for `kubernetes`) and the last.
    let pick = |n: u32| Ipv4Addr::from(u32::from(net.base) + n);
    for _ in 0..RANDOM_TRIES {
        let ip = pick(rand::rng().random_range(2..size - 1));
        if claim(cx, format!("{IP_PREFIX}{ip}")).await? {
            return Ok(ip);
        }
    }
    for n in 2..size - 1 {
        if claim(cx, format!("{IP_PREFIX}{}", pick(n))).await? {
            return Ok(pick(n));
        }
    }
    Err(ApiError::new(
        500,
        "InternalError",
        format!(
            "failed to allocate a serviceIP: range is full ({}/{})",
            net.base, net.prefix
        ),
    ))
}

async fn claim_port(cx: &dyn Context, name: &str, requested: Option<u16>) -> Result<u16, ApiError> {
    claim_port_for(cx, name, "spec.ports[0].nodePort", requested).await
}

/// [`claim_port`] for the field `field` (a NodePort or the health check port).
async fn claim_port_for(
    cx: &dyn Context,
    name: &str,
    field: &str,
    requested: Option<u16>,
) -> Result<u16, ApiError> {
    let (lo, hi) = cx.service_network().node_ports;
    if let Some(p) = requested {
        if !(lo..=hi).contains(&p) {
            return Err(invalid(
                name,
                field,
                format!(
                    "Invalid value: {p}: provided port is not in the valid range. The range of valid ports is {lo}-{hi}"
                ),
            ));
        }
        if !claim(cx, format!("{PORT_PREFIX}{p}")).await? {
            return Err(invalid(
                name,
                field,
                format!("Invalid value: {p}: provided port is already allocated"),
            ));
        }
        return Ok(p);
    }
    for _ in 0..RANDOM_TRIES {
        let p = rand::rng().random_range(lo..=hi);
        if claim(cx, format!("{PORT_PREFIX}{p}")).await? {
            return Ok(p);
        }
    }
    for p in lo..=hi {
        if claim(cx, format!("{PORT_PREFIX}{p}")).await? {
            return Ok(p);
        }
    }
    Err(ApiError::new(
        500,
        "InternalError",
        "failed to allocate a nodePort: range is full",
    ))
}

/// What a Service's writes take and give back: its ClusterIP and NodePorts (and the health
/// check port of a `Local` load balancer).
pub struct Allocations;

#[async_trait::async_trait]
impl SideEffects for Allocations {
    /// Allocates what a new or changed Service needs; `old` is the stored Service on update.
    async fn begin(
        &self,
        cx: &dyn Context,
        old: Option<&Value>,
        svc: &mut Value,
    ) -> Result<Claims, ApiError> {
        allocate_service(cx, old, svc).await.map(Claims)
    }

    async fn finish(
        &self,
        cx: &dyn Context,
        claims: Claims,
        old: Option<&Value>,
        outcome: Outcome<'_>,
    ) {
        match (outcome, old) {
            (Outcome::Failed, _) => release_all(cx, &claims.0).await,
            (Outcome::Gone, Some(old)) => release_service(cx, old, None).await,
            (Outcome::Stored(new), Some(old)) => release_service(cx, old, Some(new)).await,
            (_, None) => {}
        }
    }

    async fn after_delete(&self, cx: &dyn Context, old: &Value) {
        release_service(cx, old, None).await;
    }
}

/// Allocates what a new or changed Service needs; `old` is the stored Service on update.
/// Returns the claims taken, to release if the write fails.
async fn allocate_service(
    cx: &dyn Context,
    old: Option<&Value>,
    svc: &mut Value,
) -> Result<Vec<String>, ApiError> {
    let name = svc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut claims = Vec::new();
    let result = allocate_into(cx, &name, old, svc, &mut claims).await;
    if result.is_err() {
        release_all(cx, &claims).await;
    }
    result.map(|()| claims)
}

async fn allocate_into(
    cx: &dyn Context,
    name: &str,
    old: Option<&Value>,
    svc: &mut Value,
    claims: &mut Vec<String>,
) -> Result<(), ApiError> {
    let ty = svc["spec"]["type"]
        .as_str()
        .unwrap_or("ClusterIP")
        .to_owned();
    let spec = &mut svc["spec"];
    if ty == "ExternalName" {
        spec.as_object_mut().map(|s| {
            s.remove("clusterIP");
            s.remove("clusterIPs")
        });
    } else if let Some(old_ip) = old.and_then(|o| o["spec"]["clusterIP"].as_str()) {
        // The ClusterIP is immutable.
        let asked = spec["clusterIP"].as_str().unwrap_or("");
        if !asked.is_empty() && asked != old_ip {
            return Err(invalid(
                name,
                "spec.clusterIPs[0]",
                format!("Invalid value: {:?}: may not change once set", vec![asked]),
            ));
        }
        spec["clusterIP"] = json!(old_ip);
        spec["clusterIPs"] = json!([old_ip]);
    } else {
        let asked = spec["clusterIP"].as_str().unwrap_or("").to_owned();
        let ip = match asked.as_str() {
            "None" => "None".to_owned(),
            "" => {
                let ip = claim_ip(cx, name, None).await?;
                claims.push(format!("{IP_PREFIX}{ip}"));
                ip.to_string()
            }
            s => {
                let parsed: Ipv4Addr = s.parse().map_err(|_| {
                    invalid(name, "spec.clusterIPs[0]", format!("Invalid value: {s:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
                })?;
                let ip = claim_ip(cx, name, Some(parsed)).await?;
                claims.push(format!("{IP_PREFIX}{ip}"));
                ip.to_string()
            }
        };
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
    }
    if ty != "ExternalName" {
        if spec["ipFamilies"].is_null() {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec["ipFamilyPolicy"].is_null() {
            spec["ipFamilyPolicy"] = json!("SingleStack");
        }
        if spec["internalTrafficPolicy"].is_null() {
            spec["internalTrafficPolicy"] = json!("Cluster");
        }
    }
    let wants_node_ports = matches!(ty.as_str(), "NodePort" | "LoadBalancer");
    if wants_node_ports && spec["externalTrafficPolicy"].is_null() {
        spec["externalTrafficPolicy"] = json!("Cluster");
    }
    // The old Service's NodePorts proper (its health check port is not one to keep).
    let old_check_port = old.and_then(|o| o["spec"]["healthCheckNodePort"].as_u64());
    let old_ports: Vec<u16> = old
        .map(node_ports)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| Some(u64::from(*p)) != old_check_port)
        .collect();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if !wants_node_ports {
                p.as_object_mut().map(|m| m.remove("nodePort"));
                continue;
            }
            let asked = p["nodePort"].as_u64().and_then(|n| u16::try_from(n).ok());
            match asked {
                Some(n) if old_ports.contains(&n) => {}
                other => {
                    let n = claim_port(cx, name, other).await?;
                    claims.push(format!("{PORT_PREFIX}{n}"));
                    p["nodePort"] = json!(n);
                }
            }
        }
    }
    // A load balancer with externalTrafficPolicy Local gets a health check port from the
    // NodePort range (the service proxy answers it with the node's endpoint count);
    // any other Service has none.
    let local_lb = ty == "LoadBalancer" && spec["externalTrafficPolicy"] == "Local";
    let old_check = old
        .and_then(|o| o["spec"]["healthCheckNodePort"].as_u64())
        .and_then(|n| u16::try_from(n).ok());
    if local_lb {
        let asked = spec["healthCheckNodePort"]
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0);
        let port = match (asked, old_check) {
            (Some(a), Some(o)) if a == o => a,
            (None, Some(o)) => o,
            (asked, _) => {
                let n = claim_port_for(cx, name, "spec.healthCheckNodePort", asked).await?;
                claims.push(format!("{PORT_PREFIX}{n}"));
                n
            }
        };
        spec["healthCheckNodePort"] = json!(port);
    } else if let Some(s) = spec.as_object_mut() {
        s.remove("healthCheckNodePort");
    }
    Ok(())
}

async fn release_all(cx: &dyn Context, claims: &[String]) {
    for c in claims {
        release(cx, c.clone()).await;
    }
}

/// Releases what a Service held that `new` no longer holds (`new` = None: it is gone).
async fn release_service(cx: &dyn Context, old: &Value, new: Option<&Value>) {
    let kept_ports = new.map(node_ports).unwrap_or_default();
    for p in node_ports(old) {
        if !kept_ports.contains(&p) {
            release(cx, format!("{PORT_PREFIX}{p}")).await;
        }
    }
    if new.is_none()
        && let Some(ip) = old["spec"]["clusterIP"]
            .as_str()
            .filter(|ip| ip.parse::<Ipv4Addr>().is_ok())
    {
        release(cx, format!("{IP_PREFIX}{ip}")).await;
    }
}

/// The ports of the NodePort range a Service holds: its NodePorts and health check port.
fn node_ports(svc: &Value) -> Vec<u16> {
    svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["nodePort"])
        .chain([&svc["spec"]["healthCheckNodePort"]])
        .filter_map(|n| n.as_u64().and_then(|n| u16::try_from(n).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k1s_store::Store;
    use k1s_store::redb::{RedbConfig, RedbStore};

    use super::*;

    /// A context over a real store, on a /30 of service addresses (two to hand out).
    struct Cx {
        _dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        net: ServiceNetwork,
    }

    #[async_trait::async_trait]
    impl Context for Cx {
        fn store(&self) -> &dyn Store {
            &*self.store
        }
        fn service_network(&self) -> ServiceNetwork {
            self.net
        }
        async fn refresh_custom_resources(&self) -> Result<(), ApiError> {
            Ok(())
        }
    }

    fn cx() -> Cx {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap();
        Cx {
            _dir: dir,
            store: Arc::new(store),
            net: ServiceNetwork::parse("10.0.0.0/29", "30000-30001").unwrap(),
        }
    }

    fn svc(name: &str, ty: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"type": ty, "ports": [{"port": 80}]}})
    }

    async fn held(cx: &Cx, prefix: &str) -> usize {
        let req = k1s_store::ListRequest {
            prefix: prefix.into(),
            ..Default::default()
        };
        cx.store.list(req).await.unwrap().kvs.len()
    }

    #[tokio::test]
    async fn a_failed_write_gives_back_what_it_took() {
        let cx = cx();
        let mut a = svc("a", "NodePort");
        let claims = Allocations.begin(&cx, None, &mut a).await.unwrap();
        assert!(
            a["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .starts_with("10.0.0.")
        );
        assert!(a["spec"]["ports"][0]["nodePort"].as_u64().is_some());
        assert_eq!(
            (held(&cx, IP_PREFIX).await, held(&cx, PORT_PREFIX).await),
            (1, 1)
        );
        Allocations.finish(&cx, claims, None, Outcome::Failed).await;
        assert_eq!(
            (held(&cx, IP_PREFIX).await, held(&cx, PORT_PREFIX).await),
            (0, 0)
        );
    }

    #[tokio::test]
    async fn an_update_keeps_its_address_and_releases_dropped_ports() {
        let cx = cx();
        let mut old = svc("a", "NodePort");
        let claims = Allocations.begin(&cx, None, &mut old).await.unwrap();
        Allocations
            .finish(&cx, claims, None, Outcome::Stored(&old))
            .await;
        // To ClusterIP: the NodePort goes once the update is stored, the address stays.
        let mut new = svc("a", "ClusterIP");
        let claims = Allocations.begin(&cx, Some(&old), &mut new).await.unwrap();
        assert_eq!(new["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(held(&cx, PORT_PREFIX).await, 1);
        Allocations
            .finish(&cx, claims, Some(&old), Outcome::Stored(&new))
            .await;
        assert_eq!(
            (held(&cx, IP_PREFIX).await, held(&cx, PORT_PREFIX).await),
            (1, 0)
        );
        // A changed address is refused; deleting the Service frees it.
        let mut moved = new.clone();
        let other = if new["spec"]["clusterIP"] == "10.0.0.6" {
            "10.0.0.5"
        } else {
            "10.0.0.6"
        };
        moved["spec"]["clusterIP"] = json!(other);
        let e = Allocations
            .begin(&cx, Some(&new), &mut moved)
            .await
            .unwrap_err();
        assert_eq!(e.code, 422);
        Allocations.after_delete(&cx, &new).await;
        assert_eq!(held(&cx, IP_PREFIX).await, 0);
    }

    #[tokio::test]
    async fn a_full_range_is_an_error_that_leaves_nothing_taken() {
        let cx = cx();
        // Two NodePorts in the range: a third Service finds none, and its address is given
        // back.
        for name in ["a", "b"] {
            let mut s = svc(name, "NodePort");
            Allocations.begin(&cx, None, &mut s).await.unwrap();
        }
        let mut c = svc("c", "NodePort");
        let e = Allocations.begin(&cx, None, &mut c).await.unwrap_err();
        assert_eq!(e.code, 500, "{}", e.message);
        assert_eq!(
            (held(&cx, IP_PREFIX).await, held(&cx, PORT_PREFIX).await),
            (2, 2)
        );
    }

    #[test]
    fn parses_flags() {
        let n = ServiceNetwork::parse("10.96.3.4/12", "30000-32767").unwrap();
        assert_eq!(n.base, Ipv4Addr::new(10, 96, 0, 0));
        assert_eq!(n.first(), Ipv4Addr::new(10, 96, 0, 1));
        assert!(n.contains(Ipv4Addr::new(10, 111, 255, 1)));
        assert!(!n.contains(Ipv4Addr::new(10, 112, 0, 1)));
        let cases = [
            (
                ("fd00::/64", "1-2"),
                NetworkError::NotIpv4("fd00::/64".into()),
                "\"fd00::/64\": only IPv4 service CIDRs are supported",
            ),
            (
                ("10.0.0.0/16", "5-1"),
                NetworkError::PortRange("5-1".into()),
                "\"5-1\" is not a port range such as 30000-32767",
            ),
            (
                ("10.0.0.0/31", "1-2"),
                NetworkError::Prefix("10.0.0.0/31".into()),
                "\"10.0.0.0/31\": the prefix length must be between 8 and 30",
            ),
            (
                ("10.0.0.0", "1-2"),
                NetworkError::NotCidr("10.0.0.0".into()),
                "\"10.0.0.0\" is not a CIDR such as 10.43.0.0/16",
            ),
        ];
        for ((cidr, ports), want, text) in cases {
            let got = ServiceNetwork::parse(cidr, ports).unwrap_err();
            assert_eq!((&got, got.to_string().as_str()), (&want, text));
        }
    }
}

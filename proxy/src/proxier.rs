//! The proxier: Services, EndpointSlices and this node's Pods in, nftables transactions out.
//!
//! Typed informers (the shared runtime's [`reflector`]) feed a `Tracker` that keeps the
//! objects by Service (and the node's pods with hostPorts) and marks which changed. The sync
//! loop waits until every list is complete, programs the whole table once (a full sync, which
//! also replaces whatever an earlier k1s left: a restart neither drops traffic nor duplicates
//! rules), and then, for each burst of changes, rebuilds the fragments of the changed
//! Services and pods only and applies the difference as one transaction (a partial sync).
//! Syncs are at least `min_sync_interval` apart, so a burst of changes is coalesced into one
//! transaction. A failed transaction
//! makes the next sync a full one, after a back-off.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k1s_api::client::Client;
use k1s_runtime::backoff::Backoff;
use k1s_runtime::reflector::{self, Change};
use k1s_runtime::watcher;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::conntrack::{Conntrack, Flush};
use crate::healthcheck::{self, HealthServer};
use crate::model::{self, Endpoint, Protocol, SERVICE_NAME_LABEL, ServicePort, Targets};
use crate::nft::ruleset::{Ruleset, Table, Tx};
use crate::nft::{Nft, NftError};
use crate::rules::{self, RulesConfig};

/// The proxy's table: `ip k1s-proxy`.
pub const TABLE: &str = "k1s-proxy";

/// How the proxier runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// This node's name (endpoints on it are local).
    pub node_name: String,
    /// The nftables table (`k1s-proxy`; tests give each proxy its own).
    pub table: String,
    pub rules: RulesConfig,
    /// The least time between two syncs (bursts of changes are coalesced).
    pub min_sync_interval: Duration,
    /// Where `healthCheckNodePort`s are served (`0.0.0.0`); `None`: not served.
    pub health_bind: Option<IpAddr>,
}

impl ProxyConfig {
    pub fn new(node_name: &str, rules: RulesConfig) -> Self {
        Self {
            node_name: node_name.to_string(),
            table: TABLE.to_string(),
            rules,
            min_sync_interval: Duration::from_millis(50),
            health_bind: None,
        }
    }
}

/// An object's namespace and name.
type Name = (String, String);

/// What a fragment of the table belongs to: a Service (its ports) or a Pod (its hostPorts).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key {
    Service(Name),
    Pod(Name),
}

/// What a fragment is built from.
enum Inputs {
    /// The Service and its EndpointSlices by name.
    Service(
        Option<Arc<Service>>,
        Option<BTreeMap<String, Arc<EndpointSlice>>>,
    ),
    Pod(Option<Arc<Pod>>),
}

/// The objects by Service (and this node's pods), and which changed since the last sync.
#[derive(Default)]
struct Tracker {
    services: HashMap<Name, Arc<Service>>,
    /// EndpointSlices by Service, then by slice name.
    slices: HashMap<Name, BTreeMap<String, Arc<EndpointSlice>>>,
    /// The Service each slice was filed under (a slice's label can change).
    slice_owner: HashMap<Name, Name>,
    /// This node's pods that have hostPorts.
    pods: HashMap<Name, Arc<Pod>>,
    dirty: BTreeSet<Key>,
    services_synced: bool,
    slices_synced: bool,
    pods_synced: bool,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Name {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl Tracker {
    fn on_service(&mut self, c: Change<Service>) {
        let key = key_of(&c.object().metadata);
        match c {
            Change::Added(s) | Change::Modified(s) => {
                self.services.insert(key.clone(), Arc::new(s));
            }
            Change::Deleted(_) => {
                self.services.remove(&key);
            }
        }
        self.dirty.insert(Key::Service(key));
    }

    fn on_pod(&mut self, c: Change<Pod>) {
        let key = key_of(&c.object().metadata);
        let had = self.pods.contains_key(&key);
        match c {
            Change::Added(p) | Change::Modified(p) if !model::host_ports(&p).is_empty() => {
                self.pods.insert(key.clone(), Arc::new(p));
            }
            _ => {
                if !had {
                    return;
                }
                self.pods.remove(&key);
            }
        }
        self.dirty.insert(Key::Pod(key));
    }

    fn on_slice(&mut self, c: Change<EndpointSlice>) {
        let slice_key = key_of(&c.object().metadata);
        let owner = c
            .object()
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .map(|svc| (slice_key.0.clone(), svc.clone()));
        if let Some(old) = self.slice_owner.remove(&slice_key) {
            if let Some(m) = self.slices.get_mut(&old) {
                m.remove(&slice_key.1);
                if m.is_empty() {
                    self.slices.remove(&old);
                }
            }
            self.dirty.insert(Key::Service(old));
        }
        let (Change::Added(s) | Change::Modified(s)) = c else {
            return;
        };
        if let Some(owner) = owner {
            self.slices
                .entry(owner.clone())
                .or_default()
                .insert(slice_key.1.clone(), Arc::new(s));
            self.slice_owner.insert(slice_key, owner.clone());
            self.dirty.insert(Key::Service(owner));
        }
    }
}

/// One Service's part of the table, and what its UDP ports send where (for conntrack).
#[derive(Default, Clone)]
struct Applied {
    rules: Ruleset,
    /// For each UDP port: its addresses (ClusterIPs, external addresses), NodePort and the
    /// endpoints it dispatches to.
    udp: Vec<UdpPort>,
    /// The health check port and what it reports (externalTrafficPolicy Local load balancers).
    health: Option<(u16, healthcheck::Entry)>,
    /// The endpoints its rules DNAT to (each an element of the shared hairpin set).
    hairpin: BTreeSet<Ipv4Addr>,
}

#[derive(Clone, PartialEq, Eq)]
struct UdpPort {
    id: String,
    vips: Vec<Ipv4Addr>,
    node_port: Option<u16>,
    endpoints: BTreeSet<Ipv4Addr>,
}

/// A Service's fragment as of now.
fn fragment(
    svc: Option<&Service>,
    slices: Option<&BTreeMap<String, Arc<EndpointSlice>>>,
    cfg: &ProxyConfig,
) -> Applied {
    let mut out = Applied::default();
    let Some(svc) = svc else {
        return out;
    };
    let eps = model::endpoints(
        slices.into_iter().flat_map(|m| m.values().map(|s| &**s)),
        &cfg.node_name,
    );
    for port in model::service_ports(svc) {
        let all: Vec<Endpoint> = eps
            .get(&(port.id.port.clone(), port.id.protocol))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let targets = Targets::of(&all);
        out.rules
            .merge(&rules::service_port(&port, &targets, &cfg.rules));
        out.hairpin.extend(targets.hairpin_addresses());
        if port.id.protocol == Protocol::Udp {
            out.udp.push(udp_port(&port, &targets));
        }
        if let Some(hc) = port.health_check_node_port.filter(|_| port.external_local) {
            let n = targets.local.len();
            let entry = out.health.get_or_insert_with(|| {
                (
                    hc,
                    healthcheck::Entry {
                        namespace: port.id.namespace.clone(),
                        name: port.id.name.clone(),
                        local_endpoints: 0,
                    },
                )
            });
            entry.1.local_endpoints = entry.1.local_endpoints.max(n);
        }
    }
    out
}

/// A pod's hostPort fragment as of now.
fn pod_fragment(pod: Option<&Pod>) -> Applied {
    let mut out = Applied::default();
    for hp in pod.map(model::host_ports).unwrap_or_default() {
        out.rules.merge(&rules::host_port(&hp));
    }
    out
}

fn udp_port(port: &ServicePort, targets: &Targets) -> UdpPort {
    UdpPort {
        id: port.id.to_string(),
        vips: port
            .cluster_ips
            .iter()
            .chain(&port.external_ips)
            .copied()
            .collect(),
        node_port: port.node_port,
        endpoints: targets.cluster.iter().map(|e| e.ip).collect(),
    }
}

/// The conntrack deletions a change of a Service's UDP ports calls for.
fn stale_flows(old: &[UdpPort], new: &[UdpPort]) -> BTreeSet<Flush> {
    let mut out = BTreeSet::new();
    for o in old {
        let n = new.iter().find(|n| n.id == o.id);
        let kept: BTreeSet<Ipv4Addr> = n.map(|n| n.endpoints.clone()).unwrap_or_default();
        for gone in o.endpoints.difference(&kept) {
            for vip in &o.vips {
                out.insert(Flush::Nat {
                    vip: *vip,
                    endpoint: *gone,
                });
            }
            if let Some(np) = o.node_port {
                out.insert(Flush::NodePortNat {
                    node_port: np,
                    endpoint: *gone,
                });
            }
        }
    }
    for n in new {
        let had = old
            .iter()
            .find(|o| o.id == n.id)
            .is_some_and(|o| !o.endpoints.is_empty());
        if !had && !n.endpoints.is_empty() {
            for vip in &n.vips {
                out.insert(Flush::Address { vip: *vip });
            }
        }
    }
    out
}

/// The proxier's state between syncs.
pub struct Proxier {
    cfg: ProxyConfig,
    nft: Arc<dyn Nft>,
    conntrack: Arc<dyn Conntrack>,
    tracker: Arc<Mutex<Tracker>>,
    wake: Arc<Notify>,
    /// What the kernel holds, by Service (valid while `need_full` is false).
    applied: HashMap<Key, Applied>,
    /// How many Services DNAT to each endpoint address (its hairpin element is in the kernel
    /// while the count is above zero).
    hairpin_refs: HashMap<Ipv4Addr, usize>,
    need_full: bool,
    /// The health check listeners (set by [`Proxier::run`] when configured).
    health: Option<HealthServer>,
    /// Durations of recent syncs (for the benchmark and the metrics).
    pub last_sync: Option<SyncReport>,
}

/// What one sync did.
#[derive(Debug, Clone, Copy)]
pub struct SyncReport {
    pub full: bool,
    /// Fragments in the table: Services, and pods with hostPorts.
    pub fragments: usize,
    pub took: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Proxier {
    pub fn new(cfg: ProxyConfig, nft: Arc<dyn Nft>, conntrack: Arc<dyn Conntrack>) -> Self {
        Self {
            cfg,
            nft,
            conntrack,
            tracker: Arc::default(),
            wake: Arc::new(Notify::new()),
            applied: HashMap::new(),
            hairpin_refs: HashMap::new(),
            need_full: true,
            health: None,
            last_sync: None,
        }
    }

    fn table(&self) -> Table {
        Table {
            family: "ip",
            name: self.cfg.table.clone(),
        }
    }

    /// Feeds a Service change (the informer's callback; also used by tests and the bench).
    pub fn on_service(&self, c: Change<Service>) {
        lock(&self.tracker).on_service(c);
        self.wake.notify_one();
    }

    /// Feeds an EndpointSlice change.
    pub fn on_slice(&self, c: Change<EndpointSlice>) {
        lock(&self.tracker).on_slice(c);
        self.wake.notify_one();
    }

    /// Marks every list complete (tests and the bench, which feed changes themselves).
    pub fn mark_synced(&self) {
        let mut t = lock(&self.tracker);
        t.services_synced = true;
        t.slices_synced = true;
        t.pods_synced = true;
        drop(t);
        self.wake.notify_one();
    }

    fn ready(&self) -> bool {
        let t = lock(&self.tracker);
        t.services_synced && t.slices_synced && t.pods_synced
    }

    /// Programs what changed since the last sync (everything, after a start or an error).
    pub async fn sync(&mut self) -> Result<SyncReport, NftError> {
        let started = Instant::now();
        let full = self.need_full;
        let (dirty, inputs) = {
            let mut t = lock(&self.tracker);
            let dirty: Vec<Key> = if full {
                t.dirty.clear();
                t.services
                    .keys()
                    .cloned()
                    .map(Key::Service)
                    .chain(t.pods.keys().cloned().map(Key::Pod))
                    .chain(self.applied.keys().cloned())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect()
            } else {
                std::mem::take(&mut t.dirty).into_iter().collect()
            };
            let inputs: Vec<Inputs> = dirty
                .iter()
                .map(|k| match k {
                    Key::Service(n) => {
                        Inputs::Service(t.services.get(n).cloned(), t.slices.get(n).cloned())
                    }
                    Key::Pod(n) => Inputs::Pod(t.pods.get(n).cloned()),
                })
                .collect();
            (dirty, inputs)
        };
        let fresh: Vec<Applied> = inputs
            .iter()
            .map(|i| match i {
                Inputs::Service(s, sl) => fragment(s.as_deref(), sl.as_ref(), &self.cfg),
                Inputs::Pod(p) => pod_fragment(p.as_deref()),
            })
            .collect();
        let table = self.table();
        // The hairpin set's references: recounted on a full sync, changed by the difference
        // of each rebuilt fragment otherwise.
        let mut refs_delta: HashMap<Ipv4Addr, isize> = HashMap::new();
        for (k, f) in dirty.iter().zip(&fresh) {
            let old = self.applied.get(k).map(|a| &a.hairpin);
            for ip in &f.hairpin {
                if full || !old.is_some_and(|o| o.contains(ip)) {
                    *refs_delta.entry(*ip).or_default() += 1;
                }
            }
            for ip in old.into_iter().flatten() {
                if !full && !f.hairpin.contains(ip) {
                    *refs_delta.entry(*ip).or_default() -= 1;
                }
            }
        }
        // A full sync starts the count over.
        let refs_before = |ip: &Ipv4Addr| {
            if full {
                0
            } else {
                self.hairpin_refs.get(ip).copied().unwrap_or(0)
            }
        };
        let tx = if full {
            let base = rules::base(&self.cfg.rules);
            let mut hairpin = Ruleset::default();
            for ip in refs_delta.keys() {
                hairpin.element(rules::HAIRPIN, format!("{ip} . {ip}"), "");
            }
            let parts: Vec<&Ruleset> = std::iter::once(&base)
                .chain(fresh.iter().map(|f| &f.rules))
                .chain(std::iter::once(&hairpin))
                .collect();
            Some(Tx::full_of(&table, "k1s service proxy", &parts))
        } else {
            let mut tx = Tx::default();
            let empty = Applied::default();
            let mut ok = true;
            for (k, f) in dirty.iter().zip(&fresh) {
                let old = self.applied.get(k).unwrap_or(&empty);
                match Tx::diff(&table, &old.rules, &f.rules) {
                    Some(t) => tx.extend(t),
                    None => ok = false,
                }
            }
            for (ip, d) in &refs_delta {
                let before = refs_before(ip);
                let after = before.saturating_add_signed(*d);
                if before == 0 && after > 0 {
                    tx.add_element(&table, rules::HAIRPIN, &format!("{ip} . {ip}"));
                } else if before > 0 && after == 0 {
                    tx.delete_element(&table, rules::HAIRPIN, &format!("{ip} . {ip}"));
                }
            }
            ok.then_some(tx)
        };
        let Some(tx) = tx else {
            // A declaration changed in place (an affinity timeout): rebuild everything.
            self.need_full = true;
            lock(&self.tracker).dirty.extend(dirty);
            return Box::pin(self.sync()).await;
        };
        if !tx.is_empty()
            && let Err(e) = self.nft.apply(&tx.render()).await
        {
            self.need_full = true;
            lock(&self.tracker).dirty.extend(dirty);
            return Err(e);
        }
        if full {
            self.hairpin_refs.clear();
        }
        for (ip, d) in refs_delta {
            let n = self
                .hairpin_refs
                .get(&ip)
                .copied()
                .unwrap_or(0)
                .saturating_add_signed(d);
            if n == 0 {
                self.hairpin_refs.remove(&ip);
            } else {
                self.hairpin_refs.insert(ip, n);
            }
        }
        let mut flows = BTreeSet::new();
        for (k, f) in dirty.into_iter().zip(fresh) {
            // A full sync after a start knows nothing of the flows before it: it flushes
            // nothing rather than every UDP flow.
            if let Some(old) = self.applied.get(&k) {
                flows.extend(stale_flows(&old.udp, &f.udp));
            } else if !full {
                flows.extend(stale_flows(&[], &f.udp));
            }
            if f.rules.is_empty() {
                self.applied.remove(&k);
            } else {
                self.applied.insert(k, f);
            }
        }
        if full {
            // After a full sync what was applied before it is gone.
            let t = lock(&self.tracker);
            self.applied.retain(|k, _| match k {
                Key::Service(n) => t.services.contains_key(n),
                Key::Pod(n) => t.pods.contains_key(n),
            });
        }
        for f in &flows {
            self.conntrack.flush(f).await;
        }
        if let Some(h) = &self.health {
            let want = self
                .applied
                .values()
                .filter_map(|a| a.health.clone())
                .collect();
            h.update(want).await;
        }
        self.need_full = false;
        let report = SyncReport {
            full,
            fragments: self.applied.len(),
            took: started.elapsed(),
        };
        self.last_sync = Some(report);
        Ok(report)
    }

    /// Watches Services and EndpointSlices on `client` and keeps the table in step until
    /// `cancel`. The table is left in place on return, so traffic keeps flowing while k1s
    /// restarts; [`remove_table`] takes it away.
    pub async fn run(mut self, client: Arc<dyn Client>, cancel: CancellationToken) {
        let tasks = TaskTracker::new();
        self.health = self
            .cfg
            .health_bind
            .map(|ip| HealthServer::new(ip, cancel.clone()));
        let all = watcher::Config::default;
        let (t, w) = (&self.tracker, &self.wake);
        reflector::feed::<Service, _>(
            &tasks,
            &client,
            all(),
            t,
            w,
            Tracker::on_service,
            |t| t.services_synced = true,
            &cancel,
        );
        reflector::feed::<EndpointSlice, _>(
            &tasks,
            &client,
            all(),
            t,
            w,
            Tracker::on_slice,
            |t| t.slices_synced = true,
            &cancel,
        );
        // hostPorts: the pods bound to this node (the only ones a node may list).
        reflector::feed::<Pod, _>(
            &tasks,
            &client,
            all().fields(&format!("spec.nodeName={}", self.cfg.node_name)),
            t,
            w,
            Tracker::on_pod,
            |t| t.pods_synced = true,
            &cancel,
        );
        tasks.close();
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut last: Option<Instant> = None;
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = self.wake.notified() => {}
            }
            if !self.ready() {
                continue;
            }
            // Coalesce: at most one sync per interval.
            if let Some(l) = last {
                let next = l + self.cfg.min_sync_interval;
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep_until(next.into()) => {}
                }
            }
            last = Some(Instant::now());
            match self.sync().await {
                Ok(r) => {
                    backoff.reset();
                    if r.full {
                        tracing::info!(fragments = r.fragments, took_ms = r.took.as_millis() as u64, table = %self.cfg.table, "service proxy: programmed the nftables table");
                    } else {
                        tracing::debug!(
                            fragments = r.fragments,
                            took_us = r.took.as_micros() as u64,
                            "service proxy: partial sync"
                        );
                    }
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::error!(error = %e, retry_in_ms = delay.as_millis() as u64, "service proxy: programming nftables failed");
                    tokio::select! {
                        () = cancel.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                    self.wake.notify_one();
                }
            }
        }
        tasks.wait().await;
        if let Some(h) = &self.health {
            h.wait().await;
        }
    }
}

/// Deletes the proxy's table (for `--disable-kube-proxy`: a proxy that no longer runs must
/// not leave rules behind).
pub async fn remove_table(nft: &dyn Nft, table: &str) -> Result<(), NftError> {
    nft.delete_table("ip", table).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conntrack::FakeConntrack;
    use crate::nft::FakeNft;
    use serde_json::json;

    fn cfg() -> ProxyConfig {
        ProxyConfig::new(
            "n1",
            RulesConfig {
                service_cidr: "10.43.0.0/16".into(),
                cluster_cidr: "10.42.0.0/16".into(),
                localhost_nodeports: true,
            },
        )
    }

    fn service(name: &str, ip: &str, proto: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterIP": ip, "ports": [{"port": 53, "protocol": proto}]}
        }))
        .unwrap()
    }

    fn slice(svc: &str, ips: &[&str], proto: &str) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{svc}-x"), "namespace": "ns",
                         "labels": {SERVICE_NAME_LABEL: svc}},
            "addressType": "IPv4",
            "ports": [{"port": 5353, "protocol": proto}],
            "endpoints": ips.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>()
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn full_then_partial_syncs_and_stale_udp_flows() {
        let nft = Arc::new(FakeNft::default());
        let ct = Arc::new(FakeConntrack::default());
        let mut p = Proxier::new(cfg(), nft.clone(), ct.clone());
        p.on_service(Change::Added(service("dns", "10.43.0.10", "UDP")));
        p.on_service(Change::Added(service("web", "10.43.0.11", "TCP")));
        p.mark_synced();
        let r = p.sync().await.unwrap();
        assert!(r.full);
        let txs = nft.transactions();
        assert!(txs[0].starts_with("add table ip k1s-proxy\ndelete table ip k1s-proxy\n"));
        assert!(txs[0].contains("10.43.0.11 . tcp . 53 : goto reject-chain"));
        assert!(ct.flushed.lock().unwrap().is_empty());
        // The UDP Service gets endpoints: the rejections its clients' flows cached go.
        p.on_slice(Change::Added(slice(
            "dns",
            &["10.42.0.5", "10.42.0.6"],
            "UDP",
        )));
        assert!(!p.sync().await.unwrap().full);
        assert_eq!(
            *ct.flushed.lock().unwrap(),
            [Flush::Address {
                vip: "10.43.0.10".parse().unwrap()
            }]
        );
        ct.flushed.lock().unwrap().clear();

        // One endpoint goes: only that Service's chains change, and its flows are deleted.
        p.on_slice(Change::Modified(slice("dns", &["10.42.0.5"], "UDP")));
        let r = p.sync().await.unwrap();
        assert!(!r.full);
        let tx = nft.transactions().pop().unwrap();
        assert!(!tx.contains("table"), "{tx}");
        assert!(!tx.contains("web"), "{tx}");
        assert!(tx.contains("flush chain ip k1s-proxy svc-"), "{tx}");
        assert!(!tx.contains("10.42.0.6:5353"), "{tx}");
        // The endpoint that went is no longer a hairpin target; the other still is.
        assert!(tx.contains("delete element ip k1s-proxy hairpin { 10.42.0.6 . 10.42.0.6 }"));
        assert_eq!(p.hairpin_refs.len(), 1);
        assert_eq!(
            *ct.flushed.lock().unwrap(),
            [Flush::Nat {
                vip: "10.43.0.10".parse().unwrap(),
                endpoint: "10.42.0.6".parse().unwrap()
            }]
        );

        // Nothing changed: nothing applied.
        let before = nft.transactions().len();
        p.sync().await.unwrap();
        assert_eq!(nft.transactions().len(), before);

        // A Service deleted: its chains and elements go.
        p.on_service(Change::Deleted(service("dns", "10.43.0.10", "UDP")));
        p.sync().await.unwrap();
        let tx = nft.transactions().pop().unwrap();
        assert!(tx.contains("delete element ip k1s-proxy service-ips { 10.43.0.10 . udp . 53 }"));
        assert!(tx.contains("delete element ip k1s-proxy cluster-ips { 10.43.0.10 }"));
        assert!(p.applied.len() == 1);
    }

    #[tokio::test]
    async fn a_failed_transaction_makes_the_next_sync_full() {
        let nft = Arc::new(FakeNft::default());
        let mut p = Proxier::new(cfg(), nft.clone(), Arc::new(FakeConntrack::default()));
        p.on_service(Change::Added(service("web", "10.43.0.11", "TCP")));
        p.mark_synced();
        p.sync().await.unwrap();
        *nft.fail.lock().unwrap() = Some("boom".into());
        p.on_slice(Change::Added(slice("web", &["10.42.0.5"], "TCP")));
        assert!(p.sync().await.is_err());
        *nft.fail.lock().unwrap() = None;
        let r = p.sync().await.unwrap();
        assert!(r.full);
        let tx = nft.transactions().pop().unwrap();
        assert!(tx.contains(": 10.42.0.5 . 5353 }"), "{tx}");
    }

    #[tokio::test]
    async fn a_hairpin_element_shared_by_two_services_stays_while_one_uses_it() {
        let nft = Arc::new(FakeNft::default());
        let mut p = Proxier::new(cfg(), nft.clone(), Arc::new(FakeConntrack::default()));
        for (name, ip) in [("a", "10.43.0.11"), ("b", "10.43.0.12")] {
            p.on_service(Change::Added(service(name, ip, "TCP")));
            p.on_slice(Change::Added(slice(name, &["10.42.0.5"], "TCP")));
        }
        p.mark_synced();
        p.sync().await.unwrap();
        let full = nft.transactions().pop().unwrap();
        assert_eq!(full.matches("hairpin { 10.42.0.5 . 10.42.0.5 }").count(), 1);
        p.on_service(Change::Deleted(service("a", "10.43.0.11", "TCP")));
        p.sync().await.unwrap();
        assert!(!nft.transactions().pop().unwrap().contains("hairpin"));
        p.on_service(Change::Deleted(service("b", "10.43.0.12", "TCP")));
        p.sync().await.unwrap();
        assert!(
            nft.transactions()
                .pop()
                .unwrap()
                .contains("delete element ip k1s-proxy hairpin { 10.42.0.5 . 10.42.0.5 }")
        );
        assert!(p.hairpin_refs.is_empty());
    }

    #[test]
    fn a_slice_relabelled_moves_between_services() {
        let mut t = Tracker::default();
        t.on_slice(Change::Added(slice("a", &["10.42.0.5"], "TCP")));
        let mut moved = slice("a", &["10.42.0.5"], "TCP");
        moved
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(SERVICE_NAME_LABEL.into(), "b".into());
        t.dirty.clear();
        t.on_slice(Change::Modified(moved));
        assert!(!t.slices.contains_key(&("ns".to_string(), "a".to_string())));
        assert_eq!(t.slices[&("ns".into(), "b".into())].len(), 1);
        assert_eq!(t.dirty.len(), 2);
    }
}

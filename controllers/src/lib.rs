//! The controller manager: the controllers of kube-controller-manager, each on the shared
//! watch → cache → reconcile runtime of the `k1s-runtime` crate (issue #6).
//!
//! - [`catalog`]: the caller-supplied list of served resources (the client has no discovery).
//! - [`namespace`]: empties deleted namespaces, then finalizes them.
//! - [`gc`]: the garbage collector (ownerReferences; Background, Foreground, Orphan).
//! - [`serviceaccount`]: a `default` ServiceAccount in every namespace.
//! - [`root_ca`]: the `kube-root-ca.crt` ConfigMap in every namespace.
//! - [`replicaset`]: ReplicaSets and ReplicationControllers (slow start, expectations,
//!   adoption, status).
//! - [`deployment`]: Deployments (rolling update, Recreate, revisions, status).
//! - [`statefulset`]: StatefulSets (ordinals, claims, ordered/parallel, rolling update).
//! - [`daemonset`]: DaemonSets (one pod per eligible node, rolling update).
//! - [`history`]: ControllerRevisions of StatefulSets and DaemonSets.
//! - [`job`]: Jobs (completions, parallelism, Indexed, backoff, failure policy, tracking).
//! - [`cronjob`]: CronJobs (schedules, time zones, concurrency, history).
//! - [`ttl_after_finished`]: deletes finished Jobs after `ttlSecondsAfterFinished`.
//! - [`expectations`]: what a controller has asked for and not yet seen.
//! - [`node_lifecycle`]: node health from Leases, NotReady/unreachable taints, taint eviction.
//! - [`podgc`]: terminated, orphaned and unscheduled terminating pods.
//! - [`endpoints`], [`endpointslice`]: a selector Service's Endpoints and EndpointSlices.
//! - [`cluster_dns`]: the `kube-dns` Service's endpoints, one per node's DNS server.
//! - [`node_ipam`]: a pod CIDR for every Node from `--cluster-cidr` (the range allocator).
//! - [`servicelb`]: node addresses as `type: LoadBalancer` ingress (k3s's ServiceLB).
//! - [`disruption`]: PodDisruptionBudget status.
//! - [`resourcequota`]: ResourceQuota `status.hard` and `status.used` (usage back down after
//!   deletes; admission charges it up).
//! - [`volume_protection`]: the pvc-protection and pv-protection finalizers.
//! - [`pv`]: the PersistentVolume controller (binding, phases, reclaim).
//! - [`provisioner`]: dynamic provisioning and deletion through registered provisioners.
//! - [`resizer`], [`snapshot`], [`attach`]: expansion, snapshots and attaching through the
//!   same registered drivers; [`csi_driver`] is such a driver over a CSI plugin's socket.
//! - [`volume_driver`]: what those controllers share: the driver trait, its requests and
//!   answers, and the set of registered drivers.
//! - [`ephemeral`]: the claims of generic ephemeral volumes.
//!
//! [`run_all`] runs them all; [`run_elected`] runs them while holding the
//! `kube-system/kube-controller-manager` Lease.

pub mod attach;
pub mod catalog;
pub mod cluster_dns;
pub mod cronjob;
pub mod csi_driver;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod ephemeral;
pub mod expectations;
pub mod gc;
pub mod history;
pub mod job;
pub mod namespace;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod owned_pods;
pub mod podgc;
pub mod provisioner;
pub mod pv;
pub mod replicaset;
pub mod resizer;
pub mod resourcequota;
pub mod root_ca;
pub mod serviceaccount;
pub mod servicelb;
pub mod snapshot;
pub mod statefulset;
pub mod ttl_after_finished;
pub mod volume_driver;
pub mod volume_protection;

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::Client;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use catalog::{CatalogEntry, ResourceCatalog, StaticCatalog};
use k1s_runtime::clock::{Clock, SystemClock};
pub use k1s_runtime::leader::LeaderError;

/// Settings of the controllers, as `kube-controller-manager`'s flags.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--node-monitor-grace-period`: how long a node may go without renewing its Lease (or
    /// posting status) before it is marked Unknown (40 s).
    pub node_monitor_grace_period: Duration,
    /// `--terminated-pod-gc-threshold`: terminated pods kept before the oldest are deleted
    /// (12500; 0 disables).
    pub terminated_pod_gc_threshold: usize,
    /// The volume provisioners (CSI drivers) registered now; the caller adds and removes them
    /// as plugins come and go (empty by default).
    pub provisioners: provisioner::ProvisionerSet,
    /// Run [`servicelb`] (node addresses as load-balancer ingress); off with
    /// `--disable servicelb`.
    pub servicelb: bool,
    /// Run [`cluster_dns`] (the `kube-dns` Service's endpoints: each node's DNS server); off
    /// with `--disable dns`.
    pub cluster_dns: bool,
    /// Run [`node_ipam`] (a pod CIDR for every Node) with this range, as
    /// `--allocate-node-cidrs` with `--cluster-cidr` and `--node-cidr-mask-size`.
    pub node_ipam: Option<node_ipam::Config>,
    /// What time it is, for every controller that reads it (the system's; tests move a
    /// fake one).
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            node_monitor_grace_period: node_lifecycle::Config::default().grace_period,
            terminated_pod_gc_threshold: podgc::Config::default().terminated_threshold,
            provisioners: provisioner::ProvisionerSet::default(),
            servicelb: true,
            cluster_dns: true,
            node_ipam: None,
            clock: Arc::new(SystemClock),
        }
    }
}

/// Runs every controller until `cancel`; returns once all have stopped.
pub async fn run_all(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    ca_pem: String,
    cancel: CancellationToken,
) {
    run_all_with(client, catalog, ca_pem, Options::default(), cancel).await;
}

/// [`run_all`] with `options`.
pub async fn run_all_with(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    ca_pem: String,
    options: Options,
    cancel: CancellationToken,
) {
    // Dropping this future stops the controllers too.
    let cancel = cancel.child_token();
    let _stop_on_drop = cancel.clone().drop_guard();
    let tracker = TaskTracker::new();
    tracker.spawn(namespace::run(
        client.clone(),
        catalog.clone(),
        cancel.clone(),
    ));
    tracker.spawn(gc::run(client.clone(), catalog.clone(), cancel.clone()));
    tracker.spawn(resourcequota::run(client.clone(), catalog, cancel.clone()));
    tracker.spawn(volume_protection::run_pvc(client.clone(), cancel.clone()));
    tracker.spawn(volume_protection::run_pv(client.clone(), cancel.clone()));
    tracker.spawn(pv::run(client.clone(), cancel.clone()));
    tracker.spawn(provisioner::run(
        client.clone(),
        options.provisioners.clone(),
        cancel.clone(),
    ));
    tracker.spawn(resizer::run(
        client.clone(),
        options.provisioners.clone(),
        cancel.clone(),
    ));
    tracker.spawn(snapshot::run(
        client.clone(),
        options.provisioners.clone(),
        cancel.clone(),
    ));
    tracker.spawn(attach::desired::run(client.clone(), cancel.clone()));
    tracker.spawn(attach::attacher::run(
        client.clone(),
        options.provisioners.clone(),
        cancel.clone(),
    ));
    tracker.spawn(ephemeral::run(client.clone(), cancel.clone()));
    tracker.spawn(serviceaccount::run(client.clone(), cancel.clone()));
    let clock = options.clock.clone();
    tracker.spawn(replicaset::run(
        client.clone(),
        clock.clone(),
        cancel.clone(),
    ));
    tracker.spawn(replicaset::run_replication_controllers(
        client.clone(),
        clock.clone(),
        cancel.clone(),
    ));
    tracker.spawn(deployment::run(
        client.clone(),
        clock.clone(),
        cancel.clone(),
    ));
    tracker.spawn(statefulset::run(
        client.clone(),
        clock.clone(),
        cancel.clone(),
    ));
    tracker.spawn(daemonset::run(
        client.clone(),
        clock.clone(),
        cancel.clone(),
    ));
    tracker.spawn(job::run_with(
        client.clone(),
        job::Options {
            clock: clock.clone(),
            ..Default::default()
        },
        cancel.clone(),
    ));
    tracker.spawn(cronjob::run_with(
        client.clone(),
        cronjob::Options {
            clock: clock.clone(),
            ..Default::default()
        },
        cancel.clone(),
    ));
    tracker.spawn(ttl_after_finished::run_with_clock(
        client.clone(),
        clock.clone(),
        cancel.clone(),
    ));
    tracker.spawn(node_lifecycle::run(
        client.clone(),
        node_lifecycle::Config {
            grace_period: options.node_monitor_grace_period,
            clock: clock.clone(),
            ..Default::default()
        },
        cancel.clone(),
    ));
    tracker.spawn(podgc::run(
        client.clone(),
        podgc::Config {
            terminated_threshold: options.terminated_pod_gc_threshold,
            clock: clock.clone(),
            ..Default::default()
        },
        cancel.clone(),
    ));
    tracker.spawn(endpoints::run(client.clone(), cancel.clone()));
    tracker.spawn(endpointslice::run(client.clone(), cancel.clone()));
    if options.servicelb {
        tracker.spawn(servicelb::run(client.clone(), cancel.clone()));
    }
    if let Some(config) = options.node_ipam {
        tracker.spawn(node_ipam::run(client.clone(), config, cancel.clone()));
    }
    if options.cluster_dns {
        tracker.spawn(cluster_dns::run(client.clone(), cancel.clone()));
    }
    tracker.spawn(disruption::run(client.clone(), clock, cancel.clone()));
    tracker.spawn(root_ca::run(client, ca_pem, cancel.clone()));
    tracker.close();
    tracker.wait().await;
}

/// Runs every controller while this process (`identity`) holds the
/// `kube-system/kube-controller-manager` Lease. Returns `Ok` after `cancel`, or the error
/// that ended leadership (then the caller should stop, as upstream's controller manager
/// exits).
pub async fn run_elected(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    ca_pem: String,
    identity: &str,
    cancel: CancellationToken,
) -> Result<(), LeaderError> {
    run_elected_with(
        client,
        catalog,
        ca_pem,
        identity,
        Options::default(),
        cancel,
    )
    .await
}

/// [`run_elected`] with `options`.
pub async fn run_elected_with(
    client: Arc<dyn Client>,
    catalog: Arc<dyn ResourceCatalog>,
    ca_pem: String,
    identity: &str,
    options: Options,
    cancel: CancellationToken,
) -> Result<(), LeaderError> {
    let config =
        k1s_runtime::leader::Config::new("kube-system", "kube-controller-manager", identity);
    let elector = k1s_runtime::leader::Elector::new(client.clone(), config);
    elector
        .run(cancel, move |term| {
            run_all_with(client, catalog, ca_pem, options, term)
        })
        .await
}

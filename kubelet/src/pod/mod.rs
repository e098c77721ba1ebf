//! Pods on this node, from the feed to the final delete.
//!
//! - [`feed`]: the list/watch of this node's pods and the static pods, one worker per UID.
//! - [`worker`]: one pod's worker; it gathers what its containers do, asks [`plan`] what to do
//!   (upstream's `computePodActions`: starts, CrashLoopBackOff, kills, the phase) and does it.
//! - [`backoff`]: the containers' restart back-off. [`plan`] and [`backoff`] are pure: no I/O,
//!   no clock reads.
//! - [`blocking`]: how the worker runs cgroup and filesystem calls off the async threads.
//! - [`sandbox`]: the pod's directory, namespaces, network and cgroup.
//! - [`status`]: the pod status the worker reports.
//! - [`hooks`]: postStart and preStop handlers.
//! - [`static_pods`]: manifests on disk and their mirror pods.
//! - [`admission`]: the kubelet's admission of a pod (resources, node affinity, host ports).
//!
//! It does not own the container runtime ([`crate::runtime`]), volumes, probes or images: the
//! worker calls them.

pub mod admission;
pub mod backoff;
pub mod blocking;
pub mod feed;
pub mod hooks;
pub mod plan;
pub mod sandbox;
pub mod static_pods;
pub mod status;
pub mod worker;

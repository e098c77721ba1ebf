//! The shared watch → cache → reconcile runtime every component runs on (the kube-runtime of
//! k1s): the controllers, the scheduler's informers, the kubelet's pod feed, the service proxy
//! and the cluster DNS see the cluster only through the `k1s-api` client and this crate.
//!
//! The stages, each in its own module:
//! - [`watcher`]: list (paged) then watch one resource, resuming from the last seen
//!   resourceVersion, relisting on 410 Expired and backing off on errors; a relist is framed by
//!   [`watcher::Event::Init`] / [`watcher::Event::InitDone`].
//! - [`store`]: the cache a watcher feeds (keyed by namespace/name, with optional indexes),
//!   swapped atomically when a relist completes; readable by reconcilers.
//! - [`reflector`]: typed informers: events decoded into a k8s-openapi type as
//!   `Added`/`Modified`/`Deleted` changes (relist diffs included), and a typed cache.
//! - [`queue`]: the work queue (deduplicated keys, one reconcile per key at a time, delayed and
//!   rate-limited requeues).
//! - [`controller`]: the builder that ties watches, stores, the queue and N workers together.
//! - [`leader`]: leader election through a coordination.k8s.io/v1 Lease.
//! - [`backoff`]: exponential backoff with jitter for the watcher and the elector.
//! - [`write`]: patches and status updates where an object gone meanwhile is no error.
//! - [`clock`]: the injectable clock of time-driven components, and `metav1.Time` text.
//!
//! The runtime knows nothing about any particular kind: the untyped stages carry JSON values
//! behind `Arc`, the typed ones any k8s-openapi type.

pub mod backoff;
pub mod clock;
pub mod controller;
pub mod key;
pub mod leader;
pub mod queue;
pub mod reflector;
pub mod store;
pub mod watcher;
pub mod write;

pub use controller::{Action, Controller, Reconcile, Seen};
pub use key::ObjectKey;
pub use store::Store;

#[cfg(test)]
pub(crate) mod testing;

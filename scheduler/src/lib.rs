//! The k1s scheduler: kube-scheduler's framework as a library (issue #5).
//!
//! - [`framework`]: statuses, cycle state, one trait per extension point, node infos and
//!   snapshots, and the [`framework::Framework`] that runs a profile's plugins.
//! - [`plugins`]: the in-tree plugins, one per file; [`plugin_names`]: their names.
//! - [`framework_build`]: a profile's [`framework::Framework`], its plugins instantiated by
//!   name and ordered per extension point.
//! - [`cache`]: nodes, bound pods and assumed pods; a snapshot per cycle.
//! - [`queue`]: active, backoff and unschedulable pods, moved on cluster events.
//! - [`config`]: `KubeSchedulerConfiguration` profiles.
//! - [`scheduler`]: the scheduling and binding cycles, fed by informer events through
//!   [`scheduler::Scheduler`]'s `on_*` methods.
//! - [`informers`]: the watches that feed it (on the shared `k1s-runtime`), and [`informers::run`].

pub mod cache;
pub mod config;
pub mod framework;
pub mod framework_build;
pub mod informers;
pub mod plugin_names;
pub mod plugins;
pub mod queue;
pub mod scheduler;
#[cfg(test)]
pub(crate) mod testing;

pub use config::Config;
pub use scheduler::{Change, Scheduler};

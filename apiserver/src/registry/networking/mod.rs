//! The networking group's kinds with rules (upstream `pkg/registry/networking`).

pub mod network_policy;

//! The node group's kinds with rules (upstream `pkg/registry/node`).

pub mod runtime_class;

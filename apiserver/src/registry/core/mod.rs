//! The core group's kinds with rules of their own (upstream `pkg/registry/core`).

pub mod config_data;
pub mod namespace;
pub mod node;
pub mod persistent_volume;
pub mod pod;
pub mod pod_template;
pub mod replication_controller;
pub mod service;

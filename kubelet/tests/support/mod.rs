//! Helpers shared by the kubelet's integration tests.

pub mod registry;

//! Helpers shared by the kubelet's integration tests.

pub mod csi_fixture;
pub mod registry;

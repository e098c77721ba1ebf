//! The kubelet: node registration, one worker per pod, and the container runtime in process
//! (OCI images, namespaces, cgroups, the pod network), issue #7.
//!
//! Each OS edge sits behind a trait with a real and a fake implementation:
//! [`images::ImageService`], [`cgroups::CgroupManager`], [`network::PodNetwork`],
//! [`runtime::Runtime`].

pub mod cgroups;
pub mod config;
pub mod images;
pub mod network;
pub mod node;
pub mod runtime;
pub mod volumes;

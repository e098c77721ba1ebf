//! A pod's containers as the kubelet walks them: init containers first, in order, then the
//! regular ones ([`all_containers`]), and the key each is recorded under ([`container_key`])
//! in the pod workers' records and the device manager's allocations. Used by the container
//! spec builder ([`crate::container`]), the pod workers ([`crate::pod`]) and the device
//! manager ([`crate::devices`]).

use k8s_openapi::api::core::v1::Container;

/// A pod's containers with whether each is an init container: init containers first, in
/// order, then the regular ones.
pub(crate) fn all_containers(
    spec: &k8s_openapi::api::core::v1::PodSpec,
) -> impl Iterator<Item = (bool, &Container)> {
    spec.init_containers
        .iter()
        .flatten()
        .map(|c| (true, c))
        .chain(spec.containers.iter().map(|c| (false, c)))
}

/// The key of a container in the worker's records (and the device manager's allocations).
pub(crate) fn container_key(init: bool, name: &str) -> String {
    format!("{}/{name}", if init { "init" } else { "main" })
}

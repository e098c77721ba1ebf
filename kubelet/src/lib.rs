//! The kubelet: node registration, the container runtime (namespaces, cgroups, OCI images) and
//! the device and cgroup managers (issue #7).

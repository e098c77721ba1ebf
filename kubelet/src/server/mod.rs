//! What the kubelet's HTTPS port answers ([`port`] serves it): container logs ([`logs`]),
//! exec, attach and port-forward sessions ([`streams`]), and the node API (`/pods`,
//! `/stats/summary`, `/metrics`, [`node_api`]). It reads pods and containers; it never starts
//! or stops them (the pod workers in [`crate::pod`] do).

pub mod logs;
pub mod node_api;
pub mod port;
pub mod streams;

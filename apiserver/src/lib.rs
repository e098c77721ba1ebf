//! The Kubernetes REST API over the `k1s_store::Store` trait (issue #3).
//!
//! Owns HTTP/TLS serving, discovery, the resource handlers and their Status errors. It must not
//! touch the on-disk format: everything goes through the store trait.
//!
//! - [`pki`]: the cluster CA, the serving and admin certificates, the admin kubeconfig.
//! - [`server`]: the HTTPS listener (HTTP/1.1 and h2 by ALPN) and request routing.
//! - [`status`]: `metav1.Status` errors as kube-apiserver writes them.
//! - [`metrics`]: Prometheus metrics (`/metrics`) and the store latency decorator.

pub mod metrics;
pub mod pki;
pub mod server;
pub mod status;

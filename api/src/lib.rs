//! Shared types for k1s components: selectors, the client trait, watch events, quantities.
//! The watch → cache → reconcile runtime built on them is the `k1s-runtime` crate.
//!
//! This crate stays dependency-light (no hyper, no redb) so every component can depend on it;
//! the HTTP client is behind the `http` feature, off by default.
//!
//! - [`client`]: the [`client::Client`] trait (in-process and HTTP), typed [`client::Api`].
//! - [`dns`]: the `kube-dns` Service, Node annotation and EndpointSlice the cluster DNS parts
//!   agree on.
//! - [`events`]: Events recorded by components (with upstream's spam filter).
//! - [`join`]: the CA pin of join tokens.
//! - [`net`]: IPv4 networks (`--cluster-cidr`, `spec.podCIDR`): parse, contain, subnets.
//! - [`quantity`]: exact `resource.Quantity` values and resource lists.
//! - [`quota`]: ResourceQuota usage of objects, shared by admission and the quota controller.
//! - [`resource`]: a pod's requests, limits and QoS class, and extended resource names, as
//!   upstream computes them (typed and over JSON).
//! - [`selector`]: label and field selectors (parse and match), DNS name checks.
//! - [`streams`]: the node streams (exec, attach, logs, port-forward) the API server proxies.
//! - [`time`]: `metav1.Time` and `MicroTime` formatting, RFC 3339 parsing.
//! - [`trimmed`]: typed decoding without `metadata.managedFields` (for informers that never
//!   read them).
//! - [`volume`]: PV ↔ PVC matching shared by the scheduler and the PV controller.
//! - `http_client` (feature `http`): the [`client::Client`] over HTTPS (rustls, pooled h2 or
//!   HTTP/1.1 connections, client-certificate or bearer-token auth), for agents and tools.
//! - `server_pool` (feature `http`): the API servers an HTTP client fails over between.
//! - `kubeconfig` (feature `http`): kubeconfig files resolved into a server URL and TLS
//!   settings.
//! - `tls` (feature `http`): the TLS settings (CA, client identity, bearer token) a client
//!   presents; `http_client` re-exports them.

pub mod client;
pub mod dns;
pub mod events;
#[cfg(feature = "http")]
pub mod http_client;
pub mod join;
#[cfg(feature = "http")]
pub mod kubeconfig;
pub mod net;
pub mod quantity;
pub mod quota;
pub mod resource;
pub mod selector;
#[cfg(feature = "http")]
pub mod server_pool;
pub mod streams;
pub mod time;
#[cfg(feature = "http")]
pub mod tls;
pub mod trimmed;
pub mod volume;

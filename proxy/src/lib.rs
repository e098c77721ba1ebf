//! The service proxy of k1s: what kube-proxy's nftables mode does, in process, on every node
//! (`k1s server` and `k1s agent`).
//!
//! It sees the cluster only through the `k1s-api` client and the shared runtime's typed
//! informers (Services, EndpointSlices), and owns exactly one nftables table (`ip k1s-proxy`),
//! never touching another.
//!
//! - [`model`]: Service ports and their endpoints, decided from the API objects.
//! - [`rules`]: the table as a typed ruleset: the fixed part and one fragment per Service port.
//! - [`nft`]: the typed ruleset, transactions (full and partial), and the `nft` edge (the
//!   shared `k1s-nft` crate, re-exported).
//! - [`proxier`]: informers → change tracker → coalesced syncs, one transaction each.
//! - [`conntrack`]: stale UDP flows deleted when endpoints go.
//! - [`healthcheck`]: the `healthCheckNodePort` listeners of Local load balancers.
//! - [`host`]: the kernel settings the data path needs (checked and set at start).

pub mod conntrack;
pub mod healthcheck;
pub mod host;
pub mod model;
pub mod proxier;
pub mod rules;

pub use k1s_nft as nft;

pub use proxier::{Proxier, ProxyConfig, TABLE, remove_table};
pub use rules::RulesConfig;

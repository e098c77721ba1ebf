//! NetworkPolicy enforcement of k1s, on every node (`k1s server` and `k1s agent`), as k3s
//! embeds kube-router's policy controller: each node isolates its own pods, in one private
//! nftables table (`ip k1s-policy`) it never shares.
//!
//! It sees the cluster only through the `k1s-api` client and the shared runtime's typed
//! informers (Pods, Namespaces, NetworkPolicies), and the kernel only through `k1s-nft`.
//!
//! - [`ranges`]: address sets (pods, `ipBlock` minus `except`) as disjoint ranges.
//! - [`model`]: the policies' meaning for this node's pods ([`model::Cluster::plan`]).
//! - [`rules`]: a plan as the table's typed ruleset.
//! - [`controller`]: informers → plan → one transaction per burst of changes.

pub mod controller;
pub mod model;
pub mod ranges;
pub mod rules;

pub use controller::{PolicyConfig, PolicyController, SyncReport, TABLE, remove_table};

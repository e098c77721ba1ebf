//! The pod network across nodes (issue #28): what k3s gets from flannel.
//!
//! - [`routes`]: the kernel routes k1s owns (tagged with one routing protocol number),
//!   behind the [`routes::Routes`] trait, over rtnetlink or in memory;
//! - [`hostgw`]: the `host-gw` backend: a route to every other node's pod CIDR via that
//!   node's address, from a Node informer;
//! - [`vxlan`]: the `vxlan` backend (flannel's layout: VNI 1, UDP 8472): a VTEP per node,
//!   announced on its Node, and a neighbour, FDB entry and on-link route per other node.
//!
//! Node pod CIDRs come from the controller manager's node IPAM (`controllers::node_ipam`);
//! each node's bridge, veth pairs and masquerade (only for traffic leaving `--cluster-cidr`)
//! are the kubelet's (`kubelet::network`).

pub mod hostgw;
pub mod routes;
pub mod vxlan;

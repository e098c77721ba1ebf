//! CSI for k1s (issue #8): the CSI v1 and kubelet plugin-registration protocols (`proto`,
//! compiled from this crate's own `.proto` files), dialing plugin sockets (`connect`), a
//! client for one plugin (`client`), the kubelet's plugin watcher (`watcher`), and
//! `k1s csi-hostpath`, the plugin k1s ships.

pub mod client;
pub mod connect;
pub mod hostpath;
pub mod proto;
pub mod registrar;
pub mod serve;
pub mod watcher;

pub use client::{CsiClient, CsiError, PluginCapabilities};

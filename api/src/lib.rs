//! Shared types for k1s components: selectors, the in-process client trait, watch events and
//! the watch → cache → reconcile runtime used by the scheduler, controllers and kubelet.
//!
//! This crate stays dependency-light (no hyper, no redb) so every component can depend on it.
//!
//! - [`client`]: the [`client::Client`] trait (in-process and HTTP), typed [`client::Api`].
//! - [`selector`]: label and field selectors (parse and match), DNS name checks.

pub mod client;
pub mod selector;

//! Shared types for k1s components: the in-process client trait, watch events and the
//! watch → cache → reconcile runtime used by the scheduler, controllers and kubelet.
//!
//! This crate stays dependency-light (no hyper, no redb) so every component can depend on it.
//! It is filled in by the API server issue (#3); for now it only fixes the crate boundary.

//! The Kubernetes REST API over the `k1s_store::Store` trait (issue #3).
//!
//! Owns HTTP/TLS serving, discovery, the resource handlers and their Status errors. It must not
//! touch the on-disk format: everything goes through the store trait.
//!
//! - [`admission`]: admission plugins run on every create and update.
//! - [`auth`]: authentication (client certificates, tokens, impersonation).
//! - [`authz`]: authorization (Node, RBAC), the bootstrap policy and the review APIs.
//! - [`bootstrap`]: the system namespaces and the `kubernetes` Service, created at start.
//! - [`crds`]: CustomResourceDefinitions made into served resources; CRD cleanup.
//! - [`datastore_snapshot`]: `GET /k1s/v1/snapshot`, the datastore in one file, for admins.
//! - [`encryption`]: encryption at rest (`EncryptionConfiguration`, AES-GCM, key rotation).
//! - [`event_ttl`]: expiry of events after `--event-ttl`.
//! - [`files`]: writing files atomically (keys, certificates, snapshots).
//! - [`pki`]: the cluster CA, the serving and admin certificates, the admin kubeconfig.
//! - [`server`]: the HTTPS listener (HTTP/1.1 and h2 by ALPN) and request routing.
//! - [`status`]: `metav1.Status` errors as kube-apiserver writes them.
//! - [`local_client`]: the in-process [`k1s_api::client::Client`] for components in the server.
//! - [`mirror`]: in-memory mirrors of store prefixes for per-request decisions.
//! - [`metrics`]: Prometheus metrics (`/metrics`) and the store latency decorator.
//! - [`registry`]: the resource catalog (built-in kinds from k8s-openapi, CRDs at run time).
//! - [`rest`]: generic storage of every resource: CRUD, list, watch, with upstream semantics.
//! - [`http`]: `/api` and `/apis`: discovery, negotiation, the resource handlers.
//! - [`openapi`]: `/openapi/v2` and `/openapi/v3` documents generated from the types.

pub mod admission;
pub mod apiservice_registration;
pub mod apiservice_status;
pub mod auth;
pub mod authz;
pub mod bootstrap;
pub mod cluster_identity;
pub mod crds;
pub mod datastore_snapshot;
pub mod encryption;
pub mod endpoint_leases;
pub mod event_ttl;
pub mod files;
pub mod http;
pub mod kubelet_client;
pub mod local_client;
pub mod metrics;
pub mod mirror;
pub mod openapi;
pub mod pki;
pub mod reader;
pub mod registry;
pub mod rest;
pub mod server;
pub mod snapshot_crds;
pub mod state;
pub mod status;
pub mod user;

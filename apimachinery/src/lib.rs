//! Pure transforms of Kubernetes objects, the k1s counterpart of upstream's
//! `k8s.io/apimachinery` helpers: JSON in, JSON out, no store, no HTTP, no I/O. The API server
//! calls them; they know nothing of it.
//!
//! - [`patch`]: JSON patch, merge patch and strategic merge patch (with the built-in types'
//!   merge keys and patch strategies).
//! - [`apply`]: server-side apply and field ownership (`managedFields`), over the built-in
//!   types' structural schemas (generated: `apply/builtin.rs`).
//! - [`crd_schema`]: custom resource validation, pruning and defaulting from a CRD's schema.
//! - [`protobuf`]: `application/vnd.kubernetes.protobuf` bodies decoded to JSON and encoded
//!   from it (generated message tables: `protobuf/tables.rs`).
//! - [`table`]: the `kubectl get` columns of each resource (Table responses).

pub mod apply;
pub mod crd_schema;
pub mod patch;
pub mod protobuf;
pub mod table;

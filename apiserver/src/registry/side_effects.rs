//! What a write changes besides the object itself, as upstream's strategies' `BeginCreate` /
//! `BeginUpdate` hooks (with their finish functions) and `AfterDelete`: the addresses and
//! ports a Service takes from the store, the catalog a CRD changes. A kind's
//! [`super::strategy::Strategy::side_effects`] names them; the generic write path
//! (`crate::rest`) runs them around its store write and gives back what a failed write took.

use k1s_store::Store;
use serde_json::Value;

use super::core::service::allocator::ServiceNetwork;
use crate::status::ApiError;

/// What side effects work with; the storage layer provides it.
#[async_trait::async_trait]
pub trait Context: Send + Sync {
    /// The store: what is claimed is a key in it, so servers sharing it never hand out the
    /// same address.
    fn store(&self) -> &dyn Store;

    /// `--service-cidr` and `--service-node-port-range`.
    fn service_network(&self) -> ServiceNetwork;

    /// Rebuilds the catalog's custom resources from the stored CRDs.
    async fn refresh_custom_resources(&self) -> Result<(), ApiError>;
}

/// The store keys a write claimed before it was stored, given back if the write fails.
#[derive(Debug, Default)]
pub struct Claims(pub Vec<String>);

/// How a write ended.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// Stored as this object.
    Stored(&'a Value),
    /// The write removed the object (an update took its last finalizer away).
    Gone,
    /// Nothing was written.
    Failed,
}

/// The side effects of one kind. Every method does nothing by default.
#[async_trait::async_trait]
pub trait SideEffects: Sync {
    /// Before a create (`old` = `None`) or an update of the object itself is stored (not on
    /// dry runs or subresource writes): takes what `obj` needs and writes it in.
    async fn begin(
        &self,
        _cx: &dyn Context,
        _old: Option<&Value>,
        _obj: &mut Value,
    ) -> Result<Claims, ApiError> {
        Ok(Claims::default())
    }

    /// After a create or update, whichever way it ended; `claims` are what
    /// [`SideEffects::begin`] took (none when it did not run).
    async fn finish(
        &self,
        _cx: &dyn Context,
        _claims: Claims,
        _old: Option<&Value>,
        _outcome: Outcome<'_>,
    ) {
    }

    /// After a delete removed `old` from the store.
    async fn after_delete(&self, _cx: &dyn Context, _old: &Value) {}
}

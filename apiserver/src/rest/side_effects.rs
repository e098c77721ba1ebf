//! The kinds' side effects ([`crate::registry::side_effects`]) run around the store writes
//! of the generic write path, with the storage layer as their context.

use k1s_store::Store;
use serde_json::Value;

use super::Rest;
use crate::registry::ResourceType;
use crate::registry::core::service::allocator::ServiceNetwork;
use crate::registry::side_effects::{Claims, Context, Outcome};
use crate::status::ApiError;

#[async_trait::async_trait]
impl Context for Rest {
    fn store(&self) -> &dyn Store {
        &*self.store
    }

    fn service_network(&self) -> ServiceNetwork {
        self.services
    }

    async fn refresh_custom_resources(&self) -> Result<(), ApiError> {
        Rest::refresh_custom_resources(self).await
    }
}

impl Rest {
    /// Before a create (`old` = `None`) or update of `res` is stored: what the kind takes.
    pub(crate) async fn begin_side_effects(
        &self,
        res: &ResourceType,
        old: Option<&Value>,
        obj: &mut Value,
    ) -> Result<Claims, ApiError> {
        match res.strategy().side_effects() {
            Some(effects) => effects.begin(self, old, obj).await,
            None => Ok(Claims::default()),
        }
    }

    /// After a create or update of `res`, whichever way it ended.
    pub(crate) async fn finish_side_effects(
        &self,
        res: &ResourceType,
        claims: Claims,
        old: Option<&Value>,
        outcome: Outcome<'_>,
    ) {
        if let Some(effects) = res.strategy().side_effects() {
            effects.finish(self, claims, old, outcome).await;
        }
    }

    /// After a delete removed `old` from the store.
    pub(crate) async fn after_delete(&self, res: &ResourceType, old: &Value) {
        if let Some(effects) = res.strategy().side_effects() {
            effects.after_delete(self, old).await;
        }
    }
}

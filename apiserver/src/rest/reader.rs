//! The storage layer as the [`Reader`] admission and authentication read the cluster through.

use std::sync::Arc;

use serde_json::Value;

use super::{FieldValidation, Rest};
use crate::reader::Reader;
use crate::registry::ResourceType;
use crate::status::ApiError;

#[async_trait::async_trait]
impl Reader for Rest {
    fn served(&self, group: &str, resource: &str) -> Option<Arc<ResourceType>> {
        self.registry.catalog().served(group, resource).cloned()
    }

    fn builtin_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.registry.builtin_kind(group, kind)
    }

    async fn get(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        Rest::get(self, res, ns, name).await
    }

    async fn get_remembered(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        Rest::get_remembered(self, res, ns, name).await
    }

    async fn list(&self, res: &ResourceType, ns: Option<&str>) -> Result<Vec<Value>, ApiError> {
        Ok(Rest::list(self, res, ns, &Default::default()).await?.items)
    }

    async fn list_shared(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        Rest::list_shared(self, res, ns).await
    }

    fn forget_shared_list(&self, res: &ResourceType, ns: Option<&str>) {
        Rest::forget_shared_list(self, res, ns);
    }

    fn decode(&self, res: &ResourceType, body: Value) -> Result<Value, ApiError> {
        let mut ignored = Vec::new();
        self.decode_body(res, body, FieldValidation::Ignore, &mut ignored)
    }

    async fn update_status(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
    ) -> Result<(), ApiError> {
        self.update(res, ns, name, obj, Some("status"), &Default::default())
            .await
            .map(|_| ())
    }
}

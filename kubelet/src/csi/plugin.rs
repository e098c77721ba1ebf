//! [`NodePlugin`]: the CSI calls the kubelet makes, in front of [`CsiClient`] so the volume
//! code can be tested against a recording fake.

use std::collections::HashSet;

use k1s_csi::proto::v1::{
    NodeExpandVolumeRequest, NodeGetInfoResponse, NodeGetVolumeStatsResponse,
    NodePublishVolumeRequest, NodeStageVolumeRequest,
};
use k1s_csi::{CsiClient, CsiError};

/// A node service capability (`STAGE_UNSTAGE_VOLUME`, `GET_VOLUME_STATS`, `EXPAND_VOLUME`, ...).
pub use k1s_csi::proto::v1::node_service_capability::rpc::Type as NodeCap;

/// The Identity and Node calls of one plugin.
#[async_trait::async_trait]
pub trait NodePlugin: Send + Sync {
    async fn probe(&self) -> Result<bool, CsiError>;
    async fn node_info(&self) -> Result<NodeGetInfoResponse, CsiError>;
    async fn node_capabilities(&self) -> Result<HashSet<NodeCap>, CsiError>;
    async fn node_stage(&self, req: NodeStageVolumeRequest) -> Result<(), CsiError>;
    async fn node_unstage(&self, volume_id: &str, staging_path: &str) -> Result<(), CsiError>;
    async fn node_publish(&self, req: NodePublishVolumeRequest) -> Result<(), CsiError>;
    async fn node_unpublish(&self, volume_id: &str, target_path: &str) -> Result<(), CsiError>;
    async fn node_volume_stats(
        &self,
        volume_id: &str,
        volume_path: &str,
    ) -> Result<NodeGetVolumeStatsResponse, CsiError>;
    async fn node_expand(&self, req: NodeExpandVolumeRequest) -> Result<i64, CsiError>;
}

#[async_trait::async_trait]
impl NodePlugin for CsiClient {
    async fn probe(&self) -> Result<bool, CsiError> {
        CsiClient::probe(self).await
    }
    async fn node_info(&self) -> Result<NodeGetInfoResponse, CsiError> {
        CsiClient::node_info(self).await
    }
    async fn node_capabilities(&self) -> Result<HashSet<NodeCap>, CsiError> {
        CsiClient::node_capabilities(self).await
    }
    async fn node_stage(&self, req: NodeStageVolumeRequest) -> Result<(), CsiError> {
        CsiClient::node_stage(self, req).await
    }
    async fn node_unstage(&self, volume_id: &str, staging_path: &str) -> Result<(), CsiError> {
        CsiClient::node_unstage(self, volume_id, staging_path).await
    }
    async fn node_publish(&self, req: NodePublishVolumeRequest) -> Result<(), CsiError> {
        CsiClient::node_publish(self, req).await
    }
    async fn node_unpublish(&self, volume_id: &str, target_path: &str) -> Result<(), CsiError> {
        CsiClient::node_unpublish(self, volume_id, target_path).await
    }
    async fn node_volume_stats(
        &self,
        volume_id: &str,
        volume_path: &str,
    ) -> Result<NodeGetVolumeStatsResponse, CsiError> {
        CsiClient::node_volume_stats(self, volume_id, volume_path).await
    }
    async fn node_expand(&self, req: NodeExpandVolumeRequest) -> Result<i64, CsiError> {
        CsiClient::node_expand(self, req).await
    }
}

//! A client for one CSI plugin: its Identity, Controller and Node services on one socket.
//! Owns the per-call deadline and the mapping of gRPC statuses to [`CsiError`], including
//! which failures are *final* (the plugin certainly did not do the operation) and which may
//! still complete in the plugin (timeouts, unavailability), as the CSI sidecars tell them
//! apart.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::connect::{self, ConnectError};
use crate::proto::v1::controller_client::ControllerClient;
use crate::proto::v1::controller_service_capability::rpc::Type as ControllerCap;
use crate::proto::v1::identity_client::IdentityClient;
use crate::proto::v1::node_client::NodeClient;
use crate::proto::v1::node_service_capability::rpc::Type as NodeCap;
use crate::proto::v1::plugin_capability::{self, service, volume_expansion};
use crate::proto::v1::*;

/// Deadline for one call unless the caller asks for another.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A failed CSI call.
#[derive(Debug, thiserror::Error)]
pub enum CsiError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("CSI {method} failed: {code:?}: {message}")]
    Rpc {
        method: &'static str,
        code: Code,
        message: String,
    },
    #[error("CSI {method}: plugin returned an invalid response: {detail}")]
    BadResponse {
        method: &'static str,
        detail: String,
    },
}

impl CsiError {
    /// The gRPC code of a failed call.
    pub fn code(&self) -> Option<Code> {
        match self {
            CsiError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the plugin certainly did not perform the operation. False when it may still
    /// be doing it (deadline passed, plugin unreachable mid-call, aborted because another
    /// call for the same volume is in flight): the caller must retry with the same arguments
    /// before giving up, or it may leak what the plugin creates meanwhile.
    pub fn is_final(&self) -> bool {
        match self {
            CsiError::Connect(_) => true,
            CsiError::BadResponse { .. } => false,
            CsiError::Rpc { code, .. } => !matches!(
                code,
                Code::Cancelled
                    | Code::DeadlineExceeded
                    | Code::Unavailable
                    | Code::ResourceExhausted
                    | Code::Aborted
            ),
        }
    }

    fn rpc(method: &'static str, status: Status) -> Self {
        CsiError::Rpc {
            method,
            code: status.code(),
            message: status.message().to_string(),
        }
    }
}

/// What a plugin says it can do (GetPluginCapabilities).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginCapabilities {
    pub controller_service: bool,
    pub accessibility_constraints: bool,
    pub online_expansion: bool,
    pub offline_expansion: bool,
}

/// A connection to one plugin. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct CsiClient {
    path: PathBuf,
    timeout: Duration,
    identity: IdentityClient<Channel>,
    controller: ControllerClient<Channel>,
    node: NodeClient<Channel>,
}

/// Runs `call` with the client's deadline and maps its status.
macro_rules! rpc {
    ($self:ident, $svc:ident, $method:ident, $name:literal, $req:expr) => {{
        let mut request = tonic::Request::new($req);
        request.set_timeout($self.timeout);
        $self
            .$svc
            .clone()
            .$method(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| CsiError::rpc($name, s))
    }};
}

impl CsiClient {
    /// Connects to the plugin serving on the unix socket `path`.
    pub async fn connect(path: &Path) -> Result<Self, CsiError> {
        let channel = connect::connect(path, DEFAULT_TIMEOUT).await?;
        Ok(Self {
            path: path.to_path_buf(),
            timeout: DEFAULT_TIMEOUT,
            identity: IdentityClient::new(channel.clone()),
            controller: ControllerClient::new(channel.clone()),
            node: NodeClient::new(channel),
        })
    }

    /// The same connection with another per-call deadline.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            timeout,
            ..self.clone()
        }
    }

    /// The socket this client talks to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    // ---- identity -----------------------------------------------------------------------

    pub async fn plugin_info(&self) -> Result<GetPluginInfoResponse, CsiError> {
        let info: GetPluginInfoResponse = rpc!(
            self,
            identity,
            get_plugin_info,
            "GetPluginInfo",
            GetPluginInfoRequest {}
        )?;
        if info.name.is_empty() {
            return Err(CsiError::BadResponse {
                method: "GetPluginInfo",
                detail: "empty driver name".into(),
            });
        }
        Ok(info)
    }

    pub async fn plugin_capabilities(&self) -> Result<PluginCapabilities, CsiError> {
        let resp: GetPluginCapabilitiesResponse = rpc!(
            self,
            identity,
            get_plugin_capabilities,
            "GetPluginCapabilities",
            GetPluginCapabilitiesRequest {}
        )?;
        let mut caps = PluginCapabilities::default();
        for cap in resp.capabilities.into_iter().filter_map(|c| c.r#type) {
            match cap {
                plugin_capability::Type::Service(s) => match s.r#type() {
                    service::Type::ControllerService => caps.controller_service = true,
                    service::Type::VolumeAccessibilityConstraints => {
                        caps.accessibility_constraints = true
                    }
                    _ => {}
                },
                plugin_capability::Type::VolumeExpansion(e) => match e.r#type() {
                    volume_expansion::Type::Online => caps.online_expansion = true,
                    volume_expansion::Type::Offline => caps.offline_expansion = true,
                    volume_expansion::Type::Unknown => {}
                },
            }
        }
        Ok(caps)
    }

    /// Probe: `Ok(true)` when ready (an unset `ready` means ready, as the spec says).
    pub async fn probe(&self) -> Result<bool, CsiError> {
        let resp: ProbeResponse = rpc!(self, identity, probe, "Probe", ProbeRequest {})?;
        Ok(resp.ready.is_none_or(|r| r))
    }

    // ---- controller ---------------------------------------------------------------------

    pub async fn controller_capabilities(&self) -> Result<HashSet<ControllerCap>, CsiError> {
        let resp: ControllerGetCapabilitiesResponse = rpc!(
            self,
            controller,
            controller_get_capabilities,
            "ControllerGetCapabilities",
            ControllerGetCapabilitiesRequest {}
        )?;
        Ok(resp
            .capabilities
            .into_iter()
            .filter_map(|c| {
                c.r#type
                    .map(|controller_service_capability::Type::Rpc(r)| r.r#type())
            })
            .collect())
    }

    pub async fn create_volume(&self, req: CreateVolumeRequest) -> Result<Volume, CsiError> {
        let resp: CreateVolumeResponse =
            rpc!(self, controller, create_volume, "CreateVolume", req)?;
        match resp.volume {
            Some(v) if !v.volume_id.is_empty() => Ok(v),
            _ => Err(CsiError::BadResponse {
                method: "CreateVolume",
                detail: "no volume id".into(),
            }),
        }
    }

    pub async fn delete_volume(
        &self,
        volume_id: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), CsiError> {
        let req = DeleteVolumeRequest {
            volume_id: volume_id.to_string(),
            secrets: secrets.into_iter().collect(),
        };
        rpc!(self, controller, delete_volume, "DeleteVolume", req).map(drop)
    }

    /// ControllerPublishVolume; returns the publish context for the node.
    pub async fn controller_publish(
        &self,
        req: ControllerPublishVolumeRequest,
    ) -> Result<BTreeMap<String, String>, CsiError> {
        let resp: ControllerPublishVolumeResponse = rpc!(
            self,
            controller,
            controller_publish_volume,
            "ControllerPublishVolume",
            req
        )?;
        Ok(resp.publish_context.into_iter().collect())
    }

    pub async fn controller_unpublish(
        &self,
        req: ControllerUnpublishVolumeRequest,
    ) -> Result<(), CsiError> {
        rpc!(
            self,
            controller,
            controller_unpublish_volume,
            "ControllerUnpublishVolume",
            req
        )
        .map(drop)
    }

    pub async fn controller_expand(
        &self,
        req: ControllerExpandVolumeRequest,
    ) -> Result<ControllerExpandVolumeResponse, CsiError> {
        rpc!(
            self,
            controller,
            controller_expand_volume,
            "ControllerExpandVolume",
            req
        )
    }

    pub async fn get_capacity(
        &self,
        req: GetCapacityRequest,
    ) -> Result<GetCapacityResponse, CsiError> {
        rpc!(self, controller, get_capacity, "GetCapacity", req)
    }

    pub async fn create_snapshot(&self, req: CreateSnapshotRequest) -> Result<Snapshot, CsiError> {
        let resp: CreateSnapshotResponse =
            rpc!(self, controller, create_snapshot, "CreateSnapshot", req)?;
        match resp.snapshot {
            Some(s) if !s.snapshot_id.is_empty() => Ok(s),
            _ => Err(CsiError::BadResponse {
                method: "CreateSnapshot",
                detail: "no snapshot id".into(),
            }),
        }
    }

    pub async fn delete_snapshot(
        &self,
        snapshot_id: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), CsiError> {
        let req = DeleteSnapshotRequest {
            snapshot_id: snapshot_id.to_string(),
            secrets: secrets.into_iter().collect(),
        };
        rpc!(self, controller, delete_snapshot, "DeleteSnapshot", req).map(drop)
    }

    // ---- node ---------------------------------------------------------------------------

    pub async fn node_capabilities(&self) -> Result<HashSet<NodeCap>, CsiError> {
        let resp: NodeGetCapabilitiesResponse = rpc!(
            self,
            node,
            node_get_capabilities,
            "NodeGetCapabilities",
            NodeGetCapabilitiesRequest {}
        )?;
        Ok(resp
            .capabilities
            .into_iter()
            .filter_map(|c| {
                c.r#type
                    .map(|node_service_capability::Type::Rpc(r)| r.r#type())
            })
            .collect())
    }

    pub async fn node_info(&self) -> Result<NodeGetInfoResponse, CsiError> {
        let info: NodeGetInfoResponse = rpc!(
            self,
            node,
            node_get_info,
            "NodeGetInfo",
            NodeGetInfoRequest {}
        )?;
        if info.node_id.is_empty() {
            return Err(CsiError::BadResponse {
                method: "NodeGetInfo",
                detail: "empty node id".into(),
            });
        }
        Ok(info)
    }

    pub async fn node_stage(&self, req: NodeStageVolumeRequest) -> Result<(), CsiError> {
        rpc!(self, node, node_stage_volume, "NodeStageVolume", req).map(drop)
    }

    pub async fn node_unstage(&self, volume_id: &str, staging_path: &str) -> Result<(), CsiError> {
        let req = NodeUnstageVolumeRequest {
            volume_id: volume_id.to_string(),
            staging_target_path: staging_path.to_string(),
        };
        rpc!(self, node, node_unstage_volume, "NodeUnstageVolume", req).map(drop)
    }

    pub async fn node_publish(&self, req: NodePublishVolumeRequest) -> Result<(), CsiError> {
        rpc!(self, node, node_publish_volume, "NodePublishVolume", req).map(drop)
    }

    pub async fn node_unpublish(&self, volume_id: &str, target_path: &str) -> Result<(), CsiError> {
        let req = NodeUnpublishVolumeRequest {
            volume_id: volume_id.to_string(),
            target_path: target_path.to_string(),
        };
        rpc!(
            self,
            node,
            node_unpublish_volume,
            "NodeUnpublishVolume",
            req
        )
        .map(drop)
    }

    pub async fn node_volume_stats(
        &self,
        volume_id: &str,
        volume_path: &str,
    ) -> Result<NodeGetVolumeStatsResponse, CsiError> {
        let req = NodeGetVolumeStatsRequest {
            volume_id: volume_id.to_string(),
            volume_path: volume_path.to_string(),
            staging_target_path: String::new(),
        };
        rpc!(self, node, node_get_volume_stats, "NodeGetVolumeStats", req)
    }

    /// NodeExpandVolume; returns the new capacity (0 when the plugin does not say).
    pub async fn node_expand(&self, req: NodeExpandVolumeRequest) -> Result<i64, CsiError> {
        let resp: NodeExpandVolumeResponse =
            rpc!(self, node, node_expand_volume, "NodeExpandVolume", req)?;
        Ok(resp.capacity_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_the_plugin_may_still_act_on_are_not_final() {
        let err = |code| CsiError::Rpc {
            method: "CreateVolume",
            code,
            message: String::new(),
        };
        for code in [
            Code::DeadlineExceeded,
            Code::Unavailable,
            Code::Aborted,
            Code::Cancelled,
            Code::ResourceExhausted,
        ] {
            assert!(!err(code).is_final(), "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::NotFound,
            Code::AlreadyExists,
            Code::OutOfRange,
            Code::FailedPrecondition,
            Code::Unimplemented,
        ] {
            assert!(err(code).is_final(), "{code:?}");
        }
    }
}

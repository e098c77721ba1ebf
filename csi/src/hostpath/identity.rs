//! The CSI Identity service: the driver's name and version, the plugin capabilities
//! (controller service, topology constraints, expansion: online when the plugin may grow
//! mounted file systems, else offline) and readiness.

use tonic::{Request, Response, Status};

use super::{DRIVER_NAME, Driver};
use crate::proto::v1::identity_server::Identity;
use crate::proto::v1::plugin_capability::{self, service, volume_expansion};
use crate::proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
};

fn service_capability(t: service::Type) -> PluginCapability {
    PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service { r#type: t as i32 },
        )),
    }
}

#[tonic::async_trait]
impl Identity for Driver {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: DRIVER_NAME.to_owned(),
            vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![
                service_capability(service::Type::ControllerService),
                service_capability(service::Type::VolumeAccessibilityConstraints),
                PluginCapability {
                    r#type: Some(plugin_capability::Type::VolumeExpansion(
                        plugin_capability::VolumeExpansion {
                            r#type: if self.online_expansion() {
                                volume_expansion::Type::Online
                            } else {
                                volume_expansion::Type::Offline
                            } as i32,
                        },
                    )),
                },
            ],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        // The store opened when the driver was made; taking its lock proves no call wedged it.
        self.locked(|_| Ok(())).await?;
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}

//! One registered plugin: the kubelet connects to its socket and follows its ListAndWatch
//! stream, handing each device list to the manager, until the stream ends, the plugin
//! registers again (a newer connection replaces this one) or the kubelet stops.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::DeviceManager;
use super::proto::device_plugin_client::DevicePluginClient;
use super::proto::{Empty, RegisterRequest};

/// How long a call to a plugin may take (connecting, Allocate, ...).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) async fn follow(
    manager: Arc<DeviceManager>,
    req: RegisterRequest,
    cancel: CancellationToken,
) {
    let resource = req.resource_name;
    let path = manager.dir().join(&req.endpoint);
    let channel = match k1s_csi::connect::connect(&path, CALL_TIMEOUT).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%resource, error = %e, "connecting to a registered device plugin");
            return;
        }
    };
    let client = DevicePluginClient::new(channel);
    let generation = manager.plugin_registered(
        &resource,
        client.clone(),
        req.options.unwrap_or_default(),
        cancel.clone(),
    );
    let mut stream = match client.clone().list_and_watch(Empty {}).await {
        Ok(s) => s.into_inner(),
        Err(status) => {
            tracing::warn!(%resource, %status, "device plugin refused ListAndWatch");
            manager.plugin_gone(&resource, generation);
            return;
        }
    };
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            next = stream.message() => match next {
                Ok(Some(list)) => manager.devices_listed(&resource, generation, &list.devices),
                Ok(None) => {
                    tracing::info!(%resource, "device plugin ended its device stream");
                    break;
                }
                Err(status) => {
                    tracing::warn!(%resource, %status, "device plugin stream failed");
                    break;
                }
            },
        }
    }
    manager.plugin_gone(&resource, generation);
}

//! DefaultBinder: binds through the `pods/binding` subresource.

use std::sync::Arc;

use k1s_api::client::{Client, ResourceRef};
use serde_json::json;

use crate::framework::interface::*;
use crate::framework::{CycleState, PodInfo, Status, helpers};

use crate::plugin_names as names;

pub struct DefaultBinder {
    client: Arc<dyn Client>,
}

impl DefaultBinder {
    pub fn new(client: Arc<dyn Client>) -> Self {
        Self { client }
    }
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        names::DEFAULT_BINDER
    }
    fn as_bind(self: Arc<Self>) -> Option<Arc<dyn BindPlugin>> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl BindPlugin for DefaultBinder {
    async fn bind(&self, _: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let ns = helpers::namespace(&pod.pod);
        let name = helpers::name(&pod.pod);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": helpers::uid(&pod.pod)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let r = ResourceRef::new("", "v1", "pods", Some(ns));
        match self
            .client
            .create_subresource(&r, name, "binding", body)
            .await
        {
            Ok(_) => Status::success(),
            Err(e) => Status::error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeClient, PodBuilder};

    #[tokio::test]
    async fn default_binder_binds() {
        let cases = [("ok", false, true), ("api error", true, false)];
        for (name, fail, ok) in cases {
            let client = FakeClient::new();
            if fail {
                client.fail_paths.lock().unwrap().push("binding".into());
            }
            let b = DefaultBinder::new(client.clone());
            let s = b
                .bind(
                    &CycleState::new(),
                    &PodBuilder::new("p").namespace("ns").info(),
                    "n1",
                )
                .await;
            assert_eq!(s.is_success(), ok, "{name}");
            if ok {
                let calls = client.calls_to("/api/v1/namespaces/ns/pods/p/binding");
                assert_eq!(calls.len(), 1, "{name}");
                assert_eq!(calls[0].body["target"]["name"], "n1");
                assert_eq!(calls[0].body["kind"], "Binding");
            }
        }
    }
}

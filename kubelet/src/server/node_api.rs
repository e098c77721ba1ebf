//! The kubelet's own HTTP API, the part that is plain request/answer (no stream upgrade): what
//! the API server forwards for `nodes/NAME/proxy/PATH`, as upstream's kubelet server answers
//! on port 10250.
//!
//! | path | answer |
//! |---|---|
//! | `/healthz` | `ok` |
//! | `/pods` | a `PodList` of the pods bound to this node |
//! | `/stats/summary` | the summary ([`crate::stats`]), JSON |
//! | `/metrics/resource` | the resource metrics, Prometheus text |
//! | `/containerLogs/NAMESPACE/POD/CONTAINER` | that container's log (`tailLines`, `timestamps`, `previous`, `sinceSeconds`, `limitBytes`) |
//!
//! Anything else is 404 (`404 page not found`, as Go's mux says), other methods than GET
//! 405. The API server has authorized the caller for `nodes/proxy` before it gets here.

use std::sync::Arc;

use futures::StreamExt;
use k1s_api::client::{Client, ClientError, ListParams, ResourceRef};
use k1s_api::streams::{LogOptions, ProxyResponse};
use serde_json::{Value, json};

use crate::config::Config;
use crate::stats::StatsProvider;

/// What the node API needs besides the kubelet's configuration.
pub struct NodeApi {
    pub client: Arc<dyn Client>,
    pub stats: Arc<StatsProvider>,
}

fn text(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> ProxyResponse {
    ProxyResponse {
        status,
        content_type: content_type.into(),
        body: body.into(),
    }
}

fn json_answer(v: &Value) -> ProxyResponse {
    text(
        200,
        "application/json",
        serde_json::to_vec_pretty(v).unwrap_or_default(),
    )
}

impl NodeApi {
    /// The pods bound to this node, as the API has them.
    async fn pods(&self, config: &Config) -> Result<Vec<Value>, ClientError> {
        let r = ResourceRef::new("", "v1", "pods", None);
        let params = ListParams {
            field_selector: Some(format!("spec.nodeName={}", config.node_name)),
            ..Default::default()
        };
        Ok(self.client.list(&r, &params).await?.items)
    }

    /// Answers `method path?query`.
    pub async fn handle(
        &self,
        config: &Config,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Result<ProxyResponse, ClientError> {
        if method != "GET" && method != "HEAD" {
            return Ok(text(
                405,
                "text/plain",
                format!("{method} is not allowed on {path}\n"),
            ));
        }
        let q: std::collections::HashMap<String, String> =
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        match segments.as_slice() {
            ["healthz"] => Ok(text(200, "text/plain", "ok")),
            ["pods"] => {
                let items = self.pods(config).await?;
                Ok(json_answer(&json!({
                    "kind": "PodList",
                    "apiVersion": "v1",
                    "metadata": {},
                    "items": items,
                })))
            }
            ["stats", "summary"] => {
                let pods = self.pods(config).await?;
                let stats = self.stats.clone();
                let summary = tokio::task::spawn_blocking(move || stats.summary(&pods))
                    .await
                    .map_err(|e| ClientError {
                        code: 500,
                        reason: "InternalError".into(),
                        message: format!("building the summary: {e}"),
                    })?;
                Ok(json_answer(&summary))
            }
            ["metrics", "resource"] => {
                let pods = self.pods(config).await?;
                let stats = self.stats.clone();
                let body = tokio::task::spawn_blocking(move || {
                    crate::stats::resource_metrics(&stats.summary(&pods))
                })
                .await
                .unwrap_or_default();
                Ok(text(200, "text/plain; version=0.0.4; charset=utf-8", body))
            }
            ["containerLogs", ns, pod, container] => {
                let r = ResourceRef::new("", "v1", "pods", Some(ns));
                let pod = match self.client.get(&r, pod).await {
                    Ok(p) if p["spec"]["nodeName"] == config.node_name.as_str() => p,
                    Ok(_) | Err(ClientError { code: 404, .. }) => {
                        return Ok(text(
                            404,
                            "text/plain",
                            format!("pod {ns}/{pod} not found on this node\n"),
                        ));
                    }
                    Err(e) => return Err(e),
                };
                let options = LogOptions {
                    container: Some((*container).to_string()),
                    follow: false,
                    ..LogOptions::from_query(&q)
                        .map_err(|e| crate::server::logs::bad_request(e.to_string()))?
                };
                let mut stream = crate::server::logs::read(config, &pod, &options).await?;
                let mut body = Vec::new();
                while let Some(chunk) = stream.next().await {
                    body.extend(chunk);
                }
                Ok(text(200, "text/plain", body))
            }
            _ => Ok(text(404, "text/plain", "404 page not found\n")),
        }
    }
}

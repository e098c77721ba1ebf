//! The `Available` condition of APIServices, as kube-aggregator's availability controller
//! keeps it: a local APIService (no `service`) is always available; a remote one is when its
//! Service exists, has a ready endpoint, and answers the discovery of its group version
//! (`GET /apis/GROUP/VERSION`, with the front proxy's certificate and no user: 2xx, or 401/403
//! from an extension server that authenticates further, counts as an answer). Checked every
//! few seconds; the status is written only when it changes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::http::aggregator;
use crate::pki::CertKeyPem;
use crate::rest::{Rest, WriteOptions, meta};

/// How often every APIService is checked.
const PERIOD: Duration = Duration::from_secs(5);

/// Keeps the local APIServices registered ([`crate::apiservice_registration`]) and checks
/// every APIService until `cancel`.
pub async fn run(rest: Arc<Rest>, front_proxy: Option<CertKeyPem>, cancel: CancellationToken) {
    loop {
        crate::apiservice_registration::sync(&rest).await;
        check_all(&rest, front_proxy.as_ref()).await;
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}

/// (status, reason, message) of one APIService now.
async fn availability(
    rest: &Rest,
    front_proxy: Option<&CertKeyPem>,
    apiservice: &Value,
) -> (&'static str, &'static str, String) {
    let svc = &apiservice["spec"]["service"];
    if !svc.is_object() {
        return (
            "True",
            "Local",
            "Local APIServices are always available".into(),
        );
    }
    let (ns, name) = (
        svc["namespace"].as_str().unwrap_or(""),
        svc["name"].as_str().unwrap_or(""),
    );
    if let Some(svc_type) = rest.registry.builtin_kind("", "Service")
        && let Err(e) = rest.get(&svc_type, Some(ns), name).await
        && e.code == 404
    {
        return (
            "False",
            "ServiceNotFound",
            format!("service/{name} in \"{ns}\" is not present"),
        );
    }
    let group = apiservice["spec"]["group"].as_str().unwrap_or("");
    let version = apiservice["spec"]["version"].as_str().unwrap_or("");
    let path = format!("/apis/{group}/{version}");
    let headers = http::HeaderMap::new();
    let fwd = aggregator::Forward {
        method: &http::Method::GET,
        path_and_query: path.clone(),
        headers: &headers,
        body: bytes::Bytes::new(),
        user: None,
    };
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        aggregator::proxy(rest, front_proxy, apiservice, fwd),
    )
    .await;
    match answer {
        Ok(Ok(resp))
            if resp.status().is_success() || matches!(resp.status().as_u16(), 401 | 403) =>
        {
            ("True", "Passed", "all checks passed".into())
        }
        Ok(Ok(resp)) => (
            "False",
            "FailedDiscoveryCheck",
            format!(
                "failing or missing response from {path}: bad status from the service: {}",
                resp.status().as_u16()
            ),
        ),
        Ok(Err(e)) if e.message.contains("no ready endpoints") => (
            "False",
            "MissingEndpoints",
            format!("endpoints for service/{name} in \"{ns}\" have no addresses"),
        ),
        Ok(Err(e)) => (
            "False",
            "FailedDiscoveryCheck",
            format!("failing or missing response from {path}: {}", e.message),
        ),
        Err(_) => (
            "False",
            "FailedDiscoveryCheck",
            format!("failing or missing response from {path}: no answer in time"),
        ),
    }
}

async fn check_all(rest: &Rest, front_proxy: Option<&CertKeyPem>) {
    let Some(res) = rest
        .registry
        .builtin_kind("apiregistration.k8s.io", "APIService")
    else {
        return;
    };
    let Ok(page) = rest.list(&res, None, &Default::default()).await else {
        return;
    };
    for a in page.items {
        let (status, reason, message) = availability(rest, front_proxy, &a).await;
        let conditions = a["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let old = conditions.iter().find(|c| c["type"] == "Available");
        if old.is_some_and(|c| {
            c["status"] == status && c["reason"] == reason && c["message"] == message.as_str()
        }) {
            continue;
        }
        let since = old
            .filter(|c| c["status"] == status)
            .map(|c| c["lastTransitionTime"].clone())
            .unwrap_or_else(|| json!(meta::now()));
        let mut next = a.clone();
        let mut conds: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c["type"] != "Available")
            .collect();
        conds.push(
            json!({"type": "Available", "status": status, "reason": reason,
            "message": message, "lastTransitionTime": since}),
        );
        next["status"] = json!({"conditions": conds});
        let opts = WriteOptions {
            field_manager: Some("k1s-apiservice-availability".into()),
            ..Default::default()
        };
        let name = meta::name(&a).to_owned();
        if let Err(e) = rest
            .update(&res, None, &name, next, Some("status"), &opts)
            .await
            && e.code != 409
            && e.code != 404
        {
            tracing::warn!(apiservice = %name, error = %e.message, "writing the APIService's availability");
        } else {
            tracing::info!(apiservice = %name, %status, %reason, "APIService availability");
        }
    }
}

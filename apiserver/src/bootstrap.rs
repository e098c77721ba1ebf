//! What kube-apiserver creates for itself at start: the system namespaces, the system
//! PriorityClasses, and the `default/kubernetes` Service with its Endpoints and EndpointSlice
//! pointing at this server.

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::rest::{Rest, WriteOptions};
use crate::status::ApiError;

/// The namespaces every cluster has.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Creates `obj` unless it exists; with `replace`, an existing one gets `obj`'s content.
async fn ensure(
    rest: &Rest,
    group: &str,
    kind: &str,
    obj: Value,
    replace: bool,
) -> Result<(), ApiError> {
    let res = rest
        .registry
        .builtin_kind(group, kind)
        .ok_or_else(|| ApiError::new(500, "InternalError", format!("no built-in kind {kind}")))?;
    let ns = obj["metadata"]["namespace"].as_str().map(str::to_owned);
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let opts = WriteOptions {
        field_manager: Some("k1s-apiserver".into()),
        ..Default::default()
    };
    match rest.get(&res, ns.as_deref(), &name).await {
        Err(e) if e.code == 404 => rest
            .create(&res, ns.as_deref(), obj, &opts)
            .await
            .map(|_| ()),
        Err(e) => Err(e),
        Ok(_) if replace => rest
            .update(&res, ns.as_deref(), &name, obj, None, &opts)
            .await
            .map(|_| ()),
        Ok(_) => Ok(()),
    }
}

/// Creates the system namespaces and the `kubernetes` Service, Endpoints and EndpointSlice.
pub async fn run(rest: &Rest, advertise: IpAddr, port: u16) -> Result<(), ApiError> {
    for ns in SYSTEM_NAMESPACES {
        ensure(
            rest,
            "",
            "Namespace",
            json!({"metadata": {"name": ns}}),
            false,
        )
        .await?;
    }
    // The system priority classes (upstream's scheduling bootstrap).
    for (name, value, description) in [
        (
            "system-node-critical",
            2_000_001_000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            2_000_000_000,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
    ] {
        ensure(
            rest,
            "scheduling.k8s.io",
            "PriorityClass",
            json!({"metadata": {"name": name}, "value": value, "description": description,
                "preemptionPolicy": "PreemptLowerPriority"}),
            false,
        )
        .await?;
    }
    let labels = json!({"component": "apiserver", "provider": "kubernetes"});
    ensure(
        rest,
        "",
        "Service",
        json!({
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "spec": {
                "clusterIP": rest.services.first().to_string(),
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
        }),
        false,
    )
    .await?;
    ensure(
        rest,
        "",
        "Endpoints",
        json!({
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{
                "addresses": [{"ip": advertise.to_string()}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            }],
        }),
        true,
    )
    .await?;
    let family = if advertise.is_ipv4() { "IPv4" } else { "IPv6" };
    ensure(
        rest,
        "discovery.k8s.io",
        "EndpointSlice",
        json!({
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": family,
            "endpoints": [{"addresses": [advertise.to_string()], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }),
        true,
    )
    .await
}

/// `kube-system/extension-apiserver-authentication`, as kube-apiserver's cluster
/// authentication trust controller keeps it, and the Role that lets extension API servers
/// read it: the CA of client certificates, and how the front proxy (this server, when it
/// proxies an aggregated API) says who the user is — its CA, its certificate's name and the
/// headers. Extension API servers (metrics-server, the sample API server) read this to
/// authenticate what the aggregation layer forwards.
pub async fn extension_apiserver_authentication(
    rest: &Rest,
    client_ca_pem: &str,
    request_header_ca_pem: &str,
) -> Result<(), ApiError> {
    let list = |v: &[&str]| serde_json::to_string(v).unwrap_or_default();
    ensure(
        rest,
        "",
        "ConfigMap",
        json!({
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": {
                "client-ca-file": client_ca_pem,
                "requestheader-client-ca-file": request_header_ca_pem,
                "requestheader-allowed-names": list(&[crate::pki::FRONT_PROXY_CN]),
                "requestheader-username-headers": list(&["X-Remote-User"]),
                "requestheader-group-headers": list(&["X-Remote-Group"]),
                "requestheader-extra-headers-prefix": list(&["X-Remote-Extra-"]),
            },
        }),
        true,
    )
    .await?;
    ensure(
        rest,
        "rbac.authorization.k8s.io",
        "Role",
        json!({
            "metadata": {"name": "extension-apiserver-authentication-reader",
                "namespace": "kube-system",
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["extension-apiserver-authentication"],
                "verbs": ["get", "list", "watch"]}],
        }),
        false,
    )
    .await
}

//! The server side of joining an agent: `POST /k1s/v1/node-certificate` exchanges the join
//! token (the bootstrap user, authorized by the `system:k1s:agent-bootstrapper` role) and a
//! certificate request for a kubelet client certificate (`system:node:NAME` in
//! `system:nodes`) signed by the cluster CA, and, when it sends `servingCsr` and its
//! `addresses`, a serving certificate for its kubelet's HTTPS port (the node name and those
//! addresses as names), and, when it sends `networkCsr`, a client certificate for its
//! cluster-network components (`system:k1s:network:NAME` in `system:k1s:networks`: what
//! NetworkPolicy enforcement reads — every pod, namespace and policy — is more than a kubelet
//! identity may, as k3s gives its agents a `k3s-controller` identity for the same). The agent
//! checks the CA it gets from `/cacerts` against the hash in its token before it trusts it.
//!
//! A server joins the same way: `GET /k1s/v1/server-join` gives a server started with
//! `--server URL --token TOKEN` the shared datastore this one uses (its endpoint, and the
//! etcd client TLS files when there are any); the cluster identity it then reads from the
//! datastore, sealed with that token (`crate::cluster_identity`). The join token therefore
//! stands for the whole cluster, as k3s's server token does.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use super::UserInfo;
use crate::http::body::Body;
use crate::pki::Pki;
use crate::status::ApiError;

/// The path of the exchange.
pub const NODE_CERT_PATH: &str = "/k1s/v1/node-certificate";
/// The path a joining server asks for the datastore at.
pub const SERVER_JOIN_PATH: &str = "/k1s/v1/server-join";
/// How long node certificates are valid (k3s: one year).
const VALIDITY: jiff::SignedDuration = jiff::SignedDuration::from_hours(24 * 365);

/// Answers `POST /k1s/v1/node-certificate` with `{"nodeName": N, "csr": PEM}` (and optionally
/// `"servingCsr": PEM, "addresses": ["10.0.0.5"]`).
pub async fn node_certificate(
    pki: Option<&Pki>,
    user: &UserInfo,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let pki = pki.ok_or_else(ApiError::no_route)?;
    let body = crate::http::body::read(req.into_body()).await?;
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body must be JSON: {e}")))?;
    let node = v["nodeName"].as_str().unwrap_or("");
    if !k1s_api::selector::is_dns_subdomain(node) {
        return Err(ApiError::bad_request(format!(
            "invalid nodeName {node:?}: must be a lowercase RFC 1123 subdomain"
        )));
    }
    let csr = v["csr"]
        .as_str()
        .ok_or_else(|| ApiError::bad_request("csr (a PEM certificate request) is required"))?;
    let user_name = format!("{}{node}", super::NODE_USER_PREFIX);
    let (cert, _) = pki
        .issue_client_cert(&user_name, Some(super::NODES), VALIDITY, Some(csr))
        .map_err(|e| ApiError::bad_request(format!("cannot sign the request: {e}")))?;
    let mut out = json!({"certificate": cert, "ca": pki.ca.cert_pem});
    if let Some(network_csr) = v["networkCsr"].as_str() {
        let user = format!("{}{node}", super::NETWORK_USER_PREFIX);
        out["networkCertificate"] = pki
            .issue_client_cert(&user, Some(super::NETWORKS), VALIDITY, Some(network_csr))
            .map_err(|e| ApiError::bad_request(format!("cannot sign networkCsr: {e}")))?
            .0
            .into();
    }
    if let Some(serving_csr) = v["servingCsr"].as_str() {
        let ips = v["addresses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|a| {
                a.as_str()
                    .and_then(|a| a.parse::<std::net::IpAddr>().ok())
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("addresses: {a} is not an IP address"))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ips.len() > 16 {
            return Err(ApiError::bad_request("addresses: at most 16"));
        }
        out["servingCertificate"] = pki
            .issue_kubelet_serving_cert(node, &ips, VALIDITY, Some(serving_csr))
            .map_err(|e| ApiError::bad_request(format!("cannot sign servingCsr: {e}")))?
            .0
            .into();
    }
    tracing::info!(requester = %user.name, node, "issued a node client certificate");
    Ok(crate::http::body::respond(
        StatusCode::CREATED,
        "application/json",
        serde_json::to_vec(&out).unwrap_or_default(),
    ))
}

/// What a server joining this one needs: where the shared datastore is and how to reach it.
/// `Debug` does not print the key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ServerJoin {
    /// `--datastore-endpoint` (etcd client URLs).
    pub datastore_endpoint: String,
    /// The etcd CA, client certificate and key (PEM), when etcd is reached over TLS.
    pub ca_pem: Option<String>,
    pub cert_pem: Option<String>,
    pub key_pem: Option<String>,
}

impl std::fmt::Debug for ServerJoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerJoin")
            .field("datastore_endpoint", &self.datastore_endpoint)
            .field("tls", &self.cert_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// Answers `GET /k1s/v1/server-join`: the datastore, as JSON (`datastoreEndpoint`, and
/// `datastoreCA`, `datastoreCert`, `datastoreKey` when set).
pub fn server_join(join: Option<&ServerJoin>, user: &UserInfo) -> Result<Response<Body>, ApiError> {
    let Some(join) = join else {
        return Err(ApiError::bad_request(
            "this server keeps the cluster in its embedded datastore, which other servers \
             cannot share: servers join a cluster on etcd (start them with \
             --datastore-endpoint)",
        ));
    };
    let mut out = json!({"datastoreEndpoint": join.datastore_endpoint});
    for (key, value) in [
        ("datastoreCA", &join.ca_pem),
        ("datastoreCert", &join.cert_pem),
        ("datastoreKey", &join.key_pem),
    ] {
        if let Some(v) = value {
            out[key] = v.clone().into();
        }
    }
    tracing::info!(requester = %user.name, "gave a joining server the datastore");
    Ok(crate::http::body::respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(&out).unwrap_or_default(),
    ))
}

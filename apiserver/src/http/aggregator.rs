//! The aggregation layer, as kube-aggregator serves it in front of kube-apiserver: an
//! `APIService` (`apiregistration.k8s.io/v1`) with a `service` hands its group version to an
//! extension API server (metrics-server, the sample API server). Requests under
//! `/apis/GROUP/VERSION/...` that no built-in or custom resource serves go to one ready
//! endpoint of that Service over TLS — checked against the APIService's `caBundle` under
//! `NAME.NAMESPACE.svc`, or not at all with `insecureSkipTLSVerify` — with this server's front
//! proxy client certificate and the authenticated user in `X-Remote-User`, `X-Remote-Group`
//! and `X-Remote-Extra-*` (what `kube-system/extension-apiserver-authentication` tells the
//! extension server to trust). The answer streams back (watches too).
//!
//! Discovery: `/apis` lists the aggregated groups after the built-in ones (versions by
//! `versionPriority`), `/apis/GROUP` is answered here, `/apis/GROUP/VERSION` by the
//! extension server. While an aggregated group is registered, `/apis` is served as the legacy
//! document even to clients that ask for aggregated discovery, so that they read the
//! extension's resources from its own discovery document.
//!
//! The client's own credentials never go along; k1s has authorized the request already (as
//! upstream's handler chain does before the aggregator), and the extension server authorizes
//! it again with a SubjectAccessReview.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::body::{self, Body};
use crate::admission::webhook;
use crate::rest::Rest;
use crate::status::ApiError;
use crate::user::UserInfo;

/// Limit for reaching the extension server (TCP and TLS).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The APIServices that hand their group version to a Service, in name order.
pub(crate) async fn remote_apiservices(rest: &Rest) -> Vec<Arc<Value>> {
    let Some(res) = rest
        .registry
        .builtin_kind("apiregistration.k8s.io", "APIService")
    else {
        return Vec::new();
    };
    let mut all: Vec<Arc<Value>> = rest
        .list_shared(&res, None)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["spec"]["service"].is_object())
        .collect();
    all.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    all
}

fn priority(a: &Value, field: &str) -> i64 {
    a["spec"][field].as_i64().unwrap_or(0)
}

/// Kubernetes version order of two version names (`v1` > `v1beta2` > `v1alpha1` > `foo`), as
/// upstream's `CompareKubeAwareVersionStrings`, for equal `versionPriority`.
fn version_rank(v: &str) -> (u8, u64, u64, String) {
    let parse = |s: &str| -> Option<(u8, u64, u64)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        for (name, rank) in [("beta", 2), ("alpha", 1)] {
            if let Some(n) = tail.strip_prefix(name) {
                return Some((rank, major, n.parse().ok()?));
            }
        }
        None
    };
    match parse(v) {
        Some((rank, major, minor)) => (rank, major, minor, String::new()),
        None => (0, 0, 0, v.to_owned()),
    }
}

/// One aggregated group's `APIGroup` entry: its versions, highest `versionPriority` first.
fn group_entry(group: &str, apiservices: &[Arc<Value>]) -> Option<Value> {
    let mut versions: Vec<&Arc<Value>> = apiservices
        .iter()
        .filter(|a| a["spec"]["group"] == group)
        .collect();
    if versions.is_empty() {
        return None;
    }
    versions.sort_by(|a, b| {
        let va = a["spec"]["version"].as_str().unwrap_or("");
        let vb = b["spec"]["version"].as_str().unwrap_or("");
        priority(b, "versionPriority")
            .cmp(&priority(a, "versionPriority"))
            .then_with(|| version_rank(vb).cmp(&version_rank(va)))
    });
    let list: Vec<Value> = versions
        .iter()
        .map(|a| {
            let v = a["spec"]["version"].as_str().unwrap_or("");
            json!({"groupVersion": format!("{group}/{v}"), "version": v})
        })
        .collect();
    Some(json!({"name": group, "versions": list, "preferredVersion": list[0]}))
}

/// `/apis` with the aggregated groups added after the others (by `groupPriorityMinimum`,
/// highest first).
pub(crate) fn add_groups(group_list: &mut Value, apiservices: &[Arc<Value>]) {
    let mut groups: Vec<(i64, String)> = Vec::new();
    for a in apiservices {
        let g = a["spec"]["group"].as_str().unwrap_or("").to_owned();
        let p = priority(a, "groupPriorityMinimum");
        match groups.iter_mut().find(|(_, name)| *name == g) {
            Some(entry) => entry.0 = entry.0.max(p),
            None => groups.push((p, g)),
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let Some(list) = group_list["groups"].as_array_mut() else {
        return;
    };
    for (_, g) in groups {
        if list.iter().any(|e| e["name"] == g.as_str()) {
            continue;
        }
        if let Some(entry) = group_entry(&g, apiservices) {
            list.push(entry);
        }
    }
}

/// `/apis/GROUP` of an aggregated group.
pub(crate) fn group_document(group: &str, apiservices: &[Arc<Value>]) -> Option<Value> {
    let mut g = group_entry(group, apiservices)?;
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// What the proxy subresources forward ([`super::upstream::forwarded`]), less the user headers a
/// client might forge.
fn forwarded(name: &header::HeaderName) -> bool {
    let n = name.as_str();
    super::upstream::forwarded(name)
        && !(n.starts_with("x-remote-") || n.starts_with("impersonate-"))
}

/// Why a request could not be sent to an extension server (shown inside upstream's "error
/// trying to reach service"), or a user that cannot be put in headers.
#[derive(Debug, thiserror::Error)]
pub enum AggregatorError {
    #[error("user header: {0}")]
    UserHeader(#[source] http::header::InvalidHeaderValue),
    #[error(transparent)]
    Endpoint(#[from] webhook::call::EndpointError),
    #[error(transparent)]
    CaBundle(#[from] webhook::InvalidCaBundle),
    #[error(transparent)]
    Tls(#[from] k1s_api::http_client::HttpClientError),
}

/// The user as the front proxy tells the extension server (upstream's requestheader
/// names; extra keys are percent-encoded as upstream does).
fn user_headers(
    user: &UserInfo,
    headers: &mut http::request::Builder,
) -> Result<(), AggregatorError> {
    let value = |s: &str| HeaderValue::from_str(s).map_err(AggregatorError::UserHeader);
    let mut h = std::mem::take(headers);
    h = h.header("X-Remote-User", value(&user.name)?);
    for g in &user.groups {
        h = h.header("X-Remote-Group", value(g)?);
    }
    for (k, vs) in &user.extra {
        let key: String = k
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        for v in vs {
            h = h.header(format!("X-Remote-Extra-{key}"), value(v)?);
        }
    }
    *headers = h;
    Ok(())
}

/// One request forwarded to an extension server.
pub(crate) struct Forward<'a> {
    pub method: &'a http::Method,
    pub path_and_query: String,
    pub headers: &'a HeaderMap,
    pub body: bytes::Bytes,
    /// Who the request is for (`None`: no user headers, for the availability check).
    pub user: Option<&'a UserInfo>,
}

fn unavailable(apiservice: &str, why: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!("error trying to reach service: {why} (APIService {apiservice})"),
    )
}

/// The TLS client configuration for an APIService: its `caBundle` (or no check with
/// `insecureSkipTLSVerify`), with the front proxy's client certificate.
fn tls_config(
    apiservice: &Value,
    front_proxy: &crate::pki::CertKeyPem,
) -> Result<rustls::ClientConfig, AggregatorError> {
    let cert = front_proxy.cert_pem.as_bytes();
    let key = front_proxy.key_pem.as_bytes();
    let mut config = if apiservice["spec"]["insecureSkipTLSVerify"] == true {
        k1s_api::http_client::unverified_client_tls_config(Some((cert, key)))?
    } else {
        let ca = apiservice["spec"]["caBundle"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(webhook::decode_ca)
            .transpose()?;
        k1s_api::http_client::client_tls_config(
            &k1s_api::http_client::TlsSettings {
                ca_pem: ca,
                client_cert_pem: Some(cert.to_vec()),
                client_key_pem: Some(key.to_vec()),
                ..Default::default()
            },
            true,
        )?
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Where the APIService's Service is reached: (`ip:port`, the name its certificate carries).
async fn endpoint(
    rest: &Rest,
    apiservice: &Value,
) -> Result<(String, String), webhook::call::EndpointError> {
    let svc = &apiservice["spec"]["service"];
    let port = svc["port"].as_u64().unwrap_or(443);
    let hook = json!({"clientConfig": {"service": {
        "namespace": svc["namespace"], "name": svc["name"], "port": port}}});
    let e = webhook::endpoint(rest, &hook, CONNECT_TIMEOUT).await?;
    Ok((e.address, e.server_name))
}

/// Sends `fwd` to the extension server of `apiservice` and streams its answer back.
pub(crate) async fn proxy(
    rest: &Rest,
    front_proxy: Option<&crate::pki::CertKeyPem>,
    apiservice: &Value,
    fwd: Forward<'_>,
) -> Result<Response<Body>, ApiError> {
    let name = apiservice["metadata"]["name"].as_str().unwrap_or("");
    let fail = |e: &dyn std::fmt::Display| unavailable(name, e);
    let front_proxy =
        front_proxy.ok_or_else(|| fail(&"this server has no front proxy certificate"))?;
    let (address, server_name) = endpoint(rest, apiservice).await.map_err(|e| fail(&e))?;
    let tls = tls_config(apiservice, front_proxy).map_err(|e| fail(&e))?;
    let sni = rustls::pki_types::ServerName::try_from(server_name.clone()).map_err(|e| fail(&e))?;
    let connect = super::upstream::dial_tls(&address, sni, tls);
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| fail(&format!("dial tcp {address}: i/o timeout")))?
        .map_err(|e| fail(&e))?;
    let mut request = http::Request::builder()
        .method(fwd.method.clone())
        .uri(&fwd.path_and_query)
        .header(header::HOST, &server_name);
    for (k, v) in fwd.headers {
        if forwarded(k) {
            request = request.header(k, v);
        }
    }
    if let Some(user) = fwd.user {
        user_headers(user, &mut request).map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    let request = request
        .body(http_body_util::Full::new(fwd.body))
        .map_err(|e| ApiError::bad_request(format!("cannot forward this request: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| fail(&e))?;
    // The connection is driven beside the answer's body and ends with it (a watch ends when
    // either side closes).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let answer = sender.send_request(request).await.map_err(|e| fail(&e))?;
    let (parts, incoming) = answer.into_parts();
    let stream = futures::stream::unfold(incoming, |mut b| async move {
        use http_body_util::BodyExt;
        loop {
            match b.frame().await? {
                Ok(frame) => match frame.into_data() {
                    Ok(data) => return Some((data, b)),
                    Err(_) => continue,
                },
                Err(_) => return None,
            }
        }
    });
    let mut resp = Response::new(body::streamed(stream));
    *resp.status_mut() =
        StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    for (k, v) in &parts.headers {
        if !matches!(
            k.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "content-length" | "upgrade"
        ) {
            resp.headers_mut().append(k, v.clone());
        }
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apiservice(group: &str, version: &str, group_prio: i64, version_prio: i64) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version, "service": {"name": "s", "namespace": "n"},
                "groupPriorityMinimum": group_prio, "versionPriority": version_prio}}))
    }

    #[test]
    fn aggregated_groups_are_listed_by_priority() {
        let all = vec![
            apiservice("wardle.example.com", "v1alpha1", 2000, 200),
            apiservice("wardle.example.com", "v1beta1", 2000, 200),
            apiservice("metrics.k8s.io", "v1beta1", 100, 100),
        ];
        let mut list = json!({"kind": "APIGroupList", "groups": [{"name": "apps"}]});
        add_groups(&mut list, &all);
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["apps", "wardle.example.com", "metrics.k8s.io"]);
        let g = group_document("wardle.example.com", &all).unwrap();
        // Equal versionPriority: the Kubernetes version order decides.
        assert_eq!(g["preferredVersion"]["version"], "v1beta1");
        assert_eq!(
            g["versions"][1]["groupVersion"],
            "wardle.example.com/v1alpha1"
        );
        assert_eq!(g["kind"], "APIGroup");
        assert!(group_document("other", &all).is_none());
    }

    #[test]
    fn user_headers_carry_the_user_and_no_forgery_passes() {
        let user = UserInfo {
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [("example.com/team".to_owned(), vec!["a".to_owned()])].into(),
        };
        let mut b = http::Request::builder();
        user_headers(&user, &mut b).unwrap();
        let req = b.body(()).unwrap();
        let h = req.headers();
        assert_eq!(h["x-remote-user"], "alice");
        assert_eq!(h.get_all("x-remote-group").iter().count(), 2);
        assert_eq!(h["x-remote-extra-example.com%2Fteam"], "a");
        for forged in ["x-remote-user", "authorization", "impersonate-user"] {
            assert!(!forwarded(&header::HeaderName::from_static(forged)));
        }
        assert!(forwarded(&header::ACCEPT));
        let bad = UserInfo {
            name: "al\nice".into(),
            ..user
        };
        let e = user_headers(&bad, &mut http::Request::builder()).unwrap_err();
        assert!(matches!(e, AggregatorError::UserHeader(_)));
        assert_eq!(e.to_string(), "user header: failed to parse header value");
    }
}

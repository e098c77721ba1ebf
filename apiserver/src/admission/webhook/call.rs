//! One call of one webhook: the `AdmissionReview` sent (`admission.k8s.io/v1`, or `v1beta1`
//! when the webhook accepts only that), where it goes (a URL, or a Service resolved to one of
//! its ready endpoints), TLS checked against the webhook's `caBundle` (else the system's
//! CAs) under the name upstream checks (`NAME.NAMESPACE.svc` for a Service), the
//! `timeoutSeconds` limit, and the answer read back: allowed or not, the JSON patch of a
//! mutating webhook, warnings. Failures are typed: [`EndpointError`] (a URL that cannot be
//! called), [`PostError`] (the exchange), [`AnswerError`] (an answer upstream would reject).

use std::time::Duration;

use base64::Engine;
use http::header;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port` to connect to.
    pub address: String,
    /// The name its certificate must carry.
    pub server_name: String,
    /// Path and query of the request.
    pub path: String,
    /// For messages: the URL as upstream prints it (with the `timeout` query).
    pub url: String,
}

/// What a webhook answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    /// `response.status` of a refusal.
    pub status: Value,
    /// The decoded JSON patch of a mutating webhook.
    pub patch: Option<Value>,
    pub warnings: Vec<String>,
}

/// A `clientConfig.url` that cannot be called, or a Service that cannot be reached (see
/// [`super::endpoint`]).
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("invalid URL {url:?}: {source}")]
    InvalidUrl {
        url: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("webhook URL {url:?} must use https")]
    NotHttps { url: String },
    #[error("webhook URL {url:?} has no host")]
    NoHost { url: String },
    /// The server does not serve `Service` or `Endpoints` (the name).
    #[error("no {0} resource")]
    NoResource(&'static str),
    /// Reading the Service failed: the API error's message.
    #[error("{}", .0.message)]
    Service(crate::status::ApiError),
    #[error("service \"{name}\" has no port {port}")]
    NoPort { name: String, port: u16 },
    #[error("service \"{name}\" has no ready endpoints")]
    NoReadyEndpoints { name: String },
}

/// A failed exchange with a webhook: upstream's `Post "URL": <reason>`.
#[derive(Debug, thiserror::Error)]
#[error("Post {url:?}: {reason}")]
pub struct PostError {
    /// [`Endpoint::url`].
    pub url: String,
    #[source]
    pub reason: PostFailure,
}

/// What went wrong in [`post`].
#[derive(Debug, thiserror::Error)]
pub enum PostFailure {
    #[error(transparent)]
    Tls(#[from] k1s_api::http_client::HttpClientError),
    #[error("invalid server name {name:?}: {source}")]
    ServerName {
        name: String,
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    #[error(transparent)]
    Dial(#[from] crate::http::upstream::DialError),
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Request(#[from] http::Error),
    #[error(transparent)]
    Exchange(#[from] crate::http::upstream::RoundTripError),
    /// A non-2xx answer; `body` is its first 512 bytes, lossily decoded.
    #[error("the server responded with HTTP {code}: {body}")]
    Status { code: u16, body: String },
    /// The time limit passed. Upstream's words (Go's context error), which clients and the
    /// conformance suite read.
    #[error("context deadline exceeded")]
    Timeout,
}

/// An answer upstream would not accept.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("received invalid webhook response: {0}")]
    Invalid(#[source] serde_json::Error),
    #[error(
        "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
    )]
    Kind { api_version: String, kind: String },
    #[error("webhook response was absent")]
    Absent,
    #[error("expected response.uid={expected:?}, got {got:?}")]
    Uid { expected: String, got: String },
    #[error(
        "webhook returned response.patch but not response.patchType; expected \"JSONPatch\", got {got:?}"
    )]
    PatchType { got: String },
    #[error("received undecodable patch in webhook response: {0}")]
    PatchBase64(#[source] base64::DecodeError),
    #[error("received undecodable patch in webhook response: {0}")]
    PatchJson(#[source] serde_json::Error),
}

/// The versions of `AdmissionReview` k1s speaks, most preferred first.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The `AdmissionReview` version to send: the first of the webhook's
/// `admissionReviewVersions` that k1s speaks.
pub fn review_version(webhook: &Value) -> Option<&'static str> {
    webhook["admissionReviewVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find_map(|v| REVIEW_VERSIONS.iter().copied().find(|k| *k == v))
}

/// The review to send, around `request` (the `request` object of the review).
pub fn review(version: &str, request: Value) -> Value {
    json!({
        "apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// Reads a webhook's answer to the review with `uid`, as upstream checks it (a `v1` answer
/// must name its kind and version and echo the uid).
pub fn parse_answer(version: &str, uid: &str, body: &[u8]) -> Result<Answer, AnswerError> {
    let review: Value = serde_json::from_slice(body).map_err(AnswerError::Invalid)?;
    if version == "v1" {
        let api_version = review["apiVersion"].as_str().unwrap_or("");
        let kind = review["kind"].as_str().unwrap_or("");
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            return Err(AnswerError::Kind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            });
        }
    }
    let response = &review["response"];
    if !response.is_object() {
        return Err(AnswerError::Absent);
    }
    if version == "v1" && response["uid"].as_str() != Some(uid) {
        return Err(AnswerError::Uid {
            expected: uid.to_owned(),
            got: response["uid"].as_str().unwrap_or("").to_owned(),
        });
    }
    let patch = match response["patch"].as_str().filter(|p| !p.is_empty()) {
        None => None,
        Some(p) => {
            if version == "v1" && response["patchType"].as_str() != Some("JSONPatch") {
                return Err(AnswerError::PatchType {
                    got: response["patchType"].as_str().unwrap_or("").to_owned(),
                });
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(AnswerError::PatchBase64)?;
            let patch: Value = serde_json::from_slice(&bytes).map_err(AnswerError::PatchJson)?;
            Some(patch)
        }
    };
    Ok(Answer {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        status: response["status"].clone(),
        patch,
        warnings: response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    })
}

/// The endpoint of a `clientConfig.url` (`https://host[:port]/path`).
pub fn url_endpoint(url: &str, timeout: Duration) -> Result<Endpoint, EndpointError> {
    let uri: http::Uri = url.parse().map_err(|source| EndpointError::InvalidUrl {
        url: url.to_owned(),
        source,
    })?;
    if uri.scheme_str() != Some("https") {
        return Err(EndpointError::NotHttps {
            url: url.to_owned(),
        });
    }
    let host = uri.host().ok_or_else(|| EndpointError::NoHost {
        url: url.to_owned(),
    })?;
    let port = uri.port_u16().unwrap_or(443);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let address = if bare.contains(':') {
        format!("[{bare}]:{port}")
    } else {
        format!("{bare}:{port}")
    };
    let path = with_timeout(uri.path(), uri.query(), timeout);
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
    Ok(Endpoint {
        address,
        server_name: bare.to_owned(),
        url: format!("https://{authority}{path}"),
        path,
    })
}

/// The endpoint of a `clientConfig.service` reached at `ip:port`.
pub fn service_endpoint(
    namespace: &str,
    name: &str,
    path: Option<&str>,
    port: u16,
    ip: &str,
    target_port: u16,
    timeout: Duration,
) -> Endpoint {
    let path = path.filter(|p| !p.is_empty()).unwrap_or("/");
    let (path_only, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let address = if ip.contains(':') {
        format!("[{ip}]:{target_port}")
    } else {
        format!("{ip}:{target_port}")
    };
    let host = format!("{name}.{namespace}.svc");
    let path = with_timeout(path_only, query, timeout);
    Endpoint {
        address,
        url: format!("https://{host}:{port}{path}"),
        server_name: host,
        path,
    }
}

/// Upstream sends the webhook's time limit as `?timeout=Ns`.
fn with_timeout(path: &str, query: Option<&str>, timeout: Duration) -> String {
    let path = if path.is_empty() { "/" } else { path };
    let t = format!("timeout={}s", timeout.as_secs());
    match query.filter(|q| !q.is_empty()) {
        Some(q) => format!("{path}?{q}&{t}"),
        None => format!("{path}?{t}"),
    }
}

/// Posts `review` to `endpoint` over TLS (trusting `ca_bundle`, else the system's CAs) and
/// returns the answer's body, within `timeout`.
pub async fn post(
    endpoint: &Endpoint,
    ca_bundle: Option<&[u8]>,
    review: &Value,
    timeout: Duration,
) -> Result<bytes::Bytes, PostError> {
    let exchange = async {
        let tls = k1s_api::http_client::client_tls_config(
            &k1s_api::http_client::TlsSettings {
                ca_pem: ca_bundle.map(<[u8]>::to_vec),
                ..Default::default()
            },
            true,
        )?;
        let name = server_name(&endpoint.server_name)?;
        let stream = crate::http::upstream::dial_tls(&endpoint.address, name, tls).await?;
        let body = serde_json::to_vec(review)?;
        let request = http::Request::post(&endpoint.path)
            .header(header::HOST, &endpoint.server_name)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(bytes::Bytes::from(body)))?;
        let (parts, body) =
            crate::http::upstream::round_trip(TokioIo::new(stream), request).await?;
        if !parts.status.is_success() {
            return Err(PostFailure::Status {
                code: parts.status.as_u16(),
                body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
            });
        }
        Ok(body)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or(Err(PostFailure::Timeout))
        .map_err(|reason| PostError {
            url: endpoint.url.clone(),
            reason,
        })
}

fn server_name(name: &str) -> Result<rustls::pki_types::ServerName<'static>, PostFailure> {
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) => Ok(rustls::pki_types::ServerName::IpAddress(ip.into())),
        Err(_) => rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(|source| {
            PostFailure::ServerName {
                name: name.to_owned(),
                source,
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_urls_and_paths() {
        assert_eq!(
            review_version(&json!({"admissionReviewVersions": ["v2", "v1beta1", "v1"]})),
            Some("v1beta1")
        );
        assert_eq!(
            review_version(&json!({"admissionReviewVersions": ["v2"]})),
            None
        );
        let t = Duration::from_secs(10);
        let e = url_endpoint("https://127.0.0.1:8443/mutate?x=1", t).unwrap();
        assert_eq!(e.address, "127.0.0.1:8443");
        assert_eq!(e.server_name, "127.0.0.1");
        assert_eq!(e.path, "/mutate?x=1&timeout=10s");
        assert!(url_endpoint("http://example.com/", t).is_err());
        let e = url_endpoint("https://[::1]/", t).unwrap();
        assert_eq!(
            (e.address.as_str(), e.path.as_str()),
            ("[::1]:443", "/?timeout=10s")
        );
        let s = service_endpoint("ns", "hook", Some("/validate"), 443, "10.42.0.7", 8443, t);
        assert_eq!(s.address, "10.42.0.7:8443");
        assert_eq!(s.server_name, "hook.ns.svc");
        assert_eq!(s.path, "/validate?timeout=10s");
        assert_eq!(s.url, "https://hook.ns.svc:443/validate?timeout=10s");
        assert_eq!(e.url, "https://[::1]/?timeout=10s");
    }

    #[test]
    fn answers_are_checked_as_upstream() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u1", "allowed": true, "warnings": ["careful"],
                "patchType": "JSONPatch",
                "patch": base64::engine::general_purpose::STANDARD
                    .encode(br#"[{"op":"add","path":"/data/x","value":"y"}]"#)}});
        let a = parse_answer("v1", "u1", ok.to_string().as_bytes()).unwrap();
        assert!(a.allowed);
        assert_eq!(a.warnings, vec!["careful".to_string()]);
        assert_eq!(a.patch.unwrap()[0]["path"], "/data/x");
        assert!(parse_answer("v1", "other", ok.to_string().as_bytes()).is_err());
        let no_type = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u1", "allowed": true, "patch": "W10="}});
        assert!(parse_answer("v1", "u1", no_type.to_string().as_bytes()).is_err());
        // v1beta1 answers need neither the uid nor the kind.
        let old = json!({"response": {"allowed": false, "status": {"message": "no"}}});
        let a = parse_answer("v1beta1", "u1", old.to_string().as_bytes()).unwrap();
        assert!(!a.allowed);
        assert_eq!(a.status["message"], "no");
        assert!(parse_answer("v1", "u1", b"not json").is_err());
    }

    #[test]
    fn answer_errors_keep_upstream_wording() {
        let body = |v: Value| v.to_string().into_bytes();
        let e = parse_answer("v1", "u1", b"not json").unwrap_err();
        assert!(matches!(e, AnswerError::Invalid(_)));
        assert!(
            e.to_string()
                .starts_with("received invalid webhook response: expected ident"),
            "{e}"
        );
        let e = parse_answer(
            "v1",
            "u1",
            &body(json!({"apiVersion": "v1", "kind": "Pod"})),
        )
        .unwrap_err();
        assert!(matches!(e, AnswerError::Kind { .. }));
        assert_eq!(
            e.to_string(),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Pod"
        );
        let head = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
        let e = parse_answer("v1", "u1", &body(head.clone())).unwrap_err();
        assert!(matches!(e, AnswerError::Absent));
        assert_eq!(e.to_string(), "webhook response was absent");
        let mut r = head.clone();
        r["response"] = json!({"uid": "u2"});
        let e = parse_answer("v1", "u1", &body(r)).unwrap_err();
        assert!(matches!(e, AnswerError::Uid { .. }));
        assert_eq!(e.to_string(), r#"expected response.uid="u1", got "u2""#);
        let mut r = head.clone();
        r["response"] = json!({"uid": "u1", "patch": "W10="});
        let e = parse_answer("v1", "u1", &body(r)).unwrap_err();
        assert!(matches!(e, AnswerError::PatchType { .. }));
        assert_eq!(
            e.to_string(),
            r#"webhook returned response.patch but not response.patchType; expected "JSONPatch", got """#
        );
        let mut r = head.clone();
        r["response"] = json!({"uid": "u1", "patchType": "JSONPatch", "patch": "!!"});
        let e = parse_answer("v1", "u1", &body(r)).unwrap_err();
        assert!(matches!(e, AnswerError::PatchBase64(_)));
        assert!(
            e.to_string()
                .starts_with("received undecodable patch in webhook response: Invalid"),
            "{e}"
        );
        let mut r = head;
        r["response"] = json!({"uid": "u1", "patchType": "JSONPatch", "patch": "e30="});
        assert!(parse_answer("v1", "u1", &body(r)).is_ok());
        let e = parse_answer(
            "v1beta1",
            "u1",
            &body(json!({"response": {"patch": "bm9w"}})),
        )
        .unwrap_err();
        assert!(matches!(e, AnswerError::PatchJson(_)));
    }

    #[test]
    fn url_and_post_errors_keep_upstream_wording() {
        let t = Duration::from_secs(10);
        let e = url_endpoint("http://example.com/", t).unwrap_err();
        assert!(matches!(e, EndpointError::NotHttps { .. }));
        assert_eq!(
            e.to_string(),
            r#"webhook URL "http://example.com/" must use https"#
        );
        let e = url_endpoint("https:///x", t).unwrap_err();
        assert!(matches!(e, EndpointError::InvalidUrl { .. }));
        assert!(
            e.to_string().starts_with(r#"invalid URL "https:///x": "#),
            "{e}"
        );
        let e = url_endpoint("/relative", t).unwrap_err();
        assert!(matches!(e, EndpointError::NotHttps { .. }));
        let e = PostError {
            url: "https://hook.ns.svc:443/?timeout=10s".into(),
            reason: PostFailure::Status {
                code: 500,
                body: "boom".into(),
            },
        };
        assert_eq!(
            e.to_string(),
            r#"Post "https://hook.ns.svc:443/?timeout=10s": the server responded with HTTP 500: boom"#
        );
        let e = PostError {
            url: "https://h/".into(),
            reason: PostFailure::Timeout,
        };
        assert_eq!(
            e.to_string(),
            r#"Post "https://h/": context deadline exceeded"#
        );
        let e = server_name("bad name!").unwrap_err();
        assert!(matches!(e, PostFailure::ServerName { .. }));
        assert!(
            e.to_string()
                .starts_with(r#"invalid server name "bad name!": "#),
            "{e}"
        );
    }
}

//! Reaching what stands behind a Service or a URL, shared by the pod and service proxy
//! ([`super::proxy`]), admission and conversion webhooks and the aggregator: the port a Service
//! port names, one ready endpoint picked as upstream picks it, the headers a proxy passes on,
//! a TLS connection to an address ([`dial_tls`]), and one HTTP/1.1 exchange over a connection.
//! Nothing here reads the cluster.

use http::header;
use http_body_util::{BodyExt, Full};
use rand::Rng;
use serde_json::Value;

/// Limit for an answer's body.
const MAX_BODY: usize = 64 << 20;

/// The name of the service port `port` names: a number is mapped to its port's name; empty
/// means the service's only (unnamed) port, named `""`.
pub fn service_port_name(svc: &Value, port: &str) -> Option<String> {
    let Ok(number) = port.parse::<i64>() else {
        return Some(port.to_owned());
    };
    svc["spec"]["ports"]
        .as_array()?
        .iter()
        .find(|p| p["port"].as_i64() == Some(number))
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
}

/// A ready address and port of `endpoints` for the port named `port_name`: a subset holding
/// that port picked at random, then one of its addresses at random (upstream's choice).
pub fn pick_endpoint(
    endpoints: &Value,
    port_name: &str,
    rng: &mut impl Rng,
) -> Option<(String, u16)> {
    let subsets = endpoints["subsets"].as_array()?;
    if subsets.is_empty() {
        return None;
    }
    let start = rng.random_range(0..subsets.len());
    for i in 0..subsets.len() {
        let subset = &subsets[(start + i) % subsets.len()];
        let addresses = subset["addresses"].as_array().filter(|a| !a.is_empty());
        let port = subset["ports"].as_array().and_then(|ports| {
            ports
                .iter()
                .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
        });
        if let (Some(addresses), Some(port)) = (addresses, port) {
            let address = &addresses[rng.random_range(0..addresses.len())];
            let ip = address["ip"].as_str()?.to_owned();
            let port = u16::try_from(port["port"].as_i64()?).ok()?;
            return Some((ip, port));
        }
    }
    None
}

/// Headers that belong to one connection and are not forwarded (RFC 9110 §7.6.1), and the
/// client's credentials.
pub fn forwarded(name: &header::HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "authorization"
            | "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// Why [`dial_tls`] found no connection, worded as Go's dialer and TLS client.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("dial tcp {address}: {source}")]
    Dial {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("tls: {0}")]
    Handshake(#[source] std::io::Error),
}

/// A TCP connection to `address` with a TLS session on it for `server_name`.
pub async fn dial_tls(
    address: &str,
    server_name: rustls::pki_types::ServerName<'static>,
    tls: rustls::ClientConfig,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, DialError> {
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|source| DialError::Dial {
            address: address.to_string(),
            source,
        })?;
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls))
        .connect(server_name, tcp)
        .await
        .map_err(DialError::Handshake)
}

/// An HTTP/1.1 exchange that failed: hyper's error (handshake, request, connection), or the
/// body that could not be read (or was over [`MAX_BODY`]). Shown as the underlying error.
#[derive(Debug, thiserror::Error)]
pub enum RoundTripError {
    #[error(transparent)]
    Http(#[from] hyper::Error),
    #[error("{0}")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// One HTTP/1.1 exchange on `io`: the answer's head and whole body (up to [`MAX_BODY`]). The
/// connection is driven here, beside the exchange, and ends with it.
pub async fn round_trip<I>(
    io: I,
    request: http::Request<Full<bytes::Bytes>>,
) -> Result<(http::response::Parts, bytes::Bytes), RoundTripError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    let exchange = async {
        let response = sender.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = http_body_util::Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(RoundTripError::Body)?
            .to_bytes();
        Ok((parts, body))
    };
    tokio::pin!(exchange);
    tokio::select! {
        answer = &mut exchange => answer,
        closed = conn => match closed {
            Ok(()) => exchange.await,
            Err(e) => Err(e.into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dial_errors_are_worded_as_go_words_them() {
        let e = DialError::Dial {
            address: "10.0.0.1:443".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert_eq!(e.to_string(), "dial tcp 10.0.0.1:443: connection refused");
    }

    #[test]
    fn service_ports_by_number_map_to_their_names() {
        let svc = json!({"spec": {"ports": [
            {"name": "http", "port": 80}, {"name": "tls", "port": 443}]}});
        assert_eq!(service_port_name(&svc, "443").as_deref(), Some("tls"));
        assert_eq!(service_port_name(&svc, "http").as_deref(), Some("http"));
        assert_eq!(service_port_name(&svc, "8080"), None);
        let unnamed = json!({"spec": {"ports": [{"port": 80}]}});
        assert_eq!(service_port_name(&unnamed, "").as_deref(), Some(""));
        assert_eq!(service_port_name(&unnamed, "80").as_deref(), Some(""));
    }

    #[test]
    fn endpoints_are_picked_among_subsets_holding_the_port() {
        let eps = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "other", "port": 9}]},
            {"notReadyAddresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "http", "port": 8080}]},
            {"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}],
             "ports": [{"name": "http", "port": 8080}]},
        ]});
        let mut rng = rand::rng();
        for _ in 0..20 {
            let (ip, port) = pick_endpoint(&eps, "http", &mut rng).unwrap();
            assert!(ip == "10.0.0.2" || ip == "10.0.0.3", "{ip}");
            assert_eq!(port, 8080);
        }
        assert_eq!(pick_endpoint(&eps, "nope", &mut rng), None);
        assert_eq!(
            pick_endpoint(&json!({"subsets": []}), "http", &mut rng),
            None
        );
    }

    #[test]
    fn credentials_and_hop_by_hop_headers_stay_behind() {
        assert!(!forwarded(&header::AUTHORIZATION));
        assert!(!forwarded(&header::CONNECTION));
        assert!(forwarded(&header::ACCEPT));
        assert!(forwarded(&header::CONTENT_TYPE));
    }
}

//! What the tests' own HTTPS servers (admission and conversion webhooks, an extension API
//! server) share: the TLS configuration, the accept loop on a thread of its own, reading one
//! HTTP/1.1 request off a connection and answering it.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};

/// One request read off `conn`: its head (request line and headers) and its body (by
/// `Content-Length`); `None` when the peer goes away first.
pub async fn read_request<S: AsyncRead + Unpin>(conn: &mut S) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_len, body_len) = loop {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, len);
        }
    };
    while data.len() < head_len + body_len {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&data[..head_len]).into_owned();
    Some((head, data[head_len..head_len + body_len].to_vec()))
}

/// A TLS server configuration (HTTP/1.1) for `cert_pem`/`key_pem`, requiring client
/// certificates from `client_ca_pem` when given.
pub fn server_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: Option<&str>,
) -> rustls::ServerConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(c.unwrap()).unwrap();
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// One TLS connection of a test server.
pub type Conn = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// Serves TLS on a free loopback port, on a thread of its own: each connection that
/// completes the handshake goes to `handle`. The port.
pub fn serve_tls<F, Fut>(config: rustls::ServerConfig, handle: F) -> u16
where
    F: Fn(Conn) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let handle = Arc::new(handle);
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            port_tx.send(listener.local_addr().unwrap().port()).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, handle) = (acceptor.clone(), handle.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        handle(tls).await;
                    }
                });
            }
        });
    });
    port_rx.recv().unwrap()
}

/// Answers `code` with a JSON `body` and closes the connection.
pub async fn respond(conn: &mut Conn, code: u16, body: &str) {
    use tokio::io::AsyncWriteExt;
    let answer = format!(
        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(answer.as_bytes()).await;
    let _ = conn.shutdown().await;
}

//! [`TlsSettings`]: what a client needs to reach an API server securely — the CA to trust,
//! the client certificate and key or bearer token to present, the server name to verify.
//!
//! Plain data shared by [`crate::http_client`] (which builds the rustls configuration from it)
//! and [`crate::kubeconfig`] (which resolves a context into it).

/// How to reach the server securely: the CA to trust and the credentials to present. The
/// bearer token is here too because it travels only over the TLS connection these settings
/// make. `Debug` does not print keys or tokens.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM certificates trusted to sign the server's certificate (the cluster CA). `None`: the
    /// system's CA bundle (`$SSL_CERT_FILE`, else the usual Linux paths).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM client certificate (chain) for client-certificate authentication.
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM private key of `client_cert_pem` (PKCS#8, PKCS#1 or SEC1).
    pub client_key_pem: Option<Vec<u8>>,
    /// Sent as `Authorization: Bearer <token>` on every request.
    pub bearer_token: Option<String>,
    /// The name the server certificate must carry, when not the URL's host.
    pub server_name: Option<String>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .field(
                "client_cert_pem",
                &self.client_cert_pem.as_ref().map(Vec::len),
            )
            .field(
                "client_key_pem",
                &self.client_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

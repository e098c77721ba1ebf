//! Client certificate authentication, shared by the API server's port and the kubelet's: CN
//! is the user, each O a group.
//!
//! The TLS handshake accepts any client certificate whose holder proves possession of its key
//! (`DeferredClientVerifier`); whether the certificate chains to the cluster CA and is within
//! its validity is decided per connection afterwards ([`ClientCertCheck`]), so that a
//! certificate from another CA, or an expired one, gets kube-apiserver's 401 Status instead of
//! a failed handshake.

use std::sync::Arc;

use rustls::DistinguishedName;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The user of the API server's client certificate towards kubelets (upstream's name).
pub const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";
/// Its group: kubelets let it do everything.
pub const KUBELET_CLIENT_GROUP: &str = "system:masters";

/// What the TLS layer learned about a connection's client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PeerCert {
    /// None presented.
    #[default]
    None,
    /// Chained to the cluster CA: its subject's common name and organizations, valid until
    /// `not_after` (Unix seconds).
    Valid {
        name: String,
        groups: Vec<String>,
        not_after: i64,
    },
    /// Presented but not acceptable (another CA, expired, malformed): why.
    Invalid(String),
}

/// Checks a connection's client certificate chain against the cluster CA.
#[derive(Debug, Clone)]
pub struct ClientCertCheck {
    strict: Arc<dyn ClientCertVerifier>,
}

impl ClientCertCheck {
    /// `strict` verifies chains to the cluster CA (rustls' WebPKI client verifier).
    pub fn new(strict: Arc<dyn ClientCertVerifier>) -> Self {
        Self { strict }
    }

    /// The verifier for the TLS handshake: asks for a certificate, checks the holder's
    /// signature, and leaves the chain to [`Self::check`].
    pub fn deferred_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(DeferredClientVerifier {
            strict: self.strict.clone(),
        })
    }

    /// The identity of a connection with these peer certificates (leaf first).
    pub fn check(&self, certs: Option<&[CertificateDer<'_>]>) -> PeerCert {
        let Some((leaf, intermediates)) = certs.and_then(<[_]>::split_first) else {
            return PeerCert::None;
        };
        if let Err(e) = self
            .strict
            .verify_client_cert(leaf, intermediates, UnixTime::now())
        {
            return PeerCert::Invalid(e.to_string());
        }
        match identity(leaf) {
            Ok((name, groups, not_after)) => PeerCert::Valid {
                name,
                groups,
                not_after,
            },
            Err(why) => PeerCert::Invalid(why.to_string()),
        }
    }
}

/// Why a verified certificate names no user.
#[derive(Debug, thiserror::Error)]
enum IdentityError {
    /// The certificate does not parse as X.509.
    #[error(transparent)]
    Parse(#[from] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("the certificate has no common name")]
    NoCommonName,
}

/// The common name, organizations and expiry (Unix seconds) of a verified certificate.
fn identity(der: &CertificateDer<'_>) -> Result<(String, Vec<String>, i64), IdentityError> {
    let (_, cert) = X509Certificate::from_der(der)?;
    let subject = cert.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .filter(|s| !s.is_empty())
        .ok_or(IdentityError::NoCommonName)?;
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    Ok((cn.to_owned(), groups, cert.validity().not_after.timestamp()))
}

/// Accepts any client certificate whose signature checks out; see the module docs.
#[derive(Debug)]
struct DeferredClientVerifier {
    strict: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for DeferredClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.strict.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.strict.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.strict.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.strict.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_errors() {
        let der = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01]);
        let e = identity(&der).unwrap_err();
        let parse = X509Certificate::from_der(&der).unwrap_err();
        assert!(matches!(e, IdentityError::Parse(_)));
        assert_eq!(e.to_string(), parse.to_string());
        assert_eq!(
            IdentityError::NoCommonName.to_string(),
            "the certificate has no common name"
        );
    }
}

//! The etcd backend over TLS with client certificates (etcd `--client-cert-auth`), as an HA
//! control plane off loopback would run it; and clear errors when the TLS settings are wrong.

#[path = "support/etcd.rs"]
mod etcd_support;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use etcd_support::{EtcdServer, ServerTls};
use k1s_store::etcd::{EtcdStore, EtcdTls};
use k1s_store::{Store, StoreError};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// A CA, an etcd serving certificate for 127.0.0.1 and a client certificate, as PEM files.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn write(dir: &Path, name: &str, pem: String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path
}

fn make_pki(dir: &Path, ca_name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "etcd",
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) =
        leaf(vec![], "k1s-apiserver", ExtendedKeyUsagePurpose::ClientAuth);
    Pki {
        ca: write(dir, "ca.pem", ca_cert.pem()),
        server_cert: write(dir, "server.pem", server_cert),
        server_key: write(dir, "server-key.pem", server_key),
        client_cert: write(dir, "client.pem", client_cert),
        client_key: write(dir, "client-key.pem", client_key),
    }
}

#[tokio::test]
async fn etcd_over_tls_with_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path(), "k1s-test-etcd-ca");
    let etcd = EtcdServer::start_tls(ServerTls {
        ca: pki.ca.clone(),
        cert: pki.server_cert.clone(),
        key: pki.server_key.clone(),
    });
    let endpoint = etcd.endpoint();
    assert!(endpoint.starts_with("https://"));
    let tls = EtcdTls {
        ca_file: Some(pki.ca.clone()),
        cert_file: Some(pki.client_cert.clone()),
        key_file: Some(pki.client_key.clone()),
    };
    let store = EtcdStore::connect_with_tls(std::slice::from_ref(&endpoint), &tls)
        .await
        .unwrap();
    let rev = store
        .create("/tls/a", Bytes::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(
        store.get("/tls/a").await.unwrap().unwrap().mod_revision,
        rev
    );

    // No CA given for an https endpoint: a message that names the flag.
    let err = EtcdStore::connect(std::slice::from_ref(&endpoint))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--datastore-cafile"), "{err}");

    // Without a client certificate etcd refuses the connection.
    let no_client = EtcdTls {
        ca_file: Some(pki.ca.clone()),
        ..Default::default()
    };
    let err = EtcdStore::connect_with_tls(std::slice::from_ref(&endpoint), &no_client)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");

    // A CA that did not sign etcd's certificate: refused, not trusted.
    let other = tempfile::tempdir().unwrap();
    let wrong = make_pki(other.path(), "some-other-ca");
    let wrong_ca = EtcdTls {
        ca_file: Some(wrong.ca),
        cert_file: Some(pki.client_cert.clone()),
        key_file: Some(pki.client_key.clone()),
    };
    let err = EtcdStore::connect_with_tls(std::slice::from_ref(&endpoint), &wrong_ca)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");

    // A certificate without its key, or a missing file: clear argument errors.
    let half = EtcdTls {
        ca_file: Some(pki.ca.clone()),
        cert_file: Some(pki.client_cert.clone()),
        key_file: None,
    };
    let err = EtcdStore::connect_with_tls(std::slice::from_ref(&endpoint), &half)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err:?}");
    let missing = EtcdTls {
        ca_file: Some(dir.path().join("nope.pem")),
        ..Default::default()
    };
    let err = EtcdStore::connect_with_tls(std::slice::from_ref(&endpoint), &missing)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope.pem"), "{err}");
}

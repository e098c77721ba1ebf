//! The CA pin of a join token (`K10<ca-hash>::user:password`, k3s's format): the hash both
//! the server (when it prints its token) and a joining agent (when it checks the CA it
//! downloaded) compute.

use sha2::Digest;

/// SHA-256 of the CA certificate PEM, lowercase hex.
pub fn ca_hash(ca_pem: &str) -> String {
    sha2::Sha256::digest(ca_pem.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hash_of_a_known_text() {
        assert_eq!(
            super::ca_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

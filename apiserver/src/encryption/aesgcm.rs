//! One AES-GCM key of the `aesgcm` provider and upstream's value format:
//! `k8s:enc:aesgcm:v1:<name>:` + 12-byte random nonce + ciphertext + 16-byte tag, with the
//! storage key as additional authenticated data (so a value copied to another key does not
//! decrypt). AES-128 and AES-256 come from `ring`, which has no AES-192.

use std::fmt;

use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The prefix every aesgcm value starts with, before the key name.
pub const PREFIX: &str = "k8s:enc:aesgcm:v1:";
/// Bytes after the name's prefix that any value has at least: the nonce and the tag.
const OVERHEAD: usize = NONCE_LEN + 16;

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("secret is not valid base64")]
    NotBase64,
    #[error(
        "secret is {0} bytes long; aesgcm keys must be 16 or 32 bytes (24-byte AES-192 keys are not supported by k1s)"
    )]
    Length(usize),
}

/// Why a value did not decrypt.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error("the value is too short to hold a nonce and a tag")]
    Truncated,
    #[error("authentication failed (wrong key or damaged data)")]
    Authentication,
}

/// The system's random number generator gave no bytes.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
#[error("the system random number generator failed")]
pub struct RandomFailed;

/// Why a value could not be encrypted.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    /// No nonce.
    #[error(transparent)]
    Random(#[from] RandomFailed),
    #[error("AES-GCM sealing failed")]
    Seal,
}

/// A named AES-GCM key.
pub struct AesGcmKey {
    name: String,
    /// `k8s:enc:aesgcm:v1:<name>:`.
    prefix: Vec<u8>,
    key: LessSafeKey,
}

impl fmt::Debug for AesGcmKey {
    // Never the key material.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesGcmKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AesGcmKey {
    /// A key from its configured name and base64 secret.
    pub fn new(name: &str, secret_b64: &str) -> Result<Self, KeyError> {
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(secret_b64.trim())
            .map_err(|_| KeyError::NotBase64)?;
        let alg = match raw.len() {
            16 => &AES_128_GCM,
            32 => &AES_256_GCM,
            n => return Err(KeyError::Length(n)),
        };
        let unbound = UnboundKey::new(alg, &raw).map_err(|_| KeyError::Length(raw.len()))?;
        Ok(Self {
            name: name.to_owned(),
            prefix: format!("{PREFIX}{name}:").into_bytes(),
            key: LessSafeKey::new(unbound),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `k8s:enc:aesgcm:v1:<name>:`: values this key wrote start with it.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Encrypts `plain` for the storage key `aad`.
    pub fn seal(&self, rng: &SystemRandom, aad: &str, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill(&mut nonce).map_err(|_| RandomFailed)?;
        let mut out = Vec::with_capacity(self.prefix.len() + OVERHEAD + plain.len());
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad.as_bytes()),
                &mut body,
            )
            .map_err(|_| SealError::Seal)?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Decrypts a value that starts with [`Self::prefix`], stored under the key `aad`.
    pub fn open(&self, aad: &str, stored: &[u8]) -> Result<Vec<u8>, OpenError> {
        let rest = stored
            .strip_prefix(self.prefix.as_slice())
            .ok_or(OpenError::Authentication)?;
        if rest.len() < OVERHEAD {
            return Err(OpenError::Truncated);
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| OpenError::Truncated)?;
        let mut body = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad.as_bytes()), &mut body)
            .map_err(|_| OpenError::Authentication)?;
        Ok(plain.to_vec())
    }
}

/// A new random 32-byte key, base64-encoded (for generated configurations and rotation).
pub fn random_secret() -> Result<String, RandomFailed> {
    use base64::Engine;
    let mut raw = [0u8; 32];
    SystemRandom::new()
        .fill(&mut raw)
        .map_err(|_| RandomFailed)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn key(name: &str, len: usize, byte: u8) -> AesGcmKey {
        let secret = base64::engine::general_purpose::STANDARD.encode(vec![byte; len]);
        AesGcmKey::new(name, &secret).unwrap()
    }

    #[test]
    fn round_trip_with_both_key_sizes() {
        let rng = SystemRandom::new();
        for len in [16, 32] {
            let k = key("k1", len, 7);
            let sealed = k
                .seal(&rng, "/registry/core/secrets/d/s", b"hello")
                .unwrap();
            assert!(sealed.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
            assert!(!sealed.windows(5).any(|w| w == b"hello"));
            assert_eq!(sealed.len(), "k8s:enc:aesgcm:v1:k1:".len() + 12 + 5 + 16);
            assert_eq!(
                k.open("/registry/core/secrets/d/s", &sealed).unwrap(),
                b"hello"
            );
        }
    }

    #[test]
    fn nonces_differ_between_writes() {
        let rng = SystemRandom::new();
        let k = key("k1", 32, 7);
        let a = k.seal(&rng, "/k", b"same").unwrap();
        let b = k.seal(&rng, "/k", b"same").unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn wrong_key_other_storage_key_and_truncation_fail() {
        let rng = SystemRandom::new();
        let k = key("k1", 32, 7);
        let sealed = k.seal(&rng, "/a", b"hello").unwrap();
        // Same name, other material.
        let other = key("k1", 32, 8);
        assert_eq!(other.open("/a", &sealed), Err(OpenError::Authentication));
        // The value moved to another key.
        assert_eq!(k.open("/b", &sealed), Err(OpenError::Authentication));
        // Cut anywhere: too short, or the tag no longer matches.
        assert_eq!(
            k.open("/a", &sealed[..k.prefix().len() + 20]),
            Err(OpenError::Truncated)
        );
        assert_eq!(
            k.open("/a", &sealed[..sealed.len() - 1]),
            Err(OpenError::Authentication)
        );
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(k.open("/a", &flipped), Err(OpenError::Authentication));
    }

    #[test]
    fn bad_secrets_are_refused() {
        assert_eq!(
            AesGcmKey::new("k", "not base64!").unwrap_err(),
            KeyError::NotBase64
        );
        let b64 = |n| base64::engine::general_purpose::STANDARD.encode(vec![1u8; n]);
        assert_eq!(
            AesGcmKey::new("k", &b64(24)).unwrap_err(),
            KeyError::Length(24)
        );
        assert_eq!(
            AesGcmKey::new("k", &b64(10)).unwrap_err(),
            KeyError::Length(10)
        );
        let generated = random_secret().unwrap();
        assert!(AesGcmKey::new("k", &generated).is_ok());
    }

    #[test]
    fn debug_shows_no_key_material() {
        let k = key("visible", 32, 9);
        let s = format!("{k:?}");
        assert!(s.contains("visible"));
        assert!(!s.contains("CQkJ"));
    }

    #[test]
    fn seal_errors_read_as_before() {
        assert_eq!(
            SealError::from(RandomFailed).to_string(),
            "the system random number generator failed"
        );
        assert_eq!(SealError::Seal.to_string(), "AES-GCM sealing failed");
    }
}

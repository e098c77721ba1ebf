//! Content digests: parsing and checking `sha256:<hex>` strings, and hashing readers and writers
//! so that every byte that enters the store is verified against the digest it claims.

use std::io::{self, Read, Write};

use sha2::{Digest as _, Sha256};

/// The only algorithm the store accepts.
pub const SHA256_PREFIX: &str = "sha256:";

/// The hex part of a `sha256:<64 lowercase hex>` digest, or `None` if it is not one.
///
/// The store only ever builds paths from digests that passed this check, so a digest cannot
/// name a file outside the store.
pub fn sha256_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix(SHA256_PREFIX)?;
    (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(hex)
}

/// `sha256:<hex>` of `data`.
pub fn sha256_of(data: &[u8]) -> String {
    let mut hasher = Hasher::default();
    hasher.update(data);
    hasher.finish()
}

/// An incremental SHA-256 that also counts bytes.
#[derive(Default, Clone)]
pub struct Hasher {
    inner: Sha256,
    bytes: u64,
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        self.inner.update(data);
        self.bytes += data.len() as u64;
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// `sha256:<hex>` of everything seen so far.
    pub fn finish(&self) -> String {
        let sum = self.inner.clone().finalize();
        let mut out = String::with_capacity(SHA256_PREFIX.len() + 64);
        out.push_str(SHA256_PREFIX);
        for b in sum.iter() {
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A reader that hashes what is read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: Hasher,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Hasher::default(),
        }
    }

    /// Reads the rest of the stream (e.g. the zero blocks after a tar's end marker), so the
    /// digest covers all of it, and returns the digest.
    pub fn drain_and_finish(&mut self) -> io::Result<String> {
        io::copy(self, &mut io::sink())?;
        Ok(self.hasher.finish())
    }

    pub fn bytes(&self) -> u64 {
        self.hasher.bytes()
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// A writer that hashes what is written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Hasher,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Hasher::default(),
        }
    }

    pub fn hasher(&self) -> &Hasher {
        &self.hasher
    }

    pub fn into_inner(self) -> (W, Hasher) {
        (self.inner, self.hasher)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        assert_eq!(
            sha256_of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_of(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hex_validation() {
        let ok = sha256_of(b"x");
        assert!(sha256_hex(&ok).is_some());
        assert!(sha256_hex("sha256:../../etc/passwd").is_none());
        assert!(sha256_hex("sha512:abcd").is_none());
        assert!(sha256_hex(&ok.to_uppercase()).is_none());
    }

    #[test]
    fn hashing_reader_and_writer_agree() {
        let data = vec![7u8; 100_000];
        let mut r = HashingReader::new(&data[..]);
        let mut w = HashingWriter::new(Vec::new());
        io::copy(&mut r, &mut w).unwrap();
        assert_eq!(r.drain_and_finish().unwrap(), sha256_of(&data));
        assert_eq!(w.hasher().finish(), sha256_of(&data));
        assert_eq!(w.hasher().bytes(), 100_000);
    }
}

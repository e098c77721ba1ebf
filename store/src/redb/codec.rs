//! Binary encoding of the records in the `kv` and `log` tables (layouts in `docs/store.md`).
//!
//! Decoding never panics: a record that does not parse is reported as corruption.

use bytes::Bytes;

use crate::{Event, EventKind, KeyValue, Revision};

/// A record that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("malformed {table} record: {detail}")]
pub struct DecodeError {
    pub table: &'static str,
    pub detail: String,
}

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;

/// `kv` table value: `create_revision i64 LE | mod_revision i64 LE | value bytes`.
pub fn encode_kv(create: Revision, modified: Revision, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + value.len());
    out.extend_from_slice(&create.to_le_bytes());
    out.extend_from_slice(&modified.to_le_bytes());
    out.extend_from_slice(value);
    out
}

/// The revisions of a `kv` record, without copying its value.
pub fn kv_revisions(rec: &[u8]) -> Result<(Revision, Revision), DecodeError> {
    let mut r = Reader::new(rec, "kv");
    Ok((r.i64()?, r.i64()?))
}

pub fn decode_kv(key: &str, rec: &[u8]) -> Result<KeyValue, DecodeError> {
    let (create_revision, mod_revision) = kv_revisions(rec)?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: Bytes::copy_from_slice(&rec[16..]),
        create_revision,
        mod_revision,
    })
}

/// `log` table value (key: the revision):
/// `kind u8 | key_len u32 | key | create_revision i64 | value_len u32 | value |
///  has_prev u8 [| prev_create i64 | prev_mod i64 | prev_value (rest)]`.
pub fn encode_log(
    kind: EventKind,
    key: &str,
    create: Revision,
    value: &[u8],
    prev: Option<&KeyValue>,
) -> Vec<u8> {
    let prev_len = prev.map_or(0, |p| 16 + p.value.len());
    let mut out = Vec::with_capacity(1 + 4 + key.len() + 8 + 4 + value.len() + 1 + prev_len);
    out.push(match kind {
        EventKind::Put => KIND_PUT,
        EventKind::Delete => KIND_DELETE,
    });
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&create.to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(value);
    match prev {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            out.extend_from_slice(&p.create_revision.to_le_bytes());
            out.extend_from_slice(&p.mod_revision.to_le_bytes());
            out.extend_from_slice(&p.value);
        }
    }
    out
}

/// The key of a `log` record, without decoding the rest.
pub fn log_key(rec: &[u8]) -> Result<&str, DecodeError> {
    let mut r = Reader::new(rec, "log");
    r.u8()?;
    r.str()
}

/// Decodes a `log` record written at `revision` into the event a watcher sees.
pub fn decode_log(revision: Revision, rec: &[u8]) -> Result<Event, DecodeError> {
    let mut r = Reader::new(rec, "log");
    let kind = match r.u8()? {
        KIND_PUT => EventKind::Put,
        KIND_DELETE => EventKind::Delete,
        other => return Err(r.err(format!("unknown event kind {other}"))),
    };
    let key = r.str()?.to_owned();
    let create_revision = r.i64()?;
    let value_len = r.u32()? as usize;
    let value = Bytes::copy_from_slice(r.take(value_len)?);
    let prev = match r.u8()? {
        0 => None,
        1 => {
            let create_revision = r.i64()?;
            let mod_revision = r.i64()?;
            Some(KeyValue {
                key: key.clone(),
                value: Bytes::copy_from_slice(r.rest()),
                create_revision,
                mod_revision,
            })
        }
        other => return Err(r.err(format!("bad prev marker {other}"))),
    };
    Ok(Event {
        kind,
        kv: KeyValue {
            key,
            value,
            create_revision,
            mod_revision: revision,
        },
        prev,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    table: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], table: &'static str) -> Self {
        Self { buf, pos: 0, table }
    }

    fn err(&self, detail: String) -> DecodeError {
        DecodeError {
            table: self.table,
            detail,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(self.err(format!(
                "truncated at byte {} (wanted {n} more of {})",
                self.pos,
                self.buf.len()
            )));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(a))
    }

    fn str(&mut self) -> Result<&'a str, DecodeError> {
        let len = self.u32()? as usize;
        let b = self.take(len)?;
        std::str::from_utf8(b).map_err(|e| self.err(format!("key is not utf-8: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_round_trip() {
        let rec = encode_kv(3, 9, b"hello");
        let kv = decode_kv("/a", &rec).unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision), (3, 9));
        assert_eq!(&kv.value[..], b"hello");
        assert!(kv_revisions(&rec[..10]).is_err());
    }

    #[test]
    fn log_round_trip_with_and_without_prev() {
        let prev = KeyValue {
            key: "/k".into(),
            value: Bytes::from_static(b"old"),
            create_revision: 2,
            mod_revision: 4,
        };
        let rec = encode_log(EventKind::Put, "/k", 2, b"new", Some(&prev));
        let ev = decode_log(7, &rec).unwrap();
        assert_eq!(ev.kind, EventKind::Put);
        assert_eq!(ev.kv.mod_revision, 7);
        assert_eq!(&ev.kv.value[..], b"new");
        assert_eq!(ev.prev, Some(prev));
        assert_eq!(log_key(&rec).unwrap(), "/k");

        let rec = encode_log(EventKind::Delete, "/k", 0, b"", None);
        let ev = decode_log(8, &rec).unwrap();
        assert_eq!((ev.kind, ev.prev), (EventKind::Delete, None));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = decode_log(1, &junk);
            let _ = decode_kv("/x", &junk);
        }
        let mut rec = encode_log(EventKind::Put, "/k", 2, b"v", None);
        rec[0] = 9;
        assert!(decode_log(1, &rec).is_err());
        rec[0] = KIND_PUT;
        rec[1] = 0xff; // key length far beyond the record
        assert!(decode_log(1, &rec).is_err());
    }
}

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

/// `has_prev` markers of a `log` record.
const PREV_NONE: u8 = 0;
/// The previous value follows inline (format 1 records).
const PREV_INLINE: u8 = 1;
/// Only the previous revisions follow; the value is the `log` record at `prev_mod` (format 2).
const PREV_REF: u8 = 2;

/// `kv` table value (format 2): `create_revision i64 LE | mod_revision i64 LE`. The value is
/// the `log` record at `mod_revision`.
pub fn encode_kv(create: Revision, modified: Revision) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&create.to_le_bytes());
    out[8..].copy_from_slice(&modified.to_le_bytes());
    out
}

/// The revisions of a `kv` record: `(create_revision, mod_revision)`.
pub fn kv_revisions(rec: &[u8]) -> Result<(Revision, Revision), DecodeError> {
    let mut r = Reader::new(rec, "kv");
    Ok((r.i64()?, r.i64()?))
}

/// A format 1 `kv` record (`create_revision | mod_revision | value bytes`), read only to
/// migrate a store to format 2.
pub fn decode_kv_v1(key: &str, rec: &[u8]) -> Result<KeyValue, DecodeError> {
    let (create_revision, mod_revision) = kv_revisions(rec)?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: Bytes::copy_from_slice(&rec[16..]),
        create_revision,
        mod_revision,
    })
}

/// `log` table value (key: the revision):
/// `kind u8 | key_len u32 | key | create_revision i64 | value_len u32 | value | has_prev u8
///  [| prev_create i64 | prev_mod i64 [| prev_value (rest), format 1 only]]`.
///
/// A change names the key's previous revision instead of copying its value: that value is the
/// `log` record at `prev_mod`, which compaction keeps while this record is readable.
pub fn encode_log(
    kind: EventKind,
    key: &str,
    create: Revision,
    value: &[u8],
    prev: Option<(Revision, Revision)>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 4 + key.len() + 8 + 4 + value.len() + 1 + 16);
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
        None => out.push(PREV_NONE),
        Some((prev_create, prev_mod)) => {
            out.push(PREV_REF);
            out.extend_from_slice(&prev_create.to_le_bytes());
            out.extend_from_slice(&prev_mod.to_le_bytes());
        }
    }
    out
}

/// The previous state a `log` record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prev<'a> {
    None,
    /// Carried in the record (format 1).
    Inline {
        create: Revision,
        modified: Revision,
        value: &'a [u8],
    },
    /// The value is the `log` record at `modified` (format 2).
    Ref {
        create: Revision,
        modified: Revision,
    },
}

impl Prev<'_> {
    /// The previous revision, if any.
    pub fn revision(&self) -> Option<Revision> {
        match self {
            Prev::None => None,
            Prev::Inline { modified, .. } | Prev::Ref { modified, .. } => Some(*modified),
        }
    }
}

/// A `log` record read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecord<'a> {
    pub kind: EventKind,
    pub key: &'a str,
    pub create: Revision,
    pub value: &'a [u8],
    pub prev: Prev<'a>,
}

impl<'a> LogRecord<'a> {
    pub fn parse(rec: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(rec, "log");
        let kind = match r.u8()? {
            KIND_PUT => EventKind::Put,
            KIND_DELETE => EventKind::Delete,
            other => return Err(r.err(format!("unknown event kind {other}"))),
        };
        let key = r.str()?;
        let create = r.i64()?;
        let value_len = r.u32()? as usize;
        let value = r.take(value_len)?;
        let prev = match r.u8()? {
            PREV_NONE => Prev::None,
            PREV_INLINE => Prev::Inline {
                create: r.i64()?,
                modified: r.i64()?,
                value: r.rest(),
            },
            PREV_REF => Prev::Ref {
                create: r.i64()?,
                modified: r.i64()?,
            },
            other => return Err(r.err(format!("bad prev marker {other}"))),
        };
        Ok(Self {
            kind,
            key,
            create,
            value,
            prev,
        })
    }

    /// The event this record, written at `revision`, is to a watcher. `prev_value` is the
    /// value of the previous revision, for a record that names it by reference (read from the
    /// `log` record at that revision).
    pub fn event(
        &self,
        revision: Revision,
        prev_value: Option<Bytes>,
    ) -> Result<Event, DecodeError> {
        let key = self.key.to_owned();
        let prev = match self.prev {
            Prev::None => None,
            Prev::Inline {
                create,
                modified,
                value,
            } => Some(KeyValue {
                key: key.clone(),
                value: Bytes::copy_from_slice(value),
                create_revision: create,
                mod_revision: modified,
            }),
            Prev::Ref { create, modified } => Some(KeyValue {
                key: key.clone(),
                value: prev_value.ok_or_else(|| DecodeError {
                    table: "log",
                    detail: format!(
                        "the change at revision {revision} names revision {modified}, which is missing"
                    ),
                })?,
                create_revision: create,
                mod_revision: modified,
            }),
        };
        Ok(Event {
            kind: self.kind,
            kv: KeyValue {
                key,
                value: Bytes::copy_from_slice(self.value),
                create_revision: self.create,
                mod_revision: revision,
            },
            prev,
        })
    }
}

/// The key of a `log` record, without decoding the rest.
pub fn log_key(rec: &[u8]) -> Result<&str, DecodeError> {
    let mut r = Reader::new(rec, "log");
    r.u8()?;
    r.str()
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
        let rec = encode_kv(3, 9);
        assert_eq!(kv_revisions(&rec).unwrap(), (3, 9));
        assert!(kv_revisions(&rec[..10]).is_err());
        let mut v1 = rec.to_vec();
        v1.extend_from_slice(b"hello");
        let kv = decode_kv_v1("/a", &v1).unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision), (3, 9));
        assert_eq!(&kv.value[..], b"hello");
    }

    #[test]
    fn log_round_trip_with_and_without_prev() {
        let rec = encode_log(EventKind::Put, "/k", 2, b"new", Some((2, 4)));
        let parsed = LogRecord::parse(&rec).unwrap();
        assert_eq!(
            parsed,
            LogRecord {
                kind: EventKind::Put,
                key: "/k",
                create: 2,
                value: b"new",
                prev: Prev::Ref {
                    create: 2,
                    modified: 4
                },
            }
        );
        assert_eq!(parsed.prev.revision(), Some(4));
        let ev = parsed.event(7, Some(Bytes::from_static(b"old"))).unwrap();
        assert_eq!(ev.kind, EventKind::Put);
        assert_eq!(ev.kv.mod_revision, 7);
        assert_eq!(&ev.kv.value[..], b"new");
        let prev = KeyValue {
            key: "/k".into(),
            value: Bytes::from_static(b"old"),
            create_revision: 2,
            mod_revision: 4,
        };
        assert_eq!(ev.prev, Some(prev));
        // A referenced value that cannot be found is corruption, not an empty value.
        assert!(parsed.event(7, None).is_err());
        assert_eq!(log_key(&rec).unwrap(), "/k");

        let rec = encode_log(EventKind::Delete, "/k", 0, b"", None);
        let ev = LogRecord::parse(&rec).unwrap().event(8, None).unwrap();
        assert_eq!((ev.kind, ev.prev), (EventKind::Delete, None));
    }

    #[test]
    fn format_1_records_carry_their_prev_inline() {
        // As format 1 wrote them: the previous value follows the revisions.
        let mut rec = encode_log(EventKind::Put, "/k", 2, b"new", None);
        rec.pop();
        rec.push(PREV_INLINE);
        rec.extend_from_slice(&2i64.to_le_bytes());
        rec.extend_from_slice(&4i64.to_le_bytes());
        rec.extend_from_slice(b"old");
        let parsed = LogRecord::parse(&rec).unwrap();
        assert_eq!(
            parsed.prev,
            Prev::Inline {
                create: 2,
                modified: 4,
                value: b"old"
            }
        );
        let ev = parsed.event(7, None).unwrap();
        assert_eq!(ev.prev.map(|p| p.value), Some(Bytes::from_static(b"old")));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = LogRecord::parse(&junk);
            let _ = decode_kv_v1("/x", &junk);
            let _ = kv_revisions(&junk);
        }
        let mut rec = encode_log(EventKind::Put, "/k", 2, b"v", None);
        rec[0] = 9;
        assert!(LogRecord::parse(&rec).is_err());
        rec[0] = KIND_PUT;
        rec[1] = 0xff; // key length far beyond the record
        assert!(LogRecord::parse(&rec).is_err());
        let mut rec = encode_log(EventKind::Put, "/k", 2, b"v", Some((1, 1)));
        rec.truncate(rec.len() - 3); // a cut reference
        assert!(LogRecord::parse(&rec).is_err());
    }
}

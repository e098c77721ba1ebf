//! Bounds-checked reader for the protobuf wire format.

use super::ProtobufError;

pub(super) const VARINT: u8 = 0;
const FIXED64: u8 = 1;
pub(super) const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// Cursor over one message's bytes. Never reads out of bounds.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtobufError> {
        let rest = &self.buf[self.pos..];
        if rest.len() < n {
            return Err(ProtobufError::Truncated(what));
        }
        self.pos += n;
        Ok(&rest[..n])
    }

    pub(super) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(ProtobufError::Truncated("varint"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(ProtobufError::VarintOverflow);
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError::VarintOverflow)
    }

    /// A length-delimited payload.
    pub(super) fn bytes(&mut self) -> Result<&'a [u8], ProtobufError> {
        let len = self.varint()?;
        let remaining = self.buf.len() - self.pos;
        match usize::try_from(len) {
            Ok(n) if n <= remaining => self.take(n, "length-delimited field"),
            _ => Err(ProtobufError::Truncated("length-delimited field")),
        }
    }

    /// A field key: (field number, wire type).
    pub(super) fn key(&mut self) -> Result<(u32, u8), ProtobufError> {
        let key = self.varint()?;
        let wire_type = (key & 7) as u8;
        let num = key >> 3;
        if num == 0 || num > (1 << 29) - 1 {
            return Err(ProtobufError::InvalidFieldNumber(num));
        }
        Ok((num as u32, wire_type))
    }

    /// Skips a field of an unknown number.
    pub(super) fn skip(&mut self, wire_type: u8) -> Result<(), ProtobufError> {
        match wire_type {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8, "fixed64 value").map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => self.take(4, "fixed32 value").map(drop),
            other => Err(ProtobufError::InvalidWireType(other)),
        }
    }
}

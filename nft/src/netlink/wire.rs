//! The nf_tables netlink wire format: attributes (type-length-value, 4-byte aligned, nested
//! ones flagged), messages (a netlink header and the nfnetlink `nfgenmsg`), and the batch that
//! wraps a transaction's messages between `NFNL_MSG_BATCH_BEGIN` and `NFNL_MSG_BATCH_END`
//! so the kernel commits them at once or not at all.
//!
//! Numbers are protocol facts from the kernel's UAPI (`linux/netfilter/nf_tables.h`,
//! `linux/netfilter/nfnetlink.h`); multi-byte values are big-endian unless the attribute is
//! register data (host order, as the kernel compares it).

/// `NFNL_SUBSYS_NFTABLES`: the high byte of every nf_tables message type.
pub const SUBSYS_NFTABLES: u16 = 10;
/// `NFPROTO_IPV4`, the `ip` family.
pub const FAMILY_IPV4: u8 = 2;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_CREATE: u16 = 0x400;
pub const NLM_F_APPEND: u16 = 0x800;
/// Set on an attribute that holds attributes.
const NLA_F_NESTED: u16 = 0x8000;

pub const NLMSG_ERROR: u16 = 2;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;

/// nf_tables message kinds (`enum nf_tables_msg_types`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgType {
    NewTable = 0,
    DelTable = 2,
    NewChain = 3,
    DelChain = 5,
    NewRule = 6,
    DelRule = 8,
    NewSet = 9,
    DelSet = 11,
    NewSetElem = 12,
    DelSetElem = 14,
    GetGen = 16,
}

/// Attributes being written; [`Attrs::nested`] writes a nested one.
#[derive(Debug, Default, Clone)]
pub struct Attrs {
    pub buf: Vec<u8>,
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

impl Attrs {
    pub fn bytes(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        let len = 4 + value.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(pad4(self.buf.len()), 0);
        self
    }

    /// A NUL-terminated string.
    pub fn string(&mut self, kind: u16, value: &str) -> &mut Self {
        let len = 4 + value.len() + 1;
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(0);
        self.buf.resize(pad4(self.buf.len()), 0);
        self
    }

    pub fn u32_be(&mut self, kind: u16, value: u32) -> &mut Self {
        self.bytes(kind, &value.to_be_bytes())
    }

    pub fn u64_be(&mut self, kind: u16, value: u64) -> &mut Self {
        self.bytes(kind, &value.to_be_bytes())
    }

    pub fn u8(&mut self, kind: u16, value: u8) -> &mut Self {
        self.bytes(kind, &[value])
    }

    /// An attribute holding the attributes `fill` writes.
    pub fn nested(&mut self, kind: u16, fill: impl FnOnce(&mut Attrs)) -> &mut Self {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        let mut inner = Attrs {
            buf: std::mem::take(&mut self.buf),
        };
        fill(&mut inner);
        self.buf = inner.buf;
        let len = (self.buf.len() - start) as u16;
        self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self.buf[start + 2..start + 4].copy_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        self
    }
}

/// One transaction's messages, framed as a batch.
#[derive(Debug)]
pub struct Batch {
    pub buf: Vec<u8>,
    seq: u32,
    /// The sequence number of each message and the script line it came from (an index
    /// among the script's lines), so a rejection can say which command the kernel refused.
    pub origins: Vec<(u32, usize)>,
}

fn header(buf: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by `finish`
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    buf.push(family);
    buf.push(0); // NFNETLINK_V0
    buf.extend_from_slice(&res_id.to_be_bytes());
    start
}

fn finish(buf: &mut [u8], start: usize) {
    let len = (buf.len() - start) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

impl Batch {
    /// Opens a batch; `seq_base` keeps this batch's sequence numbers apart from the last one's.
    pub fn new(seq_base: u32) -> Batch {
        let mut buf = Vec::with_capacity(1 << 16);
        let start = header(
            &mut buf,
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            seq_base,
            0,
            SUBSYS_NFTABLES,
        );
        finish(&mut buf, start);
        Batch {
            buf,
            seq: seq_base,
            origins: Vec::new(),
        }
    }

    /// Appends one nf_tables message of the `ip` family, its attributes written by `fill`
    /// in place.
    pub fn message(
        &mut self,
        kind: MsgType,
        flags: u16,
        line: usize,
        fill: impl FnOnce(&mut Attrs),
    ) {
        self.seq = self.seq.wrapping_add(1);
        let start = header(
            &mut self.buf,
            (SUBSYS_NFTABLES << 8) | kind as u16,
            NLM_F_REQUEST | flags,
            self.seq,
            FAMILY_IPV4,
            0,
        );
        let mut attrs = Attrs {
            buf: std::mem::take(&mut self.buf),
        };
        fill(&mut attrs);
        self.buf = attrs.buf;
        finish(&mut self.buf, start);
        self.origins.push((self.seq, line));
    }

    /// How many messages it holds (begin and end aside).
    pub fn len(&self) -> usize {
        self.origins.len()
    }

    pub fn is_empty(&self) -> bool {
        self.origins.is_empty()
    }

    /// Closes the batch: the bytes to send, and the sequence number of its first message.
    pub fn end(mut self) -> (Vec<u8>, Vec<(u32, usize)>, u32) {
        self.seq = self.seq.wrapping_add(1);
        let start = header(
            &mut self.buf,
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            self.seq,
            0,
            SUBSYS_NFTABLES,
        );
        finish(&mut self.buf, start);
        (self.buf, self.origins, self.seq)
    }
}

/// A request outside any batch (`NFT_MSG_GETGEN` with an acknowledgement): its answer comes
/// after every answer to the batch sent before it on the same socket.
pub fn get_gen(seq: u32) -> Vec<u8> {
    let mut buf = Vec::new();
    let start = header(
        &mut buf,
        (SUBSYS_NFTABLES << 8) | MsgType::GetGen as u16,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        0,
        0,
    );
    finish(&mut buf, start);
    buf
}

/// One message received from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub kind: u16,
    pub seq: u32,
    /// For `NLMSG_ERROR`: 0 (an acknowledgement) or a negative errno, the sequence number of
    /// the message it answers, and the kernel's extended message if it gave one.
    pub error: Option<(i32, u32, Option<String>)>,
}

/// Splits what one `recv` returned into messages.
pub fn parse(mut data: &[u8]) -> Vec<Received> {
    let mut out = Vec::new();
    while data.len() >= 16 {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len < 16 || len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        let flags = u16::from_ne_bytes([data[6], data[7]]);
        let seq = u32::from_ne_bytes([data[8], data[9], data[10], data[11]]);
        let body = &data[16..len];
        let error = (kind == NLMSG_ERROR && body.len() >= 20).then(|| {
            let errno = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
            let orig = &body[4..];
            let orig_len = u32::from_ne_bytes([orig[0], orig[1], orig[2], orig[3]]) as usize;
            let orig_seq = u32::from_ne_bytes([orig[8], orig[9], orig[10], orig[11]]);
            // NLM_F_CAPPED: only the header was echoed; NLM_F_ACK_TLVS: extended ack follows.
            let echoed = if flags & 0x100 != 0 {
                16
            } else {
                pad4(orig_len)
            };
            let msg = if flags & 0x200 != 0 {
                extack_message(orig.get(echoed..).unwrap_or_default())
            } else {
                None
            };
            (errno, orig_seq, msg)
        });
        out.push(Received { kind, seq, error });
        data = &data[pad4(len).min(data.len())..];
    }
    out
}

/// `NLMSGERR_ATTR_MSG` from an extended acknowledgement.
fn extack_message(mut tlvs: &[u8]) -> Option<String> {
    while tlvs.len() >= 4 {
        let len = u16::from_ne_bytes([tlvs[0], tlvs[1]]) as usize;
        let kind = u16::from_ne_bytes([tlvs[2], tlvs[3]]) & !NLA_F_NESTED;
        if len < 4 || len > tlvs.len() {
            break;
        }
        if kind == 1 {
            let text = &tlvs[4..len];
            let text = text.split(|b| *b == 0).next().unwrap_or_default();
            return Some(String::from_utf8_lossy(text).into_owned());
        }
        tlvs = &tlvs[pad4(len).min(tlvs.len())..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_and_nested_ones_flagged() {
        let mut a = Attrs::default();
        a.string(1, "t").nested(4, |n| {
            n.u32_be(1, 0).u32_be(2, (-100i32) as u32);
        });
        // "t\0" → length 6, padded to 8; the nest: 4 + 2 × 8.
        assert_eq!(&a.buf[..8], &[6, 0, 1, 0, b't', 0, 0, 0]);
        assert_eq!(&a.buf[8..12], &[20, 0, 4, 0x80]);
        assert_eq!(&a.buf[24..28], &[0xff, 0xff, 0xff, 0x9c]);
        assert_eq!(a.buf.len(), 28);
    }

    #[test]
    fn a_batch_is_framed_by_begin_and_end_for_the_nftables_subsystem() {
        let mut b = Batch::new(100);
        b.message(MsgType::NewTable, NLM_F_CREATE, 7, |a| {
            a.string(1, "t");
        });
        let (buf, origins, last) = b.end();
        assert_eq!(origins, vec![(101, 7)]);
        assert_eq!(last, 102);
        // begin: 20 bytes, type 16, res_id 10 big-endian.
        assert_eq!(&buf[..4], &20u32.to_ne_bytes());
        assert_eq!(&buf[4..6], &16u16.to_ne_bytes());
        assert_eq!(&buf[16..20], &[0, 0, 0, 10]);
        // the table: type 10 << 8, request + create, family ip.
        assert_eq!(&buf[24..26], &2560u16.to_ne_bytes());
        assert_eq!(&buf[26..28], &(0x401u16).to_ne_bytes());
        assert_eq!(buf[36], FAMILY_IPV4);
        let end = buf.len() - 20;
        assert_eq!(&buf[end + 4..end + 6], &17u16.to_ne_bytes());
    }

    #[test]
    fn errors_name_the_message_they_answer() {
        let mut msg = Vec::new();
        msg.extend_from_slice(&44u32.to_ne_bytes());
        msg.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        msg.extend_from_slice(&0x300u16.to_ne_bytes()); // capped, with TLVs
        msg.extend_from_slice(&7u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&(-2i32).to_ne_bytes());
        // the echoed header of message 5
        msg.extend_from_slice(&40u32.to_ne_bytes());
        msg.extend_from_slice(&2566u16.to_ne_bytes());
        msg.extend_from_slice(&0u16.to_ne_bytes());
        msg.extend_from_slice(&5u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        let mut tlv = Attrs::default();
        tlv.string(1, "no");
        msg.extend_from_slice(&tlv.buf);
        let got = parse(&msg);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].error, Some((-2, 5, Some("no".into()))));
    }
}

//! Rules: the statements of the k1s rulesets compiled to expressions, as nft compiles them
//! (byte-aligned prefixes compared on the bytes they cover, other prefixes masked;
//! concatenations in consecutive 4-byte registers; each statement starting again at
//! register 1).

use std::net::Ipv4Addr;

use super::set::Field;
use super::{Cursor, Unsupported, unquote, unsupported};
use crate::netlink::expr::{
    Base, CmpOp, Expr, MetaKey, NAT_RANDOM_FULLY, REG_1, REG_2, REG_VERDICT, REG32_00, Verdict,
};

/// A value loaded into a register: a packet field, or a random number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    IpSaddr,
    IpDaddr,
    L4Proto,
    ThDport,
    /// `numgen random mod N`.
    Numgen(u32),
}

impl Selector {
    /// Parses a selector starting with `first`; `None` (nothing consumed after `first`) when
    /// `first` does not start one.
    pub fn parse(first: &str, c: &mut Cursor<'_>) -> Result<Option<Selector>, Unsupported> {
        let s = match (first, c.peek()) {
            ("ip", Some("saddr")) => Selector::IpSaddr,
            ("ip", Some("daddr")) => Selector::IpDaddr,
            ("meta", Some("l4proto")) => Selector::L4Proto,
            ("th", Some("dport")) => Selector::ThDport,
            ("numgen", Some("random")) => {
                c.next()?;
                c.expect("mod")?;
                let m = number(c.next()?)?;
                if m == 0 {
                    return unsupported("numgen mod 0");
                }
                // `numgen random mod N` then its value; `offset` is not used by k1s.
                return Ok(Some(Selector::Numgen(m)));
            }
            _ => return Ok(None),
        };
        c.next()?;
        Ok(Some(s))
    }

    pub fn field(self) -> Field {
        match self {
            Selector::IpSaddr | Selector::IpDaddr => Field::Ipv4,
            Selector::L4Proto => Field::Proto,
            Selector::ThDport => Field::Service,
            Selector::Numgen(_) => Field::Integer,
        }
    }

    fn len(self) -> u32 {
        self.field().size() as u32
    }

    /// Loads `len` bytes of the value (fewer for a byte-aligned prefix) into `reg`.
    fn load(self, len: u32, reg: u32) -> Expr {
        match self {
            Selector::IpSaddr | Selector::IpDaddr => Expr::Payload {
                base: Base::Network,
                offset: if self == Selector::IpSaddr { 12 } else { 16 },
                len,
                dreg: reg,
            },
            Selector::ThDport => Expr::Payload {
                base: Base::Transport,
                offset: 2,
                len,
                dreg: reg,
            },
            Selector::L4Proto => Expr::Meta {
                key: MetaKey::L4Proto,
                dreg: reg,
            },
            Selector::Numgen(modulus) => Expr::Numgen { dreg: reg, modulus },
        }
    }

    /// How nft describes the expression in a `typeof` set's userdata: its expression type
    /// (`EXPR_PAYLOAD` 7, `EXPR_META` 9, `EXPR_NUMGEN` 23) and TLVs of its own (a payload's
    /// protocol and header field, a meta key, numgen's type, modulus and offset).
    pub fn typeof_udata(self) -> (u32, Vec<u8>) {
        let mut u = Vec::new();
        let mut tlv = |kind: u8, v: u32| {
            u.push(kind);
            u.push(4);
            u.extend_from_slice(&v.to_ne_bytes());
        };
        let kind = match self {
            // PROTO_DESC_IP 12; IPHDR_SADDR 11, IPHDR_DADDR 12
            Selector::IpSaddr | Selector::IpDaddr => {
                tlv(0, 12);
                tlv(1, if self == Selector::IpSaddr { 11 } else { 12 });
                7
            }
            // PROTO_DESC_TH 11; THDR_DPORT 2
            Selector::ThDport => {
                tlv(0, 11);
                tlv(1, 2);
                7
            }
            Selector::L4Proto => {
                tlv(0, MetaKey::L4Proto as u32);
                9
            }
            // NFT_NG_RANDOM 1
            Selector::Numgen(m) => {
                tlv(0, 1);
                tlv(1, m);
                tlv(2, 0);
                23
            }
        };
        (kind, u)
    }
}

pub fn protocol(name: &str) -> Result<u8, Unsupported> {
    Ok(match name {
        "tcp" => 6,
        "udp" => 17,
        "sctp" => 132,
        "icmp" => 1,
        n => n
            .parse()
            .or_else(|_| unsupported(format!("protocol {n}")))?,
    })
}

pub fn number(t: &str) -> Result<u32, Unsupported> {
    let v = match t.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => t.parse(),
    };
    v.or_else(|_| unsupported(format!("number {t}")))
}

/// A verdict keyword (`jump`/`goto` take the next token); `None` if `word` is not one.
pub fn verdict(word: &str, c: &mut Cursor<'_>) -> Result<Option<Verdict>, Unsupported> {
    Ok(Some(match word {
        "accept" => Verdict::Accept,
        "drop" => Verdict::Drop,
        "return" => Verdict::Return,
        "jump" => Verdict::Jump(c.next()?.to_string()),
        "goto" => Verdict::Goto(c.next()?.to_string()),
        _ => return Ok(None),
    }))
}

/// A 4-byte register value in host order (marks, `ct state` bits, route types, `numgen`).
fn host_u32(v: u32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

/// Compiles a comparison of `sel` with the value `t`.
fn compare(sel: Selector, op: CmpOp, t: &str, out: &mut Vec<Expr>) -> Result<(), Unsupported> {
    let cmp = |data| Expr::Cmp {
        sreg: REG_1,
        op,
        data,
    };
    match sel {
        Selector::IpSaddr | Selector::IpDaddr => {
            let (addr, prefix) = match t.split_once('/') {
                Some((a, p)) => (a, p.parse::<u32>().ok().filter(|p| (1..=32).contains(p))),
                None => (t, Some(32)),
            };
            let (Ok(addr), Some(prefix)) = (addr.parse::<Ipv4Addr>(), prefix) else {
                return unsupported(format!("address {t}"));
            };
            let bytes = addr.octets();
            if prefix % 8 == 0 {
                let n = prefix / 8;
                out.push(sel.load(n, REG_1));
                out.push(cmp(bytes[..n as usize].to_vec()));
            } else {
                let mask = (u32::MAX << (32 - prefix)).to_be_bytes();
                let net: Vec<u8> = bytes.iter().zip(mask).map(|(b, m)| b & m).collect();
                out.push(sel.load(4, REG_1));
                out.push(Expr::Bitwise {
                    reg: REG_1,
                    mask: mask.to_vec(),
                    xor: vec![0; 4],
                });
                out.push(cmp(net));
            }
        }
        Selector::L4Proto => {
            out.push(sel.load(1, REG_1));
            out.push(cmp(vec![protocol(t)?]));
        }
        Selector::ThDport => {
            let port: u16 = t.parse().or_else(|_| unsupported(format!("port {t}")))?;
            out.push(sel.load(2, REG_1));
            out.push(cmp(port.to_be_bytes().to_vec()));
        }
        Selector::Numgen(m) => {
            let v = number(t)?;
            if v >= m {
                return unsupported(format!("numgen mod {m} compared with {v}"));
            }
            out.push(sel.load(4, REG_1));
            out.push(cmp(host_u32(v)));
        }
    }
    Ok(())
}

/// Loads a concatenation from register 1 on, each field in the next 4-byte slots.
fn load_concat(sels: &[Selector], out: &mut Vec<Expr>) {
    let mut slot = 0;
    for s in sels {
        let reg = if slot == 0 { REG_1 } else { REG32_00 + slot };
        out.push(s.load(s.len(), reg));
        slot += s.len().div_ceil(4);
    }
}

/// Selectors joined by `.` after `first`.
fn concat(first: Selector, c: &mut Cursor<'_>) -> Result<Vec<Selector>, Unsupported> {
    let mut sels = vec![first];
    while c.eat(".") {
        let t = c.next()?;
        match Selector::parse(t, c)? {
            Some(s) => sels.push(s),
            None => return unsupported(format!("{t} in a concatenation")),
        }
    }
    Ok(sels)
}

/// The set named by `@name` at the cursor, if there is one.
fn set_name<'a>(c: &mut Cursor<'a>) -> Option<&'a str> {
    let name = c.peek()?.strip_prefix('@')?;
    c.at += 1;
    Some(name)
}

fn ct_bits(list: &str) -> Result<u32, Unsupported> {
    let mut bits = 0;
    for s in list.split(',') {
        bits |= match s {
            "invalid" => 1,
            "established" => 2,
            "related" => 4,
            "new" => 8,
            "untracked" => 64,
            s => return unsupported(format!("ct state {s}")),
        };
    }
    Ok(bits)
}

/// One rule: its expressions and its comment.
pub fn rule(c: &mut Cursor<'_>) -> Result<(Vec<Expr>, Option<String>), Unsupported> {
    let mut out = Vec::with_capacity(8);
    let mut comment = None;
    while !c.done() {
        let t = c.next()?;
        if let Some(first) = Selector::parse(t, c)? {
            let sels = concat(first, c)?;
            let vmap = c.eat("vmap");
            if let Some(set) = set_name(c) {
                // A set membership test, or with `vmap` a verdict map lookup.
                load_concat(&sels, &mut out);
                out.push(Expr::Lookup {
                    set: set.to_string(),
                    sreg: REG_1,
                    dreg: vmap.then_some(REG_VERDICT),
                });
            } else if vmap || sels.len() > 1 {
                return unsupported("an anonymous set or a concatenation outside a lookup");
            } else {
                let op = if c.eat("!=") { CmpOp::Neq } else { CmpOp::Eq };
                compare(first, op, c.next()?, &mut out)?;
            }
            continue;
        }
        match t {
            "ct" => {
                c.expect("state")?;
                let bits = ct_bits(c.next()?)?;
                out.push(Expr::CtState { dreg: REG_1 });
                out.push(Expr::Bitwise {
                    reg: REG_1,
                    mask: host_u32(bits),
                    xor: host_u32(0),
                });
                out.push(Expr::Cmp {
                    sreg: REG_1,
                    op: CmpOp::Neq,
                    data: host_u32(0),
                });
            }
            "iifname" | "oifname" => {
                let op = if c.eat("!=") { CmpOp::Neq } else { CmpOp::Eq };
                let name = unquote(c.next()?)?;
                if name.len() >= 16 || name.contains('*') {
                    return unsupported(format!("interface name {name}"));
                }
                let mut data = name.into_bytes();
                data.resize(16, 0);
                let key = if t == "iifname" {
                    MetaKey::IifName
                } else {
                    MetaKey::OifName
                };
                out.push(Expr::Meta { key, dreg: REG_1 });
                out.push(Expr::Cmp {
                    sreg: REG_1,
                    op,
                    data,
                });
            }
            "meta" => {
                c.expect("mark")?;
                out.push(Expr::Meta {
                    key: MetaKey::Mark,
                    dreg: REG_1,
                });
                if c.eat("set") {
                    // meta mark set meta mark or|xor V
                    c.expect("meta")?;
                    c.expect("mark")?;
                    let op = c.next()?;
                    let v = number(c.next()?)?;
                    let (mask, xor) = match op {
                        "or" => (!v, v),
                        "xor" => (u32::MAX, v),
                        o => return unsupported(format!("meta mark set … {o}")),
                    };
                    out.push(Expr::Bitwise {
                        reg: REG_1,
                        mask: host_u32(mask),
                        xor: host_u32(xor),
                    });
                    out.push(Expr::MetaSet {
                        key: MetaKey::Mark,
                        sreg: REG_1,
                    });
                } else {
                    // meta mark & V ==|!= W
                    c.expect("&")?;
                    let mask = number(c.next()?)?;
                    let op = match c.next()? {
                        "==" => CmpOp::Eq,
                        "!=" => CmpOp::Neq,
                        o => return unsupported(format!("meta mark & … {o}")),
                    };
                    let v = number(c.next()?)?;
                    out.push(Expr::Bitwise {
                        reg: REG_1,
                        mask: host_u32(mask),
                        xor: host_u32(0),
                    });
                    out.push(Expr::Cmp {
                        sreg: REG_1,
                        op,
                        data: host_u32(v),
                    });
                }
            }
            "fib" => {
                let daddr = match c.next()? {
                    "saddr" => false,
                    "daddr" => true,
                    f => return unsupported(format!("fib {f}")),
                };
                c.expect("type")?;
                c.expect("local")?;
                out.push(Expr::FibType { daddr, dreg: REG_1 });
                // RTN_LOCAL
                out.push(Expr::Cmp {
                    sreg: REG_1,
                    op: CmpOp::Eq,
                    data: host_u32(2),
                });
            }
            "update" => {
                let Some(set) = set_name(c) else {
                    return unsupported("update of an anonymous set");
                };
                c.expect("{")?;
                let t = c.next()?;
                let sel = Selector::parse(t, c)?;
                c.expect("}")?;
                let Some(sel @ (Selector::IpSaddr | Selector::IpDaddr)) = sel else {
                    return unsupported("an update key other than an address");
                };
                out.push(sel.load(4, REG_1));
                out.push(Expr::DynsetUpdate {
                    set: set.to_string(),
                    sreg: REG_1,
                });
            }
            "dnat" => dnat(c, &mut out)?,
            "masquerade" => {
                let flags = if c.eat("fully-random") {
                    NAT_RANDOM_FULLY
                } else {
                    0
                };
                out.push(Expr::Masquerade { flags });
            }
            "reject" => out.push(Expr::Reject),
            "comment" => comment = Some(unquote(c.next()?)?),
            word => match verdict(word, c)? {
                Some(v) => out.push(Expr::Verdict(v)),
                None => return unsupported(format!("{word} in a rule")),
            },
        }
    }
    Ok((out, comment))
}

/// `dnat to IP[:PORT]`, or `dnat ip to CONCAT map @m` (a map from the concatenation to
/// `ipv4_addr . inet_service`).
fn dnat(c: &mut Cursor<'_>, out: &mut Vec<Expr>) -> Result<(), Unsupported> {
    if c.eat("ip") {
        c.expect("to")?;
        let t = c.next()?;
        let Some(first) = Selector::parse(t, c)? else {
            return unsupported(format!("dnat ip to {t}"));
        };
        let sels = concat(first, c)?;
        c.expect("map")?;
        let Some(map) = set_name(c) else {
            return unsupported("dnat to an anonymous map");
        };
        load_concat(&sels, out);
        out.push(Expr::Lookup {
            set: map.to_string(),
            sreg: REG_1,
            dreg: Some(REG_1),
        });
        // The address in the first 4 bytes, the port in the next slot.
        out.push(Expr::Dnat {
            addr: REG_1,
            proto: Some(REG32_00 + 1),
            proto_flag: false,
        });
        return Ok(());
    }
    c.expect("to")?;
    let to = c.next()?;
    let (addr, port) = match to.split_once(':') {
        Some((a, p)) => (a, Some(p)),
        None => (to, None),
    };
    let addr: Ipv4Addr = addr
        .parse()
        .or_else(|_| unsupported(format!("dnat to {to}")))?;
    out.push(Expr::Immediate {
        dreg: REG_1,
        data: addr.octets().to_vec(),
    });
    let proto = match port {
        Some(p) => {
            let p: u16 = p
                .parse()
                .or_else(|_| unsupported(format!("dnat to {to}")))?;
            out.push(Expr::Immediate {
                dreg: REG_2,
                data: p.to_be_bytes().to_vec(),
            });
            Some(REG_2)
        }
        None => None,
    };
    out.push(Expr::Dnat {
        addr: REG_1,
        proto,
        proto_flag: proto.is_some(),
    });
    Ok(())
}

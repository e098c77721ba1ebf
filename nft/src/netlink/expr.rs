//! nf_tables expressions: the register machine a rule is compiled to. [`Expr`] holds one
//! expression as the kernel takes it; [`Expr::encode`] writes its netlink attributes, and
//! `Display` prints it as `nft --debug=netlink` does, which is how the tests compare what k1s
//! compiles with what nft compiles from the same text.

use std::fmt;

use super::wire::Attrs;

/// The verdict register; `NFT_REG_1` and `NFT_REG_2` are the 16-byte registers nft uses for
/// single values, `NFT_REG32_00 + n` the 4-byte slots a concatenation fills.
pub const REG_VERDICT: u32 = 0;
pub const REG_1: u32 = 1;
pub const REG_2: u32 = 2;
pub const REG32_00: u32 = 8;

/// Where a payload load starts (`enum nft_payload_bases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Network = 1,
    Transport = 2,
}

/// Meta keys k1s uses (`enum nft_meta_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKey {
    Mark = 3,
    IifName = 6,
    OifName = 7,
    L4Proto = 16,
}

impl MetaKey {
    fn name(self) -> &'static str {
        match self {
            MetaKey::Mark => "mark",
            MetaKey::IifName => "iifname",
            MetaKey::OifName => "oifname",
            MetaKey::L4Proto => "l4proto",
        }
    }
}

/// A verdict (`NF_DROP`, `NF_ACCEPT`, `NFT_RETURN`, `NFT_JUMP`, `NFT_GOTO`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
    Return,
    Jump(String),
    Goto(String),
}

impl Verdict {
    fn code(&self) -> i32 {
        match self {
            Verdict::Drop => 0,
            Verdict::Accept => 1,
            Verdict::Jump(_) => -3,
            Verdict::Goto(_) => -4,
            Verdict::Return => -5,
        }
    }

    /// `NFTA_DATA_VERDICT` inside a data attribute.
    pub fn encode(&self, a: &mut Attrs) {
        a.nested(2, |v| {
            v.u32_be(1, self.code() as u32);
            if let Verdict::Jump(c) | Verdict::Goto(c) = self {
                v.string(2, c);
            }
        });
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Accept => f.write_str("accept"),
            Verdict::Drop => f.write_str("drop"),
            Verdict::Return => f.write_str("return"),
            Verdict::Jump(c) => write!(f, "jump -> {c}"),
            Verdict::Goto(c) => write!(f, "goto -> {c}"),
        }
    }
}

/// Comparison operators (`enum nft_cmp_ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq = 0,
    Neq = 1,
}

/// One expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Payload {
        base: Base,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    Meta {
        key: MetaKey,
        dreg: u32,
    },
    MetaSet {
        key: MetaKey,
        sreg: u32,
    },
    Cmp {
        sreg: u32,
        op: CmpOp,
        data: Vec<u8>,
    },
    Bitwise {
        reg: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    /// A set membership test, or with `dreg` a map lookup (a verdict map: the verdict register).
    Lookup {
        set: String,
        sreg: u32,
        dreg: Option<u32>,
    },
    Immediate {
        dreg: u32,
        data: Vec<u8>,
    },
    Verdict(Verdict),
    /// `numgen random mod N` into `dreg`.
    Numgen {
        dreg: u32,
        modulus: u32,
    },
    /// Destination NAT to the address in `addr` and, if given, the port in `proto`;
    /// `proto_flag`: nft states `NF_NAT_RANGE_PROTO_SPECIFIED` for a literal port (the
    /// kernel infers it from `proto` anyway).
    Dnat {
        addr: u32,
        proto: Option<u32>,
        proto_flag: bool,
    },
    Masquerade {
        flags: u32,
    },
    /// ICMP port unreachable (type 0, code 3), as `reject` means in the `ip` family.
    Reject,
    /// `fib saddr|daddr type`: the route type of the address.
    FibType {
        daddr: bool,
        dreg: u32,
    },
    CtState {
        dreg: u32,
    },
    /// `update @set { key }`: adds the key or refreshes its timeout.
    DynsetUpdate {
        set: String,
        sreg: u32,
    },
}

/// `NF_NAT_RANGE_PROTO_SPECIFIED`, `NF_NAT_RANGE_PROTO_RANDOM_FULLY`.
const NAT_PROTO_SPECIFIED: u32 = 0x2;
pub const NAT_RANDOM_FULLY: u32 = 0x10;

/// Register data as `nft --debug` prints it: 4-byte words in host order.
fn words(data: &[u8]) -> String {
    data.chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            format!("0x{:08x}", u32::from_ne_bytes(w))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `NFTA_DATA_VALUE` inside a data attribute.
fn value(a: &mut Attrs, data: &[u8]) {
    a.bytes(1, data);
}

impl Expr {
    /// The expression's name (`NFTA_EXPR_NAME`).
    pub fn name(&self) -> &'static str {
        match self {
            Expr::Payload { .. } => "payload",
            Expr::Meta { .. } | Expr::MetaSet { .. } => "meta",
            Expr::Cmp { .. } => "cmp",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Lookup { .. } => "lookup",
            Expr::Immediate { .. } | Expr::Verdict(_) => "immediate",
            Expr::Numgen { .. } => "numgen",
            Expr::Dnat { .. } => "nat",
            Expr::Masquerade { .. } => "masq",
            Expr::Reject => "reject",
            Expr::FibType { .. } => "fib",
            Expr::CtState { .. } => "ct",
            Expr::DynsetUpdate { .. } => "dynset",
        }
    }

    /// Writes the expression's attributes (`NFTA_EXPR_DATA`'s content).
    pub fn encode(&self, a: &mut Attrs) {
        match self {
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                a.u32_be(1, *dreg)
                    .u32_be(2, *base as u32)
                    .u32_be(3, *offset)
                    .u32_be(4, *len);
            }
            Expr::Meta { key, dreg } => {
                a.u32_be(1, *dreg).u32_be(2, *key as u32);
            }
            Expr::MetaSet { key, sreg } => {
                a.u32_be(2, *key as u32).u32_be(3, *sreg);
            }
            Expr::Cmp { sreg, op, data } => {
                a.u32_be(1, *sreg)
                    .u32_be(2, *op as u32)
                    .nested(3, |d| value(d, data));
            }
            Expr::Bitwise { reg, mask, xor } => {
                a.u32_be(1, *reg)
                    .u32_be(2, *reg)
                    .u32_be(3, mask.len() as u32)
                    .nested(4, |d| value(d, mask))
                    .nested(5, |d| value(d, xor));
            }
            Expr::Lookup { set, sreg, dreg } => {
                a.string(1, set).u32_be(2, *sreg);
                if let Some(d) = dreg {
                    a.u32_be(3, *d);
                }
            }
            Expr::Immediate { dreg, data } => {
                a.u32_be(1, *dreg).nested(2, |d| value(d, data));
            }
            Expr::Verdict(v) => {
                a.u32_be(1, REG_VERDICT).nested(2, |d| v.encode(d));
            }
            Expr::Numgen { dreg, modulus } => {
                // type 1: random
                a.u32_be(1, *dreg).u32_be(2, *modulus).u32_be(3, 1);
            }
            Expr::Dnat {
                addr,
                proto,
                proto_flag,
            } => {
                // type 1: dnat; family ip
                a.u32_be(1, 1).u32_be(2, 2).u32_be(3, *addr);
                if let Some(p) = proto {
                    a.u32_be(5, *p);
                }
                if *proto_flag {
                    a.u32_be(7, NAT_PROTO_SPECIFIED);
                }
            }
            Expr::Masquerade { flags } => {
                if *flags != 0 {
                    a.u32_be(1, *flags);
                }
            }
            Expr::Reject => {
                a.u32_be(1, 0).u8(2, 3);
            }
            Expr::FibType { daddr, dreg } => {
                // result 3: address type; flags: saddr 1, daddr 2
                let flags = if *daddr { 2 } else { 1 };
                a.u32_be(1, *dreg).u32_be(2, 3).u32_be(3, flags);
            }
            Expr::CtState { dreg } => {
                // key 0: state
                a.u32_be(1, *dreg).u32_be(2, 0);
            }
            Expr::DynsetUpdate { set, sreg } => {
                // op 1: update
                a.string(1, set).u32_be(3, 1).u32_be(4, *sreg);
            }
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                let base = match base {
                    Base::Network => "network",
                    Base::Transport => "transport",
                };
                write!(
                    f,
                    "[ payload load {len}b @ {base} header + {offset} => reg {dreg} ]"
                )
            }
            Expr::Meta { key, dreg } => write!(f, "[ meta load {} => reg {dreg} ]", key.name()),
            Expr::MetaSet { key, sreg } => {
                write!(f, "[ meta set {} with reg {sreg} ]", key.name())
            }
            Expr::Cmp { sreg, op, data } => {
                let op = match op {
                    CmpOp::Eq => "eq",
                    CmpOp::Neq => "neq",
                };
                write!(f, "[ cmp {op} reg {sreg} {} ]", words(data))
            }
            Expr::Bitwise { reg, mask, xor } => write!(
                f,
                "[ bitwise reg {reg} = ( reg {reg} & {} ) ^ {} ]",
                words(mask),
                words(xor)
            ),
            Expr::Lookup { set, sreg, dreg } => {
                write!(f, "[ lookup reg {sreg} set {set}")?;
                if let Some(d) = dreg {
                    write!(f, " dreg {d}")?;
                }
                f.write_str(" ]")
            }
            Expr::Immediate { dreg, data } => {
                write!(f, "[ immediate reg {dreg} {} ]", words(data))
            }
            Expr::Verdict(v) => write!(f, "[ immediate reg 0 {v} ]"),
            Expr::Numgen { dreg, modulus } => {
                write!(f, "[ numgen reg {dreg} = random mod {modulus} ]")
            }
            Expr::Dnat {
                addr,
                proto,
                proto_flag,
            } => {
                write!(f, "[ nat dnat ip addr_min reg {addr}")?;
                if let Some(p) = proto {
                    write!(f, " proto_min reg {p}")?;
                }
                if *proto_flag {
                    write!(f, " flags 0x{NAT_PROTO_SPECIFIED:x}")?;
                }
                f.write_str(" ]")
            }
            Expr::Masquerade { flags } => {
                if *flags == 0 {
                    f.write_str("[ masq ]")
                } else {
                    write!(f, "[ masq flags 0x{flags:x} ]")
                }
            }
            Expr::Reject => f.write_str("[ reject type 0 code 3 ]"),
            Expr::FibType { daddr, dreg } => {
                let which = if *daddr { "daddr" } else { "saddr" };
                write!(f, "[ fib {which} type => reg {dreg} ]")
            }
            Expr::CtState { dreg } => write!(f, "[ ct load state => reg {dreg} ]"),
            Expr::DynsetUpdate { set, sreg } => {
                write!(f, "[ dynset update reg_key {sreg} set {set} ]")
            }
        }
    }
}

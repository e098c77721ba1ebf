//! Sets and maps: declarations (`type …` and `typeof …`), the layout of their keys and
//! values, elements typed by that layout, and the userdata nft keeps beside a set so that
//! `nft list` prints it as it was declared.

use std::net::Ipv4Addr;

use super::rule::Selector;
use super::{Cursor, Unsupported, unquote, unsupported};
use crate::netlink::expr::Verdict;

/// One field of a key or value, as the kernel stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Ipv4,
    Proto,
    Service,
    /// A 32-bit number in host order (`numgen`).
    Integer,
}

impl Field {
    fn named(name: &str) -> Result<Field, Unsupported> {
        Ok(match name {
            "ipv4_addr" => Field::Ipv4,
            "inet_proto" => Field::Proto,
            "inet_service" => Field::Service,
            t => return unsupported(format!("type {t}")),
        })
    }

    /// nft's datatype id.
    fn type_id(self) -> u32 {
        match self {
            Field::Ipv4 => 7,
            Field::Proto => 12,
            Field::Service => 13,
            Field::Integer => 4,
        }
    }

    pub fn size(self) -> usize {
        match self {
            Field::Ipv4 | Field::Integer => 4,
            Field::Proto => 1,
            Field::Service => 2,
        }
    }

    /// nft's byte order of the type (`BYTEORDER_HOST_ENDIAN` 1, `BYTEORDER_BIG_ENDIAN` 2).
    fn byte_order(self) -> u32 {
        match self {
            Field::Integer => 1,
            _ => 2,
        }
    }

    /// Appends the value written `t` to `out`.
    fn value(self, t: &str, out: &mut Vec<u8>) -> Result<(), Unsupported> {
        let bad = || Unsupported(format!("{t} as {self:?}"));
        match self {
            Field::Ipv4 => {
                out.extend_from_slice(&t.parse::<Ipv4Addr>().map_err(|_| bad())?.octets())
            }
            Field::Proto => out.push(super::rule::protocol(t)?),
            Field::Service => {
                out.extend_from_slice(&t.parse::<u16>().map_err(|_| bad())?.to_be_bytes());
            }
            Field::Integer => out.extend_from_slice(&super::rule::number(t)?.to_ne_bytes()),
        }
        Ok(())
    }
}

/// A key or value's type id (each field's id in 6 bits, as nft concatenates them) and length
/// (each field of a concatenation padded to 4 bytes).
fn type_and_len(fields: &[Field]) -> (u32, u32) {
    let id = fields.iter().fold(0, |acc, f| (acc << 6) | f.type_id());
    let len = match fields {
        [one] => one.size(),
        _ => fields.iter().map(|f| f.size().div_ceil(4) * 4).sum(),
    };
    (id, len as u32)
}

/// What a map maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    None,
    Verdict,
    Value(Vec<Field>),
}

/// How a set's elements are laid out: what `add element` text means for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub key: Vec<Field>,
    pub data: Data,
}

/// A set or map declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDecl {
    pub layout: Layout,
    pub flags: u32,
    pub timeout_ms: Option<u64>,
    /// `size N`: the most elements the set holds, which the kernel also sizes it by.
    pub size: Option<u32>,
    pub comment: Option<String>,
    /// A `typeof` declaration's expressions (key, value), which nft keeps in the userdata.
    pub typeof_exprs: Option<(Vec<Selector>, Vec<Selector>)>,
}

/// `NFT_SET_MAP`, `NFT_SET_TIMEOUT`, `NFT_SET_EVAL`.
const SET_MAP: u32 = 0x8;
const SET_TIMEOUT: u32 = 0x10;
const SET_EVAL: u32 = 0x20;
/// `NFT_DATA_VERDICT` as a map's data type.
const DATA_VERDICT: u32 = 0xffff_ff00;

impl SetDecl {
    pub fn key_type_len(&self) -> (u32, u32) {
        type_and_len(&self.layout.key)
    }

    /// The data type and length of a map (`None` for a set).
    pub fn data_type_len(&self) -> Option<(u32, u32)> {
        match &self.layout.data {
            Data::None => None,
            Data::Verdict => Some((DATA_VERDICT, 0)),
            Data::Value(fields) => Some(type_and_len(fields)),
        }
    }
}

/// `type A . B [: verdict|C . D] ;` or `typeof EXPR . EXPR [: EXPR . EXPR] ;`, then
/// `[flags …;] [timeout Ns ;] [comment "…" ;] }`.
pub fn declaration(c: &mut Cursor<'_>, map: bool) -> Result<SetDecl, Unsupported> {
    let (key, data, typeof_exprs) = match c.next()? {
        "type" => {
            let key = fields_of_types(c)?;
            let data = if !map {
                Data::None
            } else {
                c.expect(":")?;
                if c.eat("verdict") {
                    Data::Verdict
                } else {
                    Data::Value(fields_of_types(c)?)
                }
            };
            (key, data, None)
        }
        "typeof" => {
            let key_exprs = typeof_exprs(c)?;
            let data_exprs = if map {
                c.expect(":")?;
                typeof_exprs(c)?
            } else {
                Vec::new()
            };
            let key = key_exprs.iter().map(|s| s.field()).collect();
            let data = if map {
                Data::Value(data_exprs.iter().map(|s| s.field()).collect())
            } else {
                Data::None
            };
            (key, data, Some((key_exprs, data_exprs)))
        }
        t => return unsupported(format!("{t} in a set declaration")),
    };
    let mut decl = SetDecl {
        layout: Layout { key, data },
        flags: if map { SET_MAP } else { 0 },
        timeout_ms: None,
        size: None,
        comment: None,
        typeof_exprs,
    };
    c.expect(";")?;
    while !c.eat("}") {
        match c.next()? {
            "flags" => {
                for f in c.next()?.split(',') {
                    decl.flags |= match f {
                        "dynamic" => SET_EVAL,
                        "timeout" => SET_TIMEOUT,
                        f => return unsupported(format!("flags {f}")),
                    };
                }
            }
            "size" => decl.size = Some(super::rule::number(c.next()?)?),
            "timeout" => {
                let t = c.next()?;
                let secs: u64 = t
                    .strip_suffix('s')
                    .and_then(|s| s.parse().ok())
                    .map_or_else(|| unsupported(format!("timeout {t}")), Ok)?;
                decl.timeout_ms = Some(secs * 1000);
            }
            "comment" => decl.comment = Some(unquote(c.next()?)?),
            t => return unsupported(format!("{t} in a set declaration")),
        }
        c.expect(";")?;
    }
    if map && decl.flags & SET_TIMEOUT != 0 {
        return unsupported("a map with timeouts");
    }
    Ok(decl)
}

fn fields_of_types(c: &mut Cursor<'_>) -> Result<Vec<Field>, Unsupported> {
    let mut out = vec![Field::named(c.next()?)?];
    while c.eat(".") {
        out.push(Field::named(c.next()?)?);
    }
    Ok(out)
}

fn typeof_exprs(c: &mut Cursor<'_>) -> Result<Vec<Selector>, Unsupported> {
    let mut out = Vec::new();
    loop {
        let t = c.next()?;
        match Selector::parse(t, c)? {
            Some(s) => out.push(s),
            None => return unsupported(format!("typeof {t}")),
        }
        if !c.eat(".") {
            return Ok(out);
        }
    }
}

/// Values of `fields` written `A . B . C`, laid out as the kernel keys them: a single field
/// as is, the fields of a concatenation each padded to 4 bytes.
fn values(c: &mut Cursor<'_>, fields: &[Field]) -> Result<Vec<u8>, Unsupported> {
    let mut out = Vec::with_capacity(16);
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            c.expect(".")?;
        }
        let start = out.len();
        f.value(c.next()?, &mut out)?;
        if fields.len() > 1 {
            out.resize(start + f.size().div_ceil(4) * 4, 0);
        }
    }
    Ok(out)
}

/// One set or map element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub key: Vec<u8>,
    pub data: ElementData,
    /// The script line it came from (consecutive element lines on one set share a command).
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElementData {
    None,
    Verdict(Verdict),
    Value(Vec<u8>),
}

/// An element of a set whose layout is `layout`: `KEY [: VALUE]`, on script line `line`.
pub fn element(c: &mut Cursor<'_>, layout: &Layout, line: usize) -> Result<Element, Unsupported> {
    let key = values(c, &layout.key)?;
    let data = match &layout.data {
        Data::None => ElementData::None,
        _ if !c.eat(":") => ElementData::None,
        Data::Verdict => match super::rule::verdict(c.next()?, c)? {
            Some(v) => ElementData::Verdict(v),
            None => return unsupported("a verdict map value"),
        },
        Data::Value(fields) => ElementData::Value(values(c, fields)?),
    };
    Ok(Element { key, data, line })
}

/// nft's userdata beside a set (`NFTNL_UDATA_SET_*` TLVs, one-byte type and length): the
/// key's byte order, for a map the data's, a `typeof` declaration's expressions, and the
/// comment.
pub fn userdata(d: &SetDecl) -> Vec<u8> {
    let order = |fields: &[Field]| match fields {
        [one] => one.byte_order(),
        _ => 0,
    };
    let mut u = Vec::new();
    tlv(&mut u, 0, &order(&d.layout.key).to_ne_bytes());
    let is_map = d.layout.data != Data::None;
    if is_map {
        let data_order = match &d.layout.data {
            Data::Value(fields) => order(fields),
            _ => 0,
        };
        tlv(&mut u, 1, &data_order.to_ne_bytes());
    }
    if let Some((key, data)) = &d.typeof_exprs {
        tlv(&mut u, 3, &typeof_udata(key));
        if is_map {
            tlv(&mut u, 4, &typeof_udata(data));
        }
    }
    if is_map {
        tlv(&mut u, 6, &0u32.to_ne_bytes());
    }
    if let Some(c) = &d.comment {
        let mut v = c.as_bytes().to_vec();
        v.push(0);
        tlv(&mut u, 7, &v);
    }
    u
}

fn tlv(u: &mut Vec<u8>, kind: u8, value: &[u8]) {
    u.push(kind);
    u.push(value.len() as u8);
    u.extend_from_slice(value);
}

/// nft's description of `typeof` expressions: the expression's type and its own
/// description; a concatenation lists its parts by index.
fn typeof_udata(exprs: &[Selector]) -> Vec<u8> {
    let one = |s: &Selector| {
        let (kind, inner) = s.typeof_udata();
        let mut u = Vec::new();
        tlv(&mut u, 0, &kind.to_ne_bytes());
        tlv(&mut u, 1, &inner);
        u
    };
    match exprs {
        [single] => one(single),
        _ => {
            let mut parts = Vec::new();
            for (i, s) in exprs.iter().enumerate() {
                tlv(&mut parts, i as u8, &one(s));
            }
            let mut u = Vec::new();
            // EXPR_CONCAT
            tlv(&mut u, 0, &13u32.to_ne_bytes());
            tlv(&mut u, 1, &parts);
            u
        }
    }
}

//! Compiles a transaction's `nft -f` text into typed nf_tables commands — for the part of
//! the nft language the k1s rulesets are written in (the service proxy's table: verdict
//! maps over concatenations, endpoint maps picked by `numgen`, `fib`, `ct state`, marks,
//! DNAT, masquerade, dynamic sets for session affinity). Anything else is [`Unsupported`],
//! and the caller hands the text to `nft` instead: one text stays the source of truth (the
//! golden tests, `nft list`), and the kernel tests prove that both paths build the same
//! table, expression for expression.
//!
//! - [`rule`]: statements → expressions.
//! - [`set`]: declarations, element layouts, the userdata nft keeps beside a set.
//!
//! Elements are typed by their set's declaration ([`Layouts`]): from the same script, or
//! remembered from an earlier one (a partial sync adds elements to sets a full sync
//! declared).

pub mod rule;
pub mod set;

use std::collections::HashMap;
use std::sync::Arc;

use crate::netlink::expr::Expr;
pub use set::{Element, ElementData, Layout, SetDecl};

/// Text this compiler does not cover (the caller falls back to `nft`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not compiled to netlink ({0})")]
pub struct Unsupported(pub String);

fn unsupported<T>(what: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported(what.into()))
}

/// A base chain's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// `filter` or `nat`.
    pub kind: String,
    /// `NF_INET_PRE_ROUTING` … `NF_INET_POST_ROUTING`.
    pub number: u32,
    pub priority: i32,
}

/// What one line of the script asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    AddTable {
        comment: Option<String>,
    },
    DeleteTable,
    AddChain {
        chain: String,
        hook: Option<Hook>,
    },
    FlushChain {
        chain: String,
    },
    DeleteChain {
        chain: String,
    },
    AddSet {
        set: String,
        decl: Box<SetDecl>,
    },
    DeleteSet {
        set: String,
    },
    AddElements {
        set: String,
        elements: Vec<Element>,
    },
    /// Elements by key (their data is `None`).
    DeleteElements {
        set: String,
        elements: Vec<Element>,
    },
    AddRule {
        chain: String,
        exprs: Vec<Expr>,
        comment: Option<String>,
    },
}

/// A command on one table, and the index of the script line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub table: Arc<str>,
    pub command: Command,
    pub line: usize,
}

/// The element layouts of the sets known so far, by table, then set name.
pub type Layouts = HashMap<String, HashMap<String, Layout>>;

/// Splits on whitespace into `out`, keeping a double-quoted string (quotes included) as one
/// token.
fn tokens<'a>(line: &'a str, out: &mut Vec<&'a str>) -> Result<(), Unsupported> {
    out.clear();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let end = if let Some(quoted) = rest.strip_prefix('"') {
            match quoted.find('"') {
                Some(i) => i + 2,
                None => return unsupported("an unterminated string"),
            }
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        out.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    Ok(())
}

fn unquote(token: &str) -> Result<String, Unsupported> {
    match token.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(s) if !s.contains('\\') => Ok(s.to_string()),
        _ => unsupported(format!("expected a quoted string, found {token}")),
    }
}

/// A cursor over one line's tokens.
pub struct Cursor<'a> {
    tokens: Vec<&'a str>,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.tokens.get(self.at).copied()
    }
    fn next(&mut self) -> Result<&'a str, Unsupported> {
        let t = self.peek();
        self.at += 1;
        t.map_or_else(|| unsupported("the line ends early"), Ok)
    }
    fn eat(&mut self, token: &str) -> bool {
        if self.peek() == Some(token) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, token: &str) -> Result<(), Unsupported> {
        let t = self.next()?;
        if t == token {
            Ok(())
        } else {
            unsupported(format!("expected {token}, found {t}"))
        }
    }
    fn done(&self) -> bool {
        self.at >= self.tokens.len()
    }
}

/// Parses a whole script. `layouts` holds the sets declared before it and is updated with
/// what the script declares and deletes (the caller keeps the update only if the script
/// was applied). Consecutive element lines of one kind on one set become one command.
pub fn parse(script: &str, layouts: &mut Layouts) -> Result<Vec<Line>, Unsupported> {
    let mut out: Vec<Line> = Vec::with_capacity(script.len() / 64 + 1);
    let mut table: Arc<str> = Arc::from("");
    let mut c = Cursor {
        tokens: Vec::with_capacity(32),
        at: 0,
    };
    for (line, text) in script.lines().enumerate() {
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        tokens(text, &mut c.tokens)?;
        c.at = 0;
        let verb = c.next()?;
        let object = c.next()?;
        let family = c.next()?;
        if family != "ip" {
            return unsupported(format!("the {family} family"));
        }
        let name = c.next()?;
        if *table != *name {
            table = Arc::from(name);
        }
        // More elements for the set the previous line added to (or deleted from): parsed
        // into that command (a full sync is mostly such lines).
        if object == "element"
            && let Some(prev) = out.last_mut()
            && prev.table == table
            && let (Command::AddElements { set, elements }, "add")
            | (Command::DeleteElements { set, elements }, "delete") = (&mut prev.command, verb)
            && c.peek() == Some(set.as_str())
        {
            c.next()?;
            let layout = layouts
                .get(name)
                .and_then(|sets| sets.get(set.as_str()))
                .map_or_else(|| unsupported(format!("elements of {set}")), Ok)?;
            elements_into(&mut c, layout, line, verb == "delete", elements)?;
            if !c.done() {
                return unsupported(format!("trailing {:?}", &c.tokens[c.at..]));
            }
            continue;
        }
        let command = command(verb, object, name, &mut c, layouts, line)?;
        if !c.done() {
            return unsupported(format!("trailing {:?}", &c.tokens[c.at..]));
        }
        out.push(Line {
            table: table.clone(),
            command,
            line,
        });
    }
    Ok(out)
}

fn command(
    verb: &str,
    object: &str,
    table: &str,
    c: &mut Cursor<'_>,
    layouts: &mut Layouts,
    line: usize,
) -> Result<Command, Unsupported> {
    Ok(match (verb, object) {
        ("add", "table") => {
            let mut comment = None;
            if c.eat("{") {
                c.expect("comment")?;
                comment = Some(unquote(c.next()?)?);
                c.eat(";");
                c.expect("}")?;
            }
            Command::AddTable { comment }
        }
        ("delete", "table") => {
            layouts.remove(table);
            Command::DeleteTable
        }
        ("add", "chain") => {
            let chain = c.next()?.to_string();
            let hook = if c.eat("{") {
                let h = hook(c)?;
                c.eat(";");
                c.expect("}")?;
                Some(h)
            } else {
                None
            };
            Command::AddChain { chain, hook }
        }
        ("flush", "chain") => Command::FlushChain {
            chain: c.next()?.to_string(),
        },
        ("delete", "chain") => Command::DeleteChain {
            chain: c.next()?.to_string(),
        },
        ("add", "set" | "map") => {
            let set = c.next()?.to_string();
            c.expect("{")?;
            let decl = set::declaration(c, object == "map")?;
            let sets = layouts.entry(table.to_string()).or_default();
            match sets.get(&set) {
                Some(l) if *l != decl.layout => {
                    return unsupported(format!("set {set} redeclared with another type"));
                }
                _ => {}
            }
            sets.insert(set.clone(), decl.layout.clone());
            Command::AddSet {
                set,
                decl: Box::new(decl),
            }
        }
        ("delete", "set" | "map") => {
            let set = c.next()?.to_string();
            if let Some(sets) = layouts.get_mut(table) {
                sets.remove(&set);
            }
            Command::DeleteSet { set }
        }
        ("add" | "delete", "element") => {
            let set = c.next()?;
            let Some(layout) = layouts.get(table).and_then(|sets| sets.get(set)) else {
                return unsupported(format!("elements of {set}, whose declaration is unknown"));
            };
            let set = set.to_string();
            let mut elements = Vec::new();
            elements_into(c, layout, line, verb == "delete", &mut elements)?;
            if verb == "add" {
                Command::AddElements { set, elements }
            } else {
                Command::DeleteElements { set, elements }
            }
        }
        ("add", "rule") => {
            let chain = c.next()?.to_string();
            let (exprs, comment) = rule::rule(c)?;
            Command::AddRule {
                chain,
                exprs,
                comment,
            }
        }
        _ => return unsupported(format!("{verb} {object}")),
    })
}

/// `{ ELEMENT [, ELEMENT]… }` of a set laid out as `layout`, appended to `out`; deleted
/// elements are keys only.
fn elements_into(
    c: &mut Cursor<'_>,
    layout: &Layout,
    line: usize,
    delete: bool,
    out: &mut Vec<Element>,
) -> Result<(), Unsupported> {
    c.expect("{")?;
    loop {
        let e = set::element(c, layout, line)?;
        if delete && e.data != ElementData::None {
            return unsupported("a deleted element with a value");
        }
        out.push(e);
        if c.eat("}") {
            return Ok(());
        }
        c.expect(",")?;
    }
}

/// `type nat hook prerouting priority dstnat`.
fn hook(c: &mut Cursor<'_>) -> Result<Hook, Unsupported> {
    c.expect("type")?;
    let kind = c.next()?;
    if kind != "nat" && kind != "filter" {
        return unsupported(format!("a {kind} chain"));
    }
    c.expect("hook")?;
    let number = match c.next()? {
        "prerouting" => 0,
        "input" => 1,
        "forward" => 2,
        "output" => 3,
        "postrouting" => 4,
        h => return unsupported(format!("the {h} hook")),
    };
    c.expect("priority")?;
    let priority = match c.next()? {
        "raw" => -300,
        "mangle" => -150,
        "dstnat" => -100,
        "filter" => 0,
        "security" => 50,
        "srcnat" => 100,
        p => p
            .parse()
            .or_else(|_| unsupported(format!("priority {p}")))?,
    };
    Ok(Hook {
        kind: kind.to_string(),
        number,
        priority,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::expr::Verdict;

    /// The expressions of one rule, one per line, as `nft --debug=netlink` prints them.
    fn compiled(rule_text: &str) -> String {
        let lines = parse(&format!("add rule ip t c {rule_text}"), &mut Layouts::new()).unwrap();
        let Command::AddRule { exprs, .. } = &lines[0].command else {
            panic!("not a rule")
        };
        exprs.iter().map(|e| format!("  {e}\n")).collect::<String>()
    }

    /// Each rule shape the k1s rulesets use, with what nft 1.0.6 compiles it to (captured
    /// with `nft --debug=netlink -f`).
    #[test]
    fn rules_compile_to_what_nft_compiles_them_to() {
        let cases: &[(&str, &str)] = &[
            (
                "ct state new jump c",
                "  [ ct load state => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0x00000008 ) ^ 0x00000000 ]
  [ cmp neq reg 1 0x00000000 ]
  [ immediate reg 0 jump -> c ]
",
            ),
            (
                "iifname != \"lo\" ip daddr 127.0.0.0/8 drop comment \"x\"",
                "  [ meta load iifname => reg 1 ]
  [ cmp neq reg 1 0x00006f6c 0x00000000 0x00000000 0x00000000 ]
  [ payload load 1b @ network header + 16 => reg 1 ]
  [ cmp eq reg 1 0x0000007f ]
  [ immediate reg 0 drop ]
",
            ),
            (
                "ip daddr . meta l4proto . th dport vmap @service-ips",
                "  [ payload load 4b @ network header + 16 => reg 1 ]
  [ meta load l4proto => reg 9 ]
  [ payload load 2b @ transport header + 2 => reg 10 ]
  [ lookup reg 1 set service-ips dreg 0 ]
",
            ),
            (
                "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @np",
                "  [ fib daddr type => reg 1 ]
  [ cmp eq reg 1 0x00000002 ]
  [ payload load 1b @ network header + 16 => reg 1 ]
  [ cmp neq reg 1 0x0000007f ]
  [ meta load l4proto => reg 1 ]
  [ payload load 2b @ transport header + 2 => reg 9 ]
  [ lookup reg 1 set np dreg 0 ]
",
            ),
            (
                "ip daddr @cluster-ips reject comment \"ClusterIP port not served\"",
                "  [ payload load 4b @ network header + 16 => reg 1 ]
  [ lookup reg 1 set cluster-ips ]
  [ reject type 0 code 3 ]
",
            ),
            (
                "ip daddr 10.43.0.0/16 drop",
                "  [ payload load 2b @ network header + 16 => reg 1 ]
  [ cmp eq reg 1 0x00002b0a ]
  [ immediate reg 0 drop ]
",
            ),
            (
                "meta mark set meta mark or 0x4000",
                "  [ meta load mark => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0xffffbfff ) ^ 0x00004000 ]
  [ meta set mark with reg 1 ]
",
            ),
            (
                "meta mark & 0x4000 == 0 return",
                "  [ meta load mark => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0x00004000 ) ^ 0x00000000 ]
  [ cmp eq reg 1 0x00000000 ]
  [ immediate reg 0 return ]
",
            ),
            (
                "meta mark set meta mark xor 0x4000",
                "  [ meta load mark => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0xffffffff ) ^ 0x00004000 ]
  [ meta set mark with reg 1 ]
",
            ),
            ("masquerade fully-random", "  [ masq flags 0x10 ]\n"),
            (
                "ip saddr . ip daddr @hairpin jump c",
                "  [ payload load 4b @ network header + 12 => reg 1 ]
  [ payload load 4b @ network header + 16 => reg 9 ]
  [ lookup reg 1 set hairpin ]
  [ immediate reg 0 jump -> c ]
",
            ),
            (
                "fib saddr type local goto c",
                "  [ fib saddr type => reg 1 ]
  [ cmp eq reg 1 0x00000002 ]
  [ immediate reg 0 goto -> c ]
",
            ),
            (
                "ip saddr != 10.40.0.0/13 accept",
                "  [ payload load 4b @ network header + 12 => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0x0000f8ff ) ^ 0x00000000 ]
  [ cmp neq reg 1 0x0000280a ]
  [ immediate reg 0 accept ]
",
            ),
            (
                "ct state established,related accept",
                "  [ ct load state => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0x00000006 ) ^ 0x00000000 ]
  [ cmp neq reg 1 0x00000000 ]
  [ immediate reg 0 accept ]
",
            ),
            (
                "numgen random mod 2 0 meta l4proto tcp dnat to 10.42.0.5:8080",
                "  [ numgen reg 1 = random mod 2 ]
  [ cmp eq reg 1 0x00000000 ]
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 0x00000006 ]
  [ immediate reg 1 0x05002a0a ]
  [ immediate reg 2 0x0000901f ]
  [ nat dnat ip addr_min reg 1 proto_min reg 2 flags 0x2 ]
",
            ),
            (
                "ip saddr @aff meta l4proto sctp update @aff { ip saddr } dnat to 10.42.0.5",
                "  [ payload load 4b @ network header + 12 => reg 1 ]
  [ lookup reg 1 set aff ]
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 0x00000084 ]
  [ payload load 4b @ network header + 12 => reg 1 ]
  [ dynset update reg_key 1 set aff ]
  [ immediate reg 1 0x05002a0a ]
  [ nat dnat ip addr_min reg 1 ]
",
            ),
            (
                "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @eps",
                "  [ payload load 4b @ network header + 16 => reg 1 ]
  [ meta load l4proto => reg 9 ]
  [ payload load 2b @ transport header + 2 => reg 10 ]
  [ numgen reg 11 = random mod 2 ]
  [ lookup reg 1 set eps dreg 1 ]
  [ nat dnat ip addr_min reg 1 proto_min reg 9 ]
",
            ),
            (
                "oifname \"k1sbr0\" accept",
                "  [ meta load oifname => reg 1 ]
  [ cmp eq reg 1 0x6273316b 0x00003072 0x00000000 0x00000000 ]
  [ immediate reg 0 accept ]
",
            ),
        ];
        for (rule, want) in cases {
            assert_eq!(&compiled(rule), want, "{rule}");
        }
    }

    #[test]
    fn declarations_and_elements_are_typed_as_the_kernel_keys_them() {
        let mut layouts = Layouts::new();
        let lines = parse(
            "add map ip t m { type ipv4_addr . inet_proto . inet_service : verdict ; }\n\
             add set ip t aff { type ipv4_addr ; flags dynamic,timeout ; timeout 30s ; }\n\
             add set ip t c { type ipv4_addr ; comment \"Active ClusterIPs\" ; }\n\
             add map ip t np { type inet_proto . inet_service : verdict ; }\n\
             add map ip t eps { typeof ip daddr . meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport ; }\n\
             add element ip t m { 10.43.0.20 . tcp . 80 : goto svc }\n\
             add element ip t np { udp . 30080 : jump x }\n\
             delete element ip t c { 10.43.0.1 }\n\
             add element ip t eps { 10.43.0.20 . tcp . 80 . 1 : 10.42.0.5 . 8080 }\n",
            &mut layouts,
        )
        .unwrap();
        let decl = |i: usize| match &lines[i].command {
            Command::AddSet { decl, .. } => (**decl).clone(),
            c => panic!("{c:?}"),
        };
        // 7 << 12 | 12 << 6 | 13, three 4-byte fields.
        assert_eq!(decl(0).key_type_len(), (0x730d, 12));
        assert_eq!(decl(0).data_type_len(), Some((0xffff_ff00, 0)));
        assert_eq!(decl(0).flags, 0x8);
        assert_eq!(decl(1).key_type_len(), (7, 4));
        assert_eq!((decl(1).flags, decl(1).timeout_ms), (0x30, Some(30_000)));
        // Captured from nft: key byte order big-endian, then the comment.
        let mut want = vec![0, 4, 2, 0, 0, 0, 7, 18];
        want.extend_from_slice(b"Active ClusterIPs\0");
        assert_eq!(set::userdata(&decl(2)), want);
        // The typeof map as nft 1.0.6 declares it (`nft --debug=mnl`).
        assert_eq!(decl(4).key_type_len(), (0x1c_c344, 16));
        assert_eq!(decl(4).data_type_len(), Some((0x1cd, 8)));
        let u = set::userdata(&decl(4));
        assert_eq!(u.len(), 174 - 4, "the userdata nft sends for it");
        assert_eq!(
            &u[12..18],
            &[3, 0x60, 0, 4, 13, 0],
            "key typeof: a concatenation"
        );
        let elements = |i: usize| match &lines[i].command {
            Command::AddElements { elements, .. } | Command::DeleteElements { elements, .. } => {
                elements.clone()
            }
            c => panic!("{c:?}"),
        };
        assert_eq!(
            elements(5)[0].key,
            [10, 43, 0, 20, 6, 0, 0, 0, 0, 80, 0, 0],
            "each field padded to 4 bytes"
        );
        assert_eq!(
            elements(5)[0].data,
            ElementData::Verdict(Verdict::Goto("svc".into()))
        );
        assert_eq!(elements(6)[0].key, [17, 0, 0, 0, 0x75, 0x80, 0, 0]);
        assert_eq!(elements(7)[0].key, [10, 43, 0, 1]);
        let e = &elements(8)[0];
        let mut key = vec![10, 43, 0, 20, 6, 0, 0, 0, 0, 80, 0, 0];
        key.extend_from_slice(&1u32.to_ne_bytes());
        assert_eq!(e.key, key, "numgen's value in host order");
        assert_eq!(
            e.data,
            ElementData::Value(vec![10, 42, 0, 5, 0x1f, 0x90, 0, 0])
        );
        // The layouts are remembered for the next script's elements, and forgotten with
        // their table.
        assert!(parse("add element ip t np { tcp . 1 : goto a }", &mut layouts).is_ok());
        parse("delete table ip t", &mut layouts).unwrap();
        assert!(parse("add element ip t np { tcp . 1 : goto a }", &mut layouts).is_err());
    }

    #[test]
    fn what_it_does_not_cover_is_refused_not_guessed() {
        for text in [
            "add rule ip t c counter",
            "add rule ip t c ip saddr { 10.0.0.1, 10.0.0.2 } accept",
            "add rule ip t c numgen random mod 2 vmap { 0 : jump a, 1 : jump b }",
            "add set ip t s { type ipv4_addr ; flags interval ; }",
            "add element ip t s { 10.0.0.0/8 }",
            "add rule inet t c accept",
            "add rule ip t c oifname \"eth*\" accept",
            "add rule ip t c ip daddr 10.0.0.0/33 drop",
        ] {
            assert!(parse(text, &mut Layouts::new()).is_err(), "{text}");
        }
    }
}

//! Typed commands → the netlink batch nft would send for them: one message per command, the
//! elements of consecutive element commands on one set sharing messages (as nft sends
//! them), sets and chains named rather than numbered (they are created in the same batch).

use super::compile::{Command, Element, ElementData, Line, set};
use super::wire::{Attrs, Batch, MsgType, NLM_F_APPEND, NLM_F_CREATE};

/// Element bytes per `NEWSETELEM` message: a nested attribute's length is 16 bits.
const ELEMENT_BYTES_PER_MESSAGE: usize = 48 * 1024;

/// A comment as nft keeps it in a table's or rule's userdata (type 0, NUL-terminated).
fn comment_userdata(comment: &str) -> Vec<u8> {
    let mut u = vec![0, (comment.len() + 1) as u8];
    u.extend_from_slice(comment.as_bytes());
    u.push(0);
    u
}

fn element_attrs(list: &mut Attrs, e: &Element) {
    list.nested(1, |el| {
        el.nested(1, |k| {
            k.bytes(1, &e.key);
        });
        match &e.data {
            ElementData::None => {}
            ElementData::Verdict(v) => {
                el.nested(2, |d| v.encode(d));
            }
            ElementData::Value(v) => {
                el.nested(2, |d| {
                    d.bytes(1, v);
                });
            }
        }
    });
}

/// The elements of a run of element commands, in messages of bounded size.
fn elements(b: &mut Batch, adding: bool, table: &str, set: &str, run: &[Line]) {
    let items: Vec<(&Element, usize)> = run
        .iter()
        .flat_map(|l| {
            let elements: &[Element] = match &l.command {
                Command::AddElements { elements, .. }
                | Command::DeleteElements { elements, .. } => elements,
                _ => &[],
            };
            elements.iter().map(|e| (e, e.line))
        })
        .collect();
    let (kind, flags) = if adding {
        (MsgType::NewSetElem, NLM_F_CREATE)
    } else {
        (MsgType::DelSetElem, 0)
    };
    let mut start = 0;
    while start < items.len() {
        let mut end = start;
        // A rejection names the first line of the message.
        b.message(kind, flags, items[start].1, |a| {
            a.string(1, table).string(2, set);
            a.nested(3, |list| {
                let base = list.buf.len();
                while end < items.len() && list.buf.len() - base < ELEMENT_BYTES_PER_MESSAGE {
                    element_attrs(list, items[end].0);
                    end += 1;
                }
            });
        });
        start = end;
    }
}

/// The batch for a parsed script.
pub fn encode(lines: &[Line], seq_base: u32) -> Batch {
    let mut b = Batch::new(seq_base);
    let mut set_id = 0u32;
    let mut i = 0;
    while i < lines.len() {
        let Line {
            table,
            command,
            line,
        } = &lines[i];
        let line = *line;
        match command {
            Command::AddTable { comment } => {
                b.message(MsgType::NewTable, NLM_F_CREATE, line, |a| {
                    a.string(1, table).u32_be(2, 0);
                    if let Some(c) = comment {
                        a.bytes(6, &comment_userdata(c));
                    }
                })
            }
            Command::DeleteTable => b.message(MsgType::DelTable, 0, line, |a| {
                a.string(1, table);
            }),
            Command::AddChain { chain, hook } => {
                b.message(MsgType::NewChain, NLM_F_CREATE, line, |a| {
                    a.string(1, table).string(3, chain);
                    if let Some(h) = hook {
                        a.nested(4, |n| {
                            n.u32_be(1, h.number).u32_be(2, h.priority as u32);
                        });
                        a.string(7, &h.kind);
                    }
                });
            }
            Command::FlushChain { chain } => b.message(MsgType::DelRule, 0, line, |a| {
                a.string(1, table).string(2, chain);
            }),
            Command::DeleteChain { chain } => b.message(MsgType::DelChain, 0, line, |a| {
                a.string(1, table).string(3, chain);
            }),
            Command::AddSet { set: name, decl } => {
                set_id += 1;
                b.message(MsgType::NewSet, NLM_F_CREATE, line, |a| {
                    let (key_type, key_len) = decl.key_type_len();
                    a.string(1, table)
                        .string(2, name)
                        .u32_be(3, decl.flags)
                        .u32_be(4, key_type)
                        .u32_be(5, key_len);
                    if let Some((data_type, data_len)) = decl.data_type_len() {
                        a.u32_be(6, data_type).u32_be(7, data_len);
                    }
                    if let Some(size) = decl.size {
                        // NFTA_SET_DESC { NFTA_SET_DESC_SIZE }
                        a.nested(9, |d| {
                            d.u32_be(1, size);
                        });
                    }
                    a.u32_be(10, set_id);
                    if let Some(t) = decl.timeout_ms {
                        a.u64_be(11, t);
                    }
                    a.bytes(13, &set::userdata(decl));
                });
            }
            Command::DeleteSet { set } => b.message(MsgType::DelSet, 0, line, |a| {
                a.string(1, table).string(2, set);
            }),
            Command::AddElements { set, .. } | Command::DeleteElements { set, .. } => {
                // The run of element commands of the same kind on this set.
                let adding = matches!(command, Command::AddElements { .. });
                let n = lines[i..]
                    .iter()
                    .take_while(|l| {
                        l.table == *table
                            && match &l.command {
                                Command::AddElements { set: s, .. } => adding && s == set,
                                Command::DeleteElements { set: s, .. } => !adding && s == set,
                                _ => false,
                            }
                    })
                    .count();
                elements(&mut b, adding, table, set, &lines[i..i + n]);
                i += n;
                continue;
            }
            Command::AddRule {
                chain,
                exprs,
                comment,
            } => b.message(MsgType::NewRule, NLM_F_CREATE | NLM_F_APPEND, line, |a| {
                a.string(1, table).string(2, chain).nested(4, |list| {
                    for e in exprs {
                        list.nested(1, |el| {
                            el.string(1, e.name()).nested(2, |d| e.encode(d));
                        });
                    }
                });
                if let Some(c) = comment {
                    a.bytes(7, &comment_userdata(c));
                }
            }),
        }
        i += 1;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::compile::{Layouts, parse};

    #[test]
    fn element_runs_on_one_set_share_messages_of_bounded_size() {
        let mut script = String::from(
            "add map ip t m { type ipv4_addr . inet_proto . inet_service : verdict ; }\n",
        );
        for i in 0..2000u32 {
            script += &format!(
                "add element ip t m {{ 10.43.{}.{} . tcp . 80 : goto svc-{i} }}\n",
                i / 256,
                i % 256
            );
        }
        script += "add rule ip t c accept\n";
        let b = encode(&parse(&script, &mut Layouts::new()).unwrap(), 0);
        // The set, 2,000 elements in a few messages of at most ~48 KiB each, the rule.
        assert!((4..10).contains(&b.len()), "{} messages", b.len());
        // Each message of elements names the first line it carries.
        assert_eq!(b.origins[1].1, 1);
        assert!(b.origins[2].1 > 100);
        assert_eq!(b.origins.last().unwrap().1, 2001);
    }
}

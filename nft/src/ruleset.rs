//! A typed picture of one private nftables table (a component owns exactly one), and the transaction text (`nft -f -`)
//! that takes the kernel from one picture to the next.
//!
//! A [`Ruleset`] holds chains (base chains with their hook, regular chains with their rules),
//! set and map declarations, and the elements of the sets and maps the owner manages.
//! [`Tx`] is one transaction: [`Tx::full`] replaces the whole table (at start and after an
//! error), [`Tx::diff`] changes only what differs between two rulesets (a partial sync, which
//! is what keeps the cost of a change independent of the size of the table). Within a
//! transaction the commands are ordered so that nothing is deleted while still referenced:
//! new sets and chains first, then removed elements, then rewritten chains, then new
//! elements, and stale chains and sets last.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The address family and name of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// `ip` (IPv4) for now.
    pub family: &'static str,
    pub name: String,
}

impl Table {
    fn qualified(&self) -> String {
        format!("{} {}", self.family, self.name)
    }
}

/// One chain: a base chain has a hook (`type nat hook prerouting priority dstnat`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    pub hook: Option<String>,
    pub rules: Vec<String>,
}

/// A set or map declaration (`type ipv4_addr . inet_proto . inet_service : verdict`, flags,
/// timeout), and whether the owner manages its elements (a dynamic set's elements are the
/// kernel's: session affinity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    pub map: bool,
    pub declaration: String,
    pub managed: bool,
}

/// Everything in the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: BTreeMap<String, Chain>,
    pub sets: BTreeMap<String, Set>,
    /// set or map name → element key → value (`""` for a set element).
    pub elements: BTreeMap<String, BTreeMap<String, String>>,
}

impl Ruleset {
    pub fn chain(&mut self, name: &str) -> &mut Chain {
        self.chains.entry(name.to_string()).or_default()
    }

    pub fn rule(&mut self, chain: &str, rule: impl Into<String>) {
        self.chain(chain).rules.push(rule.into());
    }

    pub fn base_chain(&mut self, name: &str, hook: &str) {
        self.chain(name).hook = Some(hook.to_string());
    }

    pub fn declare(&mut self, name: &str, map: bool, declaration: &str, managed: bool) {
        self.sets.insert(
            name.to_string(),
            Set {
                map,
                declaration: declaration.to_string(),
                managed,
            },
        );
    }

    pub fn element(&mut self, set: &str, key: impl Into<String>, value: impl Into<String>) {
        let elems = match self.elements.get_mut(set) {
            Some(e) => e,
            None => self.elements.entry(set.to_string()).or_default(),
        };
        elems.insert(key.into(), value.into());
    }

    /// Adds everything of `other` (a fragment with names of its own) to this ruleset.
    pub fn merge(&mut self, other: &Ruleset) {
        for (name, c) in &other.chains {
            let mine = self.chain(name);
            if c.hook.is_some() {
                mine.hook = c.hook.clone();
            }
            mine.rules.extend(c.rules.iter().cloned());
        }
        for (name, s) in &other.sets {
            self.sets.insert(name.clone(), s.clone());
        }
        for (set, elems) in &other.elements {
            let mine = self.elements.entry(set.clone()).or_default();
            for (k, v) in elems {
                mine.insert(k.clone(), v.clone());
            }
        }
    }

    /// Whether it holds nothing at all.
    pub fn is_empty(&self) -> bool {
        self.chains.is_empty() && self.sets.is_empty() && self.elements.is_empty()
    }

    /// How many rules and elements it holds (for logs and metrics).
    pub fn size(&self) -> (usize, usize) {
        (
            self.chains.values().map(|c| c.rules.len()).sum(),
            self.elements.values().map(BTreeMap::len).sum(),
        )
    }
}

/// One transaction, in phases (see the module doc for why this order); each phase is the
/// text of its commands, one per line (a full sync of a large table is hundreds of
/// thousands of lines: written once, not allocated line by line).
#[derive(Debug, Default)]
pub struct Tx {
    prelude: String,
    add_objects: String,
    delete_elements: String,
    rules: String,
    add_elements: String,
    flush_stale: String,
    delete_stale: String,
}

fn add_chain(out: &mut String, t: &str, name: &str, hook: Option<&String>) {
    let _ = match hook {
        Some(h) => writeln!(out, "add chain {t} {name} {{ {h} ; }}"),
        None => writeln!(out, "add chain {t} {name}"),
    };
}

fn add_set(out: &mut String, t: &str, name: &str, s: &Set) {
    let kind = if s.map { "map" } else { "set" };
    let _ = writeln!(out, "add {kind} {t} {name} {{ {} }}", s.declaration);
}

fn add_element_line(out: &mut String, t: &str, set: &str, key: &str, value: &str) {
    let _ = if value.is_empty() {
        writeln!(out, "add element {t} {set} {{ {key} }}")
    } else {
        writeln!(out, "add element {t} {set} {{ {key} : {value} }}")
    };
}

impl Tx {
    /// Replaces the table with `new` at once: the old table (if any) is deleted and the new
    /// one built in the same transaction, so traffic never sees a half-built table.
    pub fn full(table: &Table, comment: &str, new: &Ruleset) -> Tx {
        Tx::full_of(table, comment, &[new])
    }

    /// [`Tx::full`] of the rulesets `parts` merged (as [`Ruleset::merge`] would merge them, a
    /// later part's set or element replacing an earlier one's), without copying them.
    pub fn full_of(table: &Table, comment: &str, parts: &[&Ruleset]) -> Tx {
        let t = table.qualified();
        let mut tx = Tx::default();
        // `add` first so that the `delete` cannot fail on a missing table.
        let _ = writeln!(tx.prelude, "add table {t}");
        let _ = writeln!(tx.prelude, "delete table {t}");
        let _ = writeln!(tx.prelude, "add table {t} {{ comment \"{comment}\" ; }}");
        let mut sets: BTreeMap<&str, &Set> = BTreeMap::new();
        let mut chains: BTreeMap<&str, (Option<&String>, Vec<&String>)> = BTreeMap::new();
        let mut elements: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
        for part in parts {
            for (name, s) in &part.sets {
                sets.insert(name, s);
            }
            for (name, c) in &part.chains {
                let mine = chains.entry(name).or_default();
                if c.hook.is_some() {
                    mine.0 = c.hook.as_ref();
                }
                mine.1.extend(&c.rules);
            }
            for (set, elems) in &part.elements {
                let mine = elements.entry(set).or_default();
                for (k, v) in elems {
                    mine.insert(k, v);
                }
            }
        }
        for (name, s) in &sets {
            add_set(&mut tx.add_objects, &t, name, s);
        }
        for (name, (hook, _)) in &chains {
            add_chain(&mut tx.add_objects, &t, name, *hook);
        }
        for (name, (_, rules)) in &chains {
            for r in rules {
                let _ = writeln!(tx.rules, "add rule {t} {name} {r}");
            }
        }
        for (set, elems) in &elements {
            for (k, v) in elems {
                add_element_line(&mut tx.add_elements, &t, set, k, v);
            }
        }
        tx
    }

    /// Takes the table from `old` (what was last applied) to `new`, touching only what
    /// differs. `None` when a base chain's hook or a set's declaration differs (an affinity
    /// timeout changed): then a [`Tx::full`] is needed, since a set in use cannot be
    /// redeclared in place.
    pub fn diff(table: &Table, old: &Ruleset, new: &Ruleset) -> Option<Tx> {
        for (name, c) in &new.chains {
            if let Some(o) = old.chains.get(name)
                && o.hook != c.hook
            {
                return None;
            }
        }
        for (name, s) in &new.sets {
            if old.sets.get(name).is_some_and(|o| o != s) {
                return None;
            }
        }
        let mut tx = Tx::default();
        tx.add_into(&table.qualified(), old, new);
        Some(tx)
    }

    /// Adds one element to a set the caller manages itself (elements shared by fragments).
    pub fn add_element(&mut self, table: &Table, set: &str, key: &str) {
        add_element_line(&mut self.add_elements, &table.qualified(), set, key, "");
    }

    /// Deletes one element of a set the caller manages itself.
    pub fn delete_element(&mut self, table: &Table, set: &str, key: &str) {
        let _ = writeln!(
            self.delete_elements,
            "delete element {} {set} {{ {key} }}",
            table.qualified()
        );
    }

    /// Appends another transaction's commands phase by phase.
    pub fn extend(&mut self, other: Tx) {
        self.prelude.push_str(&other.prelude);
        self.add_objects.push_str(&other.add_objects);
        self.delete_elements.push_str(&other.delete_elements);
        self.rules.push_str(&other.rules);
        self.add_elements.push_str(&other.add_elements);
        self.flush_stale.push_str(&other.flush_stale);
        self.delete_stale.push_str(&other.delete_stale);
    }

    pub fn is_empty(&self) -> bool {
        self.prelude.is_empty()
            && self.add_objects.is_empty()
            && self.delete_elements.is_empty()
            && self.rules.is_empty()
            && self.add_elements.is_empty()
            && self.flush_stale.is_empty()
            && self.delete_stale.is_empty()
    }

    fn add_into(&mut self, t: &str, old: &Ruleset, new: &Ruleset) {
        for (name, s) in &new.sets {
            if !old.sets.contains_key(name) {
                add_set(&mut self.add_objects, t, name, s);
            }
        }
        for (name, c) in &new.chains {
            if !old.chains.contains_key(name) {
                add_chain(&mut self.add_objects, t, name, c.hook.as_ref());
            }
        }
        let empty = BTreeMap::new();
        for (set, old_elems) in &old.elements {
            if old.sets.get(set).is_some_and(|s| !s.managed) {
                continue;
            }
            // A set deleted whole takes its elements with it.
            if old.sets.contains_key(set) && !new.sets.contains_key(set) {
                continue;
            }
            let new_elems = new.elements.get(set).unwrap_or(&empty);
            for (k, v) in old_elems {
                if new_elems.get(k) != Some(v) {
                    let _ = writeln!(self.delete_elements, "delete element {t} {set} {{ {k} }}");
                }
            }
        }
        for (name, c) in &new.chains {
            match old.chains.get(name) {
                Some(o) if o.rules == c.rules => continue,
                Some(_) => {
                    let _ = writeln!(self.rules, "flush chain {t} {name}");
                }
                None => {}
            }
            for r in &c.rules {
                let _ = writeln!(self.rules, "add rule {t} {name} {r}");
            }
        }
        for (set, new_elems) in &new.elements {
            let old_elems = old.elements.get(set).unwrap_or(&empty);
            for (k, v) in new_elems {
                if old_elems.get(k) != Some(v) {
                    add_element_line(&mut self.add_elements, t, set, k, v);
                }
            }
        }
        for name in old.chains.keys() {
            if !new.chains.contains_key(name) {
                let _ = writeln!(self.flush_stale, "flush chain {t} {name}");
                let _ = writeln!(self.delete_stale, "delete chain {t} {name}");
            }
        }
        for (name, s) in &old.sets {
            if !new.sets.contains_key(name) {
                let kind = if s.map { "map" } else { "set" };
                let _ = writeln!(self.delete_stale, "delete {kind} {t} {name}");
            }
        }
    }

    /// The transaction as `nft -f` input.
    pub fn render(&self) -> String {
        let parts = [
            &self.prelude,
            &self.add_objects,
            &self.delete_elements,
            &self.rules,
            &self.add_elements,
            &self.flush_stale,
            &self.delete_stale,
        ];
        let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        for p in parts {
            out.push_str(p);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            family: "ip",
            name: "t".into(),
        }
    }

    fn base() -> Ruleset {
        let mut r = Ruleset::default();
        r.declare("m", true, "type inet_service : verdict ;", true);
        r.base_chain("pre", "type nat hook prerouting priority dstnat");
        r.rule("pre", "th dport vmap @m");
        r
    }

    #[test]
    fn full_replaces_the_table_in_one_transaction() {
        let mut r = base();
        r.rule("a", "counter");
        r.element("m", "80", "goto a");
        assert_eq!(
            Tx::full(&table(), "c", &r).render(),
            "add table ip t\n\
             delete table ip t\n\
             add table ip t { comment \"c\" ; }\n\
             add map ip t m { type inet_service : verdict ; }\n\
             add chain ip t a\n\
             add chain ip t pre { type nat hook prerouting priority dstnat ; }\n\
             add rule ip t a counter\n\
             add rule ip t pre th dport vmap @m\n\
             add element ip t m { 80 : goto a }\n"
        );
    }

    #[test]
    fn diff_touches_only_what_changed_in_a_safe_order() {
        let mut old = base();
        old.rule("a", "counter");
        old.rule("b", "drop");
        old.element("m", "80", "goto a");
        old.element("m", "81", "goto b");
        let mut new = base();
        new.rule("a", "accept");
        new.rule("c", "reject");
        new.element("m", "80", "goto a");
        new.element("m", "82", "goto c");
        let tx = Tx::diff(&table(), &old, &new).unwrap();
        assert_eq!(
            tx.render(),
            "add chain ip t c\n\
             delete element ip t m { 81 }\n\
             flush chain ip t a\n\
             add rule ip t a accept\n\
             add rule ip t c reject\n\
             add element ip t m { 82 : goto c }\n\
             flush chain ip t b\n\
             delete chain ip t b\n"
        );
        assert!(Tx::diff(&table(), &new, &new).unwrap().is_empty());
    }

    #[test]
    fn a_changed_hook_needs_a_full_sync() {
        let old = base();
        let mut new = base();
        new.base_chain("pre", "type nat hook output priority -100");
        assert!(Tx::diff(&table(), &old, &new).is_none());
    }

    #[test]
    fn dynamic_sets_keep_their_elements_and_a_changed_declaration_needs_a_full_sync() {
        let mut old = base();
        old.declare(
            "aff",
            false,
            "type ipv4_addr ; flags dynamic,timeout ; timeout 10s ;",
            false,
        );
        old.rule("a", "update @aff { ip saddr }");
        // Elements the kernel added to a dynamic set are never deleted by a diff.
        old.element("aff", "10.0.0.1", "");
        let mut same = old.clone();
        same.elements.clear();
        assert!(Tx::diff(&table(), &old, &same).unwrap().is_empty());
        let mut new = old.clone();
        new.declare(
            "aff",
            false,
            "type ipv4_addr ; flags dynamic,timeout ; timeout 20s ;",
            false,
        );
        assert!(Tx::diff(&table(), &old, &new).is_none());
        // A set no longer used goes after the chains that used it.
        let mut gone = base();
        gone.declare("m", true, "type inet_service : verdict ;", true);
        let text = Tx::diff(&table(), &old, &gone).unwrap().render();
        let flush = text.find("flush chain ip t a").unwrap();
        let delete = text.find("delete set ip t aff").unwrap();
        assert!(flush < delete, "{text}");
    }
}

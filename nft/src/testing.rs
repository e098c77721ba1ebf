//! For tests that program tables in network namespaces of their own and compare what the
//! kernel lists (`nft list`, `nft --debug=netlink list`).

use std::process::Command;

use crate::{NftCommand, NftNetlink};

/// A scratch network namespace (`ip netns add`), deleted on drop.
#[derive(Debug)]
pub struct Netns(pub String);

impl Netns {
    /// `NAME-PID`; `None` where it cannot be created (not root).
    pub fn new(name: &str) -> Option<Netns> {
        let name = format!("{name}-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Netns(name))
    }

    /// `nft` run inside it.
    pub fn nft(&self) -> NftCommand {
        NftCommand {
            command: ["ip", "netns", "exec", &self.0, "nft"]
                .map(String::from)
                .to_vec(),
        }
    }

    /// Netlink to its kernel, `nft` inside it for what is not compiled.
    pub fn netlink(&self) -> NftNetlink {
        NftNetlink::new(Some(format!("/run/netns/{}", self.0).into()), self.nft())
    }

    /// What `nft list WHAT` prints inside it (`["ruleset"]`, `["table", "ip", "t"]`); with
    /// `debug`, each rule's expressions too.
    pub fn list(&self, what: &[&str], debug: bool) -> String {
        let mut args = vec!["netns", "exec", &self.0, "nft"];
        if debug {
            args.push("--debug=netlink");
        }
        args.push("list");
        args.extend(what);
        let out = Command::new("ip").args(&args).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `listing` with the items of each `elements = { … }` block and the element lines of a
/// debug listing sorted: a hash set lists its elements in the order of a hash seeded per
/// set, so two equal tables list them differently.
pub fn normalized_listing(listing: &str) -> String {
    let mut out = String::new();
    let mut rest = listing;
    while let Some(i) = rest.find("elements = {") {
        let (head, tail) = rest.split_at(i + "elements = {".len());
        out.push_str(head);
        let end = tail.find('}').unwrap_or(tail.len());
        let mut items: Vec<&str> = tail[..end]
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        items.sort_unstable();
        out.push_str(&items.join(", "));
        rest = &tail[end..];
    }
    out.push_str(rest);
    // `--debug=netlink` prints elements one per line, in the same hash order.
    let mut lines: Vec<&str> = out.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let run = lines[i..]
            .iter()
            .take_while(|l| l.starts_with("\telement "))
            .count();
        lines[i..i + run].sort_unstable();
        i += run.max(1);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_order_does_not_matter() {
        let a = "map m {\n\telements = { 2 : goto b,\n\t\t1 : goto a }\n}\n\telement 02\n\telement 01\n";
        let b = "map m {\n\telements = { 1 : goto a, 2 : goto b }\n}\n\telement 01\n\telement 02\n";
        assert_eq!(normalized_listing(a), normalized_listing(b));
        assert_ne!(normalized_listing(a), normalized_listing("map m {\n}"));
    }
}

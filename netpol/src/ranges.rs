//! Sets of IPv4 addresses as sorted, disjoint, non-adjacent inclusive ranges: what a peer
//! list of a policy rule resolves to (pod addresses, `ipBlock.cidr` minus its `except`s), in
//! the form an nftables interval set takes without overlaps.

use std::net::Ipv4Addr;

/// An `a.b.c.d/len` network read as NetworkPolicy's `ipBlock` reads it: host bits set are
/// allowed and ignored (upstream parses these fields leniently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub first: u32,
    pub last: u32,
}

impl Cidr {
    /// `None` when `s` is not an IPv4 CIDR (IPv6 blocks do not apply to this IPv4 cluster).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, len) = s.trim().split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let len: u32 = len.parse().ok()?;
        if len > 32 {
            return None;
        }
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        let first = u32::from(addr) & mask;
        Some(Cidr {
            first,
            last: first | !mask,
        })
    }
}

/// A set of addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    /// Every address.
    pub fn all() -> Ranges {
        Ranges(vec![(0, u32::MAX)])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ranges, sorted and disjoint.
    pub fn iter(&self) -> impl Iterator<Item = (Ipv4Addr, Ipv4Addr)> + '_ {
        self.0
            .iter()
            .map(|&(a, b)| (Ipv4Addr::from(a), Ipv4Addr::from(b)))
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        // The last range starting at or before `ip`.
        let i = self.0.partition_point(|&(a, _)| a <= ip);
        i > 0 && self.0[i - 1].1 >= ip
    }

    pub fn add_ip(&mut self, ip: Ipv4Addr) {
        let ip = u32::from(ip);
        self.add(ip, ip);
    }

    pub fn add_cidr(&mut self, c: Cidr) {
        self.add(c.first, c.last);
    }

    /// Adds `[first, last]`, merging what overlaps or touches it.
    fn add(&mut self, first: u32, last: u32) {
        self.0.push((first, last));
        self.normalize();
    }

    /// The set of the addresses in `ranges` (in any order, overlapping or not): one sort,
    /// where adding them one by one would cost a pass each.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (Ipv4Addr, Ipv4Addr)>) -> Ranges {
        let mut r = Ranges(
            ranges
                .into_iter()
                .map(|(a, b)| (u32::from(a), u32::from(b)))
                .filter(|(a, b)| a <= b)
                .collect(),
        );
        r.normalize();
        r
    }

    /// Sorts and merges overlapping or touching ranges.
    fn normalize(&mut self) {
        self.0.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.0.len());
        for &(a, b) in &self.0 {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        self.0 = out;
    }

    /// Removes `c`'s addresses.
    pub fn remove_cidr(&mut self, c: Cidr) {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b < c.first || a > c.last {
                out.push((a, b));
                continue;
            }
            if a < c.first {
                out.push((a, c.first - 1));
            }
            if b > c.last {
                out.push((c.last + 1, b));
            }
        }
        self.0 = out;
    }

    /// Adds every address of `other`.
    pub fn union(&mut self, other: &Ranges) {
        self.0.extend_from_slice(&other.0);
        self.normalize();
    }

    /// The elements of an nftables interval set: `a.b.c.d` or `a.b.c.d-e.f.g.h`.
    pub fn elements(&self) -> impl Iterator<Item = String> + '_ {
        self.iter().map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn text(r: &Ranges) -> Vec<String> {
        r.elements().collect()
    }

    #[test]
    fn cidrs_parse_leniently_and_reject_what_is_not_ipv4() {
        let c = Cidr::parse("10.0.1.7/24").unwrap();
        assert_eq!(
            (Ipv4Addr::from(c.first), Ipv4Addr::from(c.last)),
            (ip("10.0.1.0"), ip("10.0.1.255"))
        );
        assert_eq!(Cidr::parse("0.0.0.0/0").unwrap().last, u32::MAX);
        assert_eq!(
            Cidr::parse("1.2.3.4/32").unwrap().first,
            u32::from(ip("1.2.3.4"))
        );
        for bad in ["fd00::/8", "10.0.0.0/33", "10.0.0.0", "x/8"] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn addresses_merge_into_disjoint_ranges() {
        let mut r = Ranges::default();
        for a in ["10.0.0.5", "10.0.0.3", "10.0.0.4", "10.0.0.9"] {
            r.add_ip(ip(a));
        }
        assert_eq!(text(&r), ["10.0.0.3-10.0.0.5", "10.0.0.9"]);
        r.add_cidr(Cidr::parse("10.0.0.0/29").unwrap());
        assert_eq!(text(&r), ["10.0.0.0-10.0.0.7", "10.0.0.9"]);
        r.add_ip(ip("10.0.0.8"));
        assert_eq!(text(&r), ["10.0.0.0-10.0.0.9"]);
        assert!(r.contains(ip("10.0.0.9")) && !r.contains(ip("10.0.0.10")));
    }

    #[test]
    fn excepts_cut_holes() {
        let mut r = Ranges::default();
        r.add_cidr(Cidr::parse("10.0.0.0/16").unwrap());
        r.remove_cidr(Cidr::parse("10.0.1.0/24").unwrap());
        r.remove_cidr(Cidr::parse("10.0.0.0/32").unwrap());
        assert_eq!(text(&r), ["10.0.0.1-10.0.0.255", "10.0.2.0-10.0.255.255"]);
        let mut all = Ranges::all();
        all.remove_cidr(Cidr::parse("0.0.0.0/1").unwrap());
        assert_eq!(text(&all), ["128.0.0.0-255.255.255.255"]);
        all.remove_cidr(Cidr::parse("128.0.0.0/1").unwrap());
        assert!(all.is_empty());
    }

    #[test]
    fn many_addresses_at_once() {
        let r = Ranges::from_ranges(
            ["10.0.0.9", "10.0.0.1", "10.0.0.2", "10.0.0.9", "10.0.0.3"].map(|a| (ip(a), ip(a))),
        );
        assert_eq!(text(&r), ["10.0.0.1-10.0.0.3", "10.0.0.9"]);
        let edge = Ranges::from_ranges([
            (ip("255.255.255.0"), ip("255.255.255.255")),
            (ip("255.255.255.255"), ip("255.255.255.255")),
        ]);
        assert_eq!(text(&edge), ["255.255.255.0-255.255.255.255"]);
    }

    #[test]
    fn union_of_overlapping_sets() {
        let mut a = Ranges::default();
        a.add_cidr(Cidr::parse("10.0.0.0/30").unwrap());
        let mut b = Ranges::default();
        b.add_cidr(Cidr::parse("10.0.0.2/31").unwrap());
        b.add_ip(ip("10.0.0.200"));
        a.union(&b);
        assert_eq!(text(&a), ["10.0.0.0-10.0.0.3", "10.0.0.200"]);
    }
}

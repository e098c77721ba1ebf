//! IPv4 networks as the cluster-network components read them from flags and Node objects
//! (`--cluster-cidr`, `spec.podCIDR`): parse, contain, and cut into node-sized subnets.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an IPv4 network (a.b.c.d/len with the host bits zero): {reason}")]
pub struct NetError {
    pub input: String,
    pub reason: String,
}

/// An IPv4 network: its address (host bits zero) and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Net {
    addr: Ipv4Addr,
    len: u8,
}

impl Ipv4Net {
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len))
        }
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.addr)
    }

    /// Whether `other` lies wholly inside this network.
    pub fn contains_net(&self, other: &Ipv4Net) -> bool {
        other.len >= self.len && self.contains(other.addr)
    }

    /// The subnets of prefix length `len` this network holds, in order; none when `len` is
    /// shorter than this network's prefix or longer than 32.
    pub fn subnets(&self, len: u8) -> impl Iterator<Item = Ipv4Net> + use<> {
        let ok = len >= self.len && len <= 32;
        let count: u64 = if ok { 1u64 << (len - self.len) } else { 0 };
        let step: u64 = 1u64 << (32 - u32::from(len.min(32)));
        let base = u64::from(u32::from(self.addr));
        (0..count).map(move |i| Ipv4Net {
            addr: Ipv4Addr::from((base + i * step) as u32),
            len,
        })
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Ipv4Net {
    type Err = NetError;

    fn from_str(s: &str) -> Result<Self, NetError> {
        let err = |reason: &str| NetError {
            input: s.to_string(),
            reason: reason.to_string(),
        };
        let (addr, len) = s.trim().split_once('/').ok_or_else(|| err("no /len"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| err("not an IPv4 address"))?;
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| err("the prefix length must be 0 to 32"))?;
        let net = Ipv4Net { addr, len };
        if u32::from(addr) & !net.mask() != 0 {
            return Err(err("host bits are set"));
        }
        Ok(net)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_contains_and_cuts() {
        let n: Ipv4Net = "10.42.0.0/16".parse().unwrap();
        assert!(n.contains("10.42.7.1".parse().unwrap()));
        assert!(!n.contains("10.43.0.1".parse().unwrap()));
        assert!(n.contains_net(&"10.42.3.0/24".parse().unwrap()));
        assert!(!n.contains_net(&"10.0.0.0/8".parse().unwrap()));
        let subs: Vec<String> = n.subnets(24).take(2).map(|s| s.to_string()).collect();
        assert_eq!(subs, ["10.42.0.0/24", "10.42.1.0/24"]);
        assert_eq!(n.subnets(24).count(), 256);
        assert_eq!(n.subnets(8).count(), 0);
        assert_eq!(n.subnets(24).last().unwrap().to_string(), "10.42.255.0/24");
        for bad in ["10.42.0.1/16", "10.42.0.0", "10.42.0.0/33", "x/8"] {
            assert!(bad.parse::<Ipv4Net>().is_err(), "{bad}");
        }
        let e = "10.42.0.1/16".parse::<Ipv4Net>().unwrap_err().to_string();
        assert!(e.contains("host bits"), "{e}");
    }
}

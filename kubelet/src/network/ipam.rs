//! Host-local IPAM for one IPv4 pod CIDR, the way the CNI `host-local` plugin does it.
//!
//! This file owns the address plan and its persisted state, nothing else (no netlink):
//!
//! * the gateway is the first host address of the CIDR (`.1` of a `/24`) and lives on the
//!   bridge; pods get addresses from the second host address up to the last one before the
//!   broadcast address; the network and broadcast addresses are never handed out;
//! * allocations are keyed by pod UID: asking again for a UID that holds an address returns
//!   that address;
//! * a `last_reserved` pointer makes the search start after the most recently handed out
//!   address, so a released address is not reused at once (a new pod does not inherit the
//!   conntrack entries or ARP cache lines of the previous one);
//! * the state is one JSON file, `ipam.json` in the state dir, replaced atomically (temp file,
//!   fsync, rename, fsync of the dir) before an allocation or release is reported; a state
//!   file left by a different CIDR keeps only the allocations that still fit;
//! * one mutex serialises allocations within the process. Two processes sharing a state dir
//!   are not supported (the kubelet is the only writer).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::{NetworkError, PodAddress};

/// The name of the state file inside the state dir.
pub const STATE_FILE: &str = "ipam.json";

/// An IPv4 network: a network address (host bits zero) and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix_len: u8,
}

impl Ipv4Cidr {
    /// A CIDR usable as a pod network: the host bits of `network` must be zero and the
    /// prefix must leave room for a gateway and at least one pod (`/30` or shorter).
    pub fn new(network: Ipv4Addr, prefix_len: u8) -> Result<Self, NetworkError> {
        if !(1..=30).contains(&prefix_len) {
            return Err(NetworkError::Invalid(format!(
                "pod CIDR {network}/{prefix_len}: the prefix length must be between 1 and 30"
            )));
        }
        let cidr = Ipv4Cidr {
            network,
            prefix_len,
        };
        if u32::from(network) & !cidr.mask() != 0 {
            return Err(NetworkError::Invalid(format!(
                "pod CIDR {network}/{prefix_len}: host bits are set (network address is {})",
                Ipv4Addr::from(u32::from(network) & cidr.mask())
            )));
        }
        Ok(cidr)
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    fn mask(&self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix_len))
    }

    /// The broadcast address (the last address of the network).
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !self.mask())
    }

    /// The gateway: the first host address, which the bridge holds.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    /// Whether `ip` lies in this network.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.network)
    }

    /// The first and last address handed to pods (both inclusive).
    fn pod_range(&self) -> (u32, u32) {
        (u32::from(self.network) + 2, u32::from(self.broadcast()) - 1)
    }

    /// Whether `ip` may be handed to a pod (in the network, not the network, gateway or
    /// broadcast address).
    pub fn is_pod_address(&self, ip: Ipv4Addr) -> bool {
        let (first, last) = self.pod_range();
        (first..=last).contains(&u32::from(ip))
    }

    /// How many pod addresses the network has.
    pub fn pod_capacity(&self) -> u32 {
        let (first, last) = self.pod_range();
        last - first + 1
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = NetworkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || NetworkError::Invalid(format!("pod CIDR {s:?}: expected a.b.c.d/len"));
        let (addr, len) = s.trim().split_once('/').ok_or_else(invalid)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| invalid())?;
        let len: u8 = len.parse().map_err(|_| invalid())?;
        Ipv4Cidr::new(addr, len)
    }
}

impl Serialize for Ipv4Cidr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ipv4Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What `ipam.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    /// The CIDR the allocations were made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cidr: Option<Ipv4Cidr>,
    /// The most recently handed out address; the next search starts after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_reserved: Option<Ipv4Addr>,
    /// Pod UID to address.
    #[serde(default)]
    allocations: BTreeMap<String, Ipv4Addr>,
}

/// Host-local IPAM for one pod CIDR; see the module docs.
#[derive(Debug)]
pub struct Ipam {
    cidr: Ipv4Cidr,
    /// The state file, `None` for an in-memory IPAM.
    path: Option<PathBuf>,
    state: Mutex<State>,
}

impl Ipam {
    /// An IPAM persisted as `ipam.json` under `state_dir` (created if missing), loading what a
    /// previous run left there.
    pub fn open(cidr: Ipv4Cidr, state_dir: &Path) -> Result<Self, NetworkError> {
        fs::create_dir_all(state_dir).map_err(|source| NetworkError::Os {
            context: format!("creating the IPAM state dir {}", state_dir.display()),
            source,
        })?;
        let path = state_dir.join(STATE_FILE);
        let state = match fs::read(&path) {
            Ok(bytes) => {
                let state: State =
                    serde_json::from_slice(&bytes).map_err(|e| NetworkError::State {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                adopt(state, cidr)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State {
                cidr: Some(cidr),
                ..State::default()
            },
            Err(source) => {
                return Err(NetworkError::Os {
                    context: format!("reading {}", path.display()),
                    source,
                });
            }
        };
        Ok(Ipam {
            cidr,
            path: Some(path),
            state: Mutex::new(state),
        })
    }

    /// An IPAM that keeps its state in memory only (for fakes and tests).
    pub fn in_memory(cidr: Ipv4Cidr) -> Self {
        Ipam {
            cidr,
            path: None,
            state: Mutex::new(State {
                cidr: Some(cidr),
                ..State::default()
            }),
        }
    }

    /// The CIDR addresses come from.
    pub fn cidr(&self) -> Ipv4Cidr {
        self.cidr
    }

    /// The state file, if persisted.
    pub fn state_file(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated: changes are made
        // on a copy and swapped in after persisting, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pod_address(&self, ip: Ipv4Addr) -> PodAddress {
        PodAddress {
            ip: IpAddr::V4(ip),
            gateway: IpAddr::V4(self.cidr.gateway()),
            prefix_len: self.cidr.prefix_len(),
        }
    }

    /// The address `pod_uid` holds, or a new one: the first free address after
    /// `last_reserved`, wrapping around once. Persisted before it returns.
    pub fn allocate(&self, pod_uid: &str) -> Result<PodAddress, NetworkError> {
        check_uid(pod_uid)?;
        let mut state = self.lock();
        if let Some(ip) = state.allocations.get(pod_uid) {
            return Ok(self.pod_address(*ip));
        }
        let (first, last) = self.cidr.pod_range();
        let start = match state.last_reserved {
            Some(ip) if self.cidr.is_pod_address(ip) && u32::from(ip) < last => u32::from(ip) + 1,
            _ => first,
        };
        let used: std::collections::HashSet<Ipv4Addr> =
            state.allocations.values().copied().collect();
        let capacity = self.cidr.pod_capacity();
        let found = (0..capacity)
            .map(|i| {
                // `start + i` wraps from `last` back to `first`.
                let offset = (start - first + i) % capacity;
                Ipv4Addr::from(first + offset)
            })
            .find(|ip| !used.contains(ip))
            .ok_or_else(|| NetworkError::Exhausted(self.cidr.to_string()))?;
        let mut next = state.clone();
        next.allocations.insert(pod_uid.to_string(), found);
        next.last_reserved = Some(found);
        self.persist(&next)?;
        *state = next;
        Ok(self.pod_address(found))
    }

    /// Releases the address of `pod_uid`, returning it (`None` if it had none).
    /// `last_reserved` stays where it is, so the address is not handed out again at once.
    pub fn release(&self, pod_uid: &str) -> Result<Option<Ipv4Addr>, NetworkError> {
        let mut state = self.lock();
        if !state.allocations.contains_key(pod_uid) {
            return Ok(None);
        }
        let mut next = state.clone();
        let released = next.allocations.remove(pod_uid);
        self.persist(&next)?;
        *state = next;
        Ok(released)
    }

    /// The address `pod_uid` holds, if any.
    pub fn get(&self, pod_uid: &str) -> Option<PodAddress> {
        self.lock()
            .allocations
            .get(pod_uid)
            .map(|ip| self.pod_address(*ip))
    }

    /// All allocations, pod UID to address.
    pub fn allocations(&self) -> BTreeMap<String, Ipv4Addr> {
        self.lock().allocations.clone()
    }

    fn persist(&self, state: &State) -> Result<(), NetworkError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| NetworkError::State {
            path: path.clone(),
            message: format!("encoding: {e}"),
        })?;
        write_atomically(path, &bytes)
    }
}

/// Keeps what a state file left behind that fits `cidr`.
fn adopt(mut state: State, cidr: Ipv4Cidr) -> State {
    if state.cidr != Some(cidr) {
        let before = state.allocations.len();
        state.allocations.retain(|_, ip| cidr.is_pod_address(*ip));
        if state.allocations.len() != before {
            tracing::warn!(
                old = ?state.cidr.map(|c| c.to_string()),
                new = %cidr,
                dropped = before - state.allocations.len(),
                "pod CIDR changed; dropping IPAM allocations outside the new CIDR"
            );
        }
        state.cidr = Some(cidr);
    }
    if state
        .last_reserved
        .is_some_and(|ip| !cidr.is_pod_address(ip))
    {
        state.last_reserved = None;
    }
    state
}

fn check_uid(pod_uid: &str) -> Result<(), NetworkError> {
    if pod_uid.is_empty() || pod_uid.len() > 253 || pod_uid.chars().any(char::is_control) {
        return Err(NetworkError::Invalid(format!(
            "pod UID {pod_uid:?} is not valid"
        )));
    }
    Ok(())
}

/// Replaces `path` with `bytes`: a temp file in the same dir, fsync, rename, fsync of the dir.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), NetworkError> {
    let os = |context: String| move |source| NetworkError::Os { context, source };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| STATE_FILE.to_string());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp).map_err(os(format!("creating {}", tmp.display())))?;
        file.write_all(bytes)
            .map_err(os(format!("writing {}", tmp.display())))?;
        file.sync_all()
            .map_err(os(format!("syncing {}", tmp.display())))?;
        fs::rename(&tmp, path).map_err(os(format!(
            "renaming {} to {}",
            tmp.display(),
            path.display()
        )))?;
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(os(format!("syncing the dir {}", dir.display())))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_parsing() {
        struct Case {
            input: &'static str,
            ok: bool,
            gateway: &'static str,
            broadcast: &'static str,
            capacity: u32,
        }
        let cases = [
            Case {
                input: "10.42.0.0/24",
                ok: true,
                gateway: "10.42.0.1",
                broadcast: "10.42.0.255",
                capacity: 253,
            },
            Case {
                input: " 10.244.3.0/24 ",
                ok: true,
                gateway: "10.244.3.1",
                broadcast: "10.244.3.255",
                capacity: 253,
            },
            Case {
                input: "10.42.0.0/16",
                ok: true,
                gateway: "10.42.0.1",
                broadcast: "10.42.255.255",
                capacity: 65533,
            },
            Case {
                input: "192.168.7.4/30",
                ok: true,
                gateway: "192.168.7.5",
                broadcast: "192.168.7.7",
                capacity: 1,
            },
            Case {
                input: "10.42.0.1/24",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "10.42.0.0/31",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "10.42.0.0/32",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "0.0.0.0/0",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "10.42.0.0",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "10.42.0.0/abc",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "fd00::/64",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
            Case {
                input: "",
                ok: false,
                gateway: "",
                broadcast: "",
                capacity: 0,
            },
        ];
        for case in cases {
            let parsed = case.input.parse::<Ipv4Cidr>();
            assert_eq!(parsed.is_ok(), case.ok, "{:?}: {parsed:?}", case.input);
            if let Ok(c) = parsed {
                assert_eq!(c.gateway(), ip(case.gateway), "{}", case.input);
                assert_eq!(c.broadcast(), ip(case.broadcast), "{}", case.input);
                assert_eq!(c.pod_capacity(), case.capacity, "{}", case.input);
                assert_eq!(c.to_string().parse::<Ipv4Cidr>().unwrap(), c);
            }
        }
    }

    #[test]
    fn pod_address_membership() {
        let c = cidr("10.42.0.0/24");
        let cases = [
            ("10.42.0.0", true, false),
            ("10.42.0.1", true, false),
            ("10.42.0.2", true, true),
            ("10.42.0.128", true, true),
            ("10.42.0.254", true, true),
            ("10.42.0.255", true, false),
            ("10.42.1.2", false, false),
            ("10.41.255.255", false, false),
        ];
        for (addr, contains, pod) in cases {
            assert_eq!(c.contains(ip(addr)), contains, "{addr} contains");
            assert_eq!(c.is_pod_address(ip(addr)), pod, "{addr} is_pod_address");
        }
    }

    /// A script of allocations and releases against one in-memory IPAM, each step with the
    /// address it must yield.
    #[test]
    fn allocation_sequences() {
        enum Step {
            Alloc(&'static str, Result<&'static str, ()>),
            Release(&'static str, Option<&'static str>),
        }
        use Step::*;
        struct Case {
            name: &'static str,
            cidr: &'static str,
            steps: Vec<Step>,
        }
        let cases = vec![
            Case {
                name: "first pods get .2 and .3",
                cidr: "10.42.0.0/24",
                steps: vec![Alloc("a", Ok("10.42.0.2")), Alloc("b", Ok("10.42.0.3"))],
            },
            Case {
                name: "same uid gets the same address",
                cidr: "10.42.0.0/24",
                steps: vec![
                    Alloc("a", Ok("10.42.0.2")),
                    Alloc("b", Ok("10.42.0.3")),
                    Alloc("a", Ok("10.42.0.2")),
                    Alloc("c", Ok("10.42.0.4")),
                ],
            },
            Case {
                name: "released address is not reused at once",
                cidr: "10.42.0.0/24",
                steps: vec![
                    Alloc("a", Ok("10.42.0.2")),
                    Alloc("b", Ok("10.42.0.3")),
                    Release("a", Some("10.42.0.2")),
                    Alloc("c", Ok("10.42.0.4")),
                    Release("a", None),
                    Release("nobody", None),
                ],
            },
            Case {
                name: "wraps around and skips the gateway and broadcast",
                cidr: "10.0.0.0/29",
                steps: vec![
                    Alloc("a", Ok("10.0.0.2")),
                    Alloc("b", Ok("10.0.0.3")),
                    Alloc("c", Ok("10.0.0.4")),
                    Alloc("d", Ok("10.0.0.5")),
                    Alloc("e", Ok("10.0.0.6")),
                    Alloc("f", Err(())),
                    Release("b", Some("10.0.0.3")),
                    Alloc("f", Ok("10.0.0.3")),
                    Alloc("g", Err(())),
                    Release("a", Some("10.0.0.2")),
                    Release("e", Some("10.0.0.6")),
                    Alloc("g", Ok("10.0.0.6")),
                    Alloc("h", Ok("10.0.0.2")),
                ],
            },
            Case {
                name: "a /30 has room for one pod",
                cidr: "10.0.0.4/30",
                steps: vec![
                    Alloc("a", Ok("10.0.0.6")),
                    Alloc("b", Err(())),
                    Release("a", Some("10.0.0.6")),
                    Alloc("b", Ok("10.0.0.6")),
                ],
            },
            Case {
                name: "bad uids are refused",
                cidr: "10.42.0.0/24",
                steps: vec![Alloc("", Err(())), Alloc("a\nb", Err(()))],
            },
        ];
        for case in cases {
            let ipam = Ipam::in_memory(cidr(case.cidr));
            for (i, step) in case.steps.iter().enumerate() {
                match step {
                    Alloc(uid, want) => {
                        let got = ipam.allocate(uid);
                        match (want, &got) {
                            (Ok(want), Ok(got)) => {
                                assert_eq!(got.ip, IpAddr::V4(ip(want)), "{} step {i}", case.name);
                                assert_eq!(
                                    got.gateway,
                                    IpAddr::V4(cidr(case.cidr).gateway()),
                                    "{} step {i}",
                                    case.name
                                );
                                assert_eq!(got.prefix_len, cidr(case.cidr).prefix_len());
                                assert_eq!(ipam.get(uid).as_ref(), Some(got));
                            }
                            (Err(()), Err(_)) => {}
                            _ => panic!("{} step {i}: want {want:?}, got {got:?}", case.name),
                        }
                    }
                    Release(uid, want) => {
                        let got = ipam.release(uid).unwrap();
                        assert_eq!(got, want.map(ip), "{} step {i}", case.name);
                        assert_eq!(ipam.get(uid), None, "{} step {i}", case.name);
                    }
                }
            }
        }
    }

    #[test]
    fn exhaustion_names_the_cidr() {
        let ipam = Ipam::in_memory(cidr("10.0.0.4/30"));
        ipam.allocate("a").unwrap();
        let err = ipam.allocate("b").unwrap_err();
        assert!(
            matches!(&err, NetworkError::Exhausted(c) if c == "10.0.0.4/30"),
            "{err}"
        );
    }

    #[test]
    fn concurrent_allocations_are_distinct() {
        let ipam = Arc::new(Ipam::in_memory(cidr("10.42.0.0/24")));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let ipam = ipam.clone();
                std::thread::spawn(move || {
                    (0..30)
                        .map(|i| ipam.allocate(&format!("pod-{t}-{i}")).unwrap().ip)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<IpAddr> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(all.len(), 240);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 240, "an address was handed out twice");
        // 240 of 253 taken: 13 left, then exhaustion.
        for i in 0..13 {
            ipam.allocate(&format!("extra-{i}")).unwrap();
        }
        assert!(matches!(
            ipam.allocate("one-too-many"),
            Err(NetworkError::Exhausted(_))
        ));
    }

    #[test]
    fn concurrent_allocations_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let ipam = Arc::new(Ipam::open(cidr("10.42.0.0/24"), dir.path()).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let ipam = ipam.clone();
                std::thread::spawn(move || {
                    for i in 0..10 {
                        ipam.allocate(&format!("pod-{t}-{i}")).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let before = ipam.allocations();
        drop(ipam);
        let reopened = Ipam::open(cidr("10.42.0.0/24"), dir.path()).unwrap();
        assert_eq!(reopened.allocations(), before);
        assert_eq!(before.len(), 40);
    }

    #[test]
    fn reload_after_restart() {
        let dir = tempfile::tempdir().unwrap();
        let c = cidr("10.42.0.0/24");
        {
            let ipam = Ipam::open(c, dir.path()).unwrap();
            assert_eq!(ipam.allocate("a").unwrap().ip, IpAddr::V4(ip("10.42.0.2")));
            assert_eq!(ipam.allocate("b").unwrap().ip, IpAddr::V4(ip("10.42.0.3")));
            assert_eq!(ipam.release("b").unwrap(), Some(ip("10.42.0.3")));
        }
        // No temp files left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![STATE_FILE.to_string()]);

        let ipam = Ipam::open(c, dir.path()).unwrap();
        assert_eq!(
            ipam.get("a").map(|a| a.ip),
            Some(IpAddr::V4(ip("10.42.0.2")))
        );
        assert_eq!(ipam.get("b"), None);
        // last_reserved (.3) survived the restart: the next pod gets .4, not .3.
        assert_eq!(ipam.allocate("c").unwrap().ip, IpAddr::V4(ip("10.42.0.4")));
        assert_eq!(ipam.allocate("a").unwrap().ip, IpAddr::V4(ip("10.42.0.2")));
    }

    #[test]
    fn state_from_another_cidr_keeps_what_fits() {
        let dir = tempfile::tempdir().unwrap();
        {
            let ipam = Ipam::open(cidr("10.42.0.0/16"), dir.path()).unwrap();
            for i in 0..300 {
                ipam.allocate(&format!("p{i}")).unwrap();
            }
        }
        let ipam = Ipam::open(cidr("10.42.0.0/24"), dir.path()).unwrap();
        // p0..p252 got 10.42.0.2..=10.42.0.254; p253 got .255 and later ones 10.42.1.x.
        assert_eq!(ipam.allocations().len(), 253);
        assert!(ipam.get("p0").is_some());
        assert!(ipam.get("p253").is_none());
        assert!(matches!(
            ipam.allocate("new"),
            Err(NetworkError::Exhausted(_))
        ));
    }

    #[test]
    fn corrupt_state_is_an_error_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(STATE_FILE), b"{not json").unwrap();
        let err = Ipam::open(cidr("10.42.0.0/24"), dir.path()).unwrap_err();
        assert!(
            matches!(&err, NetworkError::State { path, .. } if path.ends_with(STATE_FILE)),
            "{err}"
        );
    }

    #[test]
    fn state_file_format() {
        let dir = tempfile::tempdir().unwrap();
        let ipam = Ipam::open(cidr("10.42.0.0/24"), dir.path()).unwrap();
        ipam.allocate("uid-1").unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.path().join(STATE_FILE)).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "cidr": "10.42.0.0/24",
                "last_reserved": "10.42.0.2",
                "allocations": {"uid-1": "10.42.0.2"}
            })
        );
    }
}

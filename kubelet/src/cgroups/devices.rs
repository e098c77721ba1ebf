//! The device access of a container's cgroup: which device nodes its processes may create,
//! read and write.
//!
//! Owns the rule set ([`DeviceRules`]: upstream runtimes' default allow-list, plus what device
//! plugins hand a container, or everything for a privileged one) and enforcing it in both
//! cgroup versions:
//!
//! - v1: the `devices` controller, `devices.deny` `a` then one `devices.allow` line per rule
//!   (skipped when `devices.list` already holds exactly the rules);
//! - v2: a `BPF_PROG_TYPE_CGROUP_DEVICE` program generated from the rules ([`program`]),
//!   loaded with `bpf(2)` and attached to the group (replacing a program attached before).
//!
//! Without this a container that keeps `CAP_MKNOD` (in upstream's default set) could create
//! `/dev/sda` in its own `/dev` and read the host's disk.
//!
//! The default list is the one runc and containerd give every unprivileged container: creating
//! any device node (`m`), and reading and writing `/dev/null`, `/dev/zero`, `/dev/full`,
//! `/dev/random`, `/dev/urandom`, `/dev/tty`, `/dev/console`, `/dev/ptmx` and the `/dev/pts`
//! terminals.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::CgroupError;
use super::fsutil;

/// Device node kinds a rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceKind {
    /// Both kinds (v1 `a`).
    All,
    Char,
    Block,
}

/// One allow rule. `None` numbers are wildcards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeviceRule {
    pub kind: DeviceKind,
    pub major: Option<u32>,
    pub minor: Option<u32>,
    /// Bits of [`READ`], [`WRITE`] and [`MKNOD`].
    pub access: u8,
}

/// Creating the node (`m`).
pub const MKNOD: u8 = 1;
/// Opening it for reading (`r`).
pub const READ: u8 = 2;
/// Opening it for writing (`w`).
pub const WRITE: u8 = 4;
/// `rwm`.
pub const ALL_ACCESS: u8 = MKNOD | READ | WRITE;

/// What a container's processes may do with device nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceRules {
    /// Everything (privileged containers).
    AllowAll,
    /// Only what these rules allow.
    Only(Vec<DeviceRule>),
}

impl DeviceRule {
    const fn char(major: Option<u32>, minor: Option<u32>, access: u8) -> Self {
        Self {
            kind: DeviceKind::Char,
            major,
            minor,
            access,
        }
    }

    /// The v1 `devices.allow` / `devices.list` line: `c 1:3 rwm`, `b *:* m`, `a *:* rwm`.
    pub fn v1_line(&self) -> String {
        let kind = match self.kind {
            DeviceKind::All => 'a',
            DeviceKind::Char => 'c',
            DeviceKind::Block => 'b',
        };
        let num = |n: Option<u32>| n.map_or_else(|| "*".to_string(), |n| n.to_string());
        format!(
            "{kind} {}:{} {}",
            num(self.major),
            num(self.minor),
            access_string(self.access)
        )
    }
}

/// `rwm` letters of an access mask, in the kernel's order.
pub fn access_string(access: u8) -> String {
    let mut s = String::new();
    for (bit, c) in [(READ, 'r'), (WRITE, 'w'), (MKNOD, 'm')] {
        if access & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Device permissions with a letter other than `r`, `w` and `m`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device permissions {0:?}: only the letters r, w and m are allowed")]
pub struct BadAccess(pub String);

/// A device program the kernel refused, with the verifier's log.
#[derive(Debug, thiserror::Error)]
#[error("loading the device program: {source}; verifier: {verifier}")]
pub struct ProgramLoadError {
    pub source: std::io::Error,
    pub verifier: String,
}

/// Parses cgroup permissions (`rw`, `rwm`, ...) as device plugins give them; empty means
/// `rwm`.
pub fn parse_access(s: &str) -> Result<u8, BadAccess> {
    if s.is_empty() {
        return Ok(ALL_ACCESS);
    }
    let mut access = 0;
    for c in s.chars() {
        access |= match c {
            'r' => READ,
            'w' => WRITE,
            'm' => MKNOD,
            _ => return Err(BadAccess(s.to_string())),
        };
    }
    Ok(access)
}

/// Upstream runtimes' default allow-list for unprivileged containers.
pub fn default_rules() -> Vec<DeviceRule> {
    let c = |major, minor| DeviceRule::char(Some(major), Some(minor), ALL_ACCESS);
    vec![
        DeviceRule::char(None, None, MKNOD),
        DeviceRule {
            kind: DeviceKind::Block,
            major: None,
            minor: None,
            access: MKNOD,
        },
        c(1, 3),                                       // null
        c(1, 5),                                       // zero
        c(1, 7),                                       // full
        c(1, 8),                                       // random
        c(1, 9),                                       // urandom
        c(5, 0),                                       // tty
        c(5, 1),                                       // console
        c(5, 2),                                       // ptmx
        DeviceRule::char(Some(136), None, ALL_ACCESS), // pts
    ]
}

/// The rules of one container: everything when privileged, else the defaults plus `extra`
/// (the device plugins' devices).
pub fn container_rules(privileged: bool, extra: &[DeviceRule]) -> DeviceRules {
    if privileged {
        return DeviceRules::AllowAll;
    }
    let mut rules = default_rules();
    for r in extra {
        if !rules.contains(r) {
            rules.push(*r);
        }
    }
    DeviceRules::Only(rules)
}

/// The v1 lines of a rule set, as `devices.list` shows them.
fn v1_lines(rules: &DeviceRules) -> BTreeSet<String> {
    match rules {
        DeviceRules::AllowAll => BTreeSet::from(["a *:* rwm".to_string()]),
        DeviceRules::Only(rules) => rules.iter().map(DeviceRule::v1_line).collect(),
    }
}

/// Enforces `rules` on the v1 `devices` group `dir` (which must have no child groups).
pub fn apply_v1(dir: &Path, rules: &DeviceRules) -> Result<(), CgroupError> {
    let want = v1_lines(rules);
    let current: BTreeSet<String> = fsutil::read(&dir.join("devices.list"))?
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if current == want {
        return Ok(());
    }
    let allow = dir.join("devices.allow");
    match rules {
        DeviceRules::AllowAll => fsutil::write_file(&allow, "a"),
        DeviceRules::Only(_) => {
            fsutil::write_file(&dir.join("devices.deny"), "a")?;
            want.iter().try_for_each(|l| fsutil::write_file(&allow, l))
        }
    }
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    /// Destination register in the low nibble, source register in the high one.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

// Opcodes (linux/bpf_common.h, linux/bpf.h).
const LDX_MEM_W: u8 = 0x61;
const ALU32_AND_K: u8 = 0x54;
const ALU32_RSH_K: u8 = 0x74;
const ALU64_AND_K: u8 = 0x57;
const ALU64_MOV_K: u8 = 0xb7;
const ALU64_MOV_X: u8 = 0xbf;
const JMP_JNE_K: u8 = 0x55;
const JMP_EXIT: u8 = 0x95;

// `struct bpf_cgroup_dev_ctx` values.
const BPF_DEVCG_DEV_BLOCK: i32 = 1;
const BPF_DEVCG_DEV_CHAR: i32 = 2;

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// The device program for `rules`: r2 = device type, r3 = requested access, r4 = major,
/// r5 = minor; then one block per rule that jumps past itself on a mismatch and else returns 1
/// (allow); falling off the last block returns 0 (deny).
pub fn program(rules: &[DeviceRule]) -> Vec<Insn> {
    let mut prog = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU32_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 3, 1, 0, 0),
        insn(ALU32_RSH_K, 3, 0, 0, 16),
        insn(LDX_MEM_W, 4, 1, 4, 0),
        insn(LDX_MEM_W, 5, 1, 8, 0),
    ];
    for r in rules {
        // Jumps are filled with their index in the block; fixed up once its length is known.
        let mut block = Vec::new();
        let mut jumps = Vec::new();
        let mut jne = |block: &mut Vec<Insn>, reg: u8, imm: i32| {
            jumps.push(block.len());
            block.push(insn(JMP_JNE_K, reg, 0, 0, imm));
        };
        match r.kind {
            DeviceKind::All => {}
            DeviceKind::Char => jne(&mut block, 2, BPF_DEVCG_DEV_CHAR),
            DeviceKind::Block => jne(&mut block, 2, BPF_DEVCG_DEV_BLOCK),
        }
        let access = r.access & ALL_ACCESS;
        if access != ALL_ACCESS {
            // Every requested bit must be allowed: (requested & !allowed) == 0.
            block.push(insn(ALU64_MOV_X, 1, 3, 0, 0));
            block.push(insn(ALU64_AND_K, 1, 0, 0, i32::from(!access & ALL_ACCESS)));
            jne(&mut block, 1, 0);
        }
        if let Some(major) = r.major {
            jne(&mut block, 4, major as i32);
        }
        if let Some(minor) = r.minor {
            jne(&mut block, 5, minor as i32);
        }
        block.push(insn(ALU64_MOV_K, 0, 0, 0, 1));
        block.push(insn(JMP_EXIT, 0, 0, 0, 0));
        let len = block.len();
        for j in jumps {
            block[j].off = (len - j - 1) as i16;
        }
        prog.extend(block);
    }
    prog.push(insn(ALU64_MOV_K, 0, 0, 0, 0));
    prog.push(insn(JMP_EXIT, 0, 0, 0, 0));
    prog
}

// bpf(2) commands, program and attach types.
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;

/// The `BPF_PROG_LOAD` part of `union bpf_attr` (the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The `BPF_PROG_ATTACH` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<i64> {
    // SAFETY: `attr` is a properly laid out, initialized prefix of `union bpf_attr` for `cmd`
    // that lives across the call; the kernel reads at most `size_of::<T>()` bytes of it and
    // treats the rest of the union as zero.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Loads a device program; on failure the verifier's log is in the error.
fn load(prog: &[Insn]) -> Result<OwnedFd, ProgramLoadError> {
    let license = b"Apache-2.0\0";
    let mut name = [0u8; 16];
    name[..11].copy_from_slice(b"k1s_devices");
    let attr = |log: &mut Vec<u8>| ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: u32::from(!log.is_empty()),
        log_size: log.len() as u32,
        log_buf: if log.is_empty() {
            0
        } else {
            log.as_mut_ptr() as u64
        },
        prog_name: name,
        expected_attach_type: BPF_CGROUP_DEVICE,
        ..ProgLoadAttr::default()
    };
    let mut none = Vec::new();
    match bpf(BPF_PROG_LOAD, &mut attr(&mut none)) {
        // SAFETY: a successful BPF_PROG_LOAD returns a new file descriptor that nothing else
        // owns.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(source) => {
            // Again with the verifier's log, to say why.
            let mut log = vec![0u8; 64 * 1024];
            let _ = bpf(BPF_PROG_LOAD, &mut attr(&mut log));
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            Err(ProgramLoadError {
                source,
                verifier: text.trim().to_string(),
            })
        }
    }
}

/// Enforces `rules` on the v2 group `dir`: attaches the device program generated from them,
/// replacing one attached before. [`DeviceRules::AllowAll`] attaches nothing (a new group
/// allows all devices its parents allow). A directory that is not on a cgroup2 file system (a
/// fixture tree) is left alone.
pub fn apply_v2(dir: &Path, rules: &DeviceRules) -> Result<(), CgroupError> {
    let DeviceRules::Only(rules) = rules else {
        return Ok(());
    };
    if super::detect_version(dir)? != super::CgroupVersion::V2 {
        tracing::debug!(group = %dir.display(), "not a cgroup2 group; device program not attached");
        return Ok(());
    }
    let other = |reason: String| CgroupError::Other(format!("{}: {reason}", dir.display()));
    // CgroupError has no variant for it: its message, under the group's path.
    let prog = load(&program(rules)).map_err(|e| other(e.to_string()))?;
    let group = std::fs::File::open(dir).map_err(|e| fsutil::io_err(dir, e))?;
    let mut attr = ProgAttachAttr {
        target_fd: group.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: 0,
    };
    bpf(BPF_PROG_ATTACH, &mut attr)
        .map_err(|e| other(format!("attaching the device program: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on one access, as the kernel would, to check the generated code
    /// without a kernel: a tiny interpreter of the instructions [`program`] emits.
    fn run(prog: &[Insn], kind: i32, access: u8, major: u32, minor: u32) -> u64 {
        let ctx = [((access as u32) << 16) | kind as u32, major, minor];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        loop {
            let i = prog[pc];
            let (dst, src) = ((i.regs & 0x0f) as usize, (i.regs >> 4) as usize);
            pc += 1;
            match i.code {
                LDX_MEM_W => {
                    assert_eq!(src, 1, "loads only from the context");
                    r[dst] = u64::from(ctx[i.off as usize / 4]);
                }
                ALU32_AND_K => r[dst] = (r[dst] as u32 & i.imm as u32) as u64,
                ALU32_RSH_K => r[dst] = ((r[dst] as u32) >> i.imm) as u64,
                ALU64_AND_K => r[dst] &= i.imm as i64 as u64,
                ALU64_MOV_K => r[dst] = i.imm as i64 as u64,
                ALU64_MOV_X => r[dst] = r[src],
                JMP_JNE_K => {
                    if r[dst] != i.imm as i64 as u64 {
                        pc += i.off as usize;
                    }
                }
                JMP_EXIT => return r[0],
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    const CHAR: i32 = BPF_DEVCG_DEV_CHAR;
    const BLOCK: i32 = BPF_DEVCG_DEV_BLOCK;

    #[test]
    fn the_default_program_allows_the_default_devices_only() {
        let DeviceRules::Only(rules) = container_rules(false, &[]) else {
            panic!("unprivileged containers get a list");
        };
        let p = program(&rules);
        // /dev/null read and write, /dev/pts/7, /dev/ptmx.
        assert_eq!(run(&p, CHAR, READ | WRITE, 1, 3), 1);
        assert_eq!(run(&p, CHAR, READ, 136, 7), 1);
        assert_eq!(run(&p, CHAR, WRITE, 5, 2), 1);
        // Creating any node is allowed, opening it is not.
        assert_eq!(run(&p, BLOCK, MKNOD, 8, 0), 1);
        assert_eq!(run(&p, BLOCK, READ, 8, 0), 0);
        assert_eq!(run(&p, CHAR, MKNOD, 1, 1), 1);
        assert_eq!(run(&p, CHAR, READ, 1, 1), 0); // /dev/mem
        assert_eq!(run(&p, CHAR, MKNOD | READ, 1, 11), 0);
        // The right numbers as a block device are still denied.
        assert_eq!(run(&p, BLOCK, READ, 1, 3), 0);
    }

    #[test]
    fn plugin_devices_get_their_permissions() {
        let dev = DeviceRule {
            kind: DeviceKind::Char,
            major: Some(10),
            minor: Some(200),
            access: parse_access("rw").unwrap(),
        };
        let DeviceRules::Only(rules) = container_rules(false, &[dev, dev]) else {
            panic!();
        };
        assert_eq!(rules.iter().filter(|r| **r == dev).count(), 1);
        let p = program(&rules);
        assert_eq!(run(&p, CHAR, READ | WRITE, 10, 200), 1);
        assert_eq!(run(&p, CHAR, MKNOD, 10, 200), 1); // by the wildcard mknod rule
        assert_eq!(run(&p, CHAR, READ, 10, 201), 0);
        let all = DeviceRule {
            kind: DeviceKind::All,
            major: None,
            minor: None,
            access: ALL_ACCESS,
        };
        assert_eq!(run(&program(&[all]), BLOCK, READ | WRITE, 8, 1), 1);
        assert_eq!(run(&program(&[]), CHAR, READ, 1, 3), 0);
        assert_eq!(container_rules(true, &[dev]), DeviceRules::AllowAll);
    }

    #[test]
    fn v1_lines_and_permissions() {
        let lines = v1_lines(&container_rules(false, &[]));
        for l in ["c *:* m", "b *:* m", "c 1:3 rwm", "c 136:* rwm"] {
            assert!(lines.contains(l), "{l} in {lines:?}");
        }
        assert_eq!(
            v1_lines(&DeviceRules::AllowAll),
            BTreeSet::from(["a *:* rwm".to_string()])
        );
        assert_eq!(parse_access("").unwrap(), ALL_ACCESS);
        assert_eq!(parse_access("mr").unwrap(), MKNOD | READ);
        assert_eq!(access_string(MKNOD | READ), "rm");
        let e = parse_access("rx").unwrap_err();
        assert_eq!(e, BadAccess("rx".into()));
        assert_eq!(
            e.to_string(),
            "device permissions \"rx\": only the letters r, w and m are allowed"
        );
    }

    /// The generated program, loaded and attached by the kernel for real: on a cgroup2 mount,
    /// which on a v1 host is the hybrid `/sys/fs/cgroup/unified` (device programs need no
    /// controller).
    #[test]
    fn real_kernel_device_program() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let unified = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(Path::new)
            .find(|p| {
                super::super::detect_version(p).ok() == Some(super::super::CgroupVersion::V2)
            });
        let (true, Some(mount)) = (root, unified) else {
            eprintln!("SKIP: the device program test needs root and a cgroup2 mount");
            return;
        };
        let dir = mount.join(format!("k1s-test-devices-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let rules = container_rules(false, &[]);
        apply_v2(&dir, &rules).unwrap();
        // Attaching again replaces the program.
        apply_v2(&dir, &rules).unwrap();
        apply_v2(&dir, &DeviceRules::AllowAll).unwrap();

        let tmp = tempfile::tempdir().unwrap();
        let script = format!(
            "read _go; true </dev/null || exit 10; true </dev/kmsg && exit 11; \
             mknod {0}/kmsg c 1 11 || exit 12; true <{0}/kmsg && exit 13; exit 0",
            tmp.path().display()
        );
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        }
        let code = child.wait().unwrap().code();
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(code, Some(0));
    }

    #[test]
    fn a_fixture_directory_gets_no_program() {
        let d = tempfile::tempdir().unwrap();
        apply_v2(d.path(), &container_rules(false, &[])).unwrap();
    }
}

//! The `NETLINK_NETFILTER` socket: sends one batch in one `sendmsg` (the kernel processes it
//! before the call returns), then asks for the ruleset generation with an acknowledgement
//! and reads until that answer: every error the batch caused arrives before it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use super::wire;

const NETLINK_NETFILTER: libc::c_int = 12;
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_EXT_ACK: libc::c_int = 11;
const NETLINK_CAP_ACK: libc::c_int = 10;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn set_int(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid socket and a pointer to an int of the size passed.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Opens a socket in this thread's network namespace.
fn open_here() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_NETFILTER,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_nl is valid; the kernel assigns the port id.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `addr` is a sockaddr_nl of the size passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    })?;
    // Errors echo only the failing message's header, with the kernel's explanation.
    set_int(&fd, SOL_NETLINK, NETLINK_CAP_ACK, 1)?;
    let _ = set_int(&fd, SOL_NETLINK, NETLINK_EXT_ACK, 1);
    let timeout = libc::timeval {
        tv_sec: TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: a timeval of the size passed.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Opens a socket in the network namespace `netns` (a file such as `/run/netns/NAME`), or
/// in this process's when `None`. The namespace is entered by a thread of its own, so no
/// other thread of the process changes namespace; the socket stays in it.
pub fn open(netns: Option<&Path>) -> io::Result<OwnedFd> {
    let Some(path) = netns else {
        return open_here();
    };
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&path)?;
        // SAFETY: setns(2) on an open namespace file; it changes only this thread.
        check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })?;
        open_here()
    })
    .join()
    .map_err(|_| io::Error::other("the thread opening the netlink socket panicked"))?
}

/// What the kernel said about a batch: the errors, each with the sequence number of the
/// message it answers.
pub type Errors = Vec<(i32, u32, Option<String>)>;

/// Sends `batch` (whole, in one message) and collects the errors it caused; `probe_seq` is
/// the sequence number of the generation request that closes the exchange.
pub fn exchange(fd: &OwnedFd, batch: &[u8], probe_seq: u32) -> io::Result<Errors> {
    // One sendmsg carries the whole batch: the socket's send buffer must hold it.
    let want = (batch.len() + (1 << 16)).min(i32::MAX as usize / 2) as libc::c_int;
    if set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, want).is_err() {
        set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, want)?;
    }
    let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4 << 20);
    send(fd, batch)?;
    send(fd, &wire::get_gen(probe_seq))?;
    let mut errors = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for m in wire::parse(&buf[..n as usize]) {
            match m.error {
                Some((0, seq, _)) if seq == probe_seq => return Ok(errors),
                Some((errno, seq, _)) if seq == probe_seq => {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                Some((0, _, _)) | None => {}
                Some(e) => errors.push(e),
            }
        }
    }
}

fn send(fd: &OwnedFd, data: &[u8]) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_nl addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    loop {
        // SAFETY: `data` is readable for its length, `kernel` a sockaddr_nl of the size passed.
        let n = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// How long a batch may take before the socket gives up waiting (see `SO_RCVTIMEO` above).
pub const TIMEOUT: Duration = Duration::from_secs(60);

//! Pseudo-terminals for `tty` containers and execs: a master/slave pair whose descriptors are
//! close-on-exec from the start (the kubelet is multi-threaded; a slave leaked into another
//! child would keep the terminal from ever reporting its end), and the window size.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Opens a new pseudo-terminal: `(master, slave)`, both close-on-exec, neither becoming the
/// caller's controlling terminal.
pub fn open() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let path = c"/dev/ptmx";
    // SAFETY: open with a NUL-terminated path and flags.
    let m = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if m < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: m was just opened and is owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads an int through the pointer, which outlives the call.
    if unsafe { libc::ioctl(m, libc::TIOCSPTLCK, &unlock) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: TIOCGPTPEER takes open flags and returns a new descriptor of the slave.
    let s = unsafe {
        libc::ioctl(
            m,
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if s < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: s was just created and is owned by nobody else.
    Ok((master, unsafe { OwnedFd::from_raw_fd(s) }))
}

/// Sets the window size of the terminal behind `fd` (master or slave); the foreground
/// process group gets SIGWINCH.
pub fn set_size(fd: &impl AsRawFd, width: u16, height: u16) -> std::io::Result<()> {
    let ws = libc::winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize through the pointer, which outlives the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The window size of the terminal behind `fd`: `(width, height)`.
pub fn size(fd: &impl AsRawFd) -> std::io::Result<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes a winsize through the pointer, which outlives the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((ws.ws_col, ws.ws_row))
}

/// Makes `fd` non-blocking (for polling a master).
pub fn set_nonblocking(fd: &impl AsRawFd) -> std::io::Result<()> {
    // SAFETY: fcntl with integer arguments.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_pair_carries_bytes_and_a_size() {
        let (master, slave) = open().unwrap();
        // SAFETY: fcntl on descriptors we own.
        let cloexec = |fd: &OwnedFd| unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
        assert_ne!(cloexec(&master) & libc::FD_CLOEXEC, 0);
        assert_ne!(cloexec(&slave) & libc::FD_CLOEXEC, 0);
        set_size(&master, 120, 40).unwrap();
        assert_eq!(size(&slave).unwrap(), (120, 40));
        let mut m = std::fs::File::from(master);
        let mut s = std::fs::File::from(slave);
        s.write_all(b"hi\n").unwrap();
        let mut buf = [0u8; 16];
        let n = m.read(&mut buf).unwrap();
        // The line discipline turns \n into \r\n.
        assert_eq!(&buf[..n], b"hi\r\n");
    }
}

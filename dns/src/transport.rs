//! The transports queries come over: [`Proto`], and the UDP and TCP sockets the server
//! (and its metrics port) listen on, bound with `IP_FREEBIND` and `SO_REUSEADDR`.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpListener, UdpSocket};

/// The transport a query came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Udp,
    Tcp,
}

/// Binds `addr` with `IP_FREEBIND`, so the server can start before the address (the pod
/// bridge's gateway) is configured, and `SO_REUSEADDR` for restarts.
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let fd = socket(addr, nix::sys::socket::SockType::Datagram)?;
    let std = std::net::UdpSocket::from(fd);
    std.set_nonblocking(true)?;
    UdpSocket::from_std(std)
}

pub fn bind_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use nix::sys::socket::{Backlog, listen};
    let fd = socket(addr, nix::sys::socket::SockType::Stream)?;
    listen(&fd, Backlog::new(128).map_err(std::io::Error::from)?)?;
    let std = std::net::TcpListener::from(fd);
    std.set_nonblocking(true)?;
    TcpListener::from_std(std)
}

fn socket(
    addr: SocketAddr,
    ty: nix::sys::socket::SockType,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockaddrIn, SockaddrIn6, bind, setsockopt, sockopt,
    };
    let family = match addr.ip() {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = nix::sys::socket::socket(family, ty, SockFlag::SOCK_CLOEXEC, None)?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    match addr {
        SocketAddr::V4(a) => {
            setsockopt(&fd, sockopt::IpFreebind, &true)?;
            bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(a))?;
        }
        SocketAddr::V6(a) => {
            bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn6::from(a))?;
        }
    }
    Ok(fd)
}

//! `kubectl attach`: the shim keeps the container's stdin (a pipe, or the master of its
//! pseudo-terminal) and serves attach sessions on a unix socket in the bundle
//! ([`spec::ATTACH`]), while it goes on writing the CRI log. The socket is what makes attach
//! survive a kubelet restart: the shim outlives the kubelet, and a new kubelet just connects
//! again.
//!
//! The protocol on the socket is frames of `[kind: u8][length: u32 BE][payload]`:
//! the client sends [`HELLO`] (one byte: 1 if the session has a stdin), then [`STDIN`] data,
//! [`STDIN_CLOSE`] and [`RESIZE`] (width and height as u16 BE); the shim sends [`STDOUT`]
//! and [`STDERR`] output from the moment the client connected, and [`EXIT`] (an i32 BE exit
//! code) when the container has ended.
//!
//! `stdinOnce`: the container's stdin is closed when the first session that had a stdin ends
//! (or sends [`STDIN_CLOSE`]); on a terminal, which cannot be half-closed, the shim types an
//! end-of-file (`^D`) instead.
//!
//! This module holds the frame codec ([`frame`], [`take_frames`] and its [`FrameError`]), the
//! shim's side ([`Sessions`], driven by the shim's poll loop) and the kubelet's side
//! ([`attach`]).

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use k1s_api::streams::StreamIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::RuntimeError;
use super::spec::{self, Exit};

pub const HELLO: u8 = 0;
pub const STDIN: u8 = 1;
pub const STDIN_CLOSE: u8 = 2;
pub const RESIZE: u8 = 3;
pub const STDOUT: u8 = 4;
pub const STDERR: u8 = 5;
pub const EXIT: u8 = 6;

/// The largest payload accepted in one frame.
const MAX_FRAME: usize = 1 << 20;
/// A session whose unsent output grows past this is dropped: a slow attacher must not stall
/// the container or the shim's memory.
const MAX_BACKLOG: usize = 4 << 20;
/// Stdin waiting for the container to read it; sessions are not read while it is this full.
const MAX_STDIN: usize = 1 << 20;

/// A peer that is not speaking the attach protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame announced a payload larger than [`MAX_FRAME`].
    #[error("attach frame of {0} bytes")]
    TooLarge(usize),
}

/// One frame.
pub fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Takes the complete frames off the front of `buf`. `Err` for a frame that is too large
/// (the peer is not speaking this protocol).
pub fn take_frames(buf: &mut Vec<u8>) -> Result<Vec<(u8, Vec<u8>)>, FrameError> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= 5 {
        let len = u32::from_be_bytes([buf[at + 1], buf[at + 2], buf[at + 3], buf[at + 4]]) as usize;
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        if buf.len() - at - 5 < len {
            break;
        }
        out.push((buf[at], buf[at + 5..at + 5 + len].to_vec()));
        at += 5 + len;
    }
    buf.drain(..at);
    Ok(out)
}

/// Binds the attach socket of `bundle`. The bundle's path may be longer than a socket
/// address allows, so the socket is bound by a relative name from inside the bundle (the
/// shim is single-threaded, so changing its directory for a moment is safe).
pub fn listen(bundle: &Path) -> std::io::Result<UnixListener> {
    let here = std::fs::File::open(".")?;
    let _ = std::fs::remove_file(bundle.join(spec::ATTACH));
    std::env::set_current_dir(bundle)?;
    let l = UnixListener::bind(spec::ATTACH);
    nix::unistd::fchdir(&here).map_err(std::io::Error::from)?;
    let l = l?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// One attached client, on the shim's side.
struct Session {
    sock: UnixStream,
    input: Vec<u8>,
    backlog: Vec<u8>,
    /// The client said it has a stdin.
    stdin: bool,
}

/// What the shim's poll loop asks of the attach sessions.
pub struct Sessions {
    listener: Option<UnixListener>,
    sessions: Vec<Session>,
    /// The container's stdin (write end of its pipe, or a copy of its terminal's master).
    stdin: Option<OwnedFd>,
    pending: Vec<u8>,
    /// No more stdin is taken: it closes once `pending` is written.
    closing: bool,
    stdin_once: bool,
    tty: bool,
    /// The terminal master, for resizes.
    master: Option<OwnedFd>,
}

/// What [`Sessions::poll_fds`] asked to watch, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    Listener,
    Session(usize),
    Stdin,
}

impl Sessions {
    /// `stdin` is the container's stdin when it has one; `master` its terminal.
    pub fn new(
        listener: Option<UnixListener>,
        stdin: Option<OwnedFd>,
        master: Option<OwnedFd>,
        stdin_once: bool,
    ) -> Self {
        if let Some(s) = &stdin {
            let _ = super::pty::set_nonblocking(s);
        }
        Self {
            listener,
            sessions: Vec::new(),
            tty: master.is_some(),
            stdin,
            pending: Vec::new(),
            closing: false,
            stdin_once,
            master,
        }
    }

    /// The descriptors to poll and for what: (fd, want input, want output, what).
    pub fn poll_fds(&self) -> Vec<(BorrowedFd<'_>, bool, bool, Watch)> {
        let mut out = Vec::new();
        if let Some(l) = &self.listener {
            out.push((l.as_fd(), true, false, Watch::Listener));
        }
        let take_input = self.pending.len() < MAX_STDIN;
        for (i, s) in self.sessions.iter().enumerate() {
            out.push((
                s.sock.as_fd(),
                take_input,
                !s.backlog.is_empty(),
                Watch::Session(i),
            ));
        }
        if let Some(s) = &self.stdin
            && !self.pending.is_empty()
        {
            out.push((s.as_fd(), false, true, Watch::Stdin));
        }
        out
    }

    /// Handles readiness of what [`Self::poll_fds`] returned (`hangup` covers errors too).
    /// Sessions are only removed at the end, so indices stay valid during one round.
    pub fn ready(&mut self, events: &[(Watch, bool, bool, bool)]) {
        let mut gone = Vec::new();
        for &(what, readable, writable, hangup) in events {
            match what {
                Watch::Listener if readable => self.accept(),
                Watch::Session(i) => {
                    if (readable || hangup) && !self.read_session(i) {
                        gone.push(i);
                        continue;
                    }
                    if writable && !self.flush_session(i) {
                        gone.push(i);
                    }
                }
                Watch::Stdin if writable || hangup => self.flush_stdin(hangup),
                _ => {}
            }
        }
        gone.sort_unstable();
        gone.dedup();
        for i in gone.into_iter().rev() {
            let s = self.sessions.remove(i);
            if s.stdin {
                self.session_stdin_ended();
            }
        }
    }

    fn accept(&mut self) {
        let Some(l) = &self.listener else { return };
        while let Ok((sock, _)) = l.accept() {
            if sock.set_nonblocking(true).is_ok() {
                self.sessions.push(Session {
                    sock,
                    input: Vec::new(),
                    backlog: Vec::new(),
                    stdin: false,
                });
            }
        }
    }

    /// Reads what a session sent; false when it is gone.
    fn read_session(&mut self, i: usize) -> bool {
        let mut buf = [0u8; 32 * 1024];
        let frames = {
            let s = &mut self.sessions[i];
            match s.sock.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => s.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return true,
                Err(_) => return false,
            }
            match take_frames(&mut s.input) {
                Ok(f) => f,
                Err(_) => return false,
            }
        };
        for (kind, payload) in frames {
            match kind {
                HELLO => self.sessions[i].stdin = payload.first() == Some(&1),
                STDIN if self.sessions[i].stdin && self.stdin.is_some() && !self.closing => {
                    self.pending.extend_from_slice(&payload);
                    self.flush_stdin(false);
                }
                STDIN_CLOSE if self.sessions[i].stdin => {
                    self.sessions[i].stdin = false;
                    self.session_stdin_ended();
                }
                RESIZE if payload.len() == 4 => {
                    let w = u16::from_be_bytes([payload[0], payload[1]]);
                    let h = u16::from_be_bytes([payload[2], payload[3]]);
                    if let Some(m) = &self.master {
                        let _ = super::pty::set_size(m, w, h);
                    }
                }
                _ => {}
            }
        }
        true
    }

    /// A session that had a stdin is done with it: with `stdinOnce` the container's stdin
    /// closes now (on a terminal, an end-of-file is typed).
    fn session_stdin_ended(&mut self) {
        if !self.stdin_once || self.closing || self.stdin.is_none() {
            return;
        }
        if self.tty {
            self.pending.push(0x04);
        }
        self.closing = true;
        self.flush_stdin(false);
    }

    fn flush_stdin(&mut self, hangup: bool) {
        let Some(fd) = &self.stdin else { return };
        while !self.pending.is_empty() && !hangup {
            match nix::unistd::write(fd, &self.pending) {
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(nix::errno::Errno::EAGAIN) => return,
                Err(_) => {
                    // The container closed its end: nothing more can be delivered.
                    self.pending.clear();
                    self.closing = true;
                }
            }
        }
        if hangup {
            self.pending.clear();
        }
        if self.closing && self.pending.is_empty() {
            self.stdin = None;
        }
    }

    /// Writes a session's backlog; false when it is gone.
    fn flush_session(&mut self, i: usize) -> bool {
        let s = &mut self.sessions[i];
        while !s.backlog.is_empty() {
            match s.sock.write(&s.backlog) {
                Ok(0) => return false,
                Ok(n) => {
                    s.backlog.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Sends container output to every session.
    pub fn output(&mut self, stderr: bool, data: &[u8]) {
        if self.sessions.is_empty() {
            return;
        }
        let f = frame(if stderr { STDERR } else { STDOUT }, data);
        let mut gone = Vec::new();
        for (i, s) in self.sessions.iter_mut().enumerate() {
            if s.backlog.len() + f.len() > MAX_BACKLOG {
                gone.push(i);
                continue;
            }
            s.backlog.extend_from_slice(&f);
        }
        for i in 0..self.sessions.len() {
            if !gone.contains(&i) && !self.flush_session(i) {
                gone.push(i);
            }
        }
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            let s = self.sessions.remove(i);
            if s.stdin {
                self.session_stdin_ended();
            }
        }
    }

    /// The container has ended: tells every session how, best effort (a session gets a
    /// second to take the rest of its output), and removes the socket.
    pub fn finish(&mut self, bundle: &Path, exit_code: i32) {
        self.listener = None;
        let _ = std::fs::remove_file(bundle.join(spec::ATTACH));
        for s in &mut self.sessions {
            s.backlog
                .extend_from_slice(&frame(EXIT, &exit_code.to_be_bytes()));
            let _ = s.sock.set_nonblocking(false);
            let _ = s
                .sock
                .set_write_timeout(Some(std::time::Duration::from_secs(1)));
            let _ = s.sock.write_all(&s.backlog);
        }
        self.sessions.clear();
    }
}

/// The kubelet's side: attaches `io` to the container of `bundle` through its shim's socket.
/// Returns the container's exit code when it ends, or 0 when the client goes away first.
pub async fn attach(bundle: &Path, io: StreamIo) -> Result<i32, RuntimeError> {
    // Connect through /proc/self/fd so that a long bundle path fits a socket address.
    let dir = std::fs::File::open(bundle)?;
    let path = format!(
        "/proc/self/fd/{}/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dir),
        spec::ATTACH
    );
    let sock = match tokio::net::UnixStream::connect(&path).await {
        Ok(s) => s,
        Err(e) => {
            if let Some(exit) = read_exit(bundle) {
                return Ok(exit.exit_code);
            }
            return Err(RuntimeError::Start(format!(
                "attaching to the container: {e}"
            )));
        }
    };
    drop(dir);
    let (mut rd, mut wr) = sock.into_split();
    let StreamIo {
        stdin,
        stdout,
        stderr,
        resize,
    } = io;
    wr.write_all(&frame(HELLO, &[u8::from(stdin.is_some())]))
        .await?;
    // Client to shim: stdin and resizes, until both channels close.
    let writer = tokio::spawn(async move {
        let (mut stdin, mut resize) = (stdin, resize);
        while stdin.is_some() || resize.is_some() {
            tokio::select! {
                // Resizes first: one sent before a line of input reaches the terminal first.
                biased;
                s = async { resize.as_mut()?.recv().await }, if resize.is_some() => {
                    match s {
                        Some(s) => {
                            let mut p = s.width.to_be_bytes().to_vec();
                            p.extend_from_slice(&s.height.to_be_bytes());
                            if wr.write_all(&frame(RESIZE, &p)).await.is_err() {
                                return;
                            }
                        }
                        None => resize = None,
                    }
                }
                d = async { stdin.as_mut()?.recv().await }, if stdin.is_some() => {
                    let f = match d {
                        Some(d) => frame(STDIN, &d),
                        None => {
                            stdin = None;
                            frame(STDIN_CLOSE, &[])
                        }
                    };
                    if wr.write_all(&f).await.is_err() {
                        return;
                    }
                }
            }
        }
        // Keep the write half (the session) open until the reader ends it.
        std::future::pending::<()>().await;
    });
    let gone = {
        let (o, e) = (stdout.clone(), stderr.clone());
        async move {
            match (o, e) {
                (Some(o), _) => o.closed().await,
                (None, Some(e)) => e.closed().await,
                (None, None) => std::future::pending().await,
            }
        }
    };
    let result = tokio::select! {
        r = read_output(&mut rd, stdout, stderr) => r.map(|c| c.or_else(|| read_exit(bundle).map(|e| e.exit_code)).unwrap_or(255)),
        () = gone => Ok(0),
    };
    writer.abort();
    result
}

fn read_exit(bundle: &Path) -> Option<Exit> {
    spec::read_json(bundle, spec::EXIT).ok().flatten()
}

/// Relays output frames until [`EXIT`] (its code) or the end of the socket (None).
async fn read_output(
    rd: &mut tokio::net::unix::OwnedReadHalf,
    stdout: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
    stderr: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
) -> Result<Option<i32>, RuntimeError> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 32 * 1024];
    loop {
        let n = rd.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        for (kind, payload) in
            take_frames(&mut buf).map_err(|e| RuntimeError::Start(e.to_string()))?
        {
            match kind {
                STDOUT => {
                    if let Some(o) = &stdout {
                        let _ = o.send(payload).await;
                    }
                }
                STDERR => {
                    // Without a stderr channel (a terminal merges it), stderr goes to stdout.
                    if let Some(e) = stderr.as_ref().or(stdout.as_ref()) {
                        let _ = e.send(payload).await;
                    }
                }
                EXIT if payload.len() == 4 => {
                    return Ok(Some(i32::from_be_bytes([
                        payload[0], payload[1], payload[2], payload[3],
                    ])));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_wait_for_the_rest() {
        let mut buf = frame(STDIN, b"hello");
        buf.extend(frame(RESIZE, &[0, 80, 0, 24]));
        let tail = frame(STDOUT, b"partial");
        buf.extend_from_slice(&tail[..4]);
        let got = take_frames(&mut buf).unwrap();
        assert_eq!(
            got,
            vec![(STDIN, b"hello".to_vec()), (RESIZE, vec![0, 80, 0, 24])]
        );
        assert_eq!(buf, &tail[..4]);
        buf.extend_from_slice(&tail[4..]);
        assert_eq!(
            take_frames(&mut buf).unwrap(),
            vec![(STDOUT, b"partial".to_vec())]
        );
        assert!(buf.is_empty());
        let mut huge = vec![STDIN, 0xff, 0xff, 0xff, 0xff];
        let e = take_frames(&mut huge).unwrap_err();
        assert_eq!(e, FrameError::TooLarge(0xffff_ffff));
        assert_eq!(e.to_string(), "attach frame of 4294967295 bytes");
        // Nothing is taken off a buffer that holds a refused frame.
        assert_eq!(huge.len(), 5);
        // The limit itself is accepted (and waited for); one byte more is not.
        let mut at_limit = vec![STDOUT];
        at_limit.extend_from_slice(&(MAX_FRAME as u32).to_be_bytes());
        assert_eq!(take_frames(&mut at_limit), Ok(vec![]));
        let mut over = vec![STDOUT];
        over.extend_from_slice(&(MAX_FRAME as u32 + 1).to_be_bytes());
        assert_eq!(
            take_frames(&mut over),
            Err(FrameError::TooLarge(MAX_FRAME + 1))
        );
    }

    /// The shim's side against the kubelet's, over a real socket, with a pipe as the
    /// container's stdin.
    #[tokio::test]
    async fn sessions_relay_stdin_output_and_stdin_once() {
        let d = tempfile::tempdir().unwrap();
        let listener = listen(d.path()).unwrap();
        assert!(d.path().join(spec::ATTACH).exists());
        let (stdin_r, stdin_w) = nix::unistd::pipe().unwrap();
        let mut sessions = Sessions::new(Some(listener), Some(stdin_w), None, true);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The shim's loop on a thread: poll, dispatch; output "container says" once a
        // session is there.
        let bundle = d.path().to_path_buf();
        let stop2 = stop.clone();
        let shim = std::thread::spawn(move || {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            let mut said = false;
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
                let fds = sessions.poll_fds();
                let mut pfds: Vec<PollFd<'_>> = fds
                    .iter()
                    .map(|(fd, i, o, _)| {
                        let mut f = PollFlags::empty();
                        if *i {
                            f |= PollFlags::POLLIN;
                        }
                        if *o {
                            f |= PollFlags::POLLOUT;
                        }
                        PollFd::new(*fd, f)
                    })
                    .collect();
                let _ = poll(&mut pfds, PollTimeout::from(50u16));
                let events: Vec<(Watch, bool, bool, bool)> = pfds
                    .iter()
                    .zip(&fds)
                    .map(|(p, (_, _, _, w))| {
                        let r = p.revents().unwrap_or(PollFlags::empty());
                        (
                            *w,
                            r.contains(PollFlags::POLLIN),
                            r.contains(PollFlags::POLLOUT),
                            r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR),
                        )
                    })
                    .collect();
                drop(pfds);
                drop(fds);
                sessions.ready(&events);
                if !said && !sessions.sessions.is_empty() {
                    said = true;
                    sessions.output(false, b"container says\n");
                    sessions.output(true, b"oops\n");
                }
            }
            sessions.finish(&bundle, 7);
        });
        let (in_tx, in_rx) = tokio::sync::mpsc::channel(4);
        let (out_tx, mut out_rx) = tokio::sync::mpsc::channel(4);
        let (err_tx, mut err_rx) = tokio::sync::mpsc::channel(4);
        let io = StreamIo {
            stdin: Some(in_rx),
            stdout: Some(out_tx),
            stderr: Some(err_tx),
            resize: None,
        };
        let b = d.path().to_path_buf();
        let client = tokio::spawn(async move { attach(&b, io).await });
        assert_eq!(out_rx.recv().await.unwrap(), b"container says\n");
        assert_eq!(err_rx.recv().await.unwrap(), b"oops\n");
        in_tx.send(b"typed\n".to_vec()).await.unwrap();
        // stdinOnce: the client's EOF closes the container's stdin, after what was typed.
        drop(in_tx);
        let got = tokio::task::spawn_blocking(move || {
            let mut s = String::new();
            std::fs::File::from(stdin_r).read_to_string(&mut s).unwrap();
            s
        })
        .await
        .unwrap();
        assert_eq!(got, "typed\n");
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(client.await.unwrap().unwrap(), 7);
        shim.join().unwrap();
        assert!(!d.path().join(spec::ATTACH).exists());
    }
}

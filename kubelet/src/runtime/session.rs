//! The kubelet's side of an exec session: it starts the exec helper (`k1s internal exec`, see
//! [`super::exec`]) and relays its stdin/stdout/stderr, or the pseudo-terminal it opened in
//! the container (its master received over a unix socket) and its resizes, to the
//! [`StreamIo`] channels of the API server. Nothing here touches namespaces: that happens in
//! the helper, a fresh single-threaded process.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use k1s_api::streams::StreamIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::RuntimeError;

/// Size of one relayed chunk.
const CHUNK: usize = 32 * 1024;

/// Runs `command` in the container of `bundle` through the helper `helper` (`[k1s, internal,
/// exec]`), wired to `io`.
pub async fn exec(
    helper: &[PathBuf],
    bundle: &Path,
    command: &[String],
    tty: bool,
    io: StreamIo,
) -> Result<i32, RuntimeError> {
    let Some((program, args)) = helper.split_first() else {
        return Err(RuntimeError::Start("no exec helper configured".into()));
    };
    let (report_r, report_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).arg(bundle);
    if tty {
        cmd.arg("--tty");
    }
    cmd.arg("--").args(command);
    // With a tty, the helper sends back the master of a terminal it opened in the container.
    let terminal = if tty {
        Some(std::os::unix::net::UnixStream::pair()?)
    } else {
        None
    };
    let report_raw = report_w.as_raw_fd();
    let terminal_raw = terminal.as_ref().map(|(_, theirs)| theirs.as_raw_fd());
    // SAFETY: the closure only calls dup2, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let mut wanted = vec![(report_raw, super::exec::REPORT_FD)];
            wanted.extend(terminal_raw.map(|t| (t, super::exec::TERMINAL_FD)));
            for (from, to) in wanted {
                if libc::dup2(from, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let result = match terminal {
        Some((ours, theirs)) => exec_tty(cmd, report_w, ours, theirs, io).await,
        None => exec_pipes(cmd, report_w, io).await,
    };
    let report = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut s = String::new();
        let _ = std::fs::File::from(report_r).read_to_string(&mut s);
        s
    })
    .await
    .unwrap_or_default();
    if let Some(msg) = super::exec::parse_report(&report) {
        return Err(RuntimeError::Start(msg));
    }
    result
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(255)
}

/// Copies `rx` into `w` until `rx` closes (the client's EOF), then closes `w`.
async fn pump_in(mut rx: mpsc::Receiver<Vec<u8>>, mut w: impl tokio::io::AsyncWrite + Unpin) {
    while let Some(buf) = rx.recv().await {
        if w.write_all(&buf).await.is_err() {
            return;
        }
    }
    let _ = w.shutdown().await;
}

/// Copies `r` into `tx` until EOF. When the client stopped listening the rest is read and
/// dropped, so that the command never blocks on a full pipe.
async fn pump_out(mut r: impl tokio::io::AsyncRead + Unpin, tx: Option<mpsc::Sender<Vec<u8>>>) {
    let mut buf = vec![0u8; CHUNK];
    let mut tx = tx;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Some(t) = &tx
                    && t.send(buf[..n].to_vec()).await.is_err()
                {
                    tx = None;
                }
            }
        }
    }
}

async fn exec_pipes(
    mut cmd: tokio::process::Command,
    report_w: OwnedFd,
    io: StreamIo,
) -> Result<i32, RuntimeError> {
    cmd.stdin(if io.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    drop(cmd);
    drop(report_w);
    let stdin = match (io.stdin, child.stdin.take()) {
        (Some(rx), Some(w)) => Some(tokio::spawn(pump_in(rx, w))),
        _ => None,
    };
    let out = child.stdout.take().map(|r| pump_out(r, io.stdout));
    let err = child.stderr.take().map(|r| pump_out(r, io.stderr));
    let drain = async {
        if let Some(o) = out {
            o.await;
        }
    };
    let drain_err = async {
        if let Some(e) = err {
            e.await;
        }
    };
    let (status, (), ()) = tokio::join!(child.wait(), drain, drain_err);
    if let Some(s) = stdin {
        s.abort();
    }
    Ok(exit_code(status?))
}

async fn exec_tty(
    mut cmd: tokio::process::Command,
    report_w: OwnedFd,
    ours: std::os::unix::net::UnixStream,
    theirs: std::os::unix::net::UnixStream,
    io: StreamIo,
) -> Result<i32, RuntimeError> {
    cmd.stdin(Stdio::null());
    cmd.stdout(Stdio::null());
    cmd.stderr(Stdio::null());
    let mut child = cmd.spawn()?;
    drop(cmd);
    drop((report_w, theirs));
    // The helper sends the master once the command's terminal is set up, or closes the
    // socket when it failed before (the report then says why).
    let master = tokio::task::spawn_blocking(move || receive_fd(&ours))
        .await
        .map_err(|e| RuntimeError::Start(format!("receiving the terminal: {e}")))??;
    let Some(master) = master else {
        return Ok(exit_code(child.wait().await?));
    };
    // The command holds the only copies of the slave: the master reads EIO once it and its
    // children are done with the terminal.
    let code = relay_terminal(master, io, async move { child.wait().await }).await?;
    Ok(code)
}

/// Receives one descriptor sent with SCM_RIGHTS on `socket`; `None` at end of stream.
fn receive_fd(socket: &std::os::unix::net::UnixStream) -> std::io::Result<Option<OwnedFd>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::FromRawFd;
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let mut received = None;
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: the kernel just installed this descriptor in this process for us.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                received.get_or_insert(owned);
            }
        }
    }
    Ok(received)
}

/// Relays a terminal master to `io` until it reports EIO (every slave closed) and `done`
/// resolved; applies resizes. Returns `done`'s exit code.
async fn relay_terminal(
    master: OwnedFd,
    io: StreamIo,
    done: impl std::future::Future<Output = std::io::Result<std::process::ExitStatus>>,
) -> Result<i32, RuntimeError> {
    use tokio::io::unix::AsyncFd;
    super::pty::set_nonblocking(&master)?;
    // SAFETY: the master is owned by the AsyncFd and closed only when it is dropped.
    let afd = unsafe { AsyncFd::register(master) }.map_err(|e| RuntimeError::Io(e.into()))?;
    let StreamIo {
        stdin,
        stdout,
        stderr: _,
        resize,
    } = io;
    let mut stdin = stdin;
    let mut resize = resize;
    let mut stdout = stdout;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    let mut status = None;
    let mut output_done = false;
    tokio::pin!(done);
    while !(output_done && status.is_some()) {
        // Biased: a resize sent before a line of input is applied before that line is
        // written, so a command that reads a line and then asks for the size sees the new one.
        tokio::select! {
            biased;
            size = async { resize.as_mut()?.recv().await }, if resize.is_some() => {
                match size {
                    Some(s) => { let _ = super::pty::set_size(afd.get_ref(), s.width, s.height); }
                    None => resize = None,
                }
            }
            s = &mut done, if status.is_none() => status = Some(s?),
            guard = afd.readable(), if !output_done => {
                let mut guard = guard?;
                match guard.try_io(|fd| {
                    nix::unistd::read(fd.get_ref(), &mut buf).map_err(std::io::Error::from)
                }) {
                    Err(_would_block) => continue,
                    Ok(Ok(0)) | Ok(Err(_)) => output_done = true,
                    Ok(Ok(n)) => {
                        if let Some(t) = &stdout
                            && t.send(buf[..n].to_vec()).await.is_err()
                        {
                            stdout = None;
                        }
                    }
                }
            }
            data = async { stdin.as_mut()?.recv().await }, if stdin.is_some() && pending.is_empty() => {
                match data {
                    Some(d) => pending = d,
                    None => stdin = None,
                }
            }
            guard = afd.writable(), if !pending.is_empty() => {
                let mut guard = guard?;
                match guard.try_io(|fd| {
                    nix::unistd::write(fd.get_ref(), &pending).map_err(std::io::Error::from)
                }) {
                    Err(_would_block) => continue,
                    Ok(Ok(n)) => { pending.drain(..n); }
                    Ok(Err(_)) => pending.clear(),
                }
            }
        }
    }
    Ok(status.map(exit_code).unwrap_or(255))
}

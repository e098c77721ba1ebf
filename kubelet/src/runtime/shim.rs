//! The container shim: the process side of the runtime, run as `k1s internal shim BUNDLE` in a
//! fresh single-threaded process (never inside the kubelet's tokio runtime, where forking is
//! unsafe).
//!
//! It owns one container's life on the host:
//! 1. It forks; the first process waits for the second to report `ok PID` or `err MESSAGE` on
//!    a pipe, prints that and exits, so the kubelet learns synchronously whether the container
//!    started. The second (the shim proper) calls `setsid` and outlives the kubelet, which is
//!    what lets a restarted k1s re-adopt its containers.
//! 2. The shim joins the pod's network and IPC namespaces, unshares a pid namespace and forks
//!    the container's init, which waits until the shim has put it into its cgroups, then sets
//!    up its mount namespace ([`super::mounts`]), drops privileges and execs the command.
//!    An exec failure comes back on a close-on-exec pipe, so "executable not found" is a start
//!    error, not an exit code.
//! 3. The shim copies the container's stdout and stderr into a CRI-format log file (rotated by
//!    size), and when the container exits writes [`Exit`] to the bundle and ends.
//!
//! The container's init is pid 1 of its pid namespace: when it exits, the kernel kills every
//! other process in the container.
//!
//! Failures are typed ([`ShimError`], and the init's [`super::init::InitFailure`]) and become
//! text only where they cross a pipe: the `err MESSAGE` report, which the kubelet reads back
//! with [`parse_report`] ([`ReportError`]) and shows verbatim as the start error.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, pipe2, setsid};

use super::spec::{self, ContainerSpec, Exit, State};

/// Why the shim could not start the container; its text follows `err ` in the report.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error("no {} in {}", spec::CONFIG, bundle.display())]
    NoSpec { bundle: PathBuf },
    #[error("reading {config}: {0}", config = spec::CONFIG)]
    ReadSpec(#[source] std::io::Error),
    #[error("pipe: {0}")]
    Pipe(#[source] nix::Error),
    #[error("fork: {0}")]
    Fork(#[source] nix::Error),
    #[error("opening a terminal: {0}")]
    Terminal(#[source] std::io::Error),
    #[error("dup: {0}")]
    Dup(#[source] std::io::Error),
    #[error("creating the attach socket in {}: {source}", bundle.display())]
    AttachSocket {
        bundle: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `what`: `network` or `ipc`.
    #[error("opening {what} namespace {}: {source}", path.display())]
    OpenNamespace {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("joining {what} namespace {}: {source}", path.display())]
    JoinNamespace {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("unshare pid namespace: {0}")]
    UnsharePid(#[source] nix::Error),
    #[error("joining cgroup {}: {source}", path.display())]
    JoinCgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The container's init reported this (already the whole message) before its exec.
    #[error("{0}")]
    Init(String),
    #[error("writing {state}: {0}", state = spec::STATE)]
    WriteState(#[source] std::io::Error),
}

/// What [`parse_report`] makes of a shim's report other than `ok PID`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// `ok` and something that is not a pid: the report itself is shown.
    #[error("bad shim report {0:?}")]
    BadReport(String),
    /// `err MESSAGE` (or anything else): why the container did not start, trimmed.
    #[error("{0}")]
    Failed(String),
}

/// A path or argument with a NUL byte, which no raw call can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a path or argument holds a NUL byte")]
pub struct NulError;

/// Entry point of `k1s internal shim BUNDLE`. Returns the process's exit code.
pub fn main(bundle: &Path) -> i32 {
    let spec: ContainerSpec = match spec::read_json(bundle, spec::CONFIG) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return report_error(&ShimError::NoSpec {
                bundle: bundle.to_path_buf(),
            });
        }
        Err(e) => return report_error(&ShimError::ReadSpec(e)),
    };
    let (report_r, report_w) = match pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return report_error(&ShimError::Pipe(e)),
    };
    // SAFETY: this process is single-threaded (it was exec'd just now and started no threads).
    match unsafe { fork() } {
        Err(e) => report_error(&ShimError::Fork(e)),
        Ok(ForkResult::Parent { .. }) => {
            drop(report_w);
            let mut msg = String::new();
            let _ = File::from(report_r).read_to_string(&mut msg);
            if msg.is_empty() {
                msg = "err the shim died before the container started".into();
            }
            report_stdout(&msg)
        }
        Ok(ForkResult::Child) => {
            drop(report_r);
            let code = shim(bundle, &spec, report_w);
            // Never return into the caller's code in the forked child.
            std::process::exit(code)
        }
    }
}

/// The report of a shim that failed before forking.
fn report_error(e: &ShimError) -> i32 {
    report_stdout(&format!("err {e}"))
}

fn report_stdout(msg: &str) -> i32 {
    let mut out = std::io::stdout();
    let _ = out.write_all(msg.as_bytes());
    let _ = out.flush();
    if msg.starts_with("ok ") { 0 } else { 1 }
}

/// The shim proper: detached, it starts the container and then relays its output until it
/// exits.
fn shim(bundle: &Path, spec: &ContainerSpec, report: OwnedFd) -> i32 {
    let mut report = File::from(report);
    // Detach: a new session, and none of the caller's stdio (the caller waits for EOF on it).
    let _ = setsid();
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this single-threaded process.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    ignore_signals();
    match start(bundle, spec) {
        Err(e) => {
            let _ = report.write_all(format!("err {e}").as_bytes());
            1
        }
        Ok(running) => {
            let _ = report.write_all(format!("ok {}", running.pid).as_bytes());
            drop(report);
            relay_and_wait(bundle, spec, running)
        }
    }
}

fn ignore_signals() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGPIPE,
    ] {
        // SAFETY: SIG_IGN installs no handler code.
        unsafe {
            let _ = signal(s, SigHandler::SigIgn);
        }
    }
}

struct Running {
    pid: Pid,
    /// The container's output: stdout and stderr pipes, or its terminal's master alone.
    outputs: Vec<(OwnedFd, &'static str)>,
    /// What attach sessions need: the socket, the container's stdin, the terminal.
    sessions: super::attach::Sessions,
}

/// The shim's ends of the container's stdio, and the container's.
struct Stdio {
    outputs: Vec<(OwnedFd, &'static str)>,
    stdin: Option<OwnedFd>,
    master: Option<OwnedFd>,
    container: super::init::Stdio,
}

fn stdio(spec: &ContainerSpec) -> Result<Stdio, ShimError> {
    let p = &spec.process;
    if p.tty {
        let (master, slave) = super::pty::open().map_err(ShimError::Terminal)?;
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(ShimError::Dup);
        return Ok(Stdio {
            stdin: if p.stdin { Some(dup(&master)?) } else { None },
            master: Some(dup(&master)?),
            outputs: vec![(master, "stdout")],
            container: super::init::Stdio {
                stdin: Some(dup(&slave)?),
                stdout: dup(&slave)?,
                stderr: slave,
                tty: true,
            },
        });
    }
    let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
    let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
    let (stdin, container_stdin) = if p.stdin {
        let (r, w) = pipe2(OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
        (Some(w), Some(r))
    } else {
        (None, None)
    };
    Ok(Stdio {
        outputs: vec![(out_r, "stdout"), (err_r, "stderr")],
        stdin,
        master: None,
        container: super::init::Stdio {
            stdin: container_stdin,
            stdout: out_w,
            stderr: err_w,
            tty: false,
        },
    })
}

fn start(bundle: &Path, spec: &ContainerSpec) -> Result<Running, ShimError> {
    let io = stdio(spec)?;
    let (sync_r, sync_w) = pipe2(OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
    let (fail_r, fail_w) = pipe2(OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
    let listener = super::attach::listen(bundle).map_err(|source| ShimError::AttachSocket {
        bundle: bundle.to_path_buf(),
        source,
    })?;
    join_ns(spec.netns.as_deref(), CloneFlags::CLONE_NEWNET, "network")?;
    join_ns(spec.ipcns.as_deref(), CloneFlags::CLONE_NEWIPC, "ipc")?;
    unshare(CloneFlags::CLONE_NEWPID).map_err(ShimError::UnsharePid)?;
    let Stdio {
        outputs,
        stdin,
        master,
        container,
    } = io;
    // SAFETY: the shim is single-threaded.
    match unsafe { fork() }.map_err(ShimError::Fork)? {
        ForkResult::Child => {
            drop((outputs, stdin, master, listener, sync_w, fail_r));
            // Wait until the shim has put this process into its cgroups.
            let mut b = [0u8; 1];
            let _ = nix::unistd::read(&sync_r, &mut b);
            drop(sync_r);
            let err = super::init::run(spec, container);
            let mut fail = File::from(fail_w);
            let _ = fail.write_all(err.to_string().as_bytes());
            // SAFETY: leave without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            drop((container, sync_r, fail_w));
            for procs in &spec.cgroup_procs {
                if let Err(e) = std::fs::write(procs, child.as_raw().to_string()) {
                    let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                    let _ = waitpid(child, None);
                    return Err(ShimError::JoinCgroup {
                        path: procs.clone(),
                        source: e,
                    });
                }
            }
            let _ = nix::unistd::write(&sync_w, b"x");
            drop(sync_w);
            let mut msg = String::new();
            let _ = File::from(fail_r).read_to_string(&mut msg);
            if !msg.is_empty() {
                let _ = waitpid(child, None);
                let _ = std::fs::remove_file(bundle.join(spec::ATTACH));
                return Err(ShimError::Init(msg));
            }
            let me = std::process::id() as i32;
            let state = State {
                pid: child.as_raw(),
                pid_start: spec::process_start_time(child.as_raw()).unwrap_or(0),
                shim_pid: me,
                shim_start: spec::process_start_time(me).unwrap_or(0),
                started_at: now_rfc3339(),
            };
            spec::write_json(bundle, spec::STATE, &state).map_err(ShimError::WriteState)?;
            Ok(Running {
                pid: child,
                outputs,
                sessions: super::attach::Sessions::new(
                    Some(listener),
                    stdin,
                    master,
                    spec.process.stdin_once,
                ),
            })
        }
    }
}

fn join_ns(path: Option<&Path>, kind: CloneFlags, what: &'static str) -> Result<(), ShimError> {
    let Some(path) = path else { return Ok(()) };
    let f = File::open(path).map_err(|source| ShimError::OpenNamespace {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    setns(f.as_fd(), kind).map_err(|source| ShimError::JoinNamespace {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn now_rfc3339() -> String {
    k1s_api::time::format_nano(k1s_api::time::now())
}

/// Copies the container's output into the log (and to attach sessions) until its pipes
/// close or its terminal reports EIO, serves attach sessions meanwhile, then reaps the
/// container and records how it ended.
fn relay_and_wait(bundle: &Path, spec: &ContainerSpec, running: Running) -> i32 {
    use super::attach::Watch;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let Running {
        pid,
        outputs,
        mut sessions,
    } = running;
    let mut log = LogWriter::open(&spec.log_path, spec.log_max_bytes, spec.log_max_files);
    let mut open = vec![true; outputs.len()];
    let mut partial: Vec<Vec<u8>> = vec![Vec::new(); outputs.len()];
    let mut buf = vec![0u8; 32 * 1024];
    while open.iter().any(|o| *o) {
        // Outputs first (index i < n), then what the sessions watch.
        let mut which: Vec<Option<usize>> = Vec::new();
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        for (i, (fd, _)) in outputs.iter().enumerate() {
            if open[i] {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                which.push(Some(i));
            }
        }
        let watched = sessions.poll_fds();
        let mut kinds: Vec<Watch> = Vec::new();
        for (fd, input, output, what) in &watched {
            let mut f = PollFlags::empty();
            if *input {
                f |= PollFlags::POLLIN;
            }
            if *output {
                f |= PollFlags::POLLOUT;
            }
            fds.push(PollFd::new(*fd, f));
            which.push(None);
            kinds.push(*what);
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
            Ok(_) => {}
        }
        let revents: Vec<PollFlags> = fds
            .iter()
            .map(|p| p.revents().unwrap_or(PollFlags::empty()))
            .collect();
        drop(fds);
        drop(watched);
        let mut events = Vec::new();
        let mut k = 0;
        for (slot, r) in which.iter().zip(&revents) {
            match slot {
                Some(i) => {
                    if r.is_empty() {
                        continue;
                    }
                    let (fd, stream) = &outputs[*i];
                    match nix::unistd::read(fd, &mut buf) {
                        // EIO: every holder of the terminal's slave has closed it.
                        Ok(0) | Err(_) => {
                            open[*i] = false;
                            log.finish(stream, &mut partial[*i]);
                        }
                        Ok(n) => {
                            log.feed(stream, &mut partial[*i], &buf[..n]);
                            sessions.output(*stream == "stderr", &buf[..n]);
                        }
                    }
                }
                None => {
                    events.push((
                        kinds[k],
                        r.contains(PollFlags::POLLIN),
                        r.contains(PollFlags::POLLOUT),
                        r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR),
                    ));
                    k += 1;
                }
            }
        }
        sessions.ready(&events);
    }
    let exit = loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => break (code, None),
            Ok(WaitStatus::Signaled(_, sig, _)) => break (128 + sig as i32, Some(sig as i32)),
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => continue,
            Err(_) => break (255, None),
        }
    };
    let exit = Exit {
        exit_code: exit.0,
        signal: exit.1,
        finished_at: now_rfc3339(),
    };
    let _ = spec::write_json(bundle, spec::EXIT, &exit);
    sessions.finish(bundle, exit.exit_code);
    0
}

/// Upstream's limit for one log line; longer lines are split into partial (`P`) entries.
const MAX_LINE: usize = 16 * 1024;

/// Writes CRI log lines (`TIMESTAMP STREAM P|F TEXT`) and rotates the file by size, keeping
/// `path.1` … `path.(files-1)`.
struct LogWriter {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    max_bytes: u64,
    max_files: u32,
}

impl LogWriter {
    fn open(path: &Path, max_bytes: u64, max_files: u32) -> Self {
        let file = File::options().create(true).append(true).open(path).ok();
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        Self {
            path: path.to_path_buf(),
            file,
            size,
            max_bytes,
            max_files,
        }
    }

    fn feed(&mut self, stream: &str, partial: &mut Vec<u8>, data: &[u8]) {
        partial.extend_from_slice(data);
        while let Some(nl) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=nl).collect();
            self.line(stream, "F", &line[..line.len() - 1]);
        }
        while partial.len() >= MAX_LINE {
            let chunk: Vec<u8> = partial.drain(..MAX_LINE).collect();
            self.line(stream, "P", &chunk);
        }
    }

    /// The stream ended: output without a final newline is written as a partial (`P`)
    /// record, as CRI runtimes do, so readers that keep newlines (the termination message
    /// from the log) do not add one it never printed.
    fn finish(&mut self, stream: &str, partial: &mut Vec<u8>) {
        if !partial.is_empty() {
            self.line(stream, "P", partial);
            partial.clear();
        }
    }

    fn line(&mut self, stream: &str, tag: &str, text: &[u8]) {
        let ts = now_rfc3339();
        let mut rec = Vec::with_capacity(text.len() + 48);
        rec.extend_from_slice(ts.as_bytes());
        rec.push(b' ');
        rec.extend_from_slice(stream.as_bytes());
        rec.push(b' ');
        rec.extend_from_slice(tag.as_bytes());
        rec.push(b' ');
        rec.extend_from_slice(text);
        rec.push(b'\n');
        if let Some(f) = self.file.as_mut()
            && f.write_all(&rec).is_ok()
        {
            self.size += rec.len() as u64;
        }
        if self.max_bytes > 0 && self.size >= self.max_bytes {
            self.rotate();
        }
    }

    fn rotate(&mut self) {
        let name = |n: u32| PathBuf::from(format!("{}.{n}", self.path.display()));
        if self.max_files <= 1 {
            let _ = std::fs::remove_file(&self.path);
        } else {
            for n in (1..self.max_files - 1).rev() {
                let _ = std::fs::rename(name(n), name(n + 1));
            }
            let _ = std::fs::rename(&self.path, name(1));
        }
        self.file = File::options()
            .create(true)
            .append(true)
            .open(&self.path)
            .ok();
        self.size = 0;
    }
}

/// Parses `ok PID` / `err MESSAGE` as printed by [`main`].
pub fn parse_report(out: &str) -> Result<i32, ReportError> {
    if let Some(pid) = out.strip_prefix("ok ") {
        return pid
            .trim()
            .parse()
            .map_err(|_| ReportError::BadReport(out.to_string()));
    }
    Err(ReportError::Failed(
        out.strip_prefix("err ").unwrap_or(out).trim().to_string(),
    ))
}

/// `CString` of a path or string, for the raw calls.
pub(crate) fn cstr(s: impl AsRef<std::ffi::OsStr>) -> Result<CString, NulError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(s.as_ref().as_bytes()).map_err(|_| NulError)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse() {
        assert_eq!(parse_report("ok 42"), Ok(42));
        assert_eq!(parse_report("ok 42\n"), Ok(42));
        let e = parse_report("err exec: nope").unwrap_err();
        assert_eq!(e, ReportError::Failed("exec: nope".into()));
        assert_eq!(e.to_string(), "exec: nope");
        // Anything but `ok PID` is a failure, shown trimmed.
        let e = parse_report("  the shim died\n").unwrap_err();
        assert_eq!(e, ReportError::Failed("the shim died".into()));
        let e = parse_report("ok x").unwrap_err();
        assert_eq!(e, ReportError::BadReport("ok x".into()));
        assert_eq!(e.to_string(), r#"bad shim report "ok x""#);
    }

    #[test]
    fn error_texts() {
        assert_eq!(
            cstr("a\0b").unwrap_err().to_string(),
            "a path or argument holds a NUL byte"
        );
        assert_eq!(
            ShimError::NoSpec {
                bundle: "/b".into()
            }
            .to_string(),
            "no config.json in /b"
        );
        assert_eq!(
            ShimError::JoinNamespace {
                what: "network",
                path: "/run/netns/x".into(),
                source: nix::Error::EPERM,
            }
            .to_string(),
            format!(
                "joining network namespace /run/netns/x: {}",
                nix::Error::EPERM
            )
        );
        assert_eq!(
            ShimError::WriteState(std::io::Error::other("full")).to_string(),
            "writing state.json: full"
        );
    }

    #[test]
    fn log_lines_are_cri_and_split_and_rotate() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("0.log");
        let mut w = LogWriter::open(&path, 200, 3);
        let mut partial = Vec::new();
        w.feed("stdout", &mut partial, b"hello\nwor");
        assert_eq!(partial, b"wor");
        w.feed("stdout", &mut partial, b"ld\n");
        w.feed("stdout", &mut partial, b"DONE");
        w.finish("stdout", &mut partial);
        assert!(partial.is_empty());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with(" stdout F hello"), "{}", lines[0]);
        assert!(lines[1].ends_with(" stdout F world"));
        // The output ended without a newline: a partial record.
        assert!(lines[2].ends_with(" stdout P DONE"), "{}", lines[2]);
        for _ in 0..10 {
            w.feed(
                "stderr",
                &mut partial,
                b"0123456789012345678901234567890123456789\n",
            );
        }
        assert!(PathBuf::from(format!("{}.1", path.display())).exists());
        assert!(PathBuf::from(format!("{}.2", path.display())).exists());
        assert!(!PathBuf::from(format!("{}.3", path.display())).exists());
        let mut long = Vec::new();
        let mut w = LogWriter::open(&d.path().join("1.log"), 0, 1);
        w.feed("stdout", &mut long, &vec![b'a'; MAX_LINE + 5]);
        assert_eq!(long.len(), 5);
        let t = std::fs::read_to_string(d.path().join("1.log")).unwrap();
        assert!(t.contains(" stdout P aaaa"));
    }
}

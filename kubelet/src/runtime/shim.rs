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

/// Entry point of `k1s internal shim BUNDLE`. Returns the process's exit code.
pub fn main(bundle: &Path) -> i32 {
    let spec: ContainerSpec = match spec::read_json(bundle, spec::CONFIG) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return report_stdout(&format!("err no {} in {}", spec::CONFIG, bundle.display()));
        }
        Err(e) => return report_stdout(&format!("err reading {}: {e}", spec::CONFIG)),
    };
    let (report_r, report_w) = match pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return report_stdout(&format!("err pipe: {e}")),
    };
    // SAFETY: this process is single-threaded (it was exec'd just now and started no threads).
    match unsafe { fork() } {
        Err(e) => report_stdout(&format!("err fork: {e}")),
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
        Err(msg) => {
            let _ = report.write_all(format!("err {msg}").as_bytes());
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
    stdout: OwnedFd,
    stderr: OwnedFd,
}

fn start(bundle: &Path, spec: &ContainerSpec) -> Result<Running, String> {
    let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let (sync_r, sync_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let (fail_r, fail_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    join_ns(spec.netns.as_deref(), CloneFlags::CLONE_NEWNET, "network")?;
    join_ns(spec.ipcns.as_deref(), CloneFlags::CLONE_NEWIPC, "ipc")?;
    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| format!("unshare pid namespace: {e}"))?;
    // SAFETY: the shim is single-threaded.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            drop((out_r, err_r, sync_w, fail_r));
            // Wait until the shim has put this process into its cgroups.
            let mut b = [0u8; 1];
            let _ = nix::unistd::read(&sync_r, &mut b);
            drop(sync_r);
            let err = super::init::run(spec, out_w, err_w);
            let mut fail = File::from(fail_w);
            let _ = fail.write_all(err.as_bytes());
            // SAFETY: leave without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            drop((out_w, err_w, sync_r, fail_w));
            for procs in &spec.cgroup_procs {
                if let Err(e) = std::fs::write(procs, child.as_raw().to_string()) {
                    let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                    let _ = waitpid(child, None);
                    return Err(format!("joining cgroup {}: {e}", procs.display()));
                }
            }
            let _ = nix::unistd::write(&sync_w, b"x");
            drop(sync_w);
            let mut msg = String::new();
            let _ = File::from(fail_r).read_to_string(&mut msg);
            if !msg.is_empty() {
                let _ = waitpid(child, None);
                return Err(msg);
            }
            let me = std::process::id() as i32;
            let state = State {
                pid: child.as_raw(),
                pid_start: spec::process_start_time(child.as_raw()).unwrap_or(0),
                shim_pid: me,
                shim_start: spec::process_start_time(me).unwrap_or(0),
                started_at: now_rfc3339(),
            };
            spec::write_json(bundle, spec::STATE, &state)
                .map_err(|e| format!("writing {}: {e}", spec::STATE))?;
            Ok(Running {
                pid: child,
                stdout: out_r,
                stderr: err_r,
            })
        }
    }
}

fn join_ns(path: Option<&Path>, kind: CloneFlags, what: &str) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let f = File::open(path)
        .map_err(|e| format!("opening {what} namespace {}: {e}", path.display()))?;
    setns(f.as_fd(), kind).map_err(|e| format!("joining {what} namespace {}: {e}", path.display()))
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Copies the container's output into the log until both pipes close, then reaps it and
/// records how it ended.
fn relay_and_wait(bundle: &Path, spec: &ContainerSpec, running: Running) -> i32 {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut log = LogWriter::open(&spec.log_path, spec.log_max_bytes, spec.log_max_files);
    let streams = [(&running.stdout, "stdout"), (&running.stderr, "stderr")];
    let mut open = [true, true];
    let mut partial: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut buf = vec![0u8; 32 * 1024];
    while open.iter().any(|o| *o) {
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        let mut which = Vec::new();
        for (i, (fd, _)) in streams.iter().enumerate() {
            if open[i] {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                which.push(i);
            }
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
            Ok(_) => {}
        }
        let ready: Vec<(usize, bool)> = fds
            .iter()
            .zip(&which)
            .map(|(p, i)| (*i, p.revents().is_some_and(|r| !r.is_empty())))
            .collect();
        drop(fds);
        for (i, is_ready) in ready {
            if !is_ready {
                continue;
            }
            match nix::unistd::read(streams[i].0, &mut buf) {
                Ok(0) | Err(_) => {
                    open[i] = false;
                    if !partial[i].is_empty() {
                        log.line(streams[i].1, "F", &partial[i]);
                        partial[i].clear();
                    }
                }
                Ok(n) => log.feed(streams[i].1, &mut partial[i], &buf[..n]),
            }
        }
    }
    let exit = loop {
        match waitpid(running.pid, None) {
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

    fn line(&mut self, stream: &str, tag: &str, text: &[u8]) {
        let ts = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
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
pub fn parse_report(out: &str) -> Result<i32, String> {
    if let Some(pid) = out.strip_prefix("ok ") {
        return pid
            .trim()
            .parse()
            .map_err(|_| format!("bad shim report {out:?}"));
    }
    Err(out.strip_prefix("err ").unwrap_or(out).trim().to_string())
}

/// `CString` of a path or string, for the raw calls.
pub(crate) fn cstr(s: impl AsRef<std::ffi::OsStr>) -> Result<CString, String> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(s.as_ref().as_bytes()).map_err(|_| "a path or argument holds a NUL byte".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse() {
        assert_eq!(parse_report("ok 42"), Ok(42));
        assert_eq!(parse_report("err exec: nope"), Err("exec: nope".into()));
        assert!(parse_report("ok x").is_err());
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
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].ends_with(" stdout F hello"), "{}", lines[0]);
        assert!(lines[1].ends_with(" stdout F world"));
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

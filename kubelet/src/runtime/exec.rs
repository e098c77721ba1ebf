//! `kubectl exec`, the process side: `k1s internal exec BUNDLE [--tty] -- COMMAND...`, run by
//! [`super::ShimRuntime::exec`] in a fresh single-threaded process (setns is per thread and a
//! pid-namespace setns only applies to children, so this never happens on a tokio thread).
//!
//! It joins the ipc, uts, net and pid namespaces of the container's init (read from its
//! `state.json`), forks (the child is then in the container's pid namespace, so it dies with
//! the container), puts the child into every cgroup the init is in, and the child joins the
//! mount namespace, becomes the container's user with its capabilities and `no_new_privs`,
//! takes its environment and working directory from `config.json` and execs the command.
//!
//! Its stdin/stdout/stderr are the caller's pipes. With `--tty` the child opens a
//! pseudo-terminal in the container's own devpts (so `tty` names `/dev/pts/N` inside the
//! container, as with runc), sends the master to the caller on descriptor [`TERMINAL_FD`] (a
//! unix socket, SCM_RIGHTS), makes the slave its stdio and controlling terminal. A failure
//! before the command runs ("executable file not found in $PATH") is written as
//! `err MESSAGE` to descriptor [`REPORT_FD`] if the caller passed one; otherwise the process
//! exits with the command's exit code, 128 + signal when a signal killed it.
//!
//! Failures are typed until they cross a pipe: the helper's own ([`ExecError`]) become that
//! report's text, and the child's ([`ExecFailure`]) the text it sends back to the helper.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, setns};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork, pipe2};

use super::init::CommandError;
use super::spec::{self, ContainerSpec, State};

/// Why the helper could not run the command; its text follows `err ` in the report.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("no command specified")]
    NoCommand,
    #[error("no {} in {}", spec::CONFIG, bundle.display())]
    NoSpec { bundle: PathBuf },
    #[error("reading {config}: {0}", config = spec::CONFIG)]
    ReadSpec(#[source] std::io::Error),
    #[error("reading state: {0}")]
    ReadState(#[source] std::io::Error),
    #[error("cannot exec in a stopped container: container is not running")]
    NotRunning,
    /// `path`: `/proc/PID/ns/NAME`.
    #[error("opening {path}: {source}")]
    OpenNamespace {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("joining the {name} namespace: {source}")]
    JoinNamespace {
        name: &'static str,
        #[source]
        source: nix::Error,
    },
    #[error("pipe: {0}")]
    Pipe(#[source] nix::Error),
    #[error("fork: {0}")]
    Fork(#[source] nix::Error),
    #[error("joining cgroup {}: {source}", path.display())]
    JoinCgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for the command: {0}")]
    Wait(#[source] nix::Error),
    /// The child's [`ExecFailure`], as it sent it.
    #[error("{0}")]
    Child(String),
}

/// Why the forked child did not exec the command; the text is what the user sees.
#[derive(Debug, thiserror::Error)]
#[error("OCI runtime exec failed: exec failed: unable to start container process: {0}: unknown")]
pub struct ExecFailure(#[source] pub ExecSetupError);

/// A step of the child's setup that failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecSetupError {
    #[error("joining the mount namespace: {0}")]
    JoinMountNamespace(#[source] nix::Error),
    #[error("opening a terminal in the container: {0}")]
    OpenTerminal(#[source] std::io::Error),
    #[error("sending the terminal: {0}")]
    SendTerminal(#[source] nix::Error),
    #[error("dup2: {0}")]
    Dup2(#[source] std::io::Error),
    #[error("setsid: {0}")]
    Setsid(#[source] nix::Error),
    #[error("setting the controlling terminal: {0}")]
    ControllingTerminal(#[source] std::io::Error),
    #[error(transparent)]
    Command(#[from] CommandError),
}

/// The descriptor a start failure is reported on.
pub const REPORT_FD: i32 = 3;

/// With `--tty`, the unix socket the terminal's master is sent on.
pub const TERMINAL_FD: i32 = 4;

/// Exit code of the helper when the command never ran (the report says why).
pub const NOT_STARTED: i32 = 126;

/// Entry point of `k1s internal exec BUNDLE [--tty] -- COMMAND...`.
pub fn main(bundle: &Path, tty: bool, command: &[String]) -> i32 {
    let report = inherited(REPORT_FD);
    let terminal = if tty { inherited(TERMINAL_FD) } else { None };
    if tty && terminal.is_none() {
        eprintln!("--tty needs a unix socket on descriptor {TERMINAL_FD} for the terminal");
        return NOT_STARTED;
    }
    match run(bundle, terminal, command) {
        Ok(code) => code,
        Err(e) => {
            match report {
                Some(mut f) => {
                    let _ = f.write_all(format!("err {e}").as_bytes());
                }
                None => eprintln!("{e}"),
            }
            NOT_STARTED
        }
    }
}

/// Descriptor `fd` passed by the caller, made close-on-exec so the command never sees it.
fn inherited(fd: i32) -> Option<File> {
    // SAFETY: fcntl on a descriptor number; fails harmlessly if it is not open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return None;
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    // SAFETY: the descriptor is open and this process owns it from here on.
    Some(unsafe { File::from_raw_fd(fd) })
}

/// The running container of `bundle`: its spec and its init's pid.
fn running(bundle: &Path) -> Result<(ContainerSpec, State), ExecError> {
    let spec: ContainerSpec = spec::read_json(bundle, spec::CONFIG)
        .map_err(ExecError::ReadSpec)?
        .ok_or_else(|| ExecError::NoSpec {
            bundle: bundle.to_path_buf(),
        })?;
    let state: Option<State> =
        spec::read_json(bundle, spec::STATE).map_err(ExecError::ReadState)?;
    let exited = bundle.join(spec::EXIT).exists();
    match state {
        Some(s) if !exited && spec::process_start_time(s.pid) == Some(s.pid_start) => Ok((spec, s)),
        _ => Err(ExecError::NotRunning),
    }
}

fn run(bundle: &Path, terminal: Option<File>, command: &[String]) -> Result<i32, ExecError> {
    if command.is_empty() {
        return Err(ExecError::NoCommand);
    }
    let (spec, state) = running(bundle)?;
    let pid = state.pid;
    // Open everything under /proc/PID before joining anything: the mount namespace changes
    // what /proc is.
    let namespaces = [
        ("ipc", CloneFlags::CLONE_NEWIPC),
        ("uts", CloneFlags::CLONE_NEWUTS),
        ("net", CloneFlags::CLONE_NEWNET),
        ("pid", CloneFlags::CLONE_NEWPID),
    ];
    let mut joins = Vec::new();
    for (name, kind) in namespaces {
        let theirs = format!("/proc/{pid}/ns/{name}");
        let f = File::open(&theirs).map_err(|source| ExecError::OpenNamespace {
            path: theirs.clone(),
            source,
        })?;
        let same = match (
            std::fs::metadata(&theirs),
            std::fs::metadata(format!("/proc/self/ns/{name}")),
        ) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        };
        if !same {
            joins.push((name, kind, f));
        }
    }
    let mnt_path = format!("/proc/{pid}/ns/mnt");
    let mnt = File::open(&mnt_path).map_err(|source| ExecError::OpenNamespace {
        path: mnt_path.clone(),
        source,
    })?;
    let cgroups = cgroup_targets(pid, &spec);
    // Recheck after opening: the pid could have been reused in between.
    if spec::process_start_time(pid) != Some(state.pid_start) {
        return Err(ExecError::NotRunning);
    }
    for &(name, kind, ref f) in &joins {
        setns(f.as_fd(), kind).map_err(|source| ExecError::JoinNamespace { name, source })?;
    }
    drop(joins);

    let (sync_r, sync_w) = pipe2(OFlag::O_CLOEXEC).map_err(ExecError::Pipe)?;
    let (fail_r, fail_w) = pipe2(OFlag::O_CLOEXEC).map_err(ExecError::Pipe)?;
    // SAFETY: this process is single-threaded.
    match unsafe { fork() }.map_err(ExecError::Fork)? {
        ForkResult::Child => {
            drop((sync_w, fail_r));
            let mut b = [0u8; 1];
            let _ = nix::unistd::read(&sync_r, &mut b);
            drop(sync_r);
            let err = child(&spec, mnt, terminal, command);
            let _ = File::from(fail_w).write_all(err.to_string().as_bytes());
            // SAFETY: leave without running the parent's destructors.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            drop((sync_r, fail_w, mnt, terminal));
            // The caller's stdio now belongs to the command only, so that output ends (EOF,
            // or EIO on a terminal) when the command and its children are done with it.
            if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
                for fd in 0..3 {
                    // SAFETY: dup2 onto the standard descriptors of this single-threaded
                    // process.
                    unsafe { libc::dup2(null.as_raw_fd(), fd) };
                }
            }
            for (path, required) in &cgroups {
                if let Err(e) = std::fs::write(path, child.as_raw().to_string())
                    && *required
                {
                    let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                    let _ = waitpid(child, None);
                    return Err(ExecError::JoinCgroup {
                        path: path.clone(),
                        source: e,
                    });
                }
            }
            let _ = nix::unistd::write(&sync_w, b"x");
            drop(sync_w);
            let mut msg = String::new();
            let _ = File::from(fail_r).read_to_string(&mut msg);
            let code = loop {
                match waitpid(child, None) {
                    Ok(WaitStatus::Exited(_, code)) => break code,
                    Ok(WaitStatus::Signaled(_, sig, _)) => break 128 + sig as i32,
                    Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
                    Err(e) => return Err(ExecError::Wait(e)),
                }
            };
            if !msg.is_empty() {
                return Err(ExecError::Child(msg));
            }
            Ok(code)
        }
    }
}

/// In the forked child: the container's mount namespace, terminal, user and exec. Returns
/// only on failure, with what the user is told.
fn child(
    spec: &ContainerSpec,
    mnt: File,
    terminal: Option<File>,
    command: &[String],
) -> ExecFailure {
    // Joining a mount namespace also moves the root and working directory to its root (the
    // container's pivoted rootfs).
    if let Err(e) = setns(mnt.as_fd(), CloneFlags::CLONE_NEWNS) {
        return ExecFailure(ExecSetupError::JoinMountNamespace(e));
    }
    drop(mnt);
    let tty = terminal.is_some();
    if let Some(socket) = terminal
        && let Err(e) = container_terminal(spec, socket)
    {
        return ExecFailure(e);
    }
    let env = environment(&spec.process.env, tty);
    let cwd = if spec.process.cwd.is_empty() {
        "/"
    } else {
        &spec.process.cwd
    };
    match super::init::prepare_command(spec, command, &env, cwd) {
        Err(e) => ExecFailure(e.into()),
        Ok(prepared) => ExecFailure(super::init::exec(&prepared, &command[0]).into()),
    }
}

/// In the child, inside the container's mount namespace: opens a terminal in its devpts,
/// sends the master on `socket`, and makes the slave stdio and the controlling terminal.
fn container_terminal(spec: &ContainerSpec, socket: File) -> Result<(), ExecSetupError> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let (master, slave) = super::pty::open().map_err(ExecSetupError::OpenTerminal)?;
    // The command owns its terminal, as with a login (runc does the same for its console).
    let _ = nix::unistd::fchown(
        &slave,
        Some(nix::unistd::Uid::from_raw(spec.process.uid)),
        Some(nix::unistd::Gid::from_raw(spec.process.gid)),
    );
    let fds = [master.as_raw_fd()];
    let iov = [std::io::IoSlice::new(b"t")];
    sendmsg::<()>(
        socket.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(ExecSetupError::SendTerminal)?;
    drop((master, socket));
    for fd in 0..3 {
        // SAFETY: dup2 onto the standard descriptors of this single-threaded process.
        if unsafe { libc::dup2(slave.as_raw_fd(), fd) } < 0 {
            return Err(ExecSetupError::Dup2(std::io::Error::last_os_error()));
        }
    }
    drop(slave);
    nix::unistd::setsid().map_err(ExecSetupError::Setsid)?;
    // SAFETY: ioctl on stdin with an integer argument.
    if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } != 0 {
        return Err(ExecSetupError::ControllingTerminal(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// The container's environment, with `TERM=xterm` for a terminal unless it sets one (as
/// containerd does for a tty exec).
fn environment(env: &[String], tty: bool) -> Vec<String> {
    let mut env = env.to_vec();
    if tty && !env.iter().any(|e| e.starts_with("TERM=")) {
        env.push("TERM=xterm".into());
    }
    env
}

/// The `cgroup.procs` files of every hierarchy `pid` is in, and whether joining each is
/// required (the container's own groups are; a hierarchy the kubelet does not manage, where
/// the init merely inherited the shim's group, is best effort).
fn cgroup_targets(pid: i32, spec: &ContainerSpec) -> Vec<(PathBuf, bool)> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<(PathBuf, bool)> = spec
        .cgroup_procs
        .iter()
        .map(|p| (p.clone(), true))
        .collect();
    for p in cgroup_procs(&own, &mountinfo) {
        if !out.iter().any(|(q, _)| *q == p) {
            out.push((p, false));
        }
    }
    out
}

/// Maps `/proc/PID/cgroup` onto the cgroup mounts of `/proc/self/mountinfo`: one
/// `cgroup.procs` path per hierarchy that is mounted.
pub fn cgroup_procs(proc_cgroup: &str, mountinfo: &str) -> Vec<PathBuf> {
    struct CgMount<'a> {
        root: &'a str,
        point: &'a str,
        v2: bool,
        options: Vec<&'a str>,
    }
    let mounts: Vec<CgMount<'_>> = mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let _source = post.next();
            let options = post.next().unwrap_or("").split(',').collect();
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgMount {
                root: pre.get(3)?,
                point: pre.get(4)?,
                v2: fstype == "cgroup2",
                options,
            })
        })
        .collect();
    let mut out = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let found = mounts.iter().find(|m| {
            if controllers.is_empty() {
                m.v2
            } else {
                !m.v2 && controllers.split(',').all(|c| m.options.contains(&c))
            }
        });
        let Some(m) = found else { continue };
        let rel = if m.root == "/" {
            path
        } else if let Some(r) = path.strip_prefix(m.root) {
            r
        } else {
            continue;
        };
        let dir = Path::new(&crate::mountinfo::unescape(m.point)).join(rel.trim_start_matches('/'));
        out.push(dir.join("cgroup.procs"));
    }
    out
}

/// The exec helper's report: `err MESSAGE` when the command never ran.
pub fn parse_report(report: &str) -> Option<String> {
    report
        .strip_prefix("err ")
        .map(|m| m.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
36 33 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
37 33 0:32 / /sys/fs/cgroup/cpu rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu
38 33 0:33 /outer /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
39 33 0:34 / /sys/fs/cgroup/net_cls,net_prio rw shared:17 - cgroup cgroup rw,net_cls,net_prio
";

    #[test]
    fn cgroups_map_onto_their_mounts() {
        let own = "\
9:net_cls,net_prio:/
7:pids:/outer/kubepods/podX/c1
5:memory:/kubepods/podX/c1
4:cpu:/kubepods/podX/c1
3:cpuacct:/kubepods/podX/c1
1:name=systemd:/init.scope
0::/k1s
";
        let got = cgroup_procs(own, MOUNTINFO);
        let want: Vec<PathBuf> = [
            "/sys/fs/cgroup/net_cls,net_prio/cgroup.procs",
            "/sys/fs/cgroup/pids/kubepods/podX/c1/cgroup.procs",
            "/sys/fs/cgroup/memory/kubepods/podX/c1/cgroup.procs",
            "/sys/fs/cgroup/cpu/kubepods/podX/c1/cgroup.procs",
            "/sys/fs/cgroup/unified/k1s/cgroup.procs",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        // cpuacct and name=systemd are not mounted here: skipped.
        assert_eq!(got, want);
    }

    #[test]
    fn pure_v2() {
        let mi = "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            cgroup_procs("0::/kubepods.slice/c\n", mi),
            vec![PathBuf::from(
                "/sys/fs/cgroup/kubepods.slice/c/cgroup.procs"
            )]
        );
    }

    #[test]
    fn tty_gets_a_term() {
        let env = vec!["PATH=/bin".to_string()];
        assert_eq!(environment(&env, false), env);
        assert_eq!(environment(&env, true), vec!["PATH=/bin", "TERM=xterm"]);
        let with = vec!["TERM=vt100".to_string()];
        assert_eq!(environment(&with, true), with);
    }

    #[test]
    fn reports() {
        assert_eq!(parse_report(""), None);
        assert_eq!(parse_report("err nope\n"), Some("nope".into()));
    }

    #[test]
    fn a_stopped_container_is_refused() {
        let d = tempfile::tempdir().unwrap();
        spec::write_json(d.path(), spec::CONFIG, &ContainerSpec::default()).unwrap();
        let err = run(d.path(), None, &["true".into()]).unwrap_err();
        assert!(matches!(err, ExecError::NotRunning), "{err:?}");
        assert_eq!(
            err.to_string(),
            "cannot exec in a stopped container: container is not running"
        );
        let err = run(d.path(), None, &[]).unwrap_err();
        assert!(matches!(err, ExecError::NoCommand), "{err:?}");
        assert_eq!(err.to_string(), "no command specified");
        let empty = tempfile::tempdir().unwrap();
        let err = run(empty.path(), None, &["true".into()]).unwrap_err();
        assert!(matches!(err, ExecError::NoSpec { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("no config.json in {}", empty.path().display())
        );
    }

    #[test]
    fn child_failures_are_worded_as_runc_does() {
        let e = ExecFailure(
            CommandError::from(crate::runtime::init::LookupError::NotInPath("nope".into())).into(),
        );
        assert_eq!(
            e.to_string(),
            "OCI runtime exec failed: exec failed: unable to start container process: \
             exec: \"nope\": executable file not found in $PATH: unknown"
        );
        let e = ExecFailure(ExecSetupError::Command(CommandError::Exec {
            arg0: "sh".into(),
            source: nix::Error::ENOENT,
        }));
        assert_eq!(
            e.to_string(),
            format!(
                "OCI runtime exec failed: exec failed: unable to start container process: \
                 exec: \"sh\": {}: unknown",
                nix::Error::ENOENT.desc()
            )
        );
    }
}

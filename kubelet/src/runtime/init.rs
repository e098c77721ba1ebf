//! The container's init, between the shim's fork and `execve`: new mount and UTS namespaces,
//! the filesystem ([`super::mounts`]), hostname, user and groups, capabilities,
//! `no_new_privs`, stdio, and the exec itself. Runs in a forked child of a single-threaded
//! process; it only returns to report why the container could not start ([`InitFailure`],
//! whose text the shim passes on). Its last steps, [`prepare_command`] and [`exec`]
//! ([`CommandError`]: the command looked up, privileges dropped, the working directory, the
//! `execve`), serve the exec helper too.

use std::ffi::CString;
use std::os::fd::OwnedFd;

use caps::{CapSet, Capability, CapsHashSet};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{Gid, Uid};

use super::mounts::MountSetupError;
use super::shim::{NulError, cstr};
use super::spec::ContainerSpec;

/// Why the container's init did not exec its command. The text is the start error the
/// kubelet reports.
#[derive(Debug, thiserror::Error)]
#[error("failed to start container process: {0}")]
pub struct InitFailure(#[source] pub InitError);

/// A step of [`run`] that failed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("unshare: {0}")]
    Unshare(#[source] nix::Error),
    #[error(transparent)]
    Mounts(#[from] MountSetupError),
    #[error("sethostname: {0}")]
    Sethostname(#[source] nix::Error),
    #[error("no command specified")]
    NoCommand,
    #[error("opening /dev/null: {0}")]
    DevNull(#[source] std::io::Error),
    #[error("dup2: {0}")]
    Dup2(#[source] nix::Error),
    #[error("setsid: {0}")]
    Setsid(#[source] nix::Error),
    #[error("setting the controlling terminal: {0}")]
    ControllingTerminal(#[source] std::io::Error),
    #[error(transparent)]
    Command(#[from] CommandError),
}

/// The last steps before `execve`, which the container's init and the exec helper share
/// ([`prepare_command`], [`exec`]).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Lookup(#[from] LookupError),
    #[error(transparent)]
    Nul(#[from] NulError),
    #[error(transparent)]
    Privileges(#[from] PrivilegeError),
    #[error("chdir to cwd ({cwd:?}): {source}")]
    Chdir {
        cwd: String,
        #[source]
        source: nix::Error,
    },
    /// `execve` itself failed; `arg0` is the command as given.
    #[error("exec: {arg0:?}: {}", source.desc())]
    Exec {
        arg0: String,
        #[source]
        source: nix::Error,
    },
}

/// The command is not there, as runc words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// A path (it holds a `/`) that does not exist.
    #[error("exec: {0:?}: stat {0}: no such file or directory")]
    NoSuchFile(String),
    /// A bare name not found in the container's `PATH`.
    #[error("exec: {0:?}: executable file not found in $PATH")]
    NotInPath(String),
}

/// Why the process could not become the container's user with its capabilities.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// The name as looked up (upper case, `CAP_` prefixed).
    #[error("unknown capability {0:?}")]
    UnknownCapability(String),
    #[error("capabilities: {0}")]
    Capabilities(#[source] caps::errors::CapsError),
    #[error("setgroups: {0}")]
    Setgroups(#[source] nix::Error),
    #[error("setgid {gid}: {source}")]
    Setgid {
        gid: u32,
        #[source]
        source: nix::Error,
    },
    #[error("setuid {uid}: {source}")]
    Setuid {
        uid: u32,
        #[source]
        source: nix::Error,
    },
    #[error("no_new_privs: {0}")]
    NoNewPrivs(#[source] std::io::Error),
}

/// The container's standard descriptors: `stdin` is None for `/dev/null`; with `tty` all
/// three are the slave of its pseudo-terminal, which becomes its controlling terminal.
pub struct Stdio {
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub tty: bool,
}

/// Sets the container up and execs its process. Returns only on failure, with what the
/// kubelet reports as the start error.
pub fn run(spec: &ContainerSpec, stdio: Stdio) -> InitFailure {
    match prepare(spec, stdio) {
        Ok(command) => InitFailure(exec(&command, &spec.process.args[0]).into()),
        Err(e) => InitFailure(e),
    }
}

/// A command as `execve` takes it: the resolved path, argv and envp.
pub(crate) type Exec = (CString, Vec<CString>, Vec<CString>);

/// What the container's init and the exec helper do last, in runc's order: find `args[0]`
/// (in the container's `PATH` from `env`), become the container's user
/// ([`drop_privileges`]), enter `cwd`.
pub(crate) fn prepare_command(
    spec: &ContainerSpec,
    args: &[String],
    env: &[String],
    cwd: &str,
) -> Result<Exec, CommandError> {
    let path = resolve(&args[0], env)?;
    let argv = args.iter().map(cstr).collect::<Result<Vec<_>, _>>()?;
    let envp = env.iter().map(cstr).collect::<Result<Vec<_>, _>>()?;
    let path = cstr(&path)?;
    drop_privileges(spec)?;
    nix::unistd::chdir(cwd).map_err(|source| CommandError::Chdir {
        cwd: cwd.to_string(),
        source,
    })?;
    Ok((path, argv, envp))
}

/// Execs `command` with default signal dispositions; returns only why that failed.
pub(crate) fn exec((path, argv, envp): &Exec, arg0: &str) -> CommandError {
    reset_signals();
    let source = nix::unistd::execve(path, argv, envp).unwrap_err();
    CommandError::Exec {
        arg0: arg0.to_string(),
        source,
    }
}

fn prepare(spec: &ContainerSpec, stdio: Stdio) -> Result<Exec, InitError> {
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS;
    if spec.ipcns.is_none() && spec.netns.is_some() {
        // A pod without an IPC namespace of its own still gets one per container.
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    unshare(flags).map_err(InitError::Unshare)?;
    super::mounts::setup(spec)?;
    if !spec.hostname.is_empty() {
        nix::unistd::sethostname(&spec.hostname).map_err(InitError::Sethostname)?;
    }
    let p = &spec.process;
    if p.args.is_empty() {
        return Err(InitError::NoCommand);
    }
    let cwd = if p.cwd.is_empty() { "/" } else { &p.cwd };
    // As runc does, a missing working directory is created (as root, before privileges drop).
    let _ = std::fs::create_dir_all(cwd);
    let command = prepare_command(spec, &p.args, &p.env, cwd)?;

    let stdin = match stdio.stdin {
        Some(fd) => fd,
        None => std::fs::File::open("/dev/null")
            .map_err(InitError::DevNull)?
            .into(),
    };
    nix::unistd::dup2_stdin(&stdin).map_err(InitError::Dup2)?;
    nix::unistd::dup2_stdout(&stdio.stdout).map_err(InitError::Dup2)?;
    nix::unistd::dup2_stderr(&stdio.stderr).map_err(InitError::Dup2)?;
    if stdio.tty {
        nix::unistd::setsid().map_err(InitError::Setsid)?;
        // SAFETY: ioctl on stdin with an integer argument.
        if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } != 0 {
            return Err(InitError::ControllingTerminal(
                std::io::Error::last_os_error(),
            ));
        }
    }
    Ok(command)
}

/// Default dispositions for the signals the shim (and Rust's runtime, SIGPIPE) ignore:
/// ignored signals survive `execve`, and a container's processes must start as upstream's do.
pub(crate) fn reset_signals() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGPIPE,
        Signal::SIGQUIT,
    ] {
        // SAFETY: SIG_DFL installs no handler code.
        unsafe {
            let _ = signal(s, SigHandler::SigDfl);
        }
    }
}

/// [`lookup`], with runc's message when the command is not there.
pub(crate) fn resolve(cmd: &str, env: &[String]) -> Result<String, LookupError> {
    lookup(cmd, env).ok_or_else(|| {
        if cmd.contains('/') {
            LookupError::NoSuchFile(cmd.to_string())
        } else {
            LookupError::NotInPath(cmd.to_string())
        }
    })
}

/// `args[0]` looked up in the container's `PATH`, as execvp would.
pub(crate) fn lookup(cmd: &str, env: &[String]) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        return std::path::Path::new(cmd).exists().then(|| cmd.to_string());
    }
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    path.split(':')
        .map(|d| std::path::Path::new(if d.is_empty() { "." } else { d }).join(cmd))
        .find(|p| executable(p))
        .map(|p| p.display().to_string())
}

fn parse_caps(names: &[String]) -> Result<CapsHashSet, PrivilegeError> {
    names
        .iter()
        .map(|n| {
            let n = n.to_ascii_uppercase();
            let n = if n.starts_with("CAP_") {
                n
            } else {
                format!("CAP_{n}")
            };
            n.parse::<Capability>()
                .map_err(|_| PrivilegeError::UnknownCapability(n))
        })
        .collect()
}

pub(crate) fn drop_privileges(spec: &ContainerSpec) -> Result<(), PrivilegeError> {
    let p = &spec.process;
    let keep = if spec.privileged {
        caps::all()
    } else {
        parse_caps(&p.capabilities)?
    };
    let cap_err = PrivilegeError::Capabilities;
    // The bounding set first: it can only shrink, and needs CAP_SETPCAP, which root still has.
    for c in caps::all() {
        if !keep.contains(&c) {
            let _ = caps::drop(None, CapSet::Bounding, c);
        }
    }
    // Keep the permitted set across the uid change.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) };
    let mut groups: Vec<Gid> = vec![Gid::from_raw(p.gid)];
    groups.extend(p.additional_gids.iter().map(|g| Gid::from_raw(*g)));
    nix::unistd::setgroups(&groups).map_err(PrivilegeError::Setgroups)?;
    let gid = Gid::from_raw(p.gid);
    nix::unistd::setresgid(gid, gid, gid)
        .map_err(|source| PrivilegeError::Setgid { gid: p.gid, source })?;
    let uid = Uid::from_raw(p.uid);
    nix::unistd::setresuid(uid, uid, uid)
        .map_err(|source| PrivilegeError::Setuid { uid: p.uid, source })?;
    // Each call rewrites all three sets, and effective must stay within permitted: shrink
    // the effective set first (a non-root uid has none left anyway), then grow it back.
    let none = CapsHashSet::new();
    caps::set(None, CapSet::Effective, &none).map_err(cap_err)?;
    caps::set(None, CapSet::Permitted, &keep).map_err(cap_err)?;
    caps::set(None, CapSet::Inheritable, &keep).map_err(cap_err)?;
    caps::set(None, CapSet::Effective, &keep).map_err(cap_err)?;
    if p.no_new_privileges {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(PrivilegeError::NoNewPrivs(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_lookup() {
        let env = vec!["PATH=/nonexistent:/bin:/usr/bin".to_string()];
        assert!(lookup("sh", &env).is_some());
        assert_eq!(lookup("definitely-not-a-command-k1s", &env), None);
        assert_eq!(lookup("/bin/sh", &[]), Some("/bin/sh".into()));
        assert_eq!(lookup("/nope/sh", &[]), None);
    }

    #[test]
    fn capability_names() {
        let c = parse_caps(&["CAP_CHOWN".into(), "net_admin".into()]).unwrap();
        assert!(c.contains(&Capability::CAP_CHOWN) && c.contains(&Capability::CAP_NET_ADMIN));
        let e = parse_caps(&["nope".into()]).unwrap_err();
        assert!(
            matches!(&e, PrivilegeError::UnknownCapability(n) if n == "CAP_NOPE"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), r#"unknown capability "CAP_NOPE""#);
    }

    #[test]
    fn missing_commands_are_worded_as_runc_does() {
        let env = vec!["PATH=/nonexistent".to_string()];
        let e = resolve("nope", &env).unwrap_err();
        assert_eq!(e, LookupError::NotInPath("nope".into()));
        assert_eq!(
            InitFailure(CommandError::from(e).into()).to_string(),
            r#"failed to start container process: exec: "nope": executable file not found in $PATH"#
        );
        let e = resolve("/no/such", &env).unwrap_err();
        assert_eq!(e, LookupError::NoSuchFile("/no/such".into()));
        assert_eq!(
            e.to_string(),
            r#"exec: "/no/such": stat /no/such: no such file or directory"#
        );
    }

    #[test]
    fn exec_failures_use_the_errno_description() {
        let e = InitFailure(InitError::Command(CommandError::Exec {
            arg0: "/bin/x".into(),
            source: nix::Error::EACCES,
        }));
        assert_eq!(
            e.to_string(),
            format!(
                "failed to start container process: exec: \"/bin/x\": {}",
                nix::Error::EACCES.desc()
            )
        );
        assert_eq!(
            InitFailure(InitError::NoCommand).to_string(),
            "failed to start container process: no command specified"
        );
    }
}

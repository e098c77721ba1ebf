//! The container's init, between the shim's fork and `execve`: new mount and UTS namespaces,
//! the filesystem ([`super::mounts`]), hostname, user and groups, capabilities,
//! `no_new_privs`, stdio, and the exec itself. Runs in a forked child of a single-threaded
//! process; it only returns to report why the container could not start.

use std::ffi::CString;
use std::os::fd::OwnedFd;

use caps::{CapSet, Capability, CapsHashSet};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{Gid, Uid};

use super::shim::cstr;
use super::spec::ContainerSpec;

/// The container's standard descriptors: `stdin` is None for `/dev/null`; with `tty` all
/// three are the slave of its pseudo-terminal, which becomes its controlling terminal.
pub struct Stdio {
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub tty: bool,
}

/// Sets the container up and execs its process. Returns only on failure, with the message
/// the kubelet reports as the start error.
pub fn run(spec: &ContainerSpec, stdio: Stdio) -> String {
    match prepare(spec, stdio) {
        Ok((path, argv, envp)) => {
            reset_signals();
            let err = nix::unistd::execve(&path, &argv, &envp).unwrap_err();
            format!(
                "failed to start container process: exec: {:?}: {}",
                spec.process.args.first().map(String::as_str).unwrap_or(""),
                err.desc()
            )
        }
        Err(e) => format!("failed to start container process: {e}"),
    }
}

type Exec = (CString, Vec<CString>, Vec<CString>);

fn prepare(spec: &ContainerSpec, stdio: Stdio) -> Result<Exec, String> {
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS;
    if spec.ipcns.is_none() && spec.netns.is_some() {
        // A pod without an IPC namespace of its own still gets one per container.
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    unshare(flags).map_err(|e| format!("unshare: {e}"))?;
    super::mounts::setup(spec)?;
    if !spec.hostname.is_empty() {
        nix::unistd::sethostname(&spec.hostname).map_err(|e| format!("sethostname: {e}"))?;
    }
    let p = &spec.process;
    if p.args.is_empty() {
        return Err("no command specified".into());
    }
    let cwd = if p.cwd.is_empty() { "/" } else { &p.cwd };
    // As runc does, a missing working directory is created (as root, before privileges drop).
    let _ = std::fs::create_dir_all(cwd);
    let path = lookup(&p.args[0], &p.env).ok_or_else(|| {
        if p.args[0].contains('/') {
            format!(
                "exec: {:?}: stat {}: no such file or directory",
                p.args[0], p.args[0]
            )
        } else {
            format!("exec: {:?}: executable file not found in $PATH", p.args[0])
        }
    })?;
    let argv = p.args.iter().map(cstr).collect::<Result<Vec<_>, _>>()?;
    let envp = p.env.iter().map(cstr).collect::<Result<Vec<_>, _>>()?;
    let path = cstr(&path)?;

    drop_privileges(spec)?;
    nix::unistd::chdir(cwd).map_err(|e| format!("chdir to cwd ({cwd:?}): {e}"))?;

    let stdin = match stdio.stdin {
        Some(fd) => fd,
        None => std::fs::File::open("/dev/null")
            .map_err(|e| format!("opening /dev/null: {e}"))?
            .into(),
    };
    nix::unistd::dup2_stdin(&stdin).map_err(|e| format!("dup2: {e}"))?;
    nix::unistd::dup2_stdout(&stdio.stdout).map_err(|e| format!("dup2: {e}"))?;
    nix::unistd::dup2_stderr(&stdio.stderr).map_err(|e| format!("dup2: {e}"))?;
    if stdio.tty {
        nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
        // SAFETY: ioctl on stdin with an integer argument.
        if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } != 0 {
            return Err(format!(
                "setting the controlling terminal: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok((path, argv, envp))
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

fn parse_caps(names: &[String]) -> Result<CapsHashSet, String> {
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
                .map_err(|_| format!("unknown capability {n:?}"))
        })
        .collect()
}

pub(crate) fn drop_privileges(spec: &ContainerSpec) -> Result<(), String> {
    let p = &spec.process;
    let keep = if spec.privileged {
        caps::all()
    } else {
        parse_caps(&p.capabilities)?
    };
    let cap_err = |e: caps::errors::CapsError| format!("capabilities: {e}");
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
    nix::unistd::setgroups(&groups).map_err(|e| format!("setgroups: {e}"))?;
    let gid = Gid::from_raw(p.gid);
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| format!("setgid {}: {e}", p.gid))?;
    let uid = Uid::from_raw(p.uid);
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| format!("setuid {}: {e}", p.uid))?;
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
            return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
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
        assert!(parse_caps(&["CAP_NOPE".into()]).is_err());
    }
}

//! The container runtime, in process: there is no containerd and no runc. The kubelet writes a
//! [`spec::ContainerSpec`] into a bundle directory and starts a shim (`k1s internal shim
//! BUNDLE`, see [`shim`]) that creates the container and outlives the kubelet; the kubelet
//! follows the shim with a pidfd and reads how the container ended from the bundle.
//!
//! [`Runtime`] is the trait the pod workers use; [`ShimRuntime`] is the real one and
//! [`fake::FakeRuntime`] a scripted one for tests.

pub mod attach;
pub mod exec;
pub mod fake;
pub mod init;
pub mod mounts;
pub mod nsfile;
pub mod pty;
pub mod session;
pub mod shim;
pub mod spec;

use std::path::{Path, PathBuf};

use k1s_api::streams::StreamIo;
use spec::{ContainerSpec, Exit, State};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The container could not be started (the reason is the user's to read).
    #[error("{0}")]
    Start(String),
    #[error("runtime: {0}")]
    Io(#[from] std::io::Error),
}

/// What the pod workers need from the runtime.
#[async_trait::async_trait]
pub trait Runtime: Send + Sync {
    /// Writes `spec` into `bundle` and starts the container; returns once it runs.
    async fn start(&self, bundle: &Path, spec: &ContainerSpec) -> Result<State, RuntimeError>;
    /// The state of a container started earlier (after a kubelet restart), if its shim is
    /// still the same process.
    fn state(&self, bundle: &Path) -> Option<State>;
    /// How the container ended, if it has.
    fn exit(&self, bundle: &Path) -> Option<Exit>;
    /// Waits until the container in `bundle` ends, and says how.
    async fn wait(&self, bundle: &Path) -> Exit;
    /// Sends `signal` to the container's init.
    fn kill(&self, bundle: &Path, signal: i32) -> Result<(), RuntimeError>;
    /// Runs `command` inside the running container in `bundle` (its namespaces, cgroup,
    /// user, capabilities and environment), wired to `io`, with a pseudo-terminal when `tty`;
    /// returns the exit code (128 + signal when killed by one) once output is drained.
    /// `Err(Start)` when it never ran.
    async fn exec(
        &self,
        bundle: &Path,
        command: &[String],
        tty: bool,
        io: StreamIo,
    ) -> Result<i32, RuntimeError>;
    /// Attaches `io` to the main process of the running container in `bundle`: output from
    /// now on, stdin when the container was started with one. Returns the exit code when
    /// the container ends, or 0 when the client goes away first.
    async fn attach(&self, bundle: &Path, io: StreamIo) -> Result<i32, RuntimeError>;
}

/// The real runtime: one shim process per container.
pub struct ShimRuntime {
    /// The program and leading arguments that run a shim: `[k1s, internal, shim]`.
    shim: Vec<PathBuf>,
}

impl ShimRuntime {
    /// `shim` is the command that runs [`shim::main`]; in k1s that is its own binary with
    /// `internal shim`. The exec helper ([`exec::main`]) is the same command with `exec` in
    /// place of its last word.
    pub fn new(shim: Vec<PathBuf>) -> Self {
        Self { shim }
    }

    /// The command that runs [`exec::main`]: `[k1s, internal, exec]`.
    fn exec_helper(&self) -> Vec<PathBuf> {
        let mut helper = self.shim.clone();
        if let Some(last) = helper.last_mut() {
            *last = PathBuf::from("exec");
        }
        helper
    }
}

/// A pidfd of `pid`, if it is the process that started at `start`.
fn pidfd(pid: i32, start: u64) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor was just created and is owned by nobody else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
    // Checked after opening, so a pid reused between the check and the open cannot pass.
    (spec::process_start_time(pid) == Some(start)).then_some(fd)
}

fn unknown_exit() -> Exit {
    Exit {
        exit_code: 255,
        signal: None,
        finished_at: k1s_api::time::format_nano(k1s_api::time::now()),
    }
}

#[async_trait::async_trait]
impl Runtime for ShimRuntime {
    async fn start(&self, bundle: &Path, spec: &ContainerSpec) -> Result<State, RuntimeError> {
        std::fs::create_dir_all(bundle)?;
        for f in [spec::STATE, spec::EXIT] {
            let _ = std::fs::remove_file(bundle.join(f));
        }
        spec::write_json(bundle, spec::CONFIG, spec)?;
        let Some((program, args)) = self.shim.split_first() else {
            return Err(RuntimeError::Start("no shim configured".into()));
        };
        let out = tokio::process::Command::new(program)
            .args(args)
            .arg(bundle)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .await?;
        let report = String::from_utf8_lossy(&out.stdout);
        shim::parse_report(&report).map_err(|e| RuntimeError::Start(e.to_string()))?;
        spec::read_json(bundle, spec::STATE)?
            .ok_or_else(|| RuntimeError::Start("the shim wrote no state".into()))
    }

    fn state(&self, bundle: &Path) -> Option<State> {
        let state: State = spec::read_json(bundle, spec::STATE).ok()??;
        (spec::process_start_time(state.shim_pid) == Some(state.shim_start)).then_some(state)
    }

    fn exit(&self, bundle: &Path) -> Option<Exit> {
        spec::read_json(bundle, spec::EXIT).ok()?
    }

    async fn wait(&self, bundle: &Path) -> Exit {
        let state: Option<State> = spec::read_json(bundle, spec::STATE).ok().flatten();
        if let Some(s) = state
            && let Some(fd) = pidfd(s.shim_pid, s.shim_start)
            // SAFETY: the pidfd is owned by the AsyncFd and closed only when it is dropped.
            && let Ok(afd) = unsafe { tokio::io::unix::AsyncFd::register(fd) }
        {
            // A pidfd turns readable when the process exits.
            let _ = afd.readable().await;
        }
        self.exit(bundle).unwrap_or_else(unknown_exit)
    }

    fn kill(&self, bundle: &Path, signal: i32) -> Result<(), RuntimeError> {
        let state: State = spec::read_json(bundle, spec::STATE)?
            .ok_or_else(|| RuntimeError::Start("the container was never started".into()))?;
        if spec::process_start_time(state.pid) != Some(state.pid_start) {
            return Ok(());
        }
        // SAFETY: kill with a pid and a signal number.
        if unsafe { libc::kill(state.pid, signal) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e.into());
            }
        }
        Ok(())
    }

    async fn exec(
        &self,
        bundle: &Path,
        command: &[String],
        tty: bool,
        io: StreamIo,
    ) -> Result<i32, RuntimeError> {
        if self.state(bundle).is_none() || self.exit(bundle).is_some() {
            return Err(RuntimeError::Start("container is not running".into()));
        }
        session::exec(&self.exec_helper(), bundle, command, tty, io).await
    }

    async fn attach(&self, bundle: &Path, io: StreamIo) -> Result<i32, RuntimeError> {
        if self.state(bundle).is_none() {
            return match self.exit(bundle) {
                Some(e) => Ok(e.exit_code),
                None => Err(RuntimeError::Start("container is not running".into())),
            };
        }
        attach::attach(bundle, io).await
    }
}

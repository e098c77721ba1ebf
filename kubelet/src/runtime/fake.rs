//! A scripted [`Runtime`] for pod-worker tests: containers "run" until the test ends them with
//! [`FakeRuntime::finish`] or the kubelet kills them; commands listed in
//! [`FakeRuntime::fail_start`] fail to start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::sync::watch;

use k1s_api::streams::StreamIo;

use super::spec::{ContainerSpec, Exit, State};
use super::{Runtime, RuntimeError};

struct Container {
    spec: ContainerSpec,
    state: State,
    exit: watch::Sender<Option<Exit>>,
}

#[derive(Default)]
pub struct FakeRuntime {
    containers: Mutex<HashMap<PathBuf, Container>>,
    failing: Mutex<Vec<String>>,
    /// Every start, in order: (bundle, spec).
    pub starts: Mutex<Vec<(PathBuf, ContainerSpec)>>,
    /// Every signal sent: (bundle, signal).
    pub signals: Mutex<Vec<(PathBuf, i32)>>,
    /// Every exec, in order: (bundle, command).
    pub execs: Mutex<Vec<(PathBuf, Vec<String>)>>,
    /// What an exec of `command[0]` answers: (exit code, output). Unlisted commands exit 0
    /// with no output.
    exec_results: Mutex<HashMap<String, (i32, Vec<u8>)>>,
}

impl FakeRuntime {
    /// Makes containers whose `args[0]` is `cmd` fail to start, and execs of `cmd` fail as an
    /// executable that is not found.
    pub fn fail_start(&self, cmd: &str) {
        self.failing.lock().unwrap().push(cmd.into());
    }

    /// Makes an exec of `cmd` (its `command[0]`) exit with `code` after writing `output`.
    pub fn script_exec(&self, cmd: &str, code: i32, output: &[u8]) {
        self.exec_results
            .lock()
            .unwrap()
            .insert(cmd.into(), (code, output.to_vec()));
    }

    /// Ends the container in `bundle` with `code`.
    pub fn finish(&self, bundle: &Path, code: i32) {
        if let Some(c) = self.containers.lock().unwrap().get(bundle) {
            c.exit.send_replace(Some(Exit {
                exit_code: code,
                signal: None,
                finished_at: "2026-01-01T00:00:00Z".into(),
            }));
        }
    }

    /// Bundles of the containers started with `args[0] == cmd`.
    pub fn bundles_of(&self, cmd: &str) -> Vec<PathBuf> {
        self.starts
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| s.process.args.first().map(String::as_str) == Some(cmd))
            .map(|(b, _)| b.clone())
            .collect()
    }

    pub fn spec(&self, bundle: &Path) -> Option<ContainerSpec> {
        self.containers
            .lock()
            .unwrap()
            .get(bundle)
            .map(|c| c.spec.clone())
    }
}

#[async_trait::async_trait]
impl Runtime for FakeRuntime {
    async fn start(&self, bundle: &Path, spec: &ContainerSpec) -> Result<State, RuntimeError> {
        self.starts
            .lock()
            .unwrap()
            .push((bundle.to_path_buf(), spec.clone()));
        let cmd = spec.process.args.first().cloned().unwrap_or_default();
        if self.failing.lock().unwrap().contains(&cmd) {
            return Err(RuntimeError::Start(format!(
                "failed to start container process: exec: {cmd:?}: executable file not found in $PATH"
            )));
        }
        let state = State {
            pid: 1000,
            pid_start: 1,
            shim_pid: 999,
            shim_start: 1,
            started_at: "2026-01-01T00:00:00Z".into(),
        };
        let (exit, _) = watch::channel(None);
        self.containers.lock().unwrap().insert(
            bundle.to_path_buf(),
            Container {
                spec: spec.clone(),
                state: state.clone(),
                exit,
            },
        );
        Ok(state)
    }

    fn state(&self, bundle: &Path) -> Option<State> {
        let c = self.containers.lock().unwrap();
        c.get(bundle)
            .filter(|c| c.exit.borrow().is_none())
            .map(|c| c.state.clone())
    }

    fn exit(&self, bundle: &Path) -> Option<Exit> {
        let c = self.containers.lock().unwrap();
        c.get(bundle).and_then(|c| c.exit.borrow().clone())
    }

    async fn wait(&self, bundle: &Path) -> Exit {
        let rx = self
            .containers
            .lock()
            .unwrap()
            .get(bundle)
            .map(|c| c.exit.subscribe());
        let Some(mut rx) = rx else {
            return Exit {
                exit_code: 255,
                signal: None,
                finished_at: String::new(),
            };
        };
        loop {
            if let Some(e) = rx.borrow_and_update().clone() {
                return e;
            }
            if rx.changed().await.is_err() {
                return Exit {
                    exit_code: 255,
                    signal: None,
                    finished_at: String::new(),
                };
            }
        }
    }

    fn kill(&self, bundle: &Path, signal: i32) -> Result<(), RuntimeError> {
        self.signals
            .lock()
            .unwrap()
            .push((bundle.to_path_buf(), signal));
        // Like a shell as pid 1, the fake ignores SIGTERM and dies on SIGKILL.
        if signal == libc::SIGKILL
            && let Some(c) = self.containers.lock().unwrap().get(bundle)
            && c.exit.borrow().is_none()
        {
            c.exit.send_replace(Some(Exit {
                exit_code: 137,
                signal: Some(signal),
                finished_at: "2026-01-01T00:00:01Z".into(),
            }));
        }
        Ok(())
    }

    async fn exec(
        &self,
        bundle: &Path,
        command: &[String],
        _tty: bool,
        io: StreamIo,
    ) -> Result<i32, RuntimeError> {
        self.execs
            .lock()
            .unwrap()
            .push((bundle.to_path_buf(), command.to_vec()));
        if self.state(bundle).is_none() {
            return Err(RuntimeError::Start("container is not running".into()));
        }
        let cmd = command.first().cloned().unwrap_or_default();
        if self.failing.lock().unwrap().contains(&cmd) {
            return Err(RuntimeError::Start(format!(
                "exec: {cmd:?}: executable file not found in $PATH"
            )));
        }
        let (code, output) = self
            .exec_results
            .lock()
            .unwrap()
            .get(&cmd)
            .cloned()
            .unwrap_or_default();
        if let Some(out) = io.stdout
            && !output.is_empty()
        {
            let _ = out.send(output).await;
        }
        Ok(code)
    }

    async fn attach(&self, bundle: &Path, _io: StreamIo) -> Result<i32, RuntimeError> {
        Ok(self.wait(bundle).await.exit_code)
    }
}

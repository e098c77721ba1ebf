//! Exec handlers: a command run inside the container through [`crate::runtime::Runtime::exec`],
//! its stdout and stderr captured together (capped at [`super::MAX_OUTPUT`]) under a timeout.

use std::time::Duration;

use k1s_api::streams::StreamIo;
use tokio::sync::mpsc;

use super::{MAX_OUTPUT, Outcome, Target};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExecError {
    /// The command never ran (no such executable, the container is not running).
    #[error("{0}")]
    NotRun(String),
    #[error("command {0:?} timed out")]
    TimedOut(String),
}

/// Runs `command` in the container; returns its exit code and combined output.
pub async fn capture(
    target: &Target,
    command: &[String],
    timeout: Duration,
) -> Result<(i32, String), ExecError> {
    if command.is_empty() {
        return Err(ExecError::NotRun("no command specified".into()));
    }
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
    let io = StreamIo {
        stdin: None,
        stdout: Some(tx.clone()),
        stderr: Some(tx),
        resize: None,
    };
    let run = target.runtime.exec(&target.bundle, command, false, io);
    let collect = async {
        let mut out = Vec::new();
        // Read to the end even past the cap, so the command never blocks on a full pipe.
        while let Some(chunk) = rx.recv().await {
            let room = MAX_OUTPUT.saturating_sub(out.len());
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        out
    };
    let both = async { tokio::join!(run, collect) };
    match tokio::time::timeout(timeout, both).await {
        Err(_) => Err(ExecError::TimedOut(command.join(" "))),
        Ok((Err(e), _)) => Err(ExecError::NotRun(e.to_string())),
        Ok((Ok(code), out)) => Ok((code, String::from_utf8_lossy(&out).into_owned())),
    }
}

/// An exec probe: exit code 0 is success; the output is what events show.
pub async fn probe(target: &Target, command: &[String], timeout: Duration) -> Outcome {
    match capture(target, command, timeout).await {
        Ok((0, out)) => Outcome::success(out),
        Ok((_, out)) => Outcome::failure(out),
        // A command that could not run counts as a failure, with the reason as its output.
        Err(e) => Outcome::failure(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::probes::Verdict;
    use crate::runtime::Runtime;
    use crate::runtime::fake::FakeRuntime;

    async fn running() -> (Arc<FakeRuntime>, Target) {
        let rt = Arc::new(FakeRuntime::default());
        let bundle = std::path::PathBuf::from("/b/0");
        rt.start(&bundle, &Default::default()).await.unwrap();
        let target = Target {
            runtime: rt.clone(),
            bundle,
        };
        (rt, target)
    }

    #[tokio::test]
    async fn exit_codes_and_output() {
        let (rt, t) = running().await;
        rt.script_exec("check", 1, b"not yet\n");
        let o = probe(&t, &["check".into()], Duration::from_secs(1)).await;
        assert_eq!(o, Outcome::failure("not yet\n"));
        rt.script_exec("check", 0, b"fine");
        let o = probe(&t, &["check".into(), "-v".into()], Duration::from_secs(1)).await;
        assert_eq!(o, Outcome::success("fine"));
        assert_eq!(rt.execs.lock().unwrap()[1].1, vec!["check", "-v"]);
        let long = vec![b'x'; MAX_OUTPUT * 2];
        rt.script_exec("loud", 0, &long);
        let o = probe(&t, &["loud".into()], Duration::from_secs(1)).await;
        assert_eq!(o.output.len(), MAX_OUTPUT);
    }

    #[tokio::test]
    async fn a_command_that_cannot_run_fails() {
        let (rt, t) = running().await;
        rt.fail_start("missing");
        let o = probe(&t, &["missing".into()], Duration::from_secs(1)).await;
        assert_eq!(o.verdict, Verdict::Failure);
        assert!(o.output.contains("executable file not found"), "{o:?}");
        let o = probe(&t, &[], Duration::from_secs(1)).await;
        assert_eq!(o, Outcome::failure("no command specified"));
    }
}

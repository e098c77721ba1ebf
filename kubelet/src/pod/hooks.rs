//! Lifecycle hooks: postStart (after a container starts; the container is not running-ready
//! until it returns, and a failure gets the container killed) and preStop (before SIGTERM on
//! every kill, inside the grace period). Handlers are exec, httpGet and sleep (see
//! [`crate::probes`]); the pod worker decides when they run and what a failure means. The
//! error messages are upstream's, for the `FailedPostStartHook` / `FailedPreStopHook` events.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};

use crate::probes::{self, Action, Target};

/// An exec hook runs until it ends; the caller bounds it (the grace period for preStop).
const EXEC_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// Why a hook failed: its Display is upstream's message for the failure event. `pod` is the
/// name upstream gives it (`NAME_NS(UID)`).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The handler names a port the container does not have, or none at all.
    #[error("Lifecycle hook for Container {container:?} in Pod {pod:?} failed - error: {source}")]
    Handler {
        container: String,
        pod: String,
        source: probes::ActionError,
    },
    /// An exec hook that did not run (`error`) or exited non-zero, with its `output`.
    #[error(
        "Exec lifecycle hook ({command}) for Container {container:?} in Pod {pod:?} failed - error: {error}, message: {output:?}"
    )]
    Exec {
        /// `[cmd arg ...]`.
        command: String,
        container: String,
        pod: String,
        error: String,
        output: String,
    },
    #[error(
        "HTTP lifecycle hook ({path}) for Container {container:?} in Pod {pod:?} failed - error: {source}"
    )]
    Http {
        path: String,
        container: String,
        pod: String,
        source: probes::http::FetchError,
    },
    /// A handler the API accepted but k1s cannot run (the action's own message).
    #[error("{0}")]
    Invalid(String),
}

/// Runs `handler` for container `c` of the pod upstream names `pod` (`NAME_NS(UID)`).
pub async fn run(
    handler: &LifecycleHandler,
    c: &Container,
    pod: &str,
    pod_ip: &str,
    target: &Target,
) -> Result<(), HookError> {
    let action = match Action::from_hook(handler, c, pod_ip) {
        Ok(a) => a,
        Err(source) => {
            return Err(HookError::Handler {
                container: c.name.clone(),
                pod: pod.to_string(),
                source,
            });
        }
    };
    match &action {
        Action::Exec(cmd) => {
            let cmd_list = format!("[{}]", cmd.join(" "));
            let (err, output) = match probes::exec::capture(target, cmd, EXEC_LIMIT).await {
                Ok((0, _)) => return Ok(()),
                Ok((code, out)) => (
                    format!("command '{}' exited with {code}: {out}", cmd.join(" ")),
                    out,
                ),
                Err(e) => (e.to_string(), String::new()),
            };
            Err(HookError::Exec {
                command: cmd_list,
                container: c.name.clone(),
                pod: pod.to_string(),
                error: err,
                output,
            })
        }
        Action::Http(g) => match probes::http::fetch(g, "kube-lifecycle").await {
            // Any answer will do; only a request that fails is a failed hook.
            Ok(_) => Ok(()),
            Err(source) => Err(HookError::Http {
                path: g.path.clone(),
                container: c.name.clone(),
                pod: pod.to_string(),
                source,
            }),
        },
        Action::Sleep(d) => {
            tokio::time::sleep(*d).await;
            Ok(())
        }
        // tcpSocket hooks are accepted for compatibility and never run, as upstream.
        Action::Tcp { .. } | Action::Grpc { .. } => Ok(()),
        Action::Invalid(e) => Err(HookError::Invalid(e.clone())),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, SleepAction};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::runtime::Runtime;
    use crate::runtime::fake::FakeRuntime;

    async fn target() -> (Arc<FakeRuntime>, Target) {
        let rt = Arc::new(FakeRuntime::default());
        let bundle = std::path::PathBuf::from("/b/0");
        rt.start(&bundle, &Default::default()).await.unwrap();
        (
            rt.clone(),
            Target {
                runtime: rt,
                bundle,
            },
        )
    }

    fn container() -> Container {
        Container {
            name: "c".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn exec_hooks_report_exit_and_output() {
        let (rt, t) = target().await;
        let h = LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["sh".into(), "-c".into(), "exit 3".into()]),
            }),
            ..Default::default()
        };
        run(&h, &container(), "p_ns(u)", "10.0.0.2", &t)
            .await
            .unwrap();
        rt.script_exec("sh", 3, b"boom");
        let e = run(&h, &container(), "p_ns(u)", "10.0.0.2", &t)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "Exec lifecycle hook ([sh -c exit 3]) for Container \"c\" in Pod \"p_ns(u)\" failed - error: command 'sh -c exit 3' exited with 3: boom, message: \"boom\""
        );
    }

    #[tokio::test]
    async fn http_hooks_fail_only_without_an_answer() {
        let (_, t) = target().await;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let h = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                host: Some("127.0.0.1".into()),
                path: Some("/stop".into()),
                port: IntOrString::Int(port.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = run(&h, &container(), "p_ns(u)", "10.0.0.2", &t)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("HTTP lifecycle hook (/stop) for Container \"c\" in Pod \"p_ns(u)\" failed - error: Get \"http://127.0.0.1:"),
            "{e}"
        );
        // Any status is fine once the server answers.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n")
                .await;
        });
        let mut h = h;
        h.http_get.as_mut().unwrap().port = IntOrString::Int(port.into());
        run(&h, &container(), "p_ns(u)", "10.0.0.2", &t)
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_hooks_sleep() {
        let (_, t) = target().await;
        let h = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 5 }),
            ..Default::default()
        };
        let before = tokio::time::Instant::now();
        run(&h, &container(), "p", "", &t).await.unwrap();
        assert_eq!(before.elapsed(), Duration::from_secs(5));
    }
}

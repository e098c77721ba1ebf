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

/// Runs `handler` for container `c` of the pod upstream names `pod` (`NAME_NS(UID)`). `Err`
/// is the message for the failure event.
pub async fn run(
    handler: &LifecycleHandler,
    c: &Container,
    pod: &str,
    pod_ip: &str,
    target: &Target,
) -> Result<(), String> {
    let action = match Action::from_hook(handler, c, pod_ip) {
        Ok(a) => a,
        Err(e) => {
            return Err(format!(
                "Lifecycle hook for Container {:?} in Pod {pod:?} failed - error: {e}",
                c.name
            ));
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
            Err(format!(
                "Exec lifecycle hook ({cmd_list}) for Container {:?} in Pod {pod:?} failed - error: {err}, message: {output:?}",
                c.name
            ))
        }
        Action::Http(g) => match probes::http::fetch(g, "kube-lifecycle").await {
            // Any answer will do; only a request that fails is a failed hook.
            Ok(_) => Ok(()),
            Err(e) => Err(format!(
                "HTTP lifecycle hook ({}) for Container {:?} in Pod {pod:?} failed - error: {e}",
                g.path, c.name
            )),
        },
        Action::Sleep(d) => {
            tokio::time::sleep(*d).await;
            Ok(())
        }
        // tcpSocket hooks are accepted for compatibility and never run, as upstream.
        Action::Tcp { .. } | Action::Grpc { .. } => Ok(()),
        Action::Invalid(e) => Err(e.clone()),
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
        assert_eq!(
            run(&h, &container(), "p_ns(u)", "10.0.0.2", &t).await,
            Ok(())
        );
        rt.script_exec("sh", 3, b"boom");
        let e = run(&h, &container(), "p_ns(u)", "10.0.0.2", &t)
            .await
            .unwrap_err();
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
            .unwrap_err();
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
        assert_eq!(
            run(&h, &container(), "p_ns(u)", "10.0.0.2", &t).await,
            Ok(())
        );
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

//! Container probes (liveness, readiness, startup) and the handlers they share with the
//! lifecycle hooks ([`crate::pod::hooks`]): exec ([`exec`]), httpGet ([`http`]), tcpSocket
//! ([`tcp`]), grpc ([`grpc`]) and sleep.
//!
//! One [`worker`] task runs per probe of a running container instance, as upstream's prober
//! workers do: it waits `initialDelaySeconds`, then probes every `periodSeconds` with
//! `timeoutSeconds`, counts consecutive results against `successThreshold` and
//! `failureThreshold`, records `Unhealthy` events, and sends an [`Update`] to the pod worker
//! only when the probe's result changes. Liveness and readiness wait until the container has
//! started (its startup probe succeeded). A startup probe ends after its first success; a
//! liveness or startup probe ends after the failure that gets its container killed (the next
//! instance gets new workers). This module never touches the container itself: the pod
//! worker decides what a result means (ready, started, kill).

pub mod exec;
pub mod grpc;
pub mod http;
pub mod tcp;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;

/// What a probe reads of a response body or of a command's output (upstream's 10 KiB).
pub const MAX_OUTPUT: usize = 10 * 1024;

/// The Kubernetes minor version probes announce in their User-Agent.
pub const USER_AGENT_VERSION: &str = "1.33";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Liveness,
    Readiness,
    Startup,
}

impl Kind {
    /// As upstream prints it in events: `Readiness probe failed: ...`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
            Kind::Startup => "Startup",
        }
    }

    /// The result before the first probe: not ready, alive, not started.
    fn initial(self) -> Option<bool> {
        match self {
            Kind::Liveness => Some(true),
            Kind::Readiness => Some(false),
            Kind::Startup => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Success,
    /// Success with something to say (a redirect to another host was not followed).
    Warning,
    Failure,
}

/// One run of a handler: its verdict and the output upstream shows in events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub output: String,
}

impl Outcome {
    pub fn success(output: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Success,
            output: output.into(),
        }
    }
    pub fn warning(output: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Warning,
            output: output.into(),
        }
    }
    pub fn failure(output: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Failure,
            output: output.into(),
        }
    }
    pub fn ok(&self) -> bool {
        self.verdict != Verdict::Failure
    }
}

/// What a probe or a hook does, with the host and port resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Exec(Vec<String>),
    Http(http::HttpGet),
    Tcp {
        host: String,
        port: u16,
    },
    Grpc {
        host: String,
        port: u16,
        service: Option<String>,
    },
    Sleep(Duration),
    /// A handler that could not be resolved (an unknown port name): always fails with this.
    Invalid(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ActionError {
    #[error("couldn't find port: {port} in container {container}")]
    NoPort { port: String, container: String },
    #[error("invalid port number: {0}")]
    BadPort(i64),
    #[error("no handler specified")]
    Missing,
}

/// A port by number, or by the name of one of the container's ports.
pub fn resolve_port(port: &IntOrString, c: &Container) -> Result<u16, ActionError> {
    let n = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => match name.parse::<i64>() {
            Ok(n) => n,
            Err(_) => c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| ActionError::NoPort {
                    port: name.clone(),
                    container: c.name.clone(),
                })?,
        },
    };
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(ActionError::BadPort(n))
}

fn host_or(host: &Option<String>, pod_ip: &str) -> String {
    host.clone()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| pod_ip.to_string())
}

fn http_get(
    g: &k8s_openapi::api::core::v1::HTTPGetAction,
    c: &Container,
    pod_ip: &str,
) -> Result<http::HttpGet, ActionError> {
    Ok(http::HttpGet {
        https: g.scheme.as_deref() == Some("HTTPS"),
        host: host_or(&g.host, pod_ip),
        port: resolve_port(&g.port, c)?,
        path: g.path.clone().unwrap_or_default(),
        headers: g
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
    })
}

impl Action {
    /// The handler of a probe of container `c` in a pod at `pod_ip`.
    pub fn from_probe(p: &Probe, c: &Container, pod_ip: &str) -> Result<Self, ActionError> {
        if let Some(e) = &p.exec {
            return Ok(Action::Exec(e.command.clone().unwrap_or_default()));
        }
        if let Some(g) = &p.http_get {
            return Ok(Action::Http(http_get(g, c, pod_ip)?));
        }
        if let Some(t) = &p.tcp_socket {
            return Ok(Action::Tcp {
                host: host_or(&t.host, pod_ip),
                port: resolve_port(&t.port, c)?,
            });
        }
        if let Some(g) = &p.grpc {
            return Ok(Action::Grpc {
                host: pod_ip.to_string(),
                port: resolve_port(&IntOrString::Int(g.port), c)?,
                service: g.service.clone(),
            });
        }
        Err(ActionError::Missing)
    }

    /// The handler of a postStart or preStop hook.
    pub fn from_hook(
        h: &LifecycleHandler,
        c: &Container,
        pod_ip: &str,
    ) -> Result<Self, ActionError> {
        if let Some(e) = &h.exec {
            return Ok(Action::Exec(e.command.clone().unwrap_or_default()));
        }
        if let Some(g) = &h.http_get {
            return Ok(Action::Http(http_get(g, c, pod_ip)?));
        }
        if let Some(s) = &h.sleep {
            return Ok(Action::Sleep(Duration::from_secs(s.seconds.max(0) as u64)));
        }
        if let Some(t) = &h.tcp_socket {
            // Deprecated and never run upstream; kept as a no-op connect.
            return Ok(Action::Tcp {
                host: host_or(&t.host, pod_ip),
                port: resolve_port(&t.port, c)?,
            });
        }
        Err(ActionError::Missing)
    }
}

/// Where exec handlers run: the container instance in `bundle`.
#[derive(Clone)]
pub struct Target {
    pub runtime: Arc<dyn Runtime>,
    pub bundle: PathBuf,
}

/// Runs `action` once as a probe, bounded by `timeout`.
pub async fn run(action: &Action, target: &Target, timeout: Duration) -> Outcome {
    match action {
        Action::Exec(cmd) => exec::probe(target, cmd, timeout).await,
        Action::Http(g) => http::probe(g, timeout).await,
        Action::Tcp { host, port } => tcp::probe(host, *port, timeout).await,
        Action::Grpc {
            host,
            port,
            service,
        } => grpc::probe(host, *port, service.as_deref().unwrap_or(""), timeout).await,
        Action::Sleep(d) => {
            tokio::time::sleep(*d).await;
            Outcome::success("")
        }
        Action::Invalid(e) => Outcome::failure(e.clone()),
    }
}

/// A probe's timing and thresholds, with upstream's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub kind: Kind,
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

fn secs(v: Option<i32>, default: i32, min: i32) -> Duration {
    Duration::from_secs(v.unwrap_or(default).max(min) as u64)
}

impl Settings {
    pub fn new(kind: Kind, p: &Probe, c: &Container, pod_ip: &str) -> Result<Self, ActionError> {
        Ok(Self {
            kind,
            action: Action::from_probe(p, c, pod_ip)?,
            initial_delay: secs(p.initial_delay_seconds, 0, 0),
            period: secs(p.period_seconds, 10, 1),
            timeout: secs(p.timeout_seconds, 1, 1),
            // Liveness and startup probes must have a success threshold of 1.
            success_threshold: match kind {
                Kind::Readiness => p.success_threshold.unwrap_or(1).max(1) as u32,
                _ => 1,
            },
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1) as u32,
        })
    }
}

/// Consecutive results against the thresholds, as upstream's worker counts them.
#[derive(Debug)]
pub struct Threshold {
    success: u32,
    failure: u32,
    last: Option<bool>,
    run: u32,
    current: Option<bool>,
}

impl Threshold {
    pub fn new(kind: Kind, success: u32, failure: u32) -> Self {
        Self {
            success,
            failure,
            last: None,
            run: 0,
            current: kind.initial(),
        }
    }

    /// Records one probe run; returns the probe's new result when it changed.
    pub fn observe(&mut self, ok: bool) -> Option<bool> {
        if self.last == Some(ok) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(ok);
            self.run = 1;
        }
        let needed = if ok { self.success } else { self.failure };
        if self.run < needed || self.current == Some(ok) {
            return None;
        }
        self.current = Some(ok);
        Some(ok)
    }
}

/// A changed probe result, for the pod worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The container's key in the pod worker (`main/NAME`).
    pub key: String,
    /// The container instance it is about.
    pub attempt: i32,
    pub kind: Kind,
    pub success: bool,
}

/// Where a worker reports: the pod worker's channel and the event recorder.
#[derive(Clone)]
pub struct Reporter {
    pub key: String,
    pub attempt: i32,
    pub updates: mpsc::UnboundedSender<Update>,
    pub client: Arc<dyn k1s_api::client::Client>,
    pub source: k1s_api::events::Source,
    /// The pod, with the container's field path.
    pub about: k1s_api::events::Involved,
}

impl Reporter {
    async fn event(&self, reason: &str, message: &str) {
        k1s_api::events::record(
            self.client.as_ref(),
            &self.source,
            &self.about,
            "Warning",
            reason,
            reason,
            message,
        )
        .await;
    }
}

/// Sleeps for `d`; false when cancelled first.
async fn pause(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

/// Probes one container instance until `cancel` fires or the probe is done (see the module
/// doc). `started` says whether the container has started; a startup probe sets it through
/// `set_started` on success.
pub async fn worker(
    settings: Settings,
    target: Target,
    reporter: Reporter,
    mut started: watch::Receiver<bool>,
    set_started: Option<watch::Sender<bool>>,
    cancel: CancellationToken,
) {
    let kind = settings.kind;
    let mut threshold =
        Threshold::new(kind, settings.success_threshold, settings.failure_threshold);
    if !pause(settings.initial_delay, &cancel).await {
        return;
    }
    loop {
        if kind != Kind::Startup && !*started.borrow_and_update() {
            tokio::select! {
                _ = cancel.cancelled() => return,
                changed = started.changed() => if changed.is_err() { return },
            }
            continue;
        }
        let outcome = tokio::select! {
            _ = cancel.cancelled() => return,
            o = run(&settings.action, &target, settings.timeout) => o,
        };
        match outcome.verdict {
            Verdict::Failure => {
                let msg = format!("{} probe failed: {}", kind.label(), outcome.output);
                reporter.event("Unhealthy", &msg).await;
            }
            Verdict::Warning => {
                let msg = format!("{} probe warning: {}", kind.label(), outcome.output);
                reporter.event("ProbeWarning", &msg).await;
            }
            Verdict::Success => {}
        }
        if let Some(success) = threshold.observe(outcome.ok()) {
            tracing::debug!(container = %reporter.key, probe = kind.label(), success, "probe result changed");
            let _ = reporter.updates.send(Update {
                key: reporter.key.clone(),
                attempt: reporter.attempt,
                kind,
                success,
            });
            match (kind, success) {
                (Kind::Startup, true) => {
                    if let Some(s) = &set_started {
                        s.send_replace(true);
                    }
                    return;
                }
                // The container is killed; its next instance gets new workers.
                (Kind::Liveness | Kind::Startup, false) => return,
                _ => {}
            }
        }
        if !pause(settings.period, &cancel).await {
            return;
        }
    }
}

/// The probe workers of one container instance; dropping this does not stop them, `cancel`
/// does (the pod worker cancels when the instance ends or the pod goes).
#[derive(Debug)]
pub struct Probes {
    pub has_startup: bool,
    pub has_readiness: bool,
    pub cancel: CancellationToken,
}

/// Starts the probe workers of container `c` (instance `reporter.attempt`) on `tasks`. A
/// probe whose handler cannot be resolved (an unknown port name) fails with the reason as its
/// output.
pub fn spawn(
    c: &Container,
    pod_ip: &str,
    target: Target,
    reporter: Reporter,
    tasks: &tokio_util::task::TaskTracker,
    cancel: CancellationToken,
) -> Probes {
    let probes = [
        (Kind::Startup, c.startup_probe.as_ref()),
        (Kind::Liveness, c.liveness_probe.as_ref()),
        (Kind::Readiness, c.readiness_probe.as_ref()),
    ];
    let has_startup = c.startup_probe.is_some();
    let (started_tx, started_rx) = watch::channel(!has_startup);
    for (kind, probe) in probes {
        let Some(p) = probe else { continue };
        let settings = Settings::new(kind, p, c, pod_ip).unwrap_or_else(|e| Settings {
            kind,
            action: Action::Invalid(e.to_string()),
            initial_delay: secs(p.initial_delay_seconds, 0, 0),
            period: secs(p.period_seconds, 10, 1),
            timeout: Duration::from_secs(1),
            success_threshold: 1,
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1) as u32,
        });
        let set_started = (kind == Kind::Startup).then(|| started_tx.clone());
        tasks.spawn(worker(
            settings,
            target.clone(),
            reporter.clone(),
            started_rx.clone(),
            set_started,
            cancel.clone(),
        ));
    }
    Probes {
        has_startup,
        has_readiness: c.readiness_probe.is_some(),
        cancel,
    }
}

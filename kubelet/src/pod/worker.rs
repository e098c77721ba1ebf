//! One worker per pod: it owns the pod's sandbox and containers on this node from the first
//! sync to the final delete.
//!
//! The worker gathers what its containers do, asks [`crate::pod::plan`] what to do (start,
//! wait in back-off, kill, the phase, when to wake up) and performs it; the restart back-off
//! lives in one [`BackOff`] that only its methods write.
//!
//! The loop: sync (sandbox, init containers in order, then the containers, each restarted as
//! `restartPolicy` says with a doubling back-off; sidecars — init containers with
//! `restartPolicy: Always` — are started in their turn, the next init container waits until
//! they count as started, they restart whenever they stop, are stopped last-first once the app
//! containers are done for good, and after the app containers when the pod is deleted),
//! report status when it changed, then sleep until the pod changes, a container exits or a
//! back-off ends. A pod with a
//! deletionTimestamp is terminated (SIGTERM, the grace period, SIGKILL), its sandbox torn down
//! and the pod deleted for good. Cancelling the worker (kubelet shutdown) leaves the
//! containers running: a restarted kubelet re-adopts them from their bundles.
//!
//! Probes and hooks: each running instance of a container gets its probe workers
//! ([`crate::probes`], cancelled when the instance ends); their result changes drive
//! `started` and `ready`, and a failed liveness or startup probe kills the instance, which
//! then restarts per `restartPolicy`. postStart runs right after the start, before the
//! container counts as started (a failure kills it); preStop runs before SIGTERM on every
//! kill, inside the grace period ([`PodWorker::kill_container`]).
//!
//! The kubelet fails a pod itself ([`PodWorker::fail`]: containers killed, sandbox and
//! volumes torn down, `Failed` with a reason and message) when the eviction manager evicts it
//! ([`crate::eviction`]: `Evicted`, with a `DisruptionTarget` condition) or when it has been
//! active longer than `activeDeadlineSeconds` (`DeadlineExceeded`).

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{DeleteParams, Patch, ResourceRef, WriteParams};
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Deps;
use crate::images::{PullPolicy, PullProgress};
use crate::pod::backoff::BackOff;
use crate::pod::blocking;
use crate::pod::plan::{self, Observed, Phase, PodState, RestartPolicy, State};
use crate::pod::sandbox::Sandbox;
use crate::pod::status::{ContainerState, ContainerView, PodView, Terminated};
use crate::pod_containers::{all_containers, container_key};
use crate::probes::{self, Kind};
use crate::runtime::spec::{self, ContainerSpec, Mount};

/// A container's exit, sent by its waiter task.
struct Exited {
    name: String,
    attempt: i32,
    exit: spec::Exit,
}

/// The worker's record of one container.
#[derive(Debug, Default)]
struct Record {
    view: ContainerView,
    /// The attempt (restart number) of the instance that runs or ran last.
    attempt: Option<i32>,
    running: bool,
    /// The running instance's probe workers.
    probes: Option<probes::Probes>,
    /// The readiness probe's current result for the running instance.
    readiness_ok: bool,
}

impl Record {
    fn stop_probes(&mut self) {
        if let Some(p) = self.probes.take() {
            p.cancel.cancel();
        }
    }
}

/// Why a container's runtime spec cannot be put together: it then waits with
/// `CreateContainerConfigError` and this message.
#[derive(Debug, thiserror::Error)]
pub enum ContainerConfigError {
    #[error("the pod sandbox is not ready")]
    NoSandbox,
    /// Its environment, command or user.
    #[error(transparent)]
    Process(#[from] crate::container::ConfigError),
    #[error(transparent)]
    Sandbox(#[from] crate::pod::sandbox::SandboxError),
    #[error(transparent)]
    Volume(#[from] crate::volumes::VolumeError),
    #[error(transparent)]
    DeviceNode(#[from] crate::runtime::spec::DeviceNodeError),
    #[error(transparent)]
    DeviceRule(#[from] crate::pod::sandbox::DeviceRuleError),
    #[error(transparent)]
    Cgroup(#[from] crate::cgroups::CgroupError),
    #[error("creating {}: {source}", path.display())]
    LogDir {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The file in a container's bundle that is bind-mounted at its `terminationMessagePath`.
const TERMINATION_LOG: &str = "termination-log";

/// Upstream's cap on a termination message read from the file (its last 4 KiB).
const MAX_TERMINATION_MESSAGE: usize = 4096;

/// Upstream's minimum time between SIGTERM and SIGKILL, whatever preStop took.
const MIN_GRACE: Duration = Duration::from_secs(2);

pub struct PodWorker {
    deps: Arc<Deps>,
    uid: String,
    pod_rx: watch::Receiver<Option<Arc<Pod>>>,
    evict_rx: mpsc::UnboundedReceiver<crate::eviction::Eviction>,
    records: HashMap<String, Record>,
    /// The containers' restart back-off: written only through its methods.
    backoff: BackOff,
    exits_tx: mpsc::UnboundedSender<Exited>,
    exits_rx: mpsc::UnboundedReceiver<Exited>,
    probe_tx: mpsc::UnboundedSender<probes::Update>,
    probe_rx: mpsc::UnboundedReceiver<probes::Update>,
    sandbox: Option<Sandbox>,
    volumes: crate::volumes::PodVolumes,
    /// When to sync again although nothing changed (volume retries, token refreshes).
    resync_at: Option<Instant>,
    start_time: String,
    /// Set once the pod ended (Succeeded or Failed): it never runs again.
    terminal: Option<Phase>,
    /// Why the kubelet failed the pod (reason, message): refused at admission, evicted, past
    /// its deadline.
    rejected: Option<(String, String)>,
    /// The kubelet evicted the pod (a `DisruptionTarget` condition).
    disrupted: bool,
    /// Whether admission (device allocation) has passed.
    admitted: bool,
    /// The status last written, and where: a static pod's mirror pod UID (a new mirror pod
    /// gets the status again).
    last_reported: Option<(Option<String>, Value)>,
    /// The setup slot a new pod holds ([`crate::start_slots`]).
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The worker's own token: the kubelet's shutdown cancels it, and the worker cancels it
    /// when it returns, which ends its waiters and probe workers.
    cancel: CancellationToken,
    /// The container waiters and probe workers; the worker returns once they have ended.
    tasks: TaskTracker,
}

fn now() -> String {
    k1s_api::events::now_rfc3339()
}

impl PodWorker {
    pub fn new(
        deps: Arc<Deps>,
        uid: String,
        pod_rx: watch::Receiver<Option<Arc<Pod>>>,
        evict_rx: mpsc::UnboundedReceiver<crate::eviction::Eviction>,
        cancel: CancellationToken,
    ) -> Self {
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let (probe_tx, probe_rx) = mpsc::unbounded_channel();
        Self {
            backoff: BackOff::from_config(&deps.config),
            deps,
            uid,
            pod_rx,
            evict_rx,
            records: HashMap::new(),
            exits_tx,
            exits_rx,
            probe_tx,
            probe_rx,
            sandbox: None,
            volumes: Default::default(),
            resync_at: None,
            start_time: now(),
            terminal: None,
            rejected: None,
            disrupted: false,
            admitted: false,
            last_reported: None,
            slot: None,
            cancel,
            tasks: TaskTracker::new(),
        }
    }

    /// `key` is `init/NAME` or `main/NAME` ([`container_key`]).
    fn bundle(&self, key: &str, attempt: i32) -> PathBuf {
        let (kind, name) = key.split_once('/').unwrap_or(("main", key));
        self.deps
            .config
            .bundle_dir(&self.uid, kind == "init", name, attempt)
    }

    /// Runs until the pod is gone from this node (or the kubelet stops), then stops its tasks
    /// and waits for them.
    pub async fn run(mut self) {
        self.work().await;
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    async fn work(&mut self) {
        let mut last_pod: Option<Arc<Pod>> = None;
        loop {
            let current = self.pod_rx.borrow_and_update().clone();
            match current {
                None => {
                    // Deleted from the API without us: stop everything now.
                    if let Some(pod) = last_pod.take() {
                        self.terminate(&pod, Duration::ZERO).await;
                    }
                    self.teardown().await;
                    return;
                }
                Some(pod) if pod.metadata.deletion_timestamp.is_some() => {
                    self.terminate(&pod, deletion_grace(&pod)).await;
                    self.teardown().await;
                    self.report(&pod).await;
                    self.delete_for_good(&pod).await;
                    return;
                }
                Some(pod) => {
                    if last_pod.is_none() {
                        // A pod that already ended is never run again (after a restart).
                        self.terminal = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
                            Some("Succeeded") => Some(Phase::Succeeded),
                            Some("Failed") => Some(Phase::Failed),
                            _ => None,
                        };
                        self.adopt(&pod).await;
                    }
                    if self.plan(&pod, false).deadline_exceeded {
                        let message =
                            "Pod was active on the node longer than the specified deadline";
                        self.fail(
                            &pod,
                            "DeadlineExceeded",
                            message.into(),
                            termination_grace(&pod),
                            false,
                        )
                        .await;
                    }
                    self.sync(&pod).await;
                    self.slot = None;
                    self.report(&pod).await;
                    last_pod = Some(pod);
                }
            }
            // A container waiting to restart, the deadline or a volume resync wakes the worker.
            let now = Instant::now();
            let planned = last_pod
                .as_deref()
                .and_then(|p| self.plan(p, false).wake_at);
            let wake = planned
                .into_iter()
                .chain(self.resync_at)
                .filter(|t| *t > now)
                .min();
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                changed = self.pod_rx.changed() => {
                    if changed.is_err() {
                        // The feed is gone: the kubelet is stopping (deletion comes as an
                        // explicit `None`). Containers keep running, as on cancel; taking
                        // this for a deletion killed the pods of a kubelet that was merely
                        // restarted whenever this branch won the race with `cancelled`.
                        return;
                    }
                }
                Some(e) = self.exits_rx.recv() => self.on_exit(e, last_pod.as_deref()).await,
                Some(e) = self.evict_rx.recv() => {
                    if let Some(pod) = last_pod.clone() {
                        self.fail(&pod, "Evicted", e.message, e.grace, true).await;
                        self.report(&pod).await;
                    }
                }
                Some(u) = self.probe_rx.recv() => {
                    if let Some(pod) = last_pod.clone() {
                        self.on_probe(u, &pod).await;
                    }
                }
                _ = sleep_until(wake) => {}
            }
        }
    }

    /// After a kubelet restart: the containers this pod already has, from their bundles.
    async fn adopt(&mut self, pod: &Pod) {
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        let all = all_containers(spec);
        let mut any = false;
        let mut adopted = Vec::new();
        for (init, c) in all {
            let key = container_key(init, &c.name);
            let (config, uid, name) = (self.deps.config.clone(), self.uid.clone(), c.name.clone());
            // The last attempt's bundle, with what it says of the container.
            let found = blocking::run(move || {
                let dir = config.bundle_dir(&uid, init, &name, 0);
                let entries = std::fs::read_dir(dir.parent()?).ok()?;
                let mut attempts: Vec<i32> = entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect();
                attempts.sort();
                let last = *attempts.last()?;
                let bundle = config.bundle_dir(&uid, init, &name, last);
                let cfg: Option<ContainerSpec> =
                    spec::read_json(&bundle, spec::CONFIG).ok().flatten();
                let st: Option<spec::State> = spec::read_json(&bundle, spec::STATE).ok().flatten();
                Some((last, bundle, cfg, st))
            })
            .await;
            let Some((last, bundle, cfg, st)) = found else {
                continue;
            };
            any = true;
            let id = cfg.map(|c| format!("k1s://{}", c.id));
            let rec = self.records.entry(key.clone()).or_default();
            rec.view.name = c.name.clone();
            rec.view.image = c.image.clone().unwrap_or_default();
            rec.view.restart_count = last;
            rec.view.container_id = id.clone();
            rec.attempt = Some(last);
            if let Some(s) = &st {
                self.start_time = self.start_time.clone().min(s.started_at.clone());
            }
            if self.deps.runtime.state(&bundle).is_some() {
                let started_at = st.map(|s| s.started_at).unwrap_or_default();
                rec.view.state = ContainerState::Running { started_at };
                rec.running = true;
                if !init || crate::pod::status::is_sidecar(c) {
                    adopted.push((c.clone(), key.clone(), last));
                }
                self.spawn_waiter(key, last, bundle);
            } else if let Some(exit) = self.deps.runtime.exit(&bundle) {
                let started_at = st.map(|s| s.started_at).unwrap_or_default();
                rec.view.state = ContainerState::Terminated(Terminated {
                    exit_code: exit.exit_code,
                    signal: exit.signal,
                    reason: if exit.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    }
                    .into(),
                    message: None,
                    started_at,
                    finished_at: exit.finished_at,
                    container_id: id,
                });
            }
        }
        if any {
            tracing::info!(pod = %pod_name(pod), "re-adopted the pod's containers");
            if let Ok(sb) = Sandbox::open(&self.deps, pod).await {
                self.sandbox = Some(sb);
            }
        }
        for (c, key, attempt) in adopted {
            self.start_probes(pod, &c, &key, attempt);
        }
    }

    fn pod_ip(&self) -> String {
        self.sandbox
            .as_ref()
            .and_then(|s| s.ip.clone())
            .unwrap_or_default()
    }

    fn target(&self, key: &str, attempt: i32) -> probes::Target {
        probes::Target {
            runtime: self.deps.runtime.clone(),
            bundle: self.bundle(key, attempt),
        }
    }

    /// Starts the probes of a container instance that runs (and has passed postStart); until
    /// they say otherwise it is started unless it has a startup probe, and ready unless it
    /// has a readiness probe too.
    fn start_probes(&mut self, pod: &Pod, c: &Container, key: &str, attempt: i32) {
        let list = if key.starts_with("init/") {
            "initContainers"
        } else {
            "containers"
        };
        let about = k1s_api::events::Involved::pod(&pod.metadata)
            .with_field_path(format!("spec.{list}{{{}}}", c.name));
        let reporter = probes::Reporter {
            key: key.to_string(),
            attempt,
            updates: self.probe_tx.clone(),
            client: self.deps.client.clone(),
            source: self.deps.event_source.clone(),
            about,
        };
        let target = self.target(key, attempt);
        let p = probes::spawn(
            c,
            &self.pod_ip(),
            target,
            reporter,
            &self.tasks,
            self.cancel.child_token(),
        );
        let rec = self.records.entry(key.to_string()).or_default();
        rec.stop_probes();
        rec.view.started = !p.has_startup;
        rec.view.ready = rec.view.started && !p.has_readiness;
        rec.readiness_ok = false;
        rec.probes = Some(p);
    }

    /// A probe's result changed.
    async fn on_probe(&mut self, u: probes::Update, pod: &Pod) {
        let Some(rec) = self.records.get_mut(&u.key) else {
            return;
        };
        if rec.attempt != Some(u.attempt) || !rec.running {
            return;
        }
        let Some(p) = &rec.probes else { return };
        let has_readiness = p.has_readiness;
        match (u.kind, u.success) {
            (Kind::Readiness, ok) => {
                rec.readiness_ok = ok;
                rec.view.ready = rec.view.started && ok;
            }
            (Kind::Startup, true) => {
                rec.view.started = true;
                rec.view.ready = !has_readiness || rec.readiness_ok;
            }
            (Kind::Liveness, true) => {}
            (Kind::Liveness | Kind::Startup, false) => {
                rec.stop_probes();
                rec.view.ready = false;
                let Some(c) = spec_container(pod, &u.key).cloned() else {
                    return;
                };
                let probe = match u.kind {
                    Kind::Liveness => c.liveness_probe.as_ref(),
                    _ => c.startup_probe.as_ref(),
                };
                // The probe's own terminationGracePeriodSeconds wins over the pod's.
                let grace = probe
                    .and_then(|p| p.termination_grace_period_seconds)
                    .map_or_else(|| termination_grace(pod), seconds);
                let what = if u.kind == Kind::Liveness {
                    "liveness"
                } else {
                    "startup"
                };
                let msg = format!(
                    "Container {} failed {what} probe, will be restarted",
                    c.name
                );
                self.report(pod).await;
                self.kill_container(pod, Some(&c), &u.key, u.attempt, grace, Some(msg))
                    .await;
            }
        }
    }

    fn spawn_waiter(&self, key: String, attempt: i32, bundle: PathBuf) {
        let runtime = self.deps.runtime.clone();
        let tx = self.exits_tx.clone();
        let cancel = self.cancel.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                exit = runtime.wait(&bundle) => {
                    let _ = tx.send(Exited { name: key, attempt, exit });
                }
            }
        });
    }

    async fn on_exit(&mut self, e: Exited, pod: Option<&Pod>) {
        let Some(rec) = self
            .records
            .get_mut(&e.name)
            .filter(|r| r.attempt == Some(e.attempt))
        else {
            return;
        };
        rec.running = false;
        rec.view.ready = false;
        rec.view.started = false;
        rec.stop_probes();
        self.backoff.exited(&e.name, Instant::now());
        let started_at = match &rec.view.state {
            ContainerState::Running { started_at } => started_at.clone(),
            _ => String::new(),
        };
        let id = rec.view.container_id.clone();
        let message = self
            .termination_message(pod, &e.name, e.attempt, e.exit.exit_code)
            .await;
        let oom = match (pod, id.as_deref()) {
            (Some(p), Some(id)) if e.exit.exit_code == 137 => {
                let cgroups = self.deps.cgroups.clone();
                let uid = self.uid.clone();
                let qos = crate::cgroups::resources::qos_class(p);
                let id = id.trim_start_matches("k1s://").to_string();
                blocking::run(move || cgroups.oom_killed(&uid, qos, &id)).await
            }
            _ => false,
        };
        let reason = if oom {
            "OOMKilled"
        } else if e.exit.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        };
        let Some(rec) = self.records.get_mut(&e.name) else {
            return;
        };
        rec.view.state = ContainerState::Terminated(Terminated {
            exit_code: e.exit.exit_code,
            signal: e.exit.signal,
            reason: reason.into(),
            message,
            started_at,
            finished_at: e.exit.finished_at,
            container_id: id,
        });
    }

    /// The termination message of instance `attempt` of `key`, as upstream's kubelet: the
    /// last 4 KiB of its message file; if that is empty, the container failed and its
    /// `terminationMessagePolicy` is `FallbackToLogsOnError`, the tail of its log
    /// ([`crate::server::logs::termination_tail`]).
    async fn termination_message(
        &self,
        pod: Option<&Pod>,
        key: &str,
        attempt: i32,
        exit_code: i32,
    ) -> Option<String> {
        let file = self.bundle(key, attempt).join(TERMINATION_LOG);
        // The log to fall back on, if the message file says nothing.
        let log = pod.and_then(|pod| {
            let c = spec_container(pod, key)?;
            let fallback = c.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
            if !fallback || exit_code == 0 {
                return None;
            }
            let m = &pod.metadata;
            let dir = self.deps.config.container_logs_dir(
                m.namespace.as_deref().unwrap_or(""),
                m.name.as_deref().unwrap_or(""),
                &self.uid,
                &c.name,
            );
            Some(dir.join(format!("{attempt}.log")))
        });
        blocking::run(move || {
            let data = std::fs::read(file).unwrap_or_default();
            let from_file = &data[data.len().saturating_sub(MAX_TERMINATION_MESSAGE)..];
            if !from_file.is_empty() {
                return Some(String::from_utf8_lossy(from_file).into_owned());
            }
            Some(crate::server::logs::termination_tail_of(&log?)).filter(|t| !t.is_empty())
        })
        .await
    }

    /// Brings the pod's containers to where they should be.
    async fn sync(&mut self, pod: &Pod) {
        if self.terminal.is_some() {
            // A pod that ended holds no devices.
            self.release_node_resources();
            return;
        }
        let Some(spec) = pod.spec.clone() else { return };
        // A pod whose containers already run (adopted after a kubelet restart) was admitted
        // by the kubelet before; it keeps its checkpointed devices, and is not re-admitted
        // while its plugins may not have registered again (as upstream since 1.28).
        if !self.admitted && self.records.values().any(|r| r.running) {
            self.admitted = true;
            self.deps.admitted.record(&self.uid, pod);
        }
        if !self.admitted && !self.admit(pod).await {
            return;
        }
        // A new pod waits for a setup slot ([`crate::start_slots`]), held until its containers
        // are started or it waits on something outside (a registry, a storage plugin).
        if self.sandbox.is_none() {
            self.slot = self.deps.start_slots.clone().acquire_owned().await.ok();
        }
        if self.sandbox.is_none() {
            match Sandbox::create(&self.deps, pod).await {
                Ok(sb) => self.sandbox = Some(sb),
                Err(e) => {
                    self.event(
                        pod,
                        None,
                        "Warning",
                        "FailedCreatePodSandBox",
                        &e.to_string(),
                    );
                    self.set_backoff_all(pod);
                    return;
                }
            }
        }
        if spec.volumes.iter().flatten().any(|v| {
            v.persistent_volume_claim.is_some() || v.csi.is_some() || v.ephemeral.is_some()
        }) {
            self.slot = None;
        }
        if let Err(e) = self.sandbox_volumes(pod).await {
            self.event(pod, None, "Warning", "FailedMount", &e.to_string());
            return;
        }
        // Plan, act, and plan again with what the actions changed (a sidecar that counts as
        // started lets the next init container start in the same sync), until nothing new
        // is left to start; each container is tried once per sync.
        let mut tried: HashSet<String> = HashSet::new();
        let mut first = true;
        loop {
            let actions = self.plan(pod, false);
            if first && !actions.stop_sidecars.is_empty() {
                first = false;
                self.stop_sidecars(pod, &actions.stop_sidecars, termination_grace(pod))
                    .await;
                continue;
            }
            first = false;
            for wait in &actions.back_off {
                self.hold_back(pod, wait);
            }
            let start: Vec<String> = (actions.start.into_iter())
                .filter(|k| tried.insert(k.clone()))
                .collect();
            if start.is_empty() {
                break;
            }
            for key in start {
                if let Some(c) = spec_container(pod, &key).cloned() {
                    self.start(pod, &c, &key).await;
                }
            }
        }
        let state = self.observe(pod, false);
        let phase = plan::phase(state.restart_policy, &state.init, &state.containers);
        if phase.is_terminal() {
            self.terminal = Some(phase);
        }
    }

    /// The pod's containers as [`plan::plan`] sees them.
    fn observe(&self, pod: &Pod, terminating: bool) -> PodState {
        let spec = pod.spec.as_ref();
        let observe = |init: bool, c: &Container| {
            let key = container_key(init, &c.name);
            let rec = self.records.get(&key);
            let state = match rec {
                None => State::Waiting,
                Some(r) if r.running => State::Running {
                    started: r.view.started,
                },
                Some(r) => match &r.view.state {
                    ContainerState::Terminated(t) => State::Exited {
                        exit_code: t.exit_code,
                    },
                    _ if r.view.last.is_some() => State::Restarting,
                    _ => State::Waiting,
                },
            };
            Observed {
                name: c.name.clone(),
                sidecar: init && crate::pod::status::is_sidecar(c),
                state,
                attempted: rec.is_some_and(|r| r.attempt.is_some()),
                back_off_until: self.backoff.until(&key),
            }
        };
        let init = spec.iter().flat_map(|s| s.init_containers.iter().flatten());
        let containers = spec.iter().flat_map(|s| s.containers.iter());
        PodState {
            restart_policy: RestartPolicy::parse(spec.and_then(|s| s.restart_policy.as_deref())),
            init: init.map(|c| observe(true, c)).collect(),
            containers: containers.map(|c| observe(false, c)).collect(),
            terminating,
            terminal: self.terminal,
            active_deadline: self.deadline(pod),
        }
    }

    /// What to do next, as of now ([`plan::plan`]).
    fn plan(&self, pod: &Pod, terminating: bool) -> plan::PodActions {
        plan::plan(&self.observe(pod, terminating), Instant::now())
    }

    /// `wait` should run but waits for its back-off: a container whose last instance exited
    /// enters CrashLoopBackOff (with a `BackOff` event).
    fn hold_back(&mut self, pod: &Pod, wait: &plan::Wait) {
        let Some(c) = spec_container(pod, &wait.key) else {
            return;
        };
        let delay = self.backoff.delay(&wait.key);
        let rec = self.records.entry(wait.key.clone()).or_default();
        rec.view.name = c.name.clone();
        rec.view.image = c.image.clone().unwrap_or_default();
        if !wait.crash_loop {
            return;
        }
        let ContainerState::Terminated(last) = &rec.view.state else {
            return;
        };
        rec.view.last = Some(last.clone());
        rec.view.state = ContainerState::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: Some(format!(
                "back-off {}s restarting failed container={} pod={}",
                delay.as_secs(),
                c.name,
                pod_log_name(pod)
            )),
        };
        let msg = format!(
            "Back-off restarting failed container {} in pod {}",
            c.name,
            pod_log_name(pod)
        );
        self.event(pod, Some(c), "Warning", "BackOff", &msg);
    }

    /// Admission in upstream's order: node pressure (the eviction manager: Failed,
    /// `Evicted`), the devices of device plugin resources (Failed,
    /// `UnexpectedAdmissionError`), then resources, node affinity and host ports against the
    /// pods admitted before ([`crate::pod::admission`]: Failed, `OutOfcpu`, `NodePorts`, …).
    async fn admit(&mut self, pod: &Pod) -> bool {
        let cfg = &self.deps.config;
        let signals = crate::eviction::pressure::observe(&cfg.root_dir, &cfg.images_dir());
        let pressure = crate::eviction::pressure::evaluate(&signals, &cfg.eviction_hard);
        if let Err(refused) = crate::eviction::pressure::admit(pod, pressure) {
            self.reject(pod, "Evicted", refused.to_string()).await;
            return false;
        }
        if let Err(e) = self.deps.devices.admit(pod).await {
            let message = format!("Pod was rejected: {e}");
            self.reject(pod, "UnexpectedAdmissionError", message).await;
            return false;
        }
        let mut admitted = self.deps.admitted.admit(&self.uid, pod);
        if admitted.as_ref().is_err_and(|r| r.reason == "NodeAffinity") {
            // The node's labels may have changed since they were last read.
            let node = &self.deps.config.node_name;
            crate::pod::admission::refresh_labels(
                &self.deps.admitted,
                self.deps.client.as_ref(),
                node,
            )
            .await;
            admitted = self.deps.admitted.admit(&self.uid, pod);
        }
        if let Err(r) = admitted {
            self.reject(pod, &r.reason, r.message).await;
            return false;
        }
        self.admitted = true;
        true
    }

    /// When the pod's `activeDeadlineSeconds` runs out, counted from its start time.
    fn deadline(&self, pod: &Pod) -> Option<Instant> {
        let secs = pod.spec.as_ref()?.active_deadline_seconds?;
        let start = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
            .or_else(|| self.start_time.parse::<k8s_openapi::jiff::Timestamp>().ok())?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs() as i64;
        let left = start.as_second().saturating_add(secs).saturating_sub(now);
        Some(Instant::now() + Duration::from_secs(left.max(0) as u64))
    }

    /// The kubelet fails the pod: an event says why (`Warning` for an eviction), its
    /// containers are killed with `grace`, its sandbox and volumes torn down, and it reports
    /// `Failed` with `reason` and `message` from now on.
    async fn fail(
        &mut self,
        pod: &Pod,
        reason: &str,
        message: String,
        grace: Duration,
        disruption: bool,
    ) {
        if self.terminal.is_some() {
            return;
        }
        let type_ = if disruption { "Warning" } else { "Normal" };
        self.mark_failed(pod, type_, reason, message);
        self.disrupted = disruption;
        self.terminate(pod, grace).await;
        self.teardown().await;
    }

    /// The pod holds no devices, resources or host ports any more (it ended, or is gone).
    fn release_node_resources(&self) {
        self.deps.devices.release(&self.uid);
        self.deps.admitted.release(&self.uid);
    }

    /// The pod is refused: it ends Failed with `reason`, and an event says why.
    async fn reject(&mut self, pod: &Pod, reason: &str, message: String) {
        self.mark_failed(pod, "Warning", reason, message);
        self.release_node_resources();
    }

    /// From now on the pod is reported Failed with `reason` and `message`; a log line and an
    /// event of `type_` say so.
    fn mark_failed(&mut self, pod: &Pod, type_: &str, reason: &str, message: String) {
        tracing::warn!(pod = %pod_name(pod), %reason, %message, "the pod failed");
        self.event(pod, None, type_, reason, &message);
        self.rejected = Some((reason.into(), message));
        self.terminal = Some(Phase::Failed);
    }

    /// Sets up (or refreshes) the pod's volumes; on failure, tries again in a few seconds.
    async fn sandbox_volumes(&mut self, pod: &Pod) -> Result<(), crate::volumes::VolumeError> {
        match self.deps.volumes.setup(pod).await {
            Ok(v) => {
                self.volumes = v;
                // The next token refresh, and at the latest the periodic sync.
                let periodic = Instant::now() + self.deps.config.sync_frequency;
                self.resync_at = Some(
                    self.deps
                        .volumes
                        .next_refresh(&self.uid)
                        .map(Instant::from_std)
                        .map_or(periodic, |t| t.min(periodic)),
                );
                Ok(())
            }
            Err(e) => {
                self.resync_at = Some(Instant::now() + Duration::from_secs(2));
                Err(e)
            }
        }
    }

    /// The pod's sandbox could not be created: its app containers wait the initial back-off.
    fn set_backoff_all(&mut self, pod: &Pod) {
        let now = Instant::now();
        for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
            let key = container_key(false, &c.name);
            self.records.entry(key.clone()).or_default();
            self.backoff.hold(&key, now);
        }
    }

    /// Starts (or restarts) one container the plan says to start (its back-off is over).
    async fn start(&mut self, pod: &Pod, c: &Container, key: &str) {
        {
            let rec = self.records.entry(key.to_string()).or_default();
            rec.view.name = c.name.clone();
            rec.view.image = c.image.clone().unwrap_or_default();
        }
        // The image.
        let reference = c.image.clone().unwrap_or_default();
        let policy = match c.image_pull_policy.as_deref() {
            Some("Always") => PullPolicy::Always,
            Some("Never") => PullPolicy::Never,
            Some("IfNotPresent") => PullPolicy::IfNotPresent,
            _ if reference.ends_with(":latest")
                || !reference.rsplit('/').next().unwrap_or("").contains(':') =>
            {
                PullPolicy::Always
            }
            _ => PullPolicy::IfNotPresent,
        };
        let present = self.deps.images.get(&reference).is_some();
        let (ptx, mut prx) = mpsc::unbounded_channel::<PullProgress>();
        let progress = move |p: PullProgress| {
            let _ = ptx.send(p);
        };
        let pulling = !(present && policy != PullPolicy::Always);
        // The pull secrets are read only when the registry may be asked.
        let auth = if pulling {
            crate::pod::sandbox::pull_secrets(&self.deps, pod).await
        } else {
            Vec::new()
        };
        if pulling {
            // A pull can take minutes; other new pods need not wait for it.
            self.slot = None;
            self.event(
                pod,
                Some(c),
                "Normal",
                "Pulling",
                &format!("Pulling image \"{reference}\""),
            );
        }
        let image = self
            .deps
            .images
            .ensure(&reference, policy, &auth, &progress)
            .await;
        let mut pulled_msg = None;
        while let Ok(p) = prx.try_recv() {
            if let PullProgress::Pulled { bytes, millis, .. } = p {
                pulled_msg = Some(format!(
                    "Successfully pulled image \"{reference}\" in {}ms. Image size: {bytes} bytes.",
                    millis
                ));
            }
        }
        let image = match image {
            Ok(i) => {
                if let Some(m) = pulled_msg {
                    self.event(pod, Some(c), "Normal", "Pulled", &m);
                } else if !pulling || present {
                    self.event(
                        pod,
                        Some(c),
                        "Normal",
                        "Pulled",
                        &format!("Container image \"{reference}\" already present on machine"),
                    );
                }
                i
            }
            Err(e) => {
                let msg = e.to_string();
                let rec = self.records.entry(key.to_string()).or_default();
                let first = !matches!(&rec.view.state, ContainerState::Waiting { reason, .. } if reason == "ErrImagePull" || reason == "ImagePullBackOff");
                let reason = if matches!(e, crate::images::ImageError::NotPresent(_)) {
                    "ErrImageNeverPull"
                } else if first {
                    "ErrImagePull"
                } else {
                    "ImagePullBackOff"
                };
                self.back_off(key, reason, &msg);
                self.event(pod, Some(c), "Warning", "Failed", &msg);
                if reason == "ImagePullBackOff" {
                    self.event(
                        pod,
                        Some(c),
                        "Normal",
                        "BackOff",
                        &format!("Back-off pulling image \"{reference}\""),
                    );
                }
                return;
            }
        };
        let attempt = {
            let rec = self.records.entry(key.to_string()).or_default();
            rec.attempt.map_or(0, |a| a + 1)
        };
        let bundle = self.bundle(key, attempt);
        let id = container_id(&self.uid, key, attempt);
        let spec = match self
            .container_spec(pod, c, key, &image, &bundle, &id, attempt)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                let msg = e.to_string();
                self.back_off(key, "CreateContainerConfigError", &msg);
                self.event(pod, Some(c), "Warning", "Failed", &format!("Error: {msg}"));
                return;
            }
        };
        if let Err(e) = self.deps.devices.pre_start(&self.uid, key).await {
            let msg = e.to_string();
            self.back_off(key, "RunContainerError", &msg);
            self.event(pod, Some(c), "Warning", "Failed", &format!("Error: {msg}"));
            return;
        }
        let dir = bundle.clone();
        blocking::run(move || {
            let _ = std::fs::create_dir_all(&dir);
            // Writable by whatever user the container runs as (upstream: 0666), umask or not.
            let term_log = dir.join(TERMINATION_LOG);
            let _ = std::fs::write(&term_log, b"");
            let _ = std::fs::set_permissions(&term_log, std::fs::Permissions::from_mode(0o666));
        })
        .await;
        match self.deps.runtime.start(&bundle, &spec).await {
            Ok(state) => {
                let rec = self.records.entry(key.to_string()).or_default();
                if let ContainerState::Terminated(t) = &rec.view.state {
                    rec.view.last = Some(t.clone());
                }
                let restart = rec.attempt.is_some();
                if restart {
                    rec.view.restart_count += 1;
                }
                rec.attempt = Some(attempt);
                rec.running = true;
                rec.view.container_id = Some(format!("k1s://{id}"));
                rec.view.image_id = image.repo_digest.clone();
                rec.view.state = ContainerState::Running {
                    started_at: state.started_at,
                };
                rec.view.started = false;
                rec.view.ready = false;
                // A restart: the next exit waits one step longer.
                self.backoff.started(key, restart, Instant::now());
                self.event(
                    pod,
                    Some(c),
                    "Normal",
                    "Created",
                    &format!("Created container: {}", c.name),
                );
                self.event(
                    pod,
                    Some(c),
                    "Normal",
                    "Started",
                    &format!("Started container {}", c.name),
                );
                self.spawn_waiter(key.to_string(), attempt, bundle);
                // A failed postStart has killed the instance; its exit comes through the
                // waiter. Init containers other than sidecars have no probes. A hook may take
                // long: the setup slot goes back first.
                if c.lifecycle.as_ref().is_some_and(|l| l.post_start.is_some()) {
                    self.slot = None;
                }
                if self.post_start(pod, c, key, attempt).await {
                    if key.starts_with("init/") && !crate::pod::status::is_sidecar(c) {
                        self.records
                            .entry(key.to_string())
                            .or_default()
                            .view
                            .started = true;
                    } else {
                        self.start_probes(pod, c, key, attempt);
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                self.records.entry(key.to_string()).or_default().attempt = Some(attempt);
                self.back_off(key, "RunContainerError", &msg);
                self.event(pod, Some(c), "Warning", "Failed", &format!("Error: {msg}"));
            }
        }
    }

    /// The container waits with `reason` and may try again after its next back-off.
    fn back_off(&mut self, key: &str, reason: &str, message: &str) {
        let rec = self.records.entry(key.to_string()).or_default();
        rec.view.state = ContainerState::Waiting {
            reason: reason.into(),
            message: Some(message.into()),
        };
        self.backoff.failed(key, Instant::now());
    }

    #[allow(clippy::too_many_arguments)]
    async fn container_spec(
        &self,
        pod: &Pod,
        c: &Container,
        key: &str,
        image: &crate::images::Image,
        bundle: &Path,
        id: &str,
        attempt: i32,
    ) -> Result<ContainerSpec, ContainerConfigError> {
        let sb = self
            .sandbox
            .as_ref()
            .ok_or(ContainerConfigError::NoSandbox)?;
        // The sandbox has its address before any container starts; the env gets it (and the
        // node's) from here, not from the pod's status, which may not show them yet.
        let pod_ips: Vec<String> = sb.ip.iter().cloned().collect();
        let host_ips = [self.deps.config.node_ip.to_string()];
        let ctx = crate::container::EnvContext {
            client: &self.deps.client,
            pod,
            hostname: &sb.hostname,
            addresses: crate::container::Addresses {
                pod_ips: &pod_ips,
                host_ips: &host_ips,
            },
        };
        let mut process = crate::container::process(&ctx, c, &image.config, &image.layers).await?;
        let mut mounts = sb.mounts(pod, c)?;
        mounts.extend(crate::volumes::container_mounts(pod, c, &self.volumes)?);
        // What the device plugins' Allocate answered: environment, host mounts, device nodes.
        let devices = self.deps.devices.container_devices(&self.uid, key);
        let device_nodes = crate::runtime::spec::device_nodes(&devices.devices)?;
        process
            .env
            .extend(devices.envs.iter().map(|(k, v)| format!("{k}={v}")));
        mounts.extend(
            devices
                .mounts
                .iter()
                .map(|m| Mount::bind(&m.host_path, &m.container_path, m.read_only)),
        );
        let term_path = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        mounts.push(Mount {
            source: bundle.join(TERMINATION_LOG),
            destination: term_path,
            kind: "bind".into(),
            data: String::new(),
            readonly: false,
            file: true,
        });
        let qos = crate::cgroups::resources::qos_class(pod);
        let csc = c.security_context.as_ref();
        let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
        // Device access: the plugins' devices and the raw block volumes' devices.
        let block = crate::volumes::container_block_devices(c, &self.volumes);
        let block_nodes = crate::runtime::spec::device_nodes(&block)?;
        let allowed = device_nodes.iter().chain(&block_nodes);
        let permissions = devices.devices.iter().chain(&block);
        let resources = crate::pod::sandbox::container_resources(
            c,
            privileged,
            allowed.zip(permissions.map(|d| d.permissions.as_str())),
        )?;
        let m = &pod.metadata;
        let log_dir = self.deps.config.container_logs_dir(
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
            &self.uid,
            &c.name,
        );
        let (cgroups, uid, cid, dir) = (
            self.deps.cgroups.clone(),
            self.uid.clone(),
            id.to_string(),
            log_dir.clone(),
        );
        let cgroup_procs = blocking::run(move || {
            let procs = cgroups.ensure_container(&uid, qos, &cid, &resources)?;
            std::fs::create_dir_all(&dir)
                .map_err(|source| ContainerConfigError::LogDir { path: dir, source })?;
            Ok::<_, ContainerConfigError>(procs)
        })
        .await?;
        Ok(ContainerSpec {
            id: id.to_string(),
            layers: image.layers.clone(),
            upper: bundle.join("upper"),
            work: bundle.join("work"),
            rootfs: bundle.join("rootfs"),
            readonly_rootfs: csc
                .and_then(|s| s.read_only_root_filesystem)
                .unwrap_or(false),
            hostname: sb.hostname.clone(),
            netns: sb.netns.clone(),
            ipcns: sb.ipcns.clone(),
            privileged,
            process,
            mounts,
            devices: device_nodes,
            cgroup_procs,
            log_path: log_dir.join(format!("{attempt}.log")),
            log_max_bytes: self.deps.config.log_max_bytes,
            log_max_files: self.deps.config.log_max_files,
        })
    }

    fn views(&self, pod: &Pod, init: bool) -> Vec<ContainerView> {
        let spec = pod.spec.as_ref();
        let list: Vec<&Container> = if init {
            spec.iter()
                .flat_map(|s| s.init_containers.iter().flatten())
                .collect()
        } else {
            spec.iter().flat_map(|s| s.containers.iter()).collect()
        };
        list.into_iter()
            .map(|c| {
                // A container not created yet is `Unknown`: the status says how it waits
                // (`PodInitializing` in a pod with init containers).
                let mut view = self
                    .records
                    .get(&container_key(init, &c.name))
                    .map(|r| r.view.clone())
                    .unwrap_or_default();
                // A record made before its first start (a back-off) has no name yet.
                if view.name.is_empty() {
                    view.name = c.name.clone();
                    view.image = c.image.clone().unwrap_or_default();
                }
                view.sidecar = init && crate::pod::status::is_sidecar(c);
                view
            })
            .collect()
    }

    async fn report(&mut self, pod: &Pod) {
        let init = self.views(pod, true);
        let containers = self.views(pod, false);
        let now = now();
        let status = crate::pod::status::pod_status(&PodView {
            pod,
            init: &init,
            containers: &containers,
            sandbox_ready: self.sandbox.is_some(),
            pod_ip: self.sandbox.as_ref().and_then(|s| s.ip.clone()),
            host_ip: self.deps.config.node_ip.to_string(),
            start_time: &self.start_time,
            terminal: self.terminal.map(Phase::as_str),
            rejected: self
                .rejected
                .as_ref()
                .map(|(r, m)| (r.as_str(), m.as_str())),
            disrupted: self.disrupted,
            now: &now,
        });
        // Compare without the timestamps that move on their own.
        let target = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::pod::feed::MIRROR_UID_ANNOTATION))
            .cloned();
        let static_pod = pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(crate::pod::static_pods::SOURCE_ANNOTATION));
        if static_pod && target.is_none() {
            // No mirror pod yet to show it; the feed hands the pod over again once there is.
            return;
        }
        let reported = (target, status);
        if self.last_reported.as_ref() == Some(&reported) {
            return;
        }
        let r = ResourceRef::new("", "v1", "pods", pod.metadata.namespace.as_deref());
        let name = pod.metadata.name.clone().unwrap_or_default();
        match self
            .deps
            .client
            .patch(
                &r,
                &name,
                // Strategic: conditions merge by type, so a condition another component set
                // meanwhile (a readiness gate's, DisruptionTarget) is not overwritten.
                &Patch::Strategic(json!({"status": reported.1})),
                Some("status"),
                &WriteParams::default(),
            )
            .await
        {
            Ok(_) => self.last_reported = Some(reported),
            Err(e) => tracing::warn!(pod = %pod_name(pod), error = %e, "updating pod status"),
        }
    }

    /// Runs the container's postStart hook, if any; on failure records
    /// `FailedPostStartHook` and kills the instance. True when the container may go on.
    async fn post_start(&mut self, pod: &Pod, c: &Container, key: &str, attempt: i32) -> bool {
        let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return true;
        };
        let target = self.target(key, attempt);
        let ip = self.pod_ip();
        let who = pod_log_name(pod);
        let res = tokio::select! {
            _ = self.cancel.cancelled() => return false,
            r = crate::pod::hooks::run(h, c, &who, &ip, &target) => r,
        };
        let Err(e) = res else { return true };
        self.event(
            pod,
            Some(c),
            "Warning",
            "FailedPostStartHook",
            &e.to_string(),
        );
        self.kill_container(
            pod,
            Some(c),
            key,
            attempt,
            termination_grace(pod),
            Some("FailedPostStartHook".into()),
        )
        .await;
        false
    }

    /// Stops one container instance as upstream's `killContainer`: the Killing event
    /// (`message`, or "Stopping container NAME"), the preStop hook within `grace`, SIGTERM,
    /// what is left of the grace period (at least 2 s), SIGKILL. A zero `grace` (the pod is
    /// gone) skips preStop and kills at once. Returns once the instance has ended.
    async fn kill_container(
        &self,
        pod: &Pod,
        c: Option<&Container>,
        key: &str,
        attempt: i32,
        grace: Duration,
        message: Option<String>,
    ) {
        let name = key.split_once('/').map_or(key, |(_, n)| n);
        let message = message.unwrap_or_else(|| format!("Stopping container {name}"));
        if let Some(c) = c {
            self.event(pod, Some(c), "Normal", "Killing", &message);
        }
        let bundle = self.bundle(key, attempt);
        let mut grace = grace;
        let pre_stop = c.and_then(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)));
        if let Some((c, h)) = pre_stop
            && !grace.is_zero()
        {
            let started = Instant::now();
            let target = self.target(key, attempt);
            let ip = self.pod_ip();
            let who = pod_log_name(pod);
            let run = crate::pod::hooks::run(h, c, &who, &ip, &target);
            match tokio::time::timeout(grace, run).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    self.event(pod, Some(c), "Warning", "FailedPreStopHook", &e.to_string());
                }
                Err(_) => tracing::info!(
                    pod = %pod_name(pod), container = name, grace = grace.as_secs(),
                    "the preStop hook did not finish within the grace period"
                ),
            }
            // Upstream takes whole seconds off the grace period.
            grace = grace.saturating_sub(Duration::from_secs(started.elapsed().as_secs()));
        }
        if !grace.is_zero() {
            grace = grace.max(MIN_GRACE);
        }
        if let Err(e) = self.deps.runtime.kill(&bundle, libc::SIGTERM) {
            tracing::warn!(error = %e, "sending SIGTERM");
        }
        let runtime = self.deps.runtime.clone();
        if tokio::time::timeout(grace, runtime.wait(&bundle))
            .await
            .is_err()
        {
            let _ = runtime.kill(&bundle, libc::SIGKILL);
            let _ = tokio::time::timeout(Duration::from_secs(10), runtime.wait(&bundle)).await;
        }
    }

    /// Stops every running container, each as [`Self::kill_container`]: the app (and init)
    /// containers at once, then the sidecars, last started first, with what is left of the
    /// grace period (as upstream since 1.29).
    async fn terminate(&mut self, pod: &Pod, grace: Duration) {
        for r in self.records.values_mut() {
            r.stop_probes();
        }
        let actions = self.plan(pod, true);
        let others: Vec<(String, i32)> = (actions.kill.iter())
            .filter_map(|k| Some((k.key.clone(), self.records.get(&k.key)?.attempt?)))
            .collect();
        let begun = Instant::now();
        let kills = others.iter().map(|(key, attempt)| {
            let c = spec_container(pod, key);
            self.kill_container(pod, c, key, *attempt, grace, None)
        });
        futures::future::join_all(kills).await;
        while let Ok(e) = self.exits_rx.try_recv() {
            self.on_exit(e, Some(pod)).await;
        }
        for (key, attempt) in others {
            self.record_exit(pod, key, attempt).await;
        }
        let left = grace.saturating_sub(begun.elapsed());
        self.stop_sidecars(pod, &actions.stop_sidecars, left).await;
    }

    /// Records the exit of the stopped instance `attempt` of `key`, if it has one.
    async fn record_exit(&mut self, pod: &Pod, key: String, attempt: i32) {
        let bundle = self.bundle(&key, attempt);
        if let Some(exit) = self.deps.runtime.exit(&bundle) {
            self.on_exit(
                Exited {
                    name: key,
                    attempt,
                    exit,
                },
                Some(pod),
            )
            .await;
        }
    }

    /// Stops the sidecars the plan names (last started first) that still run, one after
    /// another sharing `grace`, and records their exits; none restarts afterwards (the plan
    /// no longer starts them).
    async fn stop_sidecars(&mut self, pod: &Pod, sidecars: &[plan::Kill], grace: Duration) {
        let begun = Instant::now();
        for kill in sidecars {
            let key = kill.key.clone();
            let Some(c) = spec_container(pod, &key) else {
                continue;
            };
            let Some(rec) = self.records.get_mut(&key).filter(|r| r.running) else {
                continue;
            };
            let Some(attempt) = rec.attempt else {
                continue;
            };
            rec.stop_probes();
            let left = grace.saturating_sub(begun.elapsed());
            self.kill_container(pod, Some(c), &key, attempt, left, None)
                .await;
            self.record_exit(pod, key, attempt).await;
        }
    }

    async fn teardown(&mut self) {
        self.release_node_resources();
        if let Some(sb) = self.sandbox.take() {
            sb.destroy(&self.deps).await;
        } else {
            Sandbox::destroy_by_uid(&self.deps, &self.uid).await;
        }
    }

    /// The final delete with grace 0, guarded by the UID so a new pod of the same name is
    /// never deleted.
    async fn delete_for_good(&self, pod: &Pod) {
        let r = ResourceRef::new("", "v1", "pods", pod.metadata.namespace.as_deref());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            precondition_uid: Some(self.uid.clone()),
            ..Default::default()
        };
        if let Err(e) = self.deps.client.delete(&r, &name, &params).await
            && !e.is_not_found()
            && !e.is_conflict()
        {
            tracing::warn!(pod = %pod_name(pod), error = %e, "deleting the terminated pod");
        }
    }

    /// Records an event about `pod` (or one of its containers) without waiting for it.
    fn event(&self, pod: &Pod, c: Option<&Container>, type_: &str, reason: &str, message: &str) {
        let mut about = k1s_api::events::Involved::pod(&pod.metadata);
        if let Some(c) = c {
            about = about.with_field_path(format!("spec.containers{{{}}}", c.name));
        }
        k1s_api::events::record_detached(
            self.deps.client.clone(),
            &self.deps.event_source,
            &about,
            type_,
            reason,
            reason,
            message,
        );
    }
}

/// The container of `pod` a worker record `key` (`init/NAME`, `main/NAME`) stands for.
fn spec_container<'a>(pod: &'a Pod, key: &str) -> Option<&'a Container> {
    let (kind, name) = key.split_once('/').unwrap_or(("main", key));
    let spec = pod.spec.as_ref()?;
    if kind == "init" {
        spec.init_containers
            .iter()
            .flatten()
            .find(|c| c.name == name)
    } else {
        spec.containers.iter().find(|c| c.name == name)
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// A container ID: 64 hex digits, stable for a pod, container and attempt.
fn container_id(uid: &str, key: &str, attempt: i32) -> String {
    use std::hash::{Hash, Hasher};
    let mut out = String::new();
    for salt in 0..4u8 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (uid, key, attempt, salt).hash(&mut h);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// `NAME_NAMESPACE(UID)`, as upstream's kubelet names a pod in messages.
fn pod_log_name(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or("")
    )
}

pub fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The pod's `terminationGracePeriodSeconds` (30 s by default).
pub(crate) fn termination_grace(pod: &Pod) -> Duration {
    let secs = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds);
    seconds(secs.unwrap_or(DEFAULT_GRACE_SECONDS))
}

/// The grace period of a pod being deleted: its `deletionGracePeriodSeconds`, 30 s when the
/// API left it unset.
fn deletion_grace(pod: &Pod) -> Duration {
    seconds(
        pod.metadata
            .deletion_grace_period_seconds
            .unwrap_or(DEFAULT_GRACE_SECONDS),
    )
}

/// Upstream's default `terminationGracePeriodSeconds`.
pub(crate) const DEFAULT_GRACE_SECONDS: i64 = 30;

/// A grace period in whole seconds, negative ones as zero.
fn seconds(secs: i64) -> Duration {
    Duration::from_secs(secs.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages a container waiting with `CreateContainerConfigError` shows.
    #[test]
    fn container_config_error_messages() {
        let cases: Vec<(ContainerConfigError, &str)> = vec![
            (
                ContainerConfigError::NoSandbox,
                "the pod sandbox is not ready",
            ),
            (
                crate::container::ConfigError("secret \"s\" not found".into()).into(),
                "secret \"s\" not found",
            ),
            (
                ContainerConfigError::LogDir {
                    path: "/var/log/pods/x".into(),
                    source: std::io::Error::from_raw_os_error(libc::EACCES),
                },
                "creating /var/log/pods/x: Permission denied (os error 13)",
            ),
            (
                crate::runtime::spec::DeviceNodeError::RelativePath {
                    host: "/dev/fuse".into(),
                    container: "dev/fuse".into(),
                }
                .into(),
                "device /dev/fuse: the container path \"dev/fuse\" is not absolute",
            ),
            (
                crate::pod::sandbox::DeviceRuleError::NumberTooLarge {
                    path: "/dev/x".into(),
                    number: 1 << 40,
                }
                .into(),
                "device /dev/x: number 1099511627776 too large",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn grace_periods() {
        let mut pod: Pod = serde_json::from_value(json!({"metadata": {}, "spec": {
            "containers": []}}))
        .unwrap();
        assert_eq!(termination_grace(&pod), Duration::from_secs(30));
        assert_eq!(deletion_grace(&pod), Duration::from_secs(30));
        pod.spec.as_mut().unwrap().termination_grace_period_seconds = Some(-5);
        assert_eq!(termination_grace(&pod), Duration::ZERO);
        pod.metadata.deletion_grace_period_seconds = Some(7);
        assert_eq!(deletion_grace(&pod), Duration::from_secs(7));
    }
}

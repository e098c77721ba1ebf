//! The pod worker's decisions as a pure function: given the pod's restart policy, what each
//! container is doing and `now`, [`plan`] says which containers to start next, which wait in
//! their back-off (CrashLoopBackOff), which to kill and why, the phase the pod is in, and
//! when the worker must look again. This is where CrashLoopBackOff, the init container order
//! and the sidecar rules are decided; the worker ([`crate::pod::worker`]) only gathers the
//! state and performs the actions. No I/O, no async, no clock reads.
//!
//! The rules, as upstream's kubelet:
//! - init containers run one at a time, in order; the next one starts once the previous has
//!   exited 0. One that failed is restarted (after its back-off) unless the pod's
//!   `restartPolicy` is `Never`, which fails the pod;
//! - sidecars (init containers with `restartPolicy: Always`) start in their turn, the next
//!   init container waits until they count as started, and they restart whenever they stop,
//!   whatever the pod's policy;
//! - app containers start once the init containers are done (an app container that has been
//!   created once means the pod was initialized: init containers never run again), and
//!   restart as the pod's `restartPolicy` says;
//! - once every app container has ended for good (`Never`, or `OnFailure` with exit 0) the
//!   running sidecars are stopped, last started first: they never keep a pod from completing;
//! - a pod being terminated (deleted, or failed by the kubelet) starts nothing; its app and
//!   init containers are killed at once, then its sidecars, last started first.

use tokio::time::Instant;

use crate::pod_containers::container_key;

/// A pod's `restartPolicy` (`Always` when unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// The policy a pod spec names; `Always` when it names none.
    pub fn parse(policy: Option<&str>) -> Self {
        match policy {
            Some("OnFailure") => Self::OnFailure,
            Some("Never") => Self::Never,
            _ => Self::Always,
        }
    }

    /// Whether an app container that exited with `exit_code` runs again.
    fn restarts(self, exit_code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => exit_code != 0,
            Self::Never => false,
        }
    }
}

/// A pod phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }

    /// Succeeded and Failed: the pod never runs again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// What one container is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum State {
    /// Not created yet, or its first creation failed (an image pull, its config, the start).
    #[default]
    Waiting,
    /// An earlier instance ended and it waits to run again (CrashLoopBackOff, or a restart
    /// whose creation failed).
    Restarting,
    /// An instance runs; `started` once its startup probe (and postStart hook) passed.
    Running { started: bool },
    /// The last instance exited with this code.
    Exited { exit_code: i32 },
}

/// One container as the worker observes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub name: String,
    /// An init container with `restartPolicy: Always` (only meaningful for init containers).
    pub sidecar: bool,
    pub state: State,
    /// An instance has been created at least once (whether or not it started).
    pub attempted: bool,
    /// It may not (re)start before this instant (its restart back-off).
    pub back_off_until: Option<Instant>,
}

impl Observed {
    /// Has run at some time: it runs, or an instance ended (upstream's "has started").
    fn has_run(&self) -> bool {
        matches!(
            self.state,
            State::Running { .. } | State::Exited { .. } | State::Restarting
        )
    }

    fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    fn succeeded(&self) -> bool {
        self.state == State::Exited { exit_code: 0 }
    }
}

/// Everything [`plan`] decides from.
#[derive(Debug, Clone)]
pub struct PodState {
    pub restart_policy: RestartPolicy,
    /// The init containers (sidecars included), in spec order.
    pub init: Vec<Observed>,
    /// The app containers, in spec order.
    pub containers: Vec<Observed>,
    /// The pod is being stopped for good: deleted, or failed by the kubelet.
    pub terminating: bool,
    /// The pod already ended (it never runs again).
    pub terminal: Option<Phase>,
    /// When its `activeDeadlineSeconds` runs out.
    pub active_deadline: Option<Instant>,
}

/// Why a container is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// The pod is being deleted or failed by the kubelet.
    PodTerminating,
    /// A sidecar: every app container has ended for good.
    AppContainersDone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// `init/NAME` or `main/NAME`, as the worker keys its records.
    pub key: String,
    pub reason: KillReason,
}

/// A container that should run but waits for its back-off to end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub key: String,
    pub until: Instant,
    /// Its last instance exited: it enters CrashLoopBackOff now (else it waits after a failed
    /// creation, keeping the reason it has).
    pub crash_loop: bool,
}

/// What the worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodActions {
    /// Containers to kill at once.
    pub kill: Vec<Kill>,
    /// Sidecars to stop one after another, in this order, after [`Self::kill`].
    pub stop_sidecars: Vec<Kill>,
    /// Containers to start, in this order.
    pub start: Vec<String>,
    /// Containers that should run but wait in their back-off.
    pub back_off: Vec<Wait>,
    /// The pod has been active longer than its `activeDeadlineSeconds`: the kubelet fails it.
    pub deadline_exceeded: bool,
    /// The pod's phase (a terminal one is final).
    pub phase: Phase,
    /// When to look again although nothing else happens: a back-off or the deadline ends.
    pub wake_at: Option<Instant>,
}

/// Decides the worker's next actions from `pod` at `now`.
pub fn plan(pod: &PodState, now: Instant) -> PodActions {
    let mut actions = PodActions {
        kill: Vec::new(),
        stop_sidecars: Vec::new(),
        start: Vec::new(),
        back_off: Vec::new(),
        deadline_exceeded: false,
        phase: pod
            .terminal
            .unwrap_or_else(|| phase(pod.restart_policy, &pod.init, &pod.containers)),
        wake_at: wake_at(pod, now),
    };
    // Whatever ran stops when the pod is terminated, even once it counts as ended (the
    // kubelet marks a pod it fails Failed before it kills the containers).
    if pod.terminating {
        actions.kill = all(pod)
            .filter(|(init, c)| c.running() && !(*init && c.sidecar))
            .map(|(init, c)| kill(init, c, KillReason::PodTerminating))
            .collect();
        actions.stop_sidecars = sidecars_last_first(pod, KillReason::PodTerminating);
        return actions;
    }
    if pod.terminal.is_some() {
        return actions;
    }
    if pod.active_deadline.is_some_and(|d| d <= now) {
        actions.deadline_exceeded = true;
        return actions;
    }
    let policy = pod.restart_policy;
    let app_done = policy != RestartPolicy::Always
        && pod.containers.iter().all(|c| match c.state {
            State::Exited { exit_code } => !policy.restarts(exit_code),
            _ => false,
        });
    if app_done {
        actions.stop_sidecars = sidecars_last_first(pod, KillReason::AppContainersDone);
        // Nothing restarts any more: no app container may, and sidecars stop.
        return actions;
    }
    // An app container created once means the pod was initialized: init containers do not
    // run again (sidecars do, whenever they stop).
    let initialized = pod.containers.iter().any(|c| c.attempted);
    for c in &pod.init {
        if c.sidecar {
            if !c.running() {
                actions.want_start(true, c, now);
            }
            if c.state == (State::Running { started: true }) || initialized {
                continue;
            }
            return actions;
        }
        if initialized {
            continue;
        }
        match c.state {
            State::Running { .. } => return actions,
            State::Exited { exit_code: 0 } => continue,
            // The pod fails: `phase` says so.
            State::Exited { .. } if policy == RestartPolicy::Never => return actions,
            _ => {
                actions.want_start(true, c, now);
                return actions;
            }
        }
    }
    for c in &pod.containers {
        let restart = match c.state {
            State::Running { .. } => false,
            State::Exited { exit_code } => policy.restarts(exit_code),
            State::Waiting | State::Restarting => true,
        };
        if restart {
            actions.want_start(false, c, now);
        }
    }
    actions
}

impl PodActions {
    /// `c` should run: it starts now, or waits for its back-off.
    fn want_start(&mut self, init: bool, c: &Observed, now: Instant) {
        let key = container_key(init, &c.name);
        match c.back_off_until {
            Some(until) if now < until => self.back_off.push(Wait {
                key,
                until,
                crash_loop: matches!(c.state, State::Exited { .. }),
            }),
            _ => self.start.push(key),
        }
    }
}

fn all(pod: &PodState) -> impl Iterator<Item = (bool, &Observed)> {
    let init = pod.init.iter().map(|c| (true, c));
    init.chain(pod.containers.iter().map(|c| (false, c)))
}

fn kill(init: bool, c: &Observed, reason: KillReason) -> Kill {
    Kill {
        key: container_key(init, &c.name),
        reason,
    }
}

/// The running sidecars, last started (last in the spec) first.
fn sidecars_last_first(pod: &PodState, reason: KillReason) -> Vec<Kill> {
    let running = pod.init.iter().rev().filter(|c| c.sidecar && c.running());
    running.map(|c| kill(true, c, reason)).collect()
}

/// The next instant after `now` a back-off of a container that does not run ends, or the
/// pod's deadline (unless it ended already).
fn wake_at(pod: &PodState, now: Instant) -> Option<Instant> {
    let back_offs = all(pod)
        .filter(|(_, c)| !c.running())
        .filter_map(|(_, c)| c.back_off_until);
    let deadline = pod.active_deadline.filter(|_| pod.terminal.is_none());
    back_offs.chain(deadline).filter(|t| *t > now).min()
}

/// Whether the pod is initialized: an app container has run, or every init container
/// succeeded and every sidecar has started.
pub fn initialized(init: &[Observed], containers: &[Observed]) -> bool {
    containers.iter().any(Observed::has_run)
        || init.iter().all(|c| {
            if c.sidecar {
                c.state == (State::Running { started: true })
            } else {
                c.succeeded()
            }
        })
}

/// The pod phase, as upstream's `getPhase`.
pub fn phase(policy: RestartPolicy, init: &[Observed], containers: &[Observed]) -> Phase {
    if !initialized(init, containers) {
        let failed_for_good = policy == RestartPolicy::Never
            && init.iter().any(|c| {
                !c.sidecar && matches!(c.state, State::Exited { exit_code } if exit_code != 0)
            });
        return if failed_for_good {
            Phase::Failed
        } else {
            Phase::Pending
        };
    }
    // Sidecars count while they run; stopped ones do not (as upstream's `getPhase`).
    let mut running = init.iter().filter(|c| c.sidecar && c.running()).count();
    let (mut waiting, mut stopped, mut succeeded) = (0, 0, 0);
    for c in containers {
        match c.state {
            State::Running { .. } => running += 1,
            State::Exited { exit_code } => {
                stopped += 1;
                if exit_code == 0 {
                    succeeded += 1;
                }
            }
            State::Restarting => stopped += 1,
            State::Waiting => waiting += 1,
        }
    }
    if waiting > 0 {
        return Phase::Pending;
    }
    if running > 0 {
        return Phase::Running;
    }
    if stopped == 0 {
        return Phase::Pending;
    }
    match policy {
        // Containers are restarting.
        RestartPolicy::Always => Phase::Running,
        _ if stopped == succeeded => Phase::Succeeded,
        RestartPolicy::Never => Phase::Failed,
        RestartPolicy::OnFailure => Phase::Running,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use RestartPolicy::{Always, Never, OnFailure};

    fn waiting(name: &str) -> Observed {
        Observed {
            name: name.into(),
            ..Default::default()
        }
    }

    fn running(name: &str) -> Observed {
        Observed {
            state: State::Running { started: true },
            attempted: true,
            ..waiting(name)
        }
    }

    fn starting(name: &str) -> Observed {
        Observed {
            state: State::Running { started: false },
            ..running(name)
        }
    }

    fn exited(name: &str, exit_code: i32) -> Observed {
        Observed {
            state: State::Exited { exit_code },
            ..running(name)
        }
    }

    fn sidecar(c: Observed) -> Observed {
        Observed { sidecar: true, ..c }
    }

    fn backing_off(c: Observed, until: Instant) -> Observed {
        Observed {
            back_off_until: Some(until),
            ..c
        }
    }

    fn pod(policy: RestartPolicy, init: Vec<Observed>, containers: Vec<Observed>) -> PodState {
        PodState {
            restart_policy: policy,
            init,
            containers,
            terminating: false,
            terminal: None,
            active_deadline: None,
        }
    }

    fn keys(ks: &[&str]) -> Vec<String> {
        ks.iter().map(|k| k.to_string()).collect()
    }

    fn kill_keys(ks: &[Kill]) -> Vec<String> {
        ks.iter().map(|k| k.key.clone()).collect()
    }

    /// Restart policies against app containers' exits: (policy, containers, starts, phase).
    #[test]
    fn restart_policies() {
        let cases: Vec<(RestartPolicy, Vec<Observed>, &[&str], Phase)> = vec![
            (Always, vec![waiting("a")], &["main/a"], Phase::Pending),
            (Always, vec![running("a")], &[], Phase::Running),
            (Always, vec![exited("a", 0)], &["main/a"], Phase::Running),
            (Always, vec![exited("a", 1)], &["main/a"], Phase::Running),
            (OnFailure, vec![exited("a", 0)], &[], Phase::Succeeded),
            (OnFailure, vec![exited("a", 1)], &["main/a"], Phase::Running),
            (Never, vec![exited("a", 0)], &[], Phase::Succeeded),
            (Never, vec![exited("a", 1)], &[], Phase::Failed),
            (
                Never,
                vec![exited("a", 0), running("b")],
                &[],
                Phase::Running,
            ),
            (
                Never,
                vec![exited("a", 0), exited("b", 2)],
                &[],
                Phase::Failed,
            ),
            (
                OnFailure,
                vec![exited("a", 0), exited("b", 2)],
                &["main/b"],
                Phase::Running,
            ),
            // Several app containers start together, in spec order.
            (
                Always,
                vec![waiting("a"), running("b"), waiting("c")],
                &["main/a", "main/c"],
                Phase::Pending,
            ),
            // A container whose creation failed is tried again whatever the policy.
            (Never, vec![waiting("a")], &["main/a"], Phase::Pending),
        ];
        let now = Instant::now();
        for (i, (policy, cs, starts, want)) in cases.into_iter().enumerate() {
            let a = plan(&pod(policy, vec![], cs), now);
            assert_eq!(a.start, keys(starts), "case {i}");
            assert_eq!(a.phase, want, "case {i}");
            assert!(a.kill.is_empty() && a.stop_sidecars.is_empty(), "case {i}");
        }
    }

    #[test]
    fn crash_loop_back_off_waits_and_expires() {
        let now = Instant::now();
        let until = now + Duration::from_secs(10);
        let crashed = backing_off(exited("a", 1), until);
        let a = plan(&pod(Always, vec![], vec![crashed.clone()]), now);
        assert!(a.start.is_empty());
        let wait = Wait {
            key: "main/a".into(),
            until,
            crash_loop: true,
        };
        assert_eq!(a.back_off, vec![wait]);
        assert_eq!(a.wake_at, Some(until));
        assert_eq!(a.phase, Phase::Running);
        // Already in CrashLoopBackOff (waiting after an exit): still waits, not entered again.
        let looping = Observed {
            state: State::Restarting,
            ..crashed.clone()
        };
        let a = plan(&pod(Always, vec![], vec![looping.clone()]), now);
        assert_eq!(a.back_off.len(), 1);
        assert!(a.start.is_empty());
        // A failed creation waits too, without entering CrashLoopBackOff.
        let failed = backing_off(waiting("a"), until);
        let a = plan(&pod(Always, vec![], vec![failed]), now);
        assert!(!a.back_off[0].crash_loop);
        // Once the back-off ends it starts, and nothing more to wake for.
        for c in [crashed, looping] {
            let a = plan(&pod(Always, vec![], vec![c]), until);
            assert_eq!(a.start, keys(&["main/a"]));
            assert!(a.back_off.is_empty());
            assert_eq!(a.wake_at, None);
        }
        // A container that will not restart does not wait: Never, or OnFailure with exit 0.
        let done = backing_off(exited("a", 0), until);
        for policy in [Never, OnFailure] {
            let a = plan(&pod(policy, vec![], vec![done.clone()]), now);
            assert!(a.back_off.is_empty() && a.start.is_empty());
            assert_eq!(a.phase, Phase::Succeeded);
        }
        // A running container's back-off wakes nothing.
        let a = plan(
            &pod(Always, vec![], vec![backing_off(running("a"), until)]),
            now,
        );
        assert_eq!(a.wake_at, None);
    }

    /// Init containers: (policy, init, containers, starts, phase).
    #[test]
    fn init_containers_run_one_at_a_time_in_order() {
        type Case = (
            RestartPolicy,
            Vec<Observed>,
            Vec<Observed>,
            &'static [&'static str],
            Phase,
        );
        let cases: Vec<Case> = vec![
            // The first one starts alone; app containers wait.
            (
                Always,
                vec![waiting("i1"), waiting("i2")],
                vec![waiting("a")],
                &["init/i1"],
                Phase::Pending,
            ),
            // The next one waits while the first runs.
            (
                Always,
                vec![running("i1"), waiting("i2")],
                vec![waiting("a")],
                &[],
                Phase::Pending,
            ),
            (
                Never,
                vec![exited("i1", 0), waiting("i2")],
                vec![waiting("a")],
                &["init/i2"],
                Phase::Pending,
            ),
            // All done: the app containers start.
            (
                Never,
                vec![exited("i1", 0), exited("i2", 0)],
                vec![waiting("a"), waiting("b")],
                &["main/a", "main/b"],
                Phase::Pending,
            ),
            // A failed one fails the pod with Never, and nothing else starts.
            (
                Never,
                vec![exited("i1", 1), waiting("i2")],
                vec![waiting("a")],
                &[],
                Phase::Failed,
            ),
            // With OnFailure or Always it restarts.
            (
                OnFailure,
                vec![exited("i1", 1), waiting("i2")],
                vec![waiting("a")],
                &["init/i1"],
                Phase::Pending,
            ),
            (
                Always,
                vec![exited("i1", 0), exited("i2", 3)],
                vec![waiting("a")],
                &["init/i2"],
                Phase::Pending,
            ),
            // Once an app container was created, init containers never run again.
            (
                Always,
                vec![exited("i1", 1)],
                vec![exited("a", 1)],
                &["main/a"],
                Phase::Running,
            ),
        ];
        let now = Instant::now();
        for (i, (policy, init, cs, starts, want)) in cases.into_iter().enumerate() {
            let a = plan(&pod(policy, init, cs), now);
            assert_eq!(a.start, keys(starts), "case {i}");
            assert_eq!(a.phase, want, "case {i}");
        }
        // A failed init container in its back-off holds everything after it.
        let until = now + Duration::from_secs(20);
        let init = vec![backing_off(exited("i1", 1), until), waiting("i2")];
        let a = plan(&pod(OnFailure, init, vec![waiting("a")]), now);
        assert!(a.start.is_empty());
        assert_eq!(a.back_off[0].key, "init/i1");
        assert_eq!(a.wake_at, Some(until));
    }

    /// Sidecars: (policy, init, containers, starts, sidecars stopped, phase).
    #[test]
    fn sidecars() {
        type Case = (
            RestartPolicy,
            Vec<Observed>,
            Vec<Observed>,
            &'static [&'static str],
            &'static [&'static str],
            Phase,
        );
        let cases: Vec<Case> = vec![
            // Started in their turn; the next init container waits until it counts as started.
            (
                Never,
                vec![sidecar(waiting("s1")), waiting("i1")],
                vec![waiting("a")],
                &["init/s1"],
                &[],
                Phase::Pending,
            ),
            (
                Never,
                vec![sidecar(starting("s1")), waiting("i1")],
                vec![waiting("a")],
                &[],
                &[],
                Phase::Pending,
            ),
            (
                Never,
                vec![
                    sidecar(running("s1")),
                    waiting("i1"),
                    sidecar(waiting("s2")),
                ],
                vec![waiting("a")],
                &["init/i1"],
                &[],
                Phase::Pending,
            ),
            (
                Never,
                vec![
                    sidecar(running("s1")),
                    exited("i1", 0),
                    sidecar(waiting("s2")),
                ],
                vec![waiting("a")],
                &["init/s2"],
                &[],
                Phase::Pending,
            ),
            (
                Never,
                vec![sidecar(running("s1")), sidecar(running("s2"))],
                vec![waiting("a")],
                &["main/a"],
                &[],
                Phase::Pending,
            ),
            // They keep running beside the app containers.
            (
                Never,
                vec![sidecar(running("s1"))],
                vec![running("a")],
                &[],
                &[],
                Phase::Running,
            ),
            // They restart whenever they stop, whatever the pod's policy.
            (
                Never,
                vec![sidecar(exited("s1", 0)), sidecar(running("s2"))],
                vec![running("a")],
                &["init/s1"],
                &[],
                Phase::Running,
            ),
            (
                OnFailure,
                vec![sidecar(exited("s1", 1))],
                vec![running("a")],
                &["init/s1"],
                &[],
                Phase::Running,
            ),
            // A restarting sidecar does not hold app containers back once the pod was
            // initialized.
            (
                Always,
                vec![sidecar(exited("s1", 1))],
                vec![exited("a", 1)],
                &["init/s1", "main/a"],
                &[],
                Phase::Running,
            ),
            // They do not keep the pod from completing: once the app containers are done for
            // good they are stopped, last started first, and none restarts; the pod counts as
            // Running until they have stopped.
            (
                Never,
                vec![
                    sidecar(running("s1")),
                    exited("i1", 0),
                    sidecar(running("s2")),
                ],
                vec![exited("a", 0)],
                &[],
                &["init/s2", "init/s1"],
                Phase::Running,
            ),
            (
                OnFailure,
                vec![sidecar(running("s1")), sidecar(exited("s2", 1))],
                vec![exited("a", 0)],
                &[],
                &["init/s1"],
                Phase::Running,
            ),
            (
                Never,
                vec![sidecar(exited("s1", 137)), sidecar(exited("s2", 137))],
                vec![exited("a", 0)],
                &[],
                &[],
                Phase::Succeeded,
            ),
            (
                Never,
                vec![sidecar(running("s1"))],
                vec![exited("a", 1)],
                &[],
                &["init/s1"],
                Phase::Running,
            ),
            (
                Never,
                vec![sidecar(exited("s1", 137))],
                vec![exited("a", 1)],
                &[],
                &[],
                Phase::Failed,
            ),
            // With Always the app containers never end for good.
            (
                Always,
                vec![sidecar(running("s1"))],
                vec![exited("a", 0)],
                &["main/a"],
                &[],
                Phase::Running,
            ),
        ];
        let now = Instant::now();
        for (i, (policy, init, cs, starts, stops, want)) in cases.into_iter().enumerate() {
            let a = plan(&pod(policy, init, cs), now);
            assert_eq!(a.start, keys(starts), "case {i}");
            assert_eq!(kill_keys(&a.stop_sidecars), keys(stops), "case {i}");
            assert!(
                a.stop_sidecars
                    .iter()
                    .all(|k| k.reason == KillReason::AppContainersDone),
                "case {i}"
            );
            assert!(a.kill.is_empty(), "case {i}");
            assert_eq!(a.phase, want, "case {i}");
        }
        // A sidecar in its back-off holds the init containers after it.
        let until = now + Duration::from_secs(10);
        let init = vec![sidecar(backing_off(exited("s1", 1), until)), waiting("i1")];
        let a = plan(&pod(Never, init, vec![waiting("a")]), now);
        assert!(a.start.is_empty());
        assert_eq!(a.back_off[0].key, "init/s1");
    }

    #[test]
    fn terminating_kills_everything_and_starts_nothing() {
        let now = Instant::now();
        let mut p = pod(
            Always,
            vec![
                sidecar(running("s1")),
                running("i1"),
                sidecar(starting("s2")),
                sidecar(exited("s3", 1)),
            ],
            vec![running("a"), exited("b", 1), waiting("c"), starting("d")],
        );
        p.terminating = true;
        let a = plan(&p, now);
        assert!(a.start.is_empty() && a.back_off.is_empty());
        // App and init containers at once, then the sidecars, last started first.
        assert_eq!(kill_keys(&a.kill), keys(&["init/i1", "main/a", "main/d"]));
        assert_eq!(kill_keys(&a.stop_sidecars), keys(&["init/s2", "init/s1"]));
        assert!(
            a.kill
                .iter()
                .chain(&a.stop_sidecars)
                .all(|k| k.reason == KillReason::PodTerminating)
        );
    }

    #[test]
    fn a_terminal_pod_does_nothing() {
        let now = Instant::now();
        let mut p = pod(Always, vec![], vec![waiting("a")]);
        p.terminal = Some(Phase::Failed);
        p.active_deadline = Some(now);
        let a = plan(&p, now);
        assert!(a.start.is_empty() && !a.deadline_exceeded);
        assert_eq!(a.phase, Phase::Failed);
        assert_eq!(a.wake_at, None);
        // Failed by the kubelet (evicted, past its deadline): what still runs is killed.
        p.containers = vec![running("a")];
        p.init = vec![sidecar(running("s"))];
        p.terminating = true;
        let a = plan(&p, now);
        assert_eq!(kill_keys(&a.kill), keys(&["main/a"]));
        assert_eq!(kill_keys(&a.stop_sidecars), keys(&["init/s"]));
    }

    #[test]
    fn active_deadline() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(30);
        let mut p = pod(Always, vec![], vec![running("a")]);
        p.active_deadline = Some(deadline);
        let a = plan(&p, now);
        assert!(!a.deadline_exceeded);
        assert_eq!(a.wake_at, Some(deadline));
        // The earlier of a back-off and the deadline wakes the worker.
        let soon = now + Duration::from_secs(5);
        p.containers.push(backing_off(exited("b", 1), soon));
        assert_eq!(plan(&p, now).wake_at, Some(soon));
        let a = plan(&p, deadline);
        assert!(a.deadline_exceeded);
        assert!(a.start.is_empty());
    }

    #[test]
    fn restart_policy_defaults_to_always() {
        assert_eq!(RestartPolicy::parse(None), Always);
        assert_eq!(RestartPolicy::parse(Some("Always")), Always);
        assert_eq!(RestartPolicy::parse(Some("OnFailure")), OnFailure);
        assert_eq!(RestartPolicy::parse(Some("Never")), Never);
    }
}

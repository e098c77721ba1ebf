//! [`Framework`]: one profile's plugins, instantiated once (by [`crate::framework_build`])
//! and run in configured order at each extension point, with score weights. Also the waiting room for pods a Permit plugin
//! asked to wait.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::interface::*;
use super::node_info::{NodeInfo, PodInfo, Snapshot};
use super::{Code, CycleState, FrameworkError, MAX_NODE_SCORE, MIN_NODE_SCORE, Status};

/// Builds a plugin from the handle and its `pluginConfig` args.
pub type PluginFactory = Arc<
    dyn Fn(&Handle, Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, FrameworkError>
        + Send
        + Sync,
>;

/// Out-of-tree plugins by name.
pub type Registry = HashMap<String, PluginFactory>;

/// The largest Permit wait upstream allows.
const MAX_PERMIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

struct WaitingPod {
    pending: HashSet<&'static str>,
    done: Option<oneshot::Sender<Status>>,
}

/// The plugins of one scheduler profile.
pub struct Framework {
    profile_name: String,
    plugins: Vec<Arc<dyn Plugin>>,
    pre_filter: Vec<Arc<dyn PreFilterPlugin>>,
    filter: Vec<Arc<dyn FilterPlugin>>,
    post_filter: Vec<Arc<dyn PostFilterPlugin>>,
    pre_score: Vec<Arc<dyn PreScorePlugin>>,
    score: Vec<(Arc<dyn ScorePlugin>, i64)>,
    reserve: Vec<Arc<dyn ReservePlugin>>,
    permit: Vec<Arc<dyn PermitPlugin>>,
    pre_bind: Vec<Arc<dyn PreBindPlugin>>,
    bind: Vec<Arc<dyn BindPlugin>>,
    /// The profile's percentageOfNodesToScore, if set.
    pub percentage_of_nodes_to_score: Option<i32>,
    waiting: Mutex<HashMap<String, WaitingPod>>,
}

/// What a profile resolved to: its plugin instances and, per extension point, the plugins
/// to run in order (Score with its weights). [`crate::framework_build`] makes it from the
/// configuration; [`Framework::from_parts`] turns it into a [`Framework`].
pub(crate) struct Parts {
    pub profile_name: String,
    pub plugins: Vec<Arc<dyn Plugin>>,
    pub pre_filter: Vec<Arc<dyn PreFilterPlugin>>,
    pub filter: Vec<Arc<dyn FilterPlugin>>,
    pub post_filter: Vec<Arc<dyn PostFilterPlugin>>,
    pub pre_score: Vec<Arc<dyn PreScorePlugin>>,
    pub score: Vec<(Arc<dyn ScorePlugin>, i64)>,
    pub reserve: Vec<Arc<dyn ReservePlugin>>,
    pub permit: Vec<Arc<dyn PermitPlugin>>,
    pub pre_bind: Vec<Arc<dyn PreBindPlugin>>,
    pub bind: Vec<Arc<dyn BindPlugin>>,
    pub percentage_of_nodes_to_score: Option<i32>,
}

impl Framework {
    /// The framework of resolved `parts`, with an empty waiting room.
    pub(crate) fn from_parts(parts: Parts) -> Self {
        let Parts {
            profile_name,
            plugins,
            pre_filter,
            filter,
            post_filter,
            pre_score,
            score,
            reserve,
            permit,
            pre_bind,
            bind,
            percentage_of_nodes_to_score,
        } = parts;
        Self {
            profile_name,
            plugins,
            pre_filter,
            filter,
            post_filter,
            pre_score,
            score,
            reserve,
            permit,
            pre_bind,
            bind,
            percentage_of_nodes_to_score,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// Names of the plugins at each extension point, for logs and tests.
    pub fn list_plugins(&self) -> Vec<(&'static str, Vec<String>)> {
        let names = |v: &mut dyn Iterator<Item = &'static str>| v.map(str::to_owned).collect();
        vec![
            (
                "PreFilter",
                names(&mut self.pre_filter.iter().map(|p| p.name())),
            ),
            ("Filter", names(&mut self.filter.iter().map(|p| p.name()))),
            (
                "PostFilter",
                names(&mut self.post_filter.iter().map(|p| p.name())),
            ),
            (
                "PreScore",
                names(&mut self.pre_score.iter().map(|p| p.name())),
            ),
            (
                "Score",
                self.score
                    .iter()
                    .map(|(p, w)| format!("{}:{w}", p.name()))
                    .collect(),
            ),
            ("Reserve", names(&mut self.reserve.iter().map(|p| p.name()))),
            ("Permit", names(&mut self.permit.iter().map(|p| p.name()))),
            (
                "PreBind",
                names(&mut self.pre_bind.iter().map(|p| p.name())),
            ),
            ("Bind", names(&mut self.bind.iter().map(|p| p.name()))),
        ]
    }

    /// The events after which a pod rejected by `rejectors` may fit. Empty `rejectors`
    /// (an error, or no plugin recorded) means every event.
    pub fn events_for(&self, rejectors: &HashSet<&'static str>) -> Option<HashSet<ClusterEvent>> {
        if rejectors.is_empty() {
            return None;
        }
        let mut out = HashSet::new();
        for p in &self.plugins {
            if rejectors.contains(p.name()) {
                out.extend(p.events_to_register());
            }
        }
        Some(out)
    }

    /// The events each instantiated plugin registered, for the queue.
    pub fn plugin_events(&self) -> Vec<(&'static str, Vec<ClusterEvent>)> {
        self.plugins
            .iter()
            .map(|p| (p.name(), p.events_to_register()))
            .collect()
    }

    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    pub fn run_pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        for p in &self.pre_filter {
            let s = p.pre_filter(state, pod, snap);
            match s.code() {
                Code::Success => {}
                Code::Skip => {
                    state.skip_filter_plugins.insert(p.name());
                }
                _ => return s.with_plugin(p.name()),
            }
        }
        // Filter runs once per node: look the skipped plugins up once, as bits by position.
        state.filter_skip = self
            .filter
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, f)| state.skip_filter_plugins.contains(f.name()))
            .fold(0, |mask, (i, _)| mask | 1 << i);
        Status::success()
    }

    /// Preemption what-if: runs every PreFilter plugin's `add_pod`.
    pub fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let s = p.add_pod(state, pod, added, node);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Preemption what-if: runs every PreFilter plugin's `remove_pod`.
    pub fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let s = p.remove_pod(state, pod, removed, node);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Filter plugins in order; the first rejection wins.
    pub fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for (i, p) in self.filter.iter().enumerate() {
            let skipped = if i < 64 {
                state.filter_skip & 1 << i != 0
            } else {
                state.skip_filter_plugins.contains(p.name())
            };
            if skipped {
                continue;
            }
            let s = p.filter(state, pod, node);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Filter with `nominated` (pods of at least the pod's priority nominated to this node)
    /// counted as if they ran there, as upstream's `RunFilterPluginsWithNominatedPods`: a
    /// preemptor keeps the room it made, and another pod cannot claim it.
    pub fn run_filter_with_nominated(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        nominated: &[Arc<PodInfo>],
    ) -> Status {
        if nominated.is_empty() {
            return self.run_filter(state, pod, node);
        }
        let mut state = state.clone();
        let mut with = node.clone();
        for p in nominated {
            let s = self.run_pre_filter_add_pod(&mut state, pod, p, &with);
            if !s.is_success() {
                return s;
            }
            with.add_pod(p.clone());
        }
        self.run_filter(&state, pod, &with)
    }

    /// PostFilter plugins in order until one succeeds (or one is unresolvable).
    pub async fn run_post_filter(&self, ctx: &PostFilterContext<'_>) -> (Option<String>, Status) {
        let mut reasons = Vec::new();
        let mut last = Status::unschedulable("");
        for p in &self.post_filter {
            let (nominated, s) = p.post_filter(ctx).await;
            match s.code() {
                Code::Success => return (nominated, s.with_plugin(p.name())),
                Code::UnschedulableAndUnresolvable => return (None, s.with_plugin(p.name())),
                Code::Error => return (None, s.with_plugin(p.name())),
                _ => {
                    reasons.extend(s.reasons().iter().cloned());
                    last = s.with_plugin(p.name());
                }
            }
        }
        if self.post_filter.is_empty() {
            return (None, Status::unschedulable(""));
        }
        let plugin = last.plugin();
        (
            None,
            Status::with_reasons(Code::Unschedulable, reasons).with_plugin(plugin),
        )
    }

    pub fn run_pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snap: &Snapshot,
    ) -> Status {
        for p in &self.pre_score {
            let s = p.pre_score(state, pod, nodes, snap);
            match s.code() {
                Code::Success => {}
                Code::Skip => {
                    state.skip_score_plugins.insert(p.name());
                }
                _ => return s.with_plugin(p.name()),
            }
        }
        Status::success()
    }

    /// Scores every node with every Score plugin, normalizes, checks the 0..=100 range and
    /// sums with weights. Returns the total per node, in `nodes` order.
    pub fn run_score<'n>(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &'n [Arc<NodeInfo>],
    ) -> Result<Vec<NodeScore<'n>>, Status> {
        // One name per node for the whole run; plugins overwrite `score` in place and the
        // weighted sums accumulate beside it.
        let mut scores: Vec<NodeScore<'_>> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: 0,
            })
            .collect();
        let mut totals = vec![0i64; nodes.len()];
        for (p, weight) in &self.score {
            if state.skip_score_plugins.contains(p.name()) {
                continue;
            }
            for (n, slot) in nodes.iter().zip(&mut scores) {
                let (v, s) = p.score(state, pod, n);
                if !s.is_success() {
                    return Err(s.with_plugin(p.name()));
                }
                slot.score = v;
            }
            let s = p.normalize_score(state, pod, &mut scores);
            if !s.is_success() {
                return Err(s.with_plugin(p.name()));
            }
            for (t, s) in totals.iter_mut().zip(&scores) {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(&s.score) {
                    return Err(Status::error(format!(
                        "plugin {:?} returns an invalid score {}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        p.name(),
                        s.score
                    )));
                }
                *t += s.score * weight;
            }
        }
        for (s, t) in scores.iter_mut().zip(totals) {
            s.score = t;
        }
        Ok(scores)
    }

    /// Reserve plugins in order; on failure the caller runs [`Framework::run_unreserve`].
    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.reserve {
            let s = p.reserve(state, pod, node);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Unreserve in reverse order.
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for p in self.reserve.iter().rev() {
            p.unreserve(state, pod, node);
        }
    }

    /// Permit plugins; Wait registers the pod in the waiting room (see
    /// [`Framework::wait_on_permit`]).
    pub fn run_permit(&self, state: &CycleState, pod: &PodInfo, node: &str) -> (Status, Duration) {
        let mut pending = HashSet::new();
        let mut timeout = Duration::ZERO;
        for p in &self.permit {
            let (s, t) = p.permit(state, pod, node);
            match s.code() {
                Code::Success => {}
                Code::Wait => {
                    pending.insert(p.name());
                    timeout = timeout.max(t.min(MAX_PERMIT_TIMEOUT));
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    return (s.with_plugin(p.name()), Duration::ZERO);
                }
                _ => {
                    return (
                        Status::error(format!(
                            "running Permit plugin {:?}: {}",
                            p.name(),
                            s.message()
                        ))
                        .with_plugin(p.name()),
                        Duration::ZERO,
                    );
                }
            }
        }
        if pending.is_empty() {
            return (Status::success(), Duration::ZERO);
        }
        let uid = super::helpers::uid(&pod.pod).to_owned();
        self.lock_waiting().insert(
            uid,
            WaitingPod {
                pending,
                done: None,
            },
        );
        (Status::new(Code::Wait, "waiting on permit"), timeout)
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, WaitingPod>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every waiting Permit plugin allowed the pod, one rejected it, or
    /// `timeout` passed.
    pub async fn wait_on_permit(&self, pod_uid: &str, timeout: Duration) -> Status {
        let rx = {
            let mut w = self.lock_waiting();
            let Some(wp) = w.get_mut(pod_uid) else {
                return Status::success();
            };
            if wp.pending.is_empty() {
                w.remove(pod_uid);
                return Status::success();
            }
            let (tx, rx) = oneshot::channel();
            wp.done = Some(tx);
            rx
        };
        let s = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(s)) => s,
            Ok(Err(_)) => Status::unschedulable("permit wait abandoned"),
            Err(_) => Status::unschedulable(format!(
                "rejected due to timeout after waiting {timeout:?} at plugin(s)"
            )),
        };
        self.lock_waiting().remove(pod_uid);
        s
    }

    /// A Permit plugin allows a waiting pod.
    pub fn allow(&self, pod_uid: &str, plugin: &'static str) {
        let mut w = self.lock_waiting();
        if let Some(wp) = w.get_mut(pod_uid) {
            wp.pending.remove(plugin);
            if wp.pending.is_empty()
                && let Some(tx) = wp.done.take()
            {
                let _ = tx.send(Status::success());
                w.remove(pod_uid);
            }
        }
    }

    /// Rejects a waiting pod.
    pub fn reject(&self, pod_uid: &str, plugin: &'static str, message: &str) {
        let mut w = self.lock_waiting();
        if let Some(mut wp) = w.remove(pod_uid)
            && let Some(tx) = wp.done.take()
        {
            let _ = tx.send(Status::unschedulable(message).with_plugin(plugin));
        }
    }

    pub async fn run_pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.pre_bind {
            let s = p.pre_bind(state, pod, node).await;
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Bind plugins until one does not skip.
    pub async fn run_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.bind {
            let s = p.bind(state, pod, node).await;
            if s.is_skip() {
                continue;
            }
            return s.with_plugin(p.name());
        }
        Status::error("all bind plugins skipped")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::framework::listers::StaticLister;
    use crate::testing::FakeClient;

    fn handle() -> Handle {
        let l = Arc::new(StaticLister::new());
        Handle {
            client: FakeClient::new(),
            volumes: l.clone(),
            cluster: l,
        }
    }

    struct WaitPlugin;
    impl Plugin for WaitPlugin {
        fn name(&self) -> &'static str {
            "Waiter"
        }
        fn as_permit(self: Arc<Self>) -> Option<Arc<dyn PermitPlugin>> {
            Some(self)
        }
    }
    impl PermitPlugin for WaitPlugin {
        fn permit(&self, _: &CycleState, _: &PodInfo, _: &str) -> (Status, Duration) {
            (Status::new(Code::Wait, "wait"), Duration::from_millis(300))
        }
    }

    #[tokio::test]
    async fn permit_wait_allow_reject_timeout() {
        let mut reg = Registry::new();
        let factory: PluginFactory = Arc::new(|_: &Handle, _: Option<&serde_json::Value>| {
            Ok(Arc::new(WaitPlugin) as Arc<dyn Plugin>)
        });
        reg.insert("Waiter".into(), factory);
        let c = Config::parse("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    permit:\n      enabled:\n      - name: Waiter\n").unwrap();
        let fw = Arc::new(Framework::with_registry(&c.profiles[0], &handle(), &reg).unwrap());
        let pod = crate::testing::PodBuilder::new("p").info();
        for (name, action, want) in [
            ("allowed", Some(true), Code::Success),
            ("rejected", Some(false), Code::Unschedulable),
            ("timed out", None, Code::Unschedulable),
        ] {
            let (s, t) = fw.run_permit(&CycleState::new(), &pod, "n");
            assert_eq!(s.code(), Code::Wait, "{name}");
            let fw2 = fw.clone();
            let waiter = tokio::spawn(async move { fw2.wait_on_permit("uid-p", t).await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            match action {
                Some(true) => fw.allow("uid-p", "Waiter"),
                Some(false) => fw.reject("uid-p", "Waiter", "no"),
                None => {}
            }
            assert_eq!(waiter.await.unwrap().code(), want, "{name}");
        }
    }
}

//! The scheduling framework: [`Status`], [`CycleState`], one trait per extension point
//! (`interface`), [`NodeInfo`] and [`Snapshot`] (`node_info`), resource arithmetic
//! (`resource`), shared matching helpers (`helpers`), the listers plugins read cluster state
//! through (`listers`), and the [`Framework`] that runs one profile's plugins (`runtime`).
//!
//! Semantics follow kube-scheduler's `pkg/scheduler/framework`. This module owns no cluster
//! state; the cache and queue feed it.

pub mod helpers;
pub mod interface;
pub mod listers;
pub mod node_info;
pub mod resource;
pub mod runtime;

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fmt;

pub use interface::*;
pub use listers::{ClusterLister, StaticLister, VolumeLister};
pub use node_info::{NodeInfo, PodInfo, Snapshot};
pub use runtime::{Framework, PluginFactory, Registry};

/// The largest score a Score plugin may give after normalization.
pub const MAX_NODE_SCORE: i64 = 100;
pub const MIN_NODE_SCORE: i64 = 0;

/// What a plugin concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Code {
    #[default]
    Success,
    /// An internal error; the pod is retried with backoff.
    Error,
    /// The pod does not fit now; preemption might help.
    Unschedulable,
    /// The pod does not fit and preemption on this node cannot change that.
    UnschedulableAndUnresolvable,
    /// Permit: hold the pod until allowed or timed out.
    Wait,
    /// PreFilter/PreScore: the plugin has nothing to do for this pod; skip its
    /// Filter/Score. Bind: let the next binder bind.
    Skip,
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The result of running a plugin: a code, human-readable reasons and the plugin that
/// produced it. The default is success.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    code: Code,
    reasons: Vec<String>,
    plugin: &'static str,
}

impl Status {
    pub fn success() -> Self {
        Self::default()
    }

    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Self {
            code,
            reasons: vec![reason.into()],
            plugin: "",
        }
    }

    pub fn with_reasons(code: Code, reasons: Vec<String>) -> Self {
        Self {
            code,
            reasons,
            plugin: "",
        }
    }

    pub fn error(reason: impl Into<String>) -> Self {
        Self::new(Code::Error, reason)
    }

    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    pub fn skip() -> Self {
        Self {
            code: Code::Skip,
            ..Default::default()
        }
    }

    pub fn code(&self) -> Code {
        self.code
    }

    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }

    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = plugin;
        self
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Unschedulable or UnschedulableAndUnresolvable.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }

    /// The reasons joined by ", ".
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plugin.is_empty() {
            write!(f, "{}: {}", self.code, self.message())
        } else {
            write!(f, "{} ({}): {}", self.code, self.plugin, self.message())
        }
    }
}

/// Data a plugin keeps for one pod's scheduling cycle.
pub trait StateData: Any + Send + Sync {
    fn clone_box(&self) -> Box<dyn StateData>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Send + Sync + Clone> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Per-cycle storage shared by the plugins of one pod's cycle. Cloned for preemption's
/// what-if runs.
#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn StateData>, foldhash::fast::FixedState>,
    /// Plugins whose PreFilter returned Skip: their Filter is not run.
    pub skip_filter_plugins: HashSet<&'static str>,
    /// Plugins whose PreScore returned Skip: their Score is not run.
    pub skip_score_plugins: HashSet<&'static str>,
    /// `skip_filter_plugins` by position among the first 64 Filter plugins, set by
    /// `Framework::run_pre_filter` for the per-node loop.
    filter_skip: u64,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        Self {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, v.as_ref().clone_box()))
                .collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
            filter_skip: self.filter_skip,
        }
    }
}

impl fmt::Debug for CycleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CycleState")
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl CycleState {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        self.data
            .get(key)
            .and_then(|v| v.as_ref().as_any().downcast_ref())
    }

    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data
            .get_mut(key)
            .and_then(|v| v.as_mut().as_any_mut().downcast_mut())
    }
}

/// Errors building a framework from a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameworkError {
    #[error("plugin {0:?} is not registered")]
    UnknownPlugin(String),
    #[error("plugin {plugin:?} does not implement the {point} extension point")]
    NotAnExtension { plugin: String, point: &'static str },
    #[error("invalid arguments for plugin {plugin:?}: {message}")]
    InvalidArgs { plugin: String, message: String },
    #[error("profile {0:?} has no bind plugin")]
    NoBinder(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_state_clones_deeply() {
        let mut s = CycleState::new();
        s.write("a", vec![1, 2]);
        let mut c = s.clone();
        c.read_mut::<Vec<i32>>("a").unwrap().push(3);
        assert_eq!(s.read::<Vec<i32>>("a").unwrap().len(), 2);
        assert_eq!(c.read::<Vec<i32>>("a").unwrap().len(), 3);
        assert!(s.read::<String>("a").is_none());
    }

    #[test]
    fn status_codes() {
        let s = Status::unschedulable("x").with_plugin("P");
        assert!(s.is_rejected());
        assert_eq!(s.to_string(), "Unschedulable (P): x");
        assert!(Status::success().is_success());
    }
}

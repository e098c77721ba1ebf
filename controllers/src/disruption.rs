//! The disruption controller, as upstream's `pkg/controller/disruption`: the status of every
//! PodDisruptionBudget, which the API server's eviction subresource reads (and decrements).
//!
//! - `expectedPods`, `desiredHealthy`: an integer `minAvailable` wants that many of the
//!   selected pods; a percentage `minAvailable` or any `maxUnavailable` is scaled (rounding up)
//!   against the sum of the pods' controllers' `spec.replicas` (ReplicaSet, Deployment through
//!   its ReplicaSet, StatefulSet; k1s serves no ReplicationControllers).
//! - `currentHealthy`: selected pods that are Ready, not being deleted and not recently
//!   evicted (`disruptedPods`, entries the eviction subresource adds; dropped once the pod is
//!   deleted, or after two minutes).
//! - `disruptionsAllowed` = currentHealthy − desiredHealthy (never below 0; 0 when no pods are
//!   expected), `observedGeneration`, and the `DisruptionAllowed` condition (`SufficientPods`,
//!   `InsufficientPods`, or `SyncFailed` when a pod's controller cannot be found).
//!
//! It writes PDB status only, through the `status` subresource.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k1s_api::client::{Client, ClientError, ResourceRef};
use k1s_api::events::{self, Involved, Source};
use k1s_api::selector::{LabelSelector, label_selector_text};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::clock::{self, Clock};
use k1s_runtime::controller::all_in_namespace;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// How long an eviction's entry in `disruptedPods` counts without the pod being deleted.
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum DisruptionError {
    #[error("poddisruptionbudget {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

fn pdbs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("policy", "v1", "poddisruptionbudgets", ns)
}

/// Runs the disruption controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, clock: Arc<dyn Clock>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "disruption",
        client.clone(),
        pdbs(None),
        watcher::Config::default(),
    )
    .workers(2);
    let pdb_store = ctrl.store();
    let mut watch = |r: ResourceRef| {
        ctrl.watches(
            r,
            watcher::Config::default(),
            Vec::new(),
            all_in_namespace(pdb_store.clone()),
        )
    };
    let pods = watch(ResourceRef::new("", "v1", "pods", None));
    let replicasets = watch(ResourceRef::new("apps", "v1", "replicasets", None));
    let deployments = watch(ResourceRef::new("apps", "v1", "deployments", None));
    let statefulsets = watch(ResourceRef::new("apps", "v1", "statefulsets", None));
    let reconciler = Arc::new(Disruption {
        client,
        clock,
        pdbs: pdb_store,
        pods,
        controllers: Controllers {
            replicasets,
            deployments,
            statefulsets,
        },
    });
    ctrl.run(reconciler, cancel).await;
}

/// The caches of the kinds whose scale a budget can count against.
pub struct Controllers {
    pub replicasets: Store,
    pub deployments: Store,
    pub statefulsets: Store,
}

impl Controllers {
    /// The controller of `pod` and its `spec.replicas` (upstream's finders).
    fn scale_of(&self, pod: &Value, ns: &str) -> Option<(String, i64)> {
        let r = key::controller_ref(pod)?;
        let name = r["name"].as_str().unwrap_or("");
        let uid = r["uid"].as_str().unwrap_or("");
        let group = key::group_of(r["apiVersion"].as_str().unwrap_or(""));
        let find = |store: &Store, n: &str, u: &str| {
            store
                .get(&ObjectKey::new(Some(ns), n))
                .filter(|o| key::uid(o) == u)
        };
        let replicas = |o: &Value| o["spec"]["replicas"].as_i64().unwrap_or(1);
        match (group, r["kind"].as_str()?) {
            ("apps", "ReplicaSet") => {
                let rs = find(&self.replicasets, name, uid)?;
                if let Some(d) = key::controller_ref(&rs).filter(|d| d["kind"] == "Deployment") {
                    let dep = find(&self.deployments, d["name"].as_str()?, d["uid"].as_str()?)?;
                    return Some((key::uid(&dep).to_owned(), replicas(&dep)));
                }
                Some((uid.to_owned(), replicas(&rs)))
            }
            ("apps", "StatefulSet") => {
                find(&self.statefulsets, name, uid).map(|s| (uid.to_owned(), replicas(&s)))
            }
            _ => None,
        }
    }

    /// The summed scale of the pods' controllers (upstream's `getExpectedScale`).
    pub fn expected_scale(
        &self,
        pods: &[Arc<Value>],
        ns: &str,
    ) -> Result<i64, (&'static str, String)> {
        let mut scales: HashMap<String, i64> = HashMap::new();
        for pod in pods {
            if key::controller_ref(pod).is_none() {
                return Err((
                    "NoControllerRef",
                    format!("found no controller ref for pod {:?}", key::name(pod)),
                ));
            }
            match self.scale_of(pod, ns) {
                Some((uid, n)) => {
                    scales.insert(uid, n);
                }
                None => {
                    return Err((
                        "NoControllers",
                        format!("found no controllers for pod {:?}", key::name(pod)),
                    ));
                }
            }
        }
        Ok(scales.values().sum())
    }
}

/// An int-or-percent that is neither an integer nor a percentage.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScaleError {
    /// Not an `i64` nor a string (the JSON value as written).
    #[error("invalid value {0}")]
    NotIntOrString(Value),
    /// A string that is not an integer followed by `%`.
    #[error("invalid value for IntOrString: invalid value {0:?}")]
    NotPercent(String),
}

/// An int-or-percent scaled against `total` (upstream's `GetScaledValueFromIntOrPercent`).
pub fn scaled(v: &Value, total: i64, round_up: bool) -> Result<i64, ScaleError> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| ScaleError::NotIntOrString(v.clone())),
        Value::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| ScaleError::NotPercent(s.clone()))?;
            let x = pct * total;
            Ok(if round_up {
                (x + 99).div_euclid(100)
            } else {
                x.div_euclid(100)
            })
        }
        _ => Err(ScaleError::NotIntOrString(v.clone())),
    }
}

/// `(expectedCount, desiredHealthy)` for the budget (upstream's `getExpectedPodCount`).
pub fn expected_and_desired(
    pdb: &Value,
    pods: &[Arc<Value>],
    scale: impl Fn() -> Result<i64, (&'static str, String)>,
) -> Result<(i64, i64), (&'static str, String)> {
    let spec = &pdb["spec"];
    if !spec["maxUnavailable"].is_null() {
        let expected = scale()?;
        let max = scaled(&spec["maxUnavailable"], expected, true)
            .map_err(|e| ("SyncFailed", e.to_string()))?;
        return Ok((expected, (expected - max).max(0)));
    }
    match &spec["minAvailable"] {
        Value::Number(n) => Ok((
            i64::try_from(pods.len()).unwrap_or(i64::MAX),
            n.as_i64().unwrap_or(0),
        )),
        v @ Value::String(_) => {
            let expected = scale()?;
            Ok((
                expected,
                scaled(v, expected, true).map_err(|e| ("SyncFailed", e.to_string()))?,
            ))
        }
        _ => Ok((0, 0)),
    }
}

/// The `disruptedPods` entries still in force, and when the next one expires.
pub fn live_disruptions(
    pdb: &Value,
    pods: &[Arc<Value>],
    now: Timestamp,
) -> (Map<String, Value>, Option<Timestamp>) {
    let mut out = Map::new();
    let mut recheck: Option<Timestamp> = None;
    for (name, t) in pdb["status"]["disruptedPods"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let Some(pod) = pods.iter().find(|p| key::name(p) == name) else {
            continue;
        };
        if key::is_deleting(pod) {
            continue;
        }
        let Some(at) = clock::parse(t) else { continue };
        let expires = at + DELETION_TIMEOUT;
        if expires < now {
            tracing::warn!(pod = %name, "pod was expected to be deleted after eviction but was not");
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
        out.insert(name.clone(), t.clone());
    }
    (out, recheck)
}

/// Ready pods not being deleted and not recently evicted.
pub fn current_healthy(pods: &[Arc<Value>], disrupted: &Map<String, Value>) -> i64 {
    let n = pods
        .iter()
        .filter(|p| !key::is_deleting(p) && !disrupted.contains_key(key::name(p)))
        .filter(|p| crate::endpoints::is_pod_ready(p))
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Sets `cond` in `conds` as `meta.SetStatusCondition` does (the transition time moves only
/// when the status changes).
fn set_condition(conds: &mut Vec<Value>, mut cond: Value, now: &str) {
    match conds.iter_mut().find(|c| c["type"] == cond["type"]) {
        Some(c) => {
            cond["lastTransitionTime"] = if c["status"] == cond["status"] {
                c["lastTransitionTime"].clone()
            } else {
                json!(now)
            };
            *c = cond;
        }
        None => {
            cond["lastTransitionTime"] = json!(now);
            conds.push(cond);
        }
    }
}

struct Disruption {
    client: Arc<dyn Client>,
    clock: Arc<dyn Clock>,
    pdbs: Store,
    pods: Store,
    controllers: Controllers,
}

#[async_trait::async_trait]
impl Reconcile for Disruption {
    type Error = DisruptionError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, DisruptionError> {
        let Some(pdb) = self.pdbs.get(k) else {
            return Ok(Action::await_change());
        };
        if key::is_deleting(&pdb) {
            return Ok(Action::await_change());
        }
        let ns = k.namespace.clone().unwrap_or_default();
        let now = self.clock.now();
        let now_text = clock::format(now);
        let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
        let sel = if pdb["spec"]["selector"].is_null() {
            None
        } else {
            label_selector_text(Some(&pdb["spec"]["selector"]))
                .ok()
                .and_then(|t| LabelSelector::parse(&t).ok())
        };
        let pods: Vec<Arc<Value>> = self
            .pods
            .list_namespace(&ns)
            .into_iter()
            .filter(|p| sel.as_ref().is_some_and(|s| s.matches_json(p)))
            .collect();
        let mut status = pdb["status"].clone();
        if !status.is_object() {
            status = json!({});
        }
        let mut conds = status["conditions"].as_array().cloned().unwrap_or_default();
        let mut recheck = None;
        match expected_and_desired(&pdb, &pods, || self.controllers.expected_scale(&pods, &ns)) {
            Ok((expected, desired)) => {
                if pods.is_empty() {
                    self.event(&pdb, "Normal", "NoPods", "No matching pods found")
                        .await;
                }
                let (disrupted, next) = live_disruptions(&pdb, &pods, now);
                recheck = next;
                let healthy = current_healthy(&pods, &disrupted);
                let allowed = if expected <= 0 {
                    0
                } else {
                    (healthy - desired).max(0)
                };
                status["currentHealthy"] = json!(healthy);
                status["desiredHealthy"] = json!(desired);
                status["expectedPods"] = json!(expected);
                status["disruptionsAllowed"] = json!(allowed);
                status["observedGeneration"] = json!(generation);
                if disrupted.is_empty() {
                    if let Some(o) = status.as_object_mut() {
                        o.remove("disruptedPods");
                    }
                } else {
                    status["disruptedPods"] = Value::Object(disrupted);
                }
                let (st, reason) = if allowed > 0 {
                    ("True", "SufficientPods")
                } else {
                    ("False", "InsufficientPods")
                };
                set_condition(
                    &mut conds,
                    json!({"type": "DisruptionAllowed", "status": st, "reason": reason,
                    "message": "", "observedGeneration": generation}),
                    &now_text,
                );
            }
            Err((event_reason, message)) => {
                // Upstream's failSafe: nothing allowed until the budget can be computed.
                self.event(&pdb, "Warning", event_reason, &message).await;
                status["disruptionsAllowed"] = json!(0);
                let observed = status["observedGeneration"].as_i64().unwrap_or(0);
                set_condition(
                    &mut conds,
                    json!({"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed",
                    "message": message, "observedGeneration": observed}),
                    &now_text,
                );
            }
        }
        status["conditions"] = json!(conds);
        if status != pdb["status"] {
            let mut next = (*pdb).clone();
            next["status"] = status;
            match k1s_runtime::write::update_status(&*self.client, &pdbs(Some(&ns)), next).await {
                Ok(true) => {}
                Ok(false) => return Ok(Action::await_change()),
                Err(e) => {
                    return Err(DisruptionError::Api {
                        key: k.to_string(),
                        source: e,
                    });
                }
            }
        }
        Ok(match recheck {
            Some(t) => Action::requeue(
                Duration::try_from(t.duration_since(now)).unwrap_or_default()
                    + Duration::from_secs(1),
            ),
            None => Action::await_change(),
        })
    }
}

impl Disruption {
    async fn event(&self, pdb: &Value, type_: &str, reason: &str, message: &str) {
        // Only when the condition would change, so a steady state does not flood events.
        let same = pdb["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "DisruptionAllowed" && c["message"] == message && c["reason"] != ""
            })
        });
        if same && reason != "NoPods" {
            return;
        }
        if reason == "NoPods" && pdb["status"]["expectedPods"] == 0 {
            return;
        }
        let about = Involved {
            api_version: "policy/v1".into(),
            kind: "PodDisruptionBudget".into(),
            namespace: key::namespace(pdb).unwrap_or("").into(),
            name: key::name(pdb).into(),
            uid: key::uid(pdb).into(),
            resource_version: key::resource_version(pdb).unwrap_or("").into(),
            field_path: None,
        };
        let source = Source {
            component: "controllermanager".into(),
            host: None,
        };
        events::record(
            &*self.client,
            &source,
            &about,
            type_,
            reason,
            reason,
            message,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
    }

    #[test]
    fn int_or_percent_scaling_rounds_up() {
        assert_eq!(scaled(&json!(2), 10, true), Ok(2));
        assert_eq!(scaled(&json!("50%"), 3, true), Ok(2));
        assert_eq!(scaled(&json!("50%"), 3, false), Ok(1));
        let e = scaled(&json!("x%"), 3, true).unwrap_err();
        assert_eq!(e, ScaleError::NotPercent("x%".into()));
        assert_eq!(
            e.to_string(),
            r#"invalid value for IntOrString: invalid value "x%""#
        );
        let e = scaled(&json!(1.5), 3, true).unwrap_err();
        assert_eq!(e, ScaleError::NotIntOrString(json!(1.5)));
        assert_eq!(e.to_string(), "invalid value 1.5");
        assert_eq!(
            scaled(&json!(true), 3, true).unwrap_err().to_string(),
            "invalid value true"
        );
    }

    #[test]
    fn expected_and_desired_as_upstream() {
        let pods = vec![pod("a", true), pod("b", true), pod("c", false)];
        let min2 = json!({"spec": {"minAvailable": 2}});
        assert_eq!(
            expected_and_desired(&min2, &pods, || unreachable!()),
            Ok((3, 2))
        );
        let pct = json!({"spec": {"minAvailable": "50%"}});
        assert_eq!(expected_and_desired(&pct, &pods, || Ok(5)), Ok((5, 3)));
        let max = json!({"spec": {"maxUnavailable": "30%"}});
        assert_eq!(expected_and_desired(&max, &pods, || Ok(5)), Ok((5, 3)));
        let max = json!({"spec": {"maxUnavailable": 9}});
        assert_eq!(expected_and_desired(&max, &pods, || Ok(5)), Ok((5, 0)));
        let err = expected_and_desired(&max, &pods, || Err(("NoControllers", "x".into())));
        assert_eq!(err, Err(("NoControllers", "x".into())));
    }

    #[test]
    fn evicted_and_deleting_pods_are_not_healthy() {
        let now = Timestamp::now();
        let recent = clock::format(now);
        let old = clock::format(now - jiff::SignedDuration::from_mins(3));
        let mut deleting = (*pod("d", true)).clone();
        deleting["metadata"]["deletionTimestamp"] = json!(recent);
        let pods = vec![
            pod("a", true),
            pod("b", true),
            pod("c", false),
            Arc::new(deleting),
        ];
        let pdb = json!({"status": {"disruptedPods": {"a": recent, "b": old, "d": recent, "gone": recent}}});
        let (live, recheck) = live_disruptions(&pdb, &pods, now);
        assert_eq!(live.keys().collect::<Vec<_>>(), vec!["a"]);
        assert!(recheck.is_some());
        assert_eq!(current_healthy(&pods, &live), 1);
    }
}

//! DefaultPreemption (PostFilter): when no node fits, find a node where evicting
//! lower-priority pods makes room, choosing victims and the node as upstream does:
//! minimal victims per node (reprieving the most important pods first, PDB-protected ones
//! before others), then the node with the fewest PDB violations, the lowest highest victim
//! priority, the lowest priority sum, the fewest victims, and the latest-started victims.
//! The victims are marked with a `DisruptionTarget` condition and deleted; the scheduler
//! records the node in `status.nominatedNodeName`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k1s_api::client::{Client, ClientError, DeleteParams, Patch, ResourceRef, WriteParams};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::framework::interface::*;
use crate::framework::listers::ClusterLister;
use crate::framework::{Code, CycleState, FrameworkError, NodeInfo, PodInfo, Status, helpers};
use crate::scheduler::{Diagnosis, FitError};

use crate::plugin_names as names;

pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Args {
    pub min_candidate_nodes_percentage: usize,
    pub min_candidate_nodes_absolute: usize,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

/// A node where preemption would work, and what it costs.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    /// Most important first.
    pub victims: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: usize,
}

pub struct DefaultPreemption {
    client: Arc<dyn Client>,
    cluster: Arc<dyn ClusterLister>,
    args: Args,
    rng: Mutex<u64>,
}

impl DefaultPreemption {
    pub fn new(handle: &Handle, args: Option<&serde_json::Value>) -> Result<Self, FrameworkError> {
        let args: Args = match args {
            Some(v) if !v.is_null() => {
                serde_json::from_value(v.clone()).map_err(|e| FrameworkError::InvalidArgs {
                    plugin: names::DEFAULT_PREEMPTION.into(),
                    message: e.to_string(),
                })?
            }
            _ => Args::default(),
        };
        if args.min_candidate_nodes_percentage > 100 {
            return Err(FrameworkError::InvalidArgs {
                plugin: names::DEFAULT_PREEMPTION.into(),
                message: "minCandidateNodesPercentage must be in 0..=100".into(),
            });
        }
        Ok(Self {
            client: handle.client.clone(),
            cluster: handle.cluster.clone(),
            args,
            rng: Mutex::new(0x2545_F491_4F6C_DD1D),
        })
    }

    fn random(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let mut s = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s % n as u64) as usize
    }

    fn num_candidates(&self, num_nodes: usize) -> usize {
        let n = (num_nodes * self.args.min_candidate_nodes_percentage / 100)
            .max(self.args.min_candidate_nodes_absolute);
        n.min(num_nodes)
    }
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        names::DEFAULT_PREEMPTION
    }
    fn as_post_filter(self: Arc<Self>) -> Option<Arc<dyn PostFilterPlugin>> {
        Some(self)
    }
}

/// Upstream `PodEligibleToPreemptOthers`; `Err` carries the reason.
fn eligible(pod: &Pod, nodes: &HashMap<&str, &Arc<NodeInfo>>) -> Result<(), &'static str> {
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never")
    {
        return Err("not eligible due to preemptionPolicy=Never.");
    }
    let prio = helpers::priority(pod);
    if let Some(nn) = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
        && let Some(ni) = nodes.get(nn)
        && ni
            .pods
            .iter()
            .any(|p| helpers::is_terminating(&p.pod) && helpers::priority(&p.pod) < prio)
    {
        return Err("not eligible due to a terminating pod on the nominated node.");
    }
    Ok(())
}

/// When the pod started (its creation time when not started; now when neither is set).
fn start_time(pod: &Pod) -> (bool, Option<Time>) {
    let t = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .or_else(|| pod.metadata.creation_timestamp.clone());
    (t.is_none(), t)
}

/// Upstream `MoreImportantPod`: higher priority, then earlier start.
fn more_important(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    helpers::priority(b)
        .cmp(&helpers::priority(a))
        .then_with(|| start_time(a).cmp(&start_time(b)))
}

/// Splits pods into (PDB-violating, not violating), spending each PDB's allowed
/// disruptions in order.
pub fn split_by_pdb_violation(
    pods: &[Arc<PodInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = pdbs
        .iter()
        .map(|p| {
            p.status
                .as_ref()
                .map(|s| s.disruptions_allowed)
                .unwrap_or(0)
        })
        .collect();
    let selectors: Vec<_> = pdbs
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .and_then(helpers::label_selector)
        })
        .collect();
    let (mut violating, mut ok) = (Vec::new(), Vec::new());
    for pi in pods {
        let pod = &pi.pod;
        let labels = helpers::labels(pod);
        let mut violated = false;
        if !labels.is_empty() {
            for (i, pdb) in pdbs.iter().enumerate() {
                if pdb.metadata.namespace.as_deref() != Some(helpers::namespace(pod)) {
                    continue;
                }
                let Some(sel) = &selectors[i] else { continue };
                if sel.is_empty() || !sel.matches(labels) {
                    continue;
                }
                if pdb
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(helpers::name(pod)))
                {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violated = true;
                }
            }
        }
        if violated {
            violating.push(pi.clone());
        } else {
            ok.push(pi.clone());
        }
    }
    (violating, ok)
}

/// Upstream `SelectVictimsOnNode`: the fewest lower-priority pods whose removal lets the
/// pod fit, and how many of them violate a PDB. `nominated` (pods nominated to the node with
/// at least the pod's priority) count as running there, so two preemptors do not both claim
/// the room one of them made.
pub fn select_victims_on_node(
    fw: &crate::framework::Framework,
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
    nominated: &[Arc<PodInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let mut state = state.clone();
    let mut ni = node.clone();
    let prio = helpers::priority(&pod.pod);
    let mut potential: Vec<Arc<PodInfo>> = Vec::new();
    for p in node.pods.iter() {
        if helpers::priority(&p.pod) < prio {
            ni.remove_pod(&p.pod);
            let s = fw.run_pre_filter_remove_pod(&mut state, pod, p, &ni);
            if !s.is_success() {
                return Err(s);
            }
            potential.push(p.clone());
        }
    }
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS));
    }
    let s = fw.run_filter_with_nominated(&state, pod, &ni, nominated);
    if !s.is_success() {
        return Err(s);
    }
    potential.sort_by(|a, b| more_important(&a.pod, &b.pod));
    let (violating, ok) = split_by_pdb_violation(&potential, pdbs);
    let mut victims = Vec::new();
    let mut num_violating = 0;
    let mut reprieve =
        |p: &Arc<PodInfo>, state: &mut CycleState, ni: &mut NodeInfo| -> Result<bool, Status> {
            let s = fw.run_pre_filter_add_pod(state, pod, p, ni);
            if !s.is_success() {
                return Err(s);
            }
            ni.add_pod(p.clone());
            if fw
                .run_filter_with_nominated(state, pod, ni, nominated)
                .is_success()
            {
                return Ok(true);
            }
            ni.remove_pod(&p.pod);
            let s = fw.run_pre_filter_remove_pod(state, pod, p, ni);
            if !s.is_success() {
                return Err(s);
            }
            victims.push(p.clone());
            Ok(false)
        };
    for p in &violating {
        if !reprieve(p, &mut state, &mut ni)? {
            num_violating += 1;
        }
    }
    for p in &ok {
        reprieve(p, &mut state, &mut ni)?;
    }
    victims.sort_by(|a, b| more_important(&a.pod, &b.pod));
    Ok((victims, num_violating))
}

/// Upstream `pickOneNodeForPreemption`.
pub fn pick_one_node(candidates: &[Candidate]) -> Option<&Candidate> {
    if let Some(c) = candidates.iter().find(|c| c.victims.is_empty()) {
        return Some(c);
    }
    let mut pool: Vec<&Candidate> = candidates.iter().collect();
    type Score = fn(&Candidate) -> (i64, Option<Time>);
    let criteria: [Score; 5] = [
        |c| (-(c.num_pdb_violations as i64), None),
        |c| {
            (
                -i64::from(
                    c.victims
                        .first()
                        .map(|v| helpers::priority(&v.pod))
                        .unwrap_or(0),
                ),
                None,
            )
        },
        |c| {
            let sum: i64 = c
                .victims
                .iter()
                .map(|v| i64::from(helpers::priority(&v.pod)) + i64::from(i32::MAX) + 1)
                .sum();
            (-sum, None)
        },
        |c| (-(c.victims.len() as i64), None),
        |c| {
            // The earliest start among the highest-priority victims; later is better.
            let top = c
                .victims
                .first()
                .map(|v| helpers::priority(&v.pod))
                .unwrap_or(0);
            let earliest = c
                .victims
                .iter()
                .filter(|v| helpers::priority(&v.pod) == top)
                .map(|v| start_time(&v.pod).1)
                .min()
                .flatten();
            (0, earliest)
        },
    ];
    for score in criteria {
        if pool.len() <= 1 {
            break;
        }
        let best = pool.iter().map(|c| score(c)).max()?;
        pool.retain(|c| score(c) == best);
    }
    pool.first().copied()
}

/// Why a victim could not be evicted.
#[derive(Debug, thiserror::Error)]
enum EvictError {
    /// Setting the `DisruptionTarget` condition failed.
    #[error(transparent)]
    Condition(ClientError),
    /// Deleting the victim failed.
    #[error(transparent)]
    Delete(ClientError),
}

impl DefaultPreemption {
    async fn evict(&self, preemptor: &Pod, node: &str, victim: &Pod) -> Result<(), EvictError> {
        let ns = helpers::namespace(victim);
        let r = ResourceRef::new("", "v1", "pods", Some(ns));
        let cond = json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": format!("{}: preempting to accommodate a higher priority pod", crate::config::DEFAULT_SCHEDULER_NAME),
        }]}});
        if let Err(e) = self
            .client
            .patch(
                &r,
                helpers::name(victim),
                &Patch::Strategic(cond),
                Some("status"),
                &WriteParams::default(),
            )
            .await
            && !e.is_not_found()
        {
            return Err(EvictError::Condition(e));
        }
        match self
            .client
            .delete(&r, helpers::name(victim), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(EvictError::Delete(e)),
        }
        crate::scheduler::record_event(
            self.client.as_ref(),
            crate::config::DEFAULT_SCHEDULER_NAME,
            victim,
            "Normal",
            "Preempted",
            &format!(
                "Preempted by pod {} on node {node}",
                helpers::uid(preemptor)
            ),
        )
        .await;
        Ok(())
    }
}

#[async_trait::async_trait]
impl PostFilterPlugin for DefaultPreemption {
    async fn post_filter(&self, ctx: &PostFilterContext<'_>) -> (Option<String>, Status) {
        let by_name: HashMap<&str, &Arc<NodeInfo>> =
            ctx.snapshot.nodes.iter().map(|n| (n.name(), n)).collect();
        if let Err(why) = eligible(&ctx.pod.pod, &by_name) {
            return (None, Status::unschedulable(format!("preemption: {why}")));
        }
        let all = ctx.snapshot.len();
        let mut statuses: HashMap<String, Status> = HashMap::new();
        let mut potential = Vec::new();
        for n in ctx.snapshot.nodes.iter() {
            match ctx.statuses.get(n.name()) {
                Some(s) if s.code() == Code::UnschedulableAndUnresolvable => {
                    statuses.insert(n.name().to_owned(), Status::unresolvable(NOT_HELPFUL));
                }
                _ => potential.push(n.clone()),
            }
        }
        let fit_error = |statuses: HashMap<String, Status>| {
            let msg = FitError {
                num_all_nodes: all,
                diagnosis: Diagnosis {
                    node_to_status: statuses,
                    ..Default::default()
                },
            }
            .message();
            (None, Status::unschedulable(format!("preemption: {msg}")))
        };
        if potential.is_empty() {
            return fit_error(statuses);
        }
        let pdbs = self.cluster.pdbs();
        let want = self.num_candidates(potential.len());
        let offset = self.random(potential.len());
        let (mut violating, mut clean) = (Vec::new(), Vec::new());
        for i in 0..potential.len() {
            let ni = &potential[(offset + i) % potential.len()];
            let nominated = ctx.nominated.get(ni.name()).map_or(&[][..], Vec::as_slice);
            match select_victims_on_node(ctx.framework, ctx.state, ctx.pod, ni, nominated, &pdbs) {
                Ok((victims, n)) => {
                    let c = Candidate {
                        node: ni.name().to_owned(),
                        victims,
                        num_pdb_violations: n,
                    };
                    if n == 0 {
                        clean.push(c);
                    } else {
                        violating.push(c);
                    }
                    if !clean.is_empty() && clean.len() + violating.len() >= want {
                        break;
                    }
                }
                Err(s) => {
                    if s.code() == Code::Error {
                        return (None, s);
                    }
                    statuses.insert(ni.name().to_owned(), s);
                }
            }
        }
        clean.append(&mut violating);
        let Some(best) = pick_one_node(&clean) else {
            return fit_error(statuses);
        };
        // The victims are evicted at once, as upstream's prepareCandidate does in parallel:
        // each eviction is a few durable writes, and the cycle waits for all of them.
        let evictions = best
            .victims
            .iter()
            .map(|v| async move { (v, self.evict(&ctx.pod.pod, &best.node, &v.pod).await) });
        for (v, result) in futures::future::join_all(evictions).await {
            if let Err(e) = result {
                return (
                    None,
                    Status::error(format!("preempting {}: {e}", helpers::pod_key(&v.pod))),
                );
            }
        }
        (Some(best.node.clone()), Status::success())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evict_error_text() {
        let api = ClientError {
            code: 500,
            reason: "InternalError".into(),
            message: "boom".into(),
        };
        let e = EvictError::Condition(api.clone());
        assert_eq!(e.to_string(), api.to_string());
        assert_eq!(e.to_string(), "InternalError (500): boom");
        assert_eq!(EvictError::Delete(api.clone()).to_string(), api.to_string());
    }
    use crate::config::Config;
    use crate::framework::Framework;
    use crate::framework::listers::StaticLister;
    use crate::framework::node_info::Snapshot;
    use crate::testing::{FakeClient, NodeBuilder, PodBuilder, node_info};
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    fn setup(pdbs: Vec<PodDisruptionBudget>) -> (Arc<FakeClient>, Handle, Framework) {
        let client = FakeClient::new();
        let lister = Arc::new(StaticLister::new());
        for p in pdbs {
            lister.upsert_pdb(p);
        }
        let handle = Handle {
            client: client.clone(),
            volumes: lister.clone(),
            cluster: lister,
        };
        let cfg = Config::default();
        let fw = Framework::new(&cfg.profiles[0], &handle).unwrap();
        (client, handle, fw)
    }

    fn pdb(app: &str, allowed: i32) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some(format!("pdb-{app}")),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector: Some(LabelSelector {
                    match_labels: Some([("app".to_owned(), app.to_owned())].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: allowed,
                ..Default::default()
            }),
        }
    }

    fn node(name: &str, cpu: &str) -> k8s_openapi::api::core::v1::Node {
        NodeBuilder::new(name)
            .allocatable(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "10")])
            .build()
    }

    fn victim(name: &str, node: &str, cpu: &str, prio: i32) -> Pod {
        PodBuilder::new(name)
            .container(&[("cpu", cpu)])
            .node(node)
            .priority(prio)
            .build()
    }

    async fn run(fw: &Framework, snap: &Snapshot, pod: &PodInfo) -> (Option<String>, Status) {
        let mut state = CycleState::new();
        let _ = fw.run_pre_filter(&mut state, pod, snap);
        let statuses: HashMap<String, Status> = snap
            .nodes
            .iter()
            .map(|n| (n.name().to_owned(), fw.run_filter(&state, pod, n)))
            .filter(|(_, s)| !s.is_success())
            .collect();
        fw.run_post_filter(&PostFilterContext {
            state: &state,
            pod,
            snapshot: snap,
            statuses: &statuses,
            framework: fw,
            nominated: &HashMap::new(),
        })
        .await
    }

    #[tokio::test]
    async fn preemption_picks_node_and_victims_as_upstream() {
        struct Case {
            name: &'static str,
            nodes: Vec<(&'static str, &'static str, Vec<Pod>)>,
            pdbs: Vec<PodDisruptionBudget>,
            pod: Pod,
            want_node: Option<&'static str>,
            want_deleted: Vec<&'static str>,
        }
        let cases = vec![
            Case {
                name: "lower-priority highest victim wins",
                nodes: vec![
                    ("n1", "2", vec![victim("a", "n1", "2", 50)]),
                    ("n2", "2", vec![victim("b", "n2", "2", 10)]),
                ],
                pdbs: vec![],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "2")])
                    .priority(100)
                    .build(),
                want_node: Some("n2"),
                want_deleted: vec!["b"],
            },
            Case {
                name: "minimal victims: the more important pod is reprieved",
                nodes: vec![(
                    "n1",
                    "3",
                    vec![
                        victim("hi", "n1", "1", 20),
                        victim("lo", "n1", "1", 10),
                        victim("lo2", "n1", "1", 10),
                    ],
                )],
                pdbs: vec![],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .priority(100)
                    .build(),
                want_node: Some("n1"),
                want_deleted: vec!["lo2"],
            },
            Case {
                name: "fewest PDB violations wins",
                nodes: vec![
                    (
                        "n1",
                        "1",
                        vec![
                            PodBuilder::new("guarded")
                                .labels(&[("app", "db")])
                                .container(&[("cpu", "1")])
                                .node("n1")
                                .priority(1)
                                .build(),
                        ],
                    ),
                    ("n2", "1", vec![victim("free", "n2", "1", 5)]),
                ],
                pdbs: vec![pdb("db", 0)],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .priority(100)
                    .build(),
                want_node: Some("n2"),
                want_deleted: vec!["free"],
            },
            Case {
                name: "PDB violation accepted when it is the only way",
                nodes: vec![(
                    "n1",
                    "1",
                    vec![
                        PodBuilder::new("guarded")
                            .labels(&[("app", "db")])
                            .container(&[("cpu", "1")])
                            .node("n1")
                            .priority(1)
                            .build(),
                    ],
                )],
                pdbs: vec![pdb("db", 0)],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .priority(100)
                    .build(),
                want_node: Some("n1"),
                want_deleted: vec!["guarded"],
            },
            Case {
                name: "fewer victims wins on equal priorities",
                nodes: vec![
                    (
                        "n1",
                        "2",
                        vec![victim("a1", "n1", "1", 10), victim("a2", "n1", "1", 10)],
                    ),
                    ("n2", "2", vec![victim("b1", "n2", "2", 10)]),
                ],
                pdbs: vec![],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "2")])
                    .priority(100)
                    .build(),
                want_node: Some("n2"),
                want_deleted: vec!["b1"],
            },
            Case {
                name: "no lower-priority pods",
                nodes: vec![("n1", "1", vec![victim("a", "n1", "1", 100)])],
                pdbs: vec![],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .priority(100)
                    .build(),
                want_node: None,
                want_deleted: vec![],
            },
            Case {
                name: "preemptionPolicy Never",
                nodes: vec![("n1", "1", vec![victim("a", "n1", "1", 1)])],
                pdbs: vec![],
                pod: PodBuilder::new("p")
                    .container(&[("cpu", "1")])
                    .priority(100)
                    .spec_with(|s| s.preemption_policy = Some("Never".into()))
                    .build(),
                want_node: None,
                want_deleted: vec![],
            },
        ];
        for c in cases {
            let (client, _h, fw) = setup(c.pdbs);
            let snap = Snapshot::new(
                c.nodes
                    .into_iter()
                    .map(|(n, cpu, pods)| node_info(node(n, cpu), pods))
                    .collect(),
                Default::default(),
            );
            let pod = PodInfo::new(Arc::new(c.pod));
            let (nominated, status) = run(&fw, &snap, &pod).await;
            assert_eq!(nominated.as_deref(), c.want_node, "{}: {status}", c.name);
            let mut deleted: Vec<String> = client
                .calls()
                .into_iter()
                .filter(|c| c.verb == "delete")
                .map(|c| c.path.rsplit('/').next().unwrap().to_owned())
                .collect();
            deleted.sort();
            assert_eq!(deleted, c.want_deleted, "{}", c.name);
        }
    }

    #[tokio::test]
    async fn room_made_for_a_nominated_pod_is_not_taken_twice() {
        // A first preemptor is nominated to n1, whose victim is still terminating. A second
        // one of the same priority must preempt elsewhere, although n1's victim is cheaper.
        let (client, _h, fw) = setup(vec![]);
        let snap = Snapshot::new(
            vec![
                node_info(node("n1", "2"), vec![victim("a", "n1", "2", 5)]),
                node_info(node("n2", "2"), vec![victim("b", "n2", "2", 10)]),
            ],
            Default::default(),
        );
        let first = Arc::new(
            PodBuilder::new("first")
                .container(&[("cpu", "2")])
                .priority(100)
                .info(),
        );
        let nominated = HashMap::from([("n1".to_owned(), vec![first])]);
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("second")
                .container(&[("cpu", "2")])
                .priority(100)
                .build(),
        ));
        let mut state = CycleState::new();
        let _ = fw.run_pre_filter(&mut state, &pod, &snap);
        let statuses: HashMap<String, Status> = snap
            .nodes
            .iter()
            .map(|n| {
                let on = nominated.get(n.name()).map_or(&[][..], Vec::as_slice);
                let s = fw.run_filter_with_nominated(&state, &pod, n, on);
                (n.name().to_owned(), s)
            })
            .collect();
        let (node, status) = fw
            .run_post_filter(&PostFilterContext {
                state: &state,
                pod: &pod,
                snapshot: &snap,
                statuses: &statuses,
                framework: &fw,
                nominated: &nominated,
            })
            .await;
        assert_eq!(node.as_deref(), Some("n2"), "{status}");
        let deleted: Vec<String> = client
            .calls()
            .into_iter()
            .filter(|c| c.verb == "delete")
            .map(|c| c.path.rsplit('/').next().unwrap().to_owned())
            .collect();
        assert_eq!(deleted, ["b"]);
    }

    #[tokio::test]
    async fn preemption_messages() {
        let (_c, _h, fw) = setup(vec![]);
        let snap = Snapshot::new(
            vec![
                node_info(
                    NodeBuilder::new("tainted")
                        .taint("k", "v", "NoSchedule")
                        .build(),
                    vec![],
                ),
                node_info(node("n2", "1"), vec![victim("a", "n2", "1", 100)]),
                node_info(node("n3", "1"), vec![victim("b", "n3", "1", 100)]),
            ],
            Default::default(),
        );
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .container(&[("cpu", "1")])
                .priority(100)
                .build(),
        ));
        let (n, s) = run(&fw, &snap, &pod).await;
        assert!(n.is_none());
        assert_eq!(
            s.message(),
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn pdb_split() {
        let pods: Vec<Arc<PodInfo>> = ["a", "b", "c"]
            .iter()
            .map(|n| Arc::new(PodBuilder::new(n).labels(&[("app", "web")]).info()))
            .collect();
        let (v, ok) = split_by_pdb_violation(&pods, &[Arc::new(pdb("web", 1))]);
        assert_eq!((v.len(), ok.len()), (2, 1));
        let (v, ok) = split_by_pdb_violation(&pods, &[Arc::new(pdb("other", 0))]);
        assert_eq!((v.len(), ok.len()), (0, 3));
    }
}

//! The arithmetic of a Deployment rollout, as upstream's `deployment/util`: surge and
//! unavailability budgets, how far the new ReplicaSet may grow and the old ones shrink, the
//! template hash, revisions. Pure functions over ReplicaSet JSON; no I/O.

use serde_json::{Value, json};

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const HASH_LABEL: &str = "pod-template-hash";

pub fn spec_replicas(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

pub fn status_i64(o: &Value, field: &str) -> i64 {
    o["status"][field].as_i64().unwrap_or(0)
}

pub fn revision(rs: &Value) -> i64 {
    rs["metadata"]["annotations"][REVISION]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// An int-or-percent of `total`, rounded up or down.
pub fn resolve(v: &Value, total: i64, round_up: bool) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) if round_up => (p * total + 99) / 100,
            Some(p) => p * total / 100,
            None => s.parse().unwrap_or(0),
        },
        _ => 0,
    }
}

/// (maxSurge, maxUnavailable) of a rolling Deployment; both zero becomes unavailable 1.
pub fn surge_and_unavailable(d: &Value) -> (i64, i64) {
    let replicas = spec_replicas(d);
    let ru = &d["spec"]["strategy"]["rollingUpdate"];
    let surge = resolve(ru.get("maxSurge").unwrap_or(&json!("25%")), replicas, true);
    let unavailable = resolve(
        ru.get("maxUnavailable").unwrap_or(&json!("25%")),
        replicas,
        false,
    );
    if surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable.min(replicas))
}

/// The max surge of any strategy (0 for Recreate).
pub fn max_surge(d: &Value) -> i64 {
    if d["spec"]["strategy"]["type"] == "Recreate" {
        0
    } else {
        surge_and_unavailable(d).0
    }
}

/// The max unavailable of any strategy (0 for Recreate).
pub fn max_unavailable(d: &Value) -> i64 {
    if d["spec"]["strategy"]["type"] == "Recreate" || spec_replicas(d) == 0 {
        0
    } else {
        surge_and_unavailable(d).1
    }
}

/// Sum of `spec.replicas`.
pub fn replica_count(rss: &[Value]) -> i64 {
    rss.iter().map(spec_replicas).sum()
}

/// Sum of a status field.
pub fn status_sum(rss: &[Value], field: &str) -> i64 {
    rss.iter().map(|r| status_i64(r, field)).sum()
}

/// How many replicas the new ReplicaSet may have now (upstream's `NewRSNewReplicas`).
pub fn new_rs_new_replicas(d: &Value, all: &[Value], new_rs: &Value) -> i64 {
    let replicas = spec_replicas(d);
    let current_new = spec_replicas(new_rs);
    let (surge, _) = surge_and_unavailable(d);
    let current = replica_count(all);
    let max_total = replicas + surge;
    if current >= max_total {
        return current_new;
    }
    let up = (max_total - current).min(replicas - current_new).max(0);
    current_new + up
}

/// How many old replicas may go now without breaking availability (upstream's
/// `maxScaledDown` in `reconcileOldReplicaSets`).
pub fn max_scaled_down(d: &Value, all: &[Value], new_rs: Option<&Value>) -> i64 {
    let (_, unavailable) = surge_and_unavailable(d);
    let min_available = spec_replicas(d) - unavailable;
    let new_unavailable =
        new_rs.map_or(0, |n| spec_replicas(n) - status_i64(n, "availableReplicas"));
    replica_count(all) - min_available - new_unavailable
}

/// The annotated `max-replicas` of a ReplicaSet (the Deployment's replicas + surge when it
/// was last sized).
fn max_replicas_annotation(rs: &Value) -> Option<i64> {
    rs["metadata"]["annotations"][MAX_REPLICAS]
        .as_str()
        .and_then(|v| v.parse().ok())
}

/// Upstream's `getReplicaSetFraction`: how much a ReplicaSet grows (or shrinks) when the
/// Deployment is resized: its size scaled by the new allowed total over the total it was
/// last sized for, rounded half away from zero.
fn fraction(d: &Value, rs: &Value) -> i64 {
    let spec = spec_replicas(rs);
    if spec_replicas(d) == 0 {
        return -spec;
    }
    let allowed = spec_replicas(d) + max_surge(d);
    let annotated = max_replicas_annotation(rs)
        .filter(|&m| m > 0)
        .unwrap_or_else(|| status_i64(d, "replicas"));
    if annotated <= 0 {
        return 0;
    }
    ((spec * allowed) as f64 / annotated as f64).round() as i64 - spec
}

/// Proportional scaling of a Deployment's active ReplicaSets (upstream's `scale` for a
/// rolling Deployment with several active sets): the new size of each, in the order given.
/// Each set takes its fraction of the difference (never more than what is left); the
/// remainder goes to the first set in upstream's order (largest first; on ties the newest
/// when growing, the oldest when shrinking).
pub fn proportional_sizes(d: &Value, active: &[Value]) -> Vec<i64> {
    let allowed = if spec_replicas(d) > 0 {
        spec_replicas(d) + max_surge(d)
    } else {
        0
    };
    let to_add = allowed - replica_count(active);
    let mut sizes: Vec<i64> = active.iter().map(spec_replicas).collect();
    if to_add == 0 {
        return sizes;
    }
    let mut order: Vec<usize> = (0..active.len()).collect();
    let created = |i: usize| {
        (
            active[i]["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            active[i]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        )
    };
    order.sort_by(|&a, &b| {
        let by_size = spec_replicas(&active[b]).cmp(&spec_replicas(&active[a]));
        by_size.then_with(|| {
            if to_add > 0 {
                created(b).cmp(&created(a))
            } else {
                created(a).cmp(&created(b))
            }
        })
    });
    let mut added = 0;
    for &i in &order {
        let spec = spec_replicas(&active[i]);
        if spec == 0 || added == to_add {
            continue;
        }
        let left = to_add - added;
        let f = fraction(d, &active[i]);
        let p = if to_add > 0 { f.min(left) } else { f.max(left) };
        sizes[i] += p;
        added += p;
    }
    if let Some(&first) = order.first() {
        sizes[first] = (sizes[first] + to_add - added).max(0);
    }
    sizes
}

/// FNV-1a (32 bit) of the template (without the hash label) and the collision count,
/// encoded with the alphabet upstream's `SafeEncodeString` uses.
pub fn template_hash(template: &Value, collision_count: i64) -> String {
    let mut t = template.clone();
    strip_hash(&mut t);
    let mut h: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    feed(t.to_string().as_bytes());
    if collision_count > 0 {
        feed(&collision_count.to_le_bytes());
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// Removes the hash label (and a now empty label map) from a pod template.
pub fn strip_hash(template: &mut Value) {
    crate::history::drop_nulls(template);
    let Some(meta) = template.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        labels.remove(HASH_LABEL);
        if labels.is_empty() {
            meta.remove("labels");
        }
    }
    if meta.is_empty() {
        template.as_object_mut().map(|t| t.remove("metadata"));
    }
}

/// Whether two pod templates are equal but for the hash label.
pub fn equal_ignore_hash(a: &Value, b: &Value) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    strip_hash(&mut a);
    strip_hash(&mut b);
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(replicas: i64, surge: Value, unavailable: Value) -> Value {
        json!({"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}})
    }

    fn rs(replicas: i64, available: i64) -> Value {
        json!({"spec": {"replicas": replicas}, "status": {"availableReplicas": available}})
    }

    #[test]
    fn budgets_round_as_upstream() {
        assert_eq!(
            surge_and_unavailable(&d(10, json!("25%"), json!("25%"))),
            (3, 2)
        );
        assert_eq!(surge_and_unavailable(&d(3, json!(0), json!(0))), (0, 1));
        assert_eq!(surge_and_unavailable(&d(4, json!(1), json!("0%"))), (1, 0));
    }

    #[test]
    fn new_and_old_replica_set_steps() {
        // 3 replicas, surge 1, unavailable 0: the new set grows by one at a time.
        let dep = d(3, json!(1), json!(0));
        let old = rs(3, 3);
        let new = rs(0, 0);
        assert_eq!(
            new_rs_new_replicas(&dep, &[old.clone(), new.clone()], &new),
            1
        );
        // Old ones may not shrink until the new pod is available.
        let new = rs(1, 0);
        assert_eq!(
            max_scaled_down(&dep, &[old.clone(), new.clone()], Some(&new)),
            0
        );
        let new = rs(1, 1);
        assert_eq!(max_scaled_down(&dep, &[old, new.clone()], Some(&new)), 1);
        // Full surge already used: no growth.
        assert_eq!(new_rs_new_replicas(&dep, &[rs(3, 3), new.clone()], &new), 1);
    }

    #[test]
    fn hashes_ignore_the_hash_label_and_differ_with_collisions() {
        let a = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}});
        let mut b = a.clone();
        b["metadata"]["labels"][HASH_LABEL] = json!("abc");
        assert_eq!(template_hash(&a, 0), template_hash(&b, 0));
        assert_ne!(template_hash(&a, 0), template_hash(&a, 1));
        assert!(equal_ignore_hash(&a, &b));
        assert!(
            template_hash(&a, 0)
                .bytes()
                .all(|c| c.is_ascii_alphanumeric())
        );
    }

    #[test]
    fn proportional_scaling_as_upstream() {
        // The conformance case: 10 replicas, surge 3, unavailable 2, a blocked rollout
        // leaves 8 old + 5 new (both sized for 13); scaled to 30 (allowed 33): 20 and 13.
        let dep = d(30, json!(3), json!(2));
        let sized = |n: i64, created: &str| {
            json!({"metadata": {"creationTimestamp": created, "annotations": {
                MAX_REPLICAS: "13", DESIRED_REPLICAS: "10"}},
                "spec": {"replicas": n}})
        };
        let old = sized(8, "2026-11-28T07:00:00Z");
        let new = sized(5, "2026-11-28T07:01:00Z");
        assert_eq!(
            proportional_sizes(&dep, &[old.clone(), new.clone()]),
            [20, 13]
        );
        // And back down to 10 (allowed 13): the older set of equal size loses first.
        let dep = d(10, json!(3), json!(2));
        let sized33 = |n: i64, created: &str| {
            let mut v = sized(n, created);
            v["metadata"]["annotations"][MAX_REPLICAS] = json!("33");
            v
        };
        assert_eq!(
            proportional_sizes(
                &dep,
                &[
                    sized33(20, "2026-11-28T07:00:00Z"),
                    sized33(13, "2026-11-28T07:01:00Z")
                ]
            ),
            [8, 5]
        );
        // Nothing to add: sizes unchanged.
        let dep = d(10, json!(3), json!(2));
        assert_eq!(proportional_sizes(&dep, &[old, new]), [8, 5]);
    }
}

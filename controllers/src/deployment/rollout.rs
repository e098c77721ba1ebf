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
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        labels.remove(HASH_LABEL);
        if labels.is_empty()
            && let Some(m) = template["metadata"].as_object_mut()
        {
            m.remove("labels");
        }
    }
    if let Some(m) = template["metadata"].as_object_mut() {
        if m.get("creationTimestamp").is_some_and(Value::is_null) {
            m.remove("creationTimestamp");
        }
        if m.is_empty() {
            template.as_object_mut().map(|t| t.remove("metadata"));
        }
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
}

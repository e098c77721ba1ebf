//! The writes of a binding, as upstream's `bind`, `unbindVolume`, `updateVolumePhase` and
//! `updateClaimStatus`: each writes only when something changes, with a PUT carrying the
//! object's resourceVersion (a stale cache gets a 409, never a lost update).
//!
//! A binding is four writes in a fixed order — PV `claimRef`, PV phase, PVC `volumeName`, PVC
//! phase — so a crash between any two leaves a state the next sync completes: a PV whose
//! `claimRef` names the claim (with its uid) is matched to that claim first.

use k1s_api::client::{Client, ClientError, WriteParams};
use k1s_api::volume::{self, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER};
use serde_json::{Value, json};

use super::{has_annotation, pvcs, pvs, typed_claim, typed_volume};
use k1s_runtime::key;

fn set_annotation(obj: &mut Value, k: &str, v: &str) {
    let meta = &mut obj["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][k] = json!(v);
}

/// A `claimRef` to `pvc` (upstream's `reference.GetReference`).
pub fn claim_ref(pvc: &Value) -> Value {
    json!({
        "kind": "PersistentVolumeClaim",
        "namespace": key::namespace(pvc).unwrap_or(""),
        "name": key::name(pvc),
        "uid": key::uid(pvc),
        "apiVersion": "v1",
        "resourceVersion": key::resource_version(pvc).unwrap_or(""),
    })
}

/// Whether `pv.spec.claimRef` names `pvc` (uid too when the reference carries one).
pub fn is_bound_to(pv: &Value, pvc: &Value) -> bool {
    match (typed_volume(pv), typed_claim(pvc)) {
        (Ok(v), Ok(c)) => volume::is_bound_to_claim(&v, &c),
        _ => false,
    }
}

/// Binds `pv` and `pvc` to each other and sets both phases to `Bound`.
pub async fn bind(client: &dyn Client, pv: &Value, pvc: &Value) -> Result<(), ClientError> {
    let pv = bind_volume_to_claim(client, pv, pvc).await?;
    let pv = update_volume_phase(client, &pv, "Bound", "").await?;
    let pvc = bind_claim_to_volume(client, pvc, &pv).await?;
    update_claim_status(client, &pvc, "Bound", Some(&pv)).await?;
    tracing::debug!(pvc = %format!("{}/{}", key::namespace(&pvc).unwrap_or(""), key::name(&pvc)),
        pv = key::name(&pv), "claim bound to volume");
    Ok(())
}

/// Sets `pv.spec.claimRef` to `pvc` (and `bound-by-controller` when the user had not
/// pre-bound it).
pub async fn bind_volume_to_claim(
    client: &dyn Client,
    pv: &Value,
    pvc: &Value,
) -> Result<Value, ClientError> {
    let by_controller = !is_bound_to(pv, pvc);
    let mut clone = pv.clone();
    let mut dirty = false;
    let r = &pv["spec"]["claimRef"];
    if r["name"].as_str() != Some(key::name(pvc))
        || r["namespace"].as_str().unwrap_or("") != key::namespace(pvc).unwrap_or("")
        || r["uid"].as_str().unwrap_or("") != key::uid(pvc)
    {
        clone["spec"]["claimRef"] = claim_ref(pvc);
        dirty = true;
    }
    if by_controller && !has_annotation(&clone, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut clone, ANN_BOUND_BY_CONTROLLER, "yes");
        dirty = true;
    }
    if !dirty {
        return Ok(pv.clone());
    }
    client
        .update(&pvs(), clone, None, &WriteParams::default())
        .await
}

/// Sets `pvc.spec.volumeName` (with `bound-by-controller` when it was not the user's) and
/// `bind-completed`.
pub async fn bind_claim_to_volume(
    client: &dyn Client,
    pvc: &Value,
    pv: &Value,
) -> Result<Value, ClientError> {
    let mut clone = pvc.clone();
    let mut dirty = false;
    if pvc["spec"]["volumeName"].as_str() != Some(key::name(pv)) {
        clone["spec"]["volumeName"] = json!(key::name(pv));
        if !has_annotation(&clone, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut clone, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        dirty = true;
    }
    if !has_annotation(&clone, ANN_BIND_COMPLETED) {
        set_annotation(&mut clone, ANN_BIND_COMPLETED, "yes");
        dirty = true;
    }
    if !dirty {
        return Ok(pvc.clone());
    }
    client
        .update(
            &pvcs(key::namespace(pvc)),
            clone,
            None,
            &WriteParams::default(),
        )
        .await
}

/// Undoes a binding on the volume side: a controller-made `claimRef` goes, a user's keeps
/// its name but loses the uid (it stays pre-bound); the phase goes back to `Available`.
pub async fn unbind_volume(client: &dyn Client, pv: &Value) -> Result<Value, ClientError> {
    let mut clone = pv.clone();
    if has_annotation(pv, ANN_BOUND_BY_CONTROLLER) {
        clone["spec"]["claimRef"] = Value::Null;
        if let Some(a) = clone["metadata"]["annotations"].as_object_mut() {
            a.remove(ANN_BOUND_BY_CONTROLLER);
        }
    } else if let Some(r) = clone["spec"]["claimRef"].as_object_mut() {
        r.remove("uid");
    }
    let updated = client
        .update(&pvs(), clone, None, &WriteParams::default())
        .await?;
    update_volume_phase(client, &updated, "Available", "").await
}

/// Sets a PV's phase (and `message`, and `lastPhaseTransitionTime`) if it differs.
pub async fn update_volume_phase(
    client: &dyn Client,
    pv: &Value,
    phase: &str,
    message: &str,
) -> Result<Value, ClientError> {
    if pv["status"]["phase"] == phase {
        return Ok(pv.clone());
    }
    let mut clone = pv.clone();
    if !clone["status"].is_object() {
        clone["status"] = json!({});
    }
    let status = &mut clone["status"];
    status["phase"] = json!(phase);
    if message.is_empty() {
        if let Some(s) = status.as_object_mut() {
            s.remove("message");
        }
    } else {
        status["message"] = json!(message);
    }
    status["lastPhaseTransitionTime"] = json!(k1s_api::events::now_rfc3339());
    let updated = client
        .update(&pvs(), clone, Some("status"), &WriteParams::default())
        .await?;
    tracing::debug!(pv = key::name(pv), phase, "volume entered phase");
    Ok(updated)
}

/// Sets a PVC's phase; with a volume, its access modes and (when becoming bound) its
/// capacity; without, clears both.
pub async fn update_claim_status(
    client: &dyn Client,
    pvc: &Value,
    phase: &str,
    pv: Option<&Value>,
) -> Result<Value, ClientError> {
    let mut clone = pvc.clone();
    if !clone["status"].is_object() {
        clone["status"] = json!({});
    }
    let mut dirty = false;
    let changing = pvc["status"]["phase"] != phase;
    if changing {
        clone["status"]["phase"] = json!(phase);
        dirty = true;
    }
    let Some(status) = clone["status"].as_object_mut() else {
        return Ok(pvc.clone());
    };
    match pv {
        None => {
            for f in ["accessModes", "capacity"] {
                if status.remove(f).is_some_and(|v| !v.is_null()) {
                    dirty = true;
                }
            }
        }
        Some(pv) => {
            let modes = &pv["spec"]["accessModes"];
            if status.get("accessModes").unwrap_or(&Value::Null) != modes {
                status.insert("accessModes".into(), modes.clone());
                dirty = true;
            }
            // Only when becoming bound: a later difference may be a pending resize.
            let cap = &pv["spec"]["capacity"];
            if changing && status.get("capacity").unwrap_or(&Value::Null) != cap {
                status.insert("capacity".into(), cap.clone());
                dirty = true;
            }
        }
    }
    if !dirty {
        return Ok(pvc.clone());
    }
    let updated = client
        .update(
            &pvcs(key::namespace(pvc)),
            clone,
            Some("status"),
            &WriteParams::default(),
        )
        .await?;
    tracing::debug!(pvc = key::name(pvc), phase, "claim entered phase");
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_refs() {
        let pvc = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u1",
            "resourceVersion": "7"}});
        let r = claim_ref(&pvc);
        assert_eq!(r["kind"], "PersistentVolumeClaim");
        assert_eq!(r["uid"], "u1");
        assert_eq!(r["resourceVersion"], "7");
        let pv = |r: Value| json!({"metadata": {"name": "v"}, "spec": {"claimRef": r}});
        assert!(is_bound_to(
            &pv(json!({"namespace": "ns", "name": "c"})),
            &pvc
        ));
        assert!(is_bound_to(&pv(r), &pvc));
        assert!(!is_bound_to(
            &pv(json!({"namespace": "ns", "name": "c", "uid": "u0"})),
            &pvc
        ));
        assert!(!is_bound_to(
            &pv(json!({"namespace": "x", "name": "c"})),
            &pvc
        ));
    }
}

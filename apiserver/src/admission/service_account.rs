//! ServiceAccount admission for pods: the ServiceAccount (`default` unless named) must exist;
//! unless automounting is switched off (on the pod or the ServiceAccount), a projected
//! `kube-api-access-*` volume with a bound token, the cluster CA (`kube-root-ca.crt`) and the
//! namespace is added and mounted at `/var/run/secrets/kubernetes.io/serviceaccount` in every
//! container; the ServiceAccount's imagePullSecrets are copied to a pod that has none.

use serde_json::{Value, json};

use super::{Request, forbidden};
use crate::reader::Reader;
use crate::status::ApiError;

/// Where the token is mounted.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Token lifetime of the projected volume (upstream: 1 h plus 7 s, so kubelets can tell it
/// apart and refresh it early).
const TOKEN_SECONDS: i64 = 3607;
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// How often the `default` ServiceAccount is looked for (500 ms apart).
const DEFAULT_SA_ATTEMPTS: usize = 10;

/// The projected volume upstream injects.
pub fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
}

fn random_suffix() -> String {
    // Upstream uses 5 characters from an alphabet without vowels and look-alikes.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub async fn admit(rest: &dyn Reader, req: &Request<'_>, pod: &mut Value) -> Result<(), ApiError> {
    if pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_string() {
        return Ok(());
    }
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let name = match pod["spec"]["serviceAccountName"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        Some(n) => n.to_owned(),
        None => {
            pod["spec"]["serviceAccountName"] = json!("default");
            "default".to_owned()
        }
    };
    let Some(res) = rest.builtin_kind("", "ServiceAccount") else {
        return Ok(());
    };
    // The default ServiceAccount is made by a controller shortly after its namespace; give
    // it a moment, as upstream does.
    let attempts = if name == "default" {
        DEFAULT_SA_ATTEMPTS
    } else {
        1
    };
    let mut found = rest.get_remembered(&res, Some(&ns), &name).await;
    for _ in 1..attempts {
        if !matches!(&found, Err(e) if e.code == 404) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        found = rest.get_remembered(&res, Some(&ns), &name).await;
    }
    let sa = match found {
        Ok(sa) => sa,
        Err(e) if e.code == 404 => {
            return Err(forbidden(
                req.res,
                pod,
                format!(
                    "error looking up service account {ns}/{name}: serviceaccount {name:?} not found"
                ),
            ));
        }
        Err(e) => return Err(e),
    };
    if pod["spec"]["imagePullSecrets"]
        .as_array()
        .is_none_or(Vec::is_empty)
        && let Some(secrets) = sa["imagePullSecrets"].as_array().filter(|s| !s.is_empty())
    {
        pod["spec"]["imagePullSecrets"] = json!(secrets);
    }
    let automount = pod["spec"]["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if !automount {
        return Ok(());
    }
    let spec = &mut pod["spec"];
    let mounted = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["mountPath"] == MOUNT_PATH))
    };
    let volume_name = format!("kube-api-access-{}", random_suffix());
    let mut used = false;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if mounted(c) {
                continue;
            }
            let mount = json!({"name": volume_name, "readOnly": true, "mountPath": MOUNT_PATH});
            match c["volumeMounts"].as_array_mut() {
                Some(m) => m.push(mount),
                None => c["volumeMounts"] = json!([mount]),
            }
            used = true;
        }
    }
    if used {
        let vol = token_volume(&volume_name);
        match spec["volumes"].as_array_mut() {
            Some(v) => v.push(vol),
            None => spec["volumes"] = json!([vol]),
        }
    }
    Ok(())
}

//! From a pod's container and its image to the [`ContainerSpec`] the runtime starts: the
//! command line (Kubernetes' command/args over the image's entrypoint/cmd, with `$(VAR)`
//! expansion), the environment (image env, `env` with every `valueFrom`, `envFrom`, the
//! service links), the working directory, user and groups, capabilities and the other
//! securityContext fields.
//!
//! As upstream's kubelet (`makeEnvironmentVariables`), `status.podIP(s)` and
//! `status.hostIP(s)` are the sandbox's and the node's addresses, known before the first
//! container starts (the pod's reported status does not have them yet then), and a
//! `resourceFieldRef` to a limit the container does not set reads the node's allocatable.

use std::collections::BTreeMap;
use std::sync::Arc;

use k1s_api::client::{Client, ListParams, ResourceRef};
use k1s_api::quantity::ResourceList;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

use crate::images::ImageConfig;
use crate::pod_containers::all_containers;
use crate::runtime::spec::{DEFAULT_CAPABILITIES, Process};

/// Why a container's spec cannot be built; the message is the user's to read
/// (`CreateContainerConfigError`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Expands `$(VAR)` references from `env`; `$$` escapes a `$`; unknown references stay as
/// written (upstream's `expansion.Expand`).
pub fn expand(input: &str, env: &BTreeMap<String, String>) -> String {
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'('
                && let Some(end) = input[i + 2..].find(')')
            {
                let name = &input[i + 2..i + 2 + end];
                match env.get(name) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&input[i..i + 3 + end]),
                }
                i += 3 + end;
                continue;
            }
        }
        let ch = input[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// argv as Kubernetes combines `command`/`args` with the image's `Entrypoint`/`Cmd`.
pub fn command_line(
    c: &Container,
    image: &ImageConfig,
    env: &BTreeMap<String, String>,
) -> Vec<String> {
    let command = c.command.clone().unwrap_or_default();
    let args = c.args.clone().unwrap_or_default();
    let ex = |v: Vec<String>| v.into_iter().map(|s| expand(&s, env)).collect::<Vec<_>>();
    match (command.is_empty(), args.is_empty()) {
        (false, _) => [ex(command), ex(args)].concat(),
        (true, false) => [image.entrypoint.clone(), ex(args)].concat(),
        (true, true) => [image.entrypoint.clone(), image.cmd.clone()].concat(),
    }
}

/// The pod's and the node's addresses, for `status.podIP(s)` and `status.hostIP(s)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Addresses<'a> {
    /// The sandbox's addresses, the primary first.
    pub pod_ips: &'a [String],
    /// The node's addresses, the primary first.
    pub host_ips: &'a [String],
}

/// Reads a pod field for `fieldRef` (downward API env); the IPs come from `addrs` (falling
/// back to the pod's status when `addrs` has none).
pub fn pod_field(pod: &Pod, path: &str, addrs: Addresses<'_>) -> Option<String> {
    let m = &pod.metadata;
    let s = pod.spec.as_ref();
    let st = pod.status.as_ref();
    let map_key = |prefix: &str| -> Option<String> {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("']"))
            .map(String::from)
    };
    // The addresses the caller knows, else what the pod's status says.
    let or_reported = |known: &[String], reported: Vec<String>| {
        if known.is_empty() {
            reported
        } else {
            known.to_vec()
        }
    };
    let host_ips = || {
        let reported = st.and_then(|st| st.host_ips.as_ref());
        let reported = reported.into_iter().flatten().map(|i| i.ip.clone());
        or_reported(addrs.host_ips, reported.collect())
    };
    let pod_ips = || {
        let reported = st.and_then(|st| st.pod_ips.as_ref());
        let reported = reported.into_iter().flatten().map(|i| i.ip.clone());
        or_reported(addrs.pod_ips, reported.collect())
    };
    Some(match path {
        "metadata.name" => m.name.clone()?,
        "metadata.namespace" => m.namespace.clone()?,
        "metadata.uid" => m.uid.clone()?,
        "spec.nodeName" => s?.node_name.clone()?,
        "spec.serviceAccountName" => s?.service_account_name.clone()?,
        "status.hostIP" => host_ips()
            .into_iter()
            .next()
            .or_else(|| st?.host_ip.clone())?,
        "status.hostIPs" => host_ips().join(","),
        "status.podIP" => pod_ips()
            .into_iter()
            .next()
            .or_else(|| st?.pod_ip.clone())?,
        "status.podIPs" => pod_ips().join(","),
        _ => {
            if let Some(k) = map_key("metadata.labels['") {
                m.labels.as_ref()?.get(&k)?.clone()
            } else if let Some(k) = map_key("metadata.annotations['") {
                m.annotations.as_ref()?.get(&k)?.clone()
            } else {
                return None;
            }
        }
    })
}

/// `resourceFieldRef`: a container's request or limit in units of `divisor`, rounded up; a
/// limit it does not set is the node's `allocatable` one.
pub fn resource_field(
    c: &Container,
    resource: &str,
    divisor: Option<&str>,
    allocatable: &ResourceList,
) -> Result<String, ConfigError> {
    // ConfigError is the message of CreateContainerConfigError.
    crate::volumes::container_resource_value(c, resource, divisor, allocatable)
        .map_err(|e| ConfigError(e.to_string()))
}

/// What the environment needs from the API.
pub struct EnvContext<'a> {
    pub client: &'a Arc<dyn Client>,
    pub pod: &'a Pod,
    pub hostname: &'a str,
    /// The sandbox's and the node's addresses.
    pub addresses: Addresses<'a>,
}

/// The data of ConfigMap or Secret `name` (secret values decoded); None when it is missing
/// and `optional`.
async fn data_of(
    client: &Arc<dyn Client>,
    ns: &str,
    resource: &str,
    name: &str,
    optional: bool,
) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
    use base64::Engine;
    let kind = if resource == "secrets" {
        "secret"
    } else {
        "configmap"
    };
    let r = ResourceRef::new("", "v1", resource, Some(ns));
    let obj = match client.get(&r, name).await {
        Ok(o) => o,
        Err(e) if e.is_not_found() && optional => return Ok(None),
        Err(e) if e.is_not_found() => {
            return Err(ConfigError(format!("{kind} \"{name}\" not found")));
        }
        Err(e) => return Err(ConfigError(format!("{kind} \"{name}\": {e}"))),
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj["data"].as_object().into_iter().flatten() {
        let v = v.as_str().unwrap_or_default();
        let v = if resource == "secrets" {
            let b = base64::engine::general_purpose::STANDARD
                .decode(v)
                .unwrap_or_default();
            String::from_utf8_lossy(&b).to_string()
        } else {
            v.to_string()
        };
        out.insert(k.clone(), v);
    }
    Ok(Some(out))
}

/// One key of a ConfigMap or Secret (`configMapKeyRef`, `secretKeyRef`).
async fn key_of(
    client: &Arc<dyn Client>,
    ns: &str,
    resource: &str,
    name: &str,
    key: &str,
    optional: bool,
) -> Result<Option<String>, ConfigError> {
    let Some(mut data) = data_of(client, ns, resource, name, optional).await? else {
        return Ok(None);
    };
    match data.remove(key) {
        Some(v) => Ok(Some(v)),
        None if optional => Ok(None),
        None => {
            let kind = if resource == "secrets" {
                "secret"
            } else {
                "configmap"
            };
            Err(ConfigError(format!(
                "couldn't find key {key} in {kind} {ns}/{name}"
            )))
        }
    }
}

/// Every key of a ConfigMap or Secret (`envFrom`).
async fn all_keys(
    client: &Arc<dyn Client>,
    ns: &str,
    resource: &str,
    name: &str,
    optional: bool,
) -> Result<Vec<(String, String)>, ConfigError> {
    Ok(data_of(client, ns, resource, name, optional)
        .await?
        .map(|d| d.into_iter().collect())
        .unwrap_or_default())
}

/// `{SVC}_SERVICE_HOST`, `{SVC}_SERVICE_PORT`, `{SVC}_PORT_…` for the services of the pod's
/// namespace (and `kubernetes` from `default`), as docker links were.
pub fn service_env(services: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in services {
        let ip = s["spec"]["clusterIP"].as_str().unwrap_or_default();
        if ip.is_empty() || ip == "None" {
            continue;
        }
        let name = s["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_uppercase()
            .replace('-', "_");
        let ports = s["spec"]["ports"].as_array().cloned().unwrap_or_default();
        let Some(first) = ports.first() else { continue };
        out.push((format!("{name}_SERVICE_HOST"), ip.to_string()));
        out.push((
            format!("{name}_SERVICE_PORT"),
            first["port"].as_i64().unwrap_or(0).to_string(),
        ));
        for p in &ports {
            if let Some(pn) = p["name"].as_str().filter(|n| !n.is_empty()) {
                out.push((
                    format!(
                        "{name}_SERVICE_PORT_{}",
                        pn.to_uppercase().replace('-', "_")
                    ),
                    p["port"].as_i64().unwrap_or(0).to_string(),
                ));
            }
        }
        let proto = |p: &Value| p["protocol"].as_str().unwrap_or("TCP").to_string();
        out.push((
            format!("{name}_PORT"),
            format!(
                "{}://{ip}:{}",
                proto(first).to_lowercase(),
                first["port"].as_i64().unwrap_or(0)
            ),
        ));
        for p in &ports {
            let port = p["port"].as_i64().unwrap_or(0);
            let pr = proto(p);
            let base = format!("{name}_PORT_{port}_{pr}");
            out.push((base.clone(), format!("{}://{ip}:{port}", pr.to_lowercase())));
            out.push((format!("{base}_PROTO"), pr.to_lowercase()));
            out.push((format!("{base}_PORT"), port.to_string()));
            out.push((format!("{base}_ADDR"), ip.to_string()));
        }
    }
    out
}

/// The container's environment, in order, as `KEY=VALUE`.
pub async fn environment(
    ctx: &EnvContext<'_>,
    c: &Container,
    image: &ImageConfig,
) -> Result<Vec<String>, ConfigError> {
    let pod = ctx.pod;
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    // Ordered with later entries overriding earlier ones.
    let mut order: Vec<String> = Vec::new();
    let mut vals: BTreeMap<String, String> = BTreeMap::new();
    // The node's allocatable, read once and only if a resourceFieldRef needs it.
    let mut allocatable: Option<ResourceList> = None;
    fn put(order: &mut Vec<String>, vals: &mut BTreeMap<String, String>, k: String, v: String) {
        if !vals.contains_key(&k) {
            order.push(k.clone());
        }
        vals.insert(k, v);
    }
    for kv in &image.env {
        if let Some((k, v)) = kv.split_once('=') {
            put(&mut order, &mut vals, k.into(), v.into());
        }
    }
    if !order.iter().any(|k| k == "PATH") {
        put(
            &mut order,
            &mut vals,
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        );
    }
    put(
        &mut order,
        &mut vals,
        "HOSTNAME".into(),
        ctx.hostname.into(),
    );
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let svc = ResourceRef::new("", "v1", "services", Some(&ns));
    let mut services = if links {
        ctx.client
            .list(&svc, &ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if ns != "default"
        && let Ok(k) = ctx
            .client
            .get(
                &ResourceRef::new("", "v1", "services", Some("default")),
                "kubernetes",
            )
            .await
    {
        services.push(k);
    }
    if ns == "default" && !links {
        services.retain(|s| s["metadata"]["name"] == "kubernetes");
    }
    for (k, v) in service_env(&services) {
        put(&mut order, &mut vals, k, v);
    }
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let pairs = if let Some(cm) = &from.config_map_ref {
            all_keys(
                ctx.client,
                &ns,
                "configmaps",
                &cm.name,
                cm.optional == Some(true),
            )
            .await?
        } else if let Some(s) = &from.secret_ref {
            all_keys(
                ctx.client,
                &ns,
                "secrets",
                &s.name,
                s.optional == Some(true),
            )
            .await?
        } else {
            Vec::new()
        };
        for (k, v) in pairs {
            put(&mut order, &mut vals, format!("{prefix}{k}"), v);
        }
    }
    for e in c.env.iter().flatten() {
        let value = if let Some(v) = &e.value {
            // $(VAR) refers to variables defined before this one.
            let defined: BTreeMap<String, String> = vals.clone();
            Some(expand(v, &defined))
        } else if let Some(from) = &e.value_from {
            if let Some(f) = &from.field_ref {
                Some(pod_field(pod, &f.field_path, ctx.addresses).unwrap_or_default())
            } else if let Some(r) = &from.resource_field_ref {
                let target = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
                    None => c,
                    Some(n) => pod
                        .spec
                        .iter()
                        .flat_map(all_containers)
                        .map(|(_, x)| x)
                        .find(|x| x.name == n)
                        .ok_or_else(|| ConfigError(format!("container {n} not found")))?,
                };
                if allocatable.is_none()
                    && crate::volumes::needs_node_allocatable(target, &r.resource)
                    && let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
                {
                    allocatable =
                        Some(crate::node::reported_allocatable(ctx.client.as_ref(), node).await);
                }
                Some(resource_field(
                    target,
                    &r.resource,
                    r.divisor.as_ref().map(|d| d.0.as_str()),
                    allocatable.as_ref().unwrap_or(&ResourceList::new()),
                )?)
            } else if let Some(k) = &from.config_map_key_ref {
                key_of(
                    ctx.client,
                    &ns,
                    "configmaps",
                    &k.name,
                    &k.key,
                    k.optional == Some(true),
                )
                .await?
            } else if let Some(k) = &from.secret_key_ref {
                key_of(
                    ctx.client,
                    &ns,
                    "secrets",
                    &k.name,
                    &k.key,
                    k.optional == Some(true),
                )
                .await?
            } else {
                None
            }
        } else {
            Some(String::new())
        };
        if let Some(v) = value {
            put(&mut order, &mut vals, e.name.clone(), v);
        }
    }
    Ok(order
        .iter()
        .map(|k| format!("{k}={}", vals.get(k).map(String::as_str).unwrap_or("")))
        .collect())
}

/// uid and gid from `runAsUser`/`runAsGroup` (container over pod), else the image's `User`
/// (numeric, or a name looked up in the image's `/etc/passwd` and `/etc/group`).
pub fn user(
    pod: &Pod,
    c: &Container,
    image: &ImageConfig,
    layers: &[std::path::PathBuf],
) -> Result<(u32, u32), ConfigError> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let csc = c.security_context.as_ref();
    let run_as_user = csc
        .and_then(|s| s.run_as_user)
        .or_else(|| psc.and_then(|s| s.run_as_user));
    let run_as_group = csc
        .and_then(|s| s.run_as_group)
        .or_else(|| psc.and_then(|s| s.run_as_group));
    let (img_user, img_group) = match image.user.as_deref().filter(|u| !u.is_empty()) {
        None => (None, None),
        Some(u) => {
            let (u, g) = u.split_once(':').map_or((u, None), |(u, g)| (u, Some(g)));
            let uid = match u.parse::<u32>() {
                Ok(n) => Some((n, None)),
                Err(_) => Some(lookup_passwd(layers, u).ok_or_else(|| {
                    ConfigError(format!(
                        "unable to find user {u}: no matching entries in passwd file"
                    ))
                })?)
                .map(|(uid, gid)| (uid, Some(gid))),
            };
            let gid = match g {
                None => uid.and_then(|(_, g)| g),
                Some(g) => Some(match g.parse::<u32>() {
                    Ok(n) => n,
                    Err(_) => lookup_group(layers, g).ok_or_else(|| {
                        ConfigError(format!(
                            "unable to find group {g}: no matching entries in group file"
                        ))
                    })?,
                }),
            };
            (uid.map(|(u, _)| u), gid)
        }
    };
    let uid = run_as_user.map(|u| u as u32).or(img_user).unwrap_or(0);
    let gid = run_as_group.map(|g| g as u32).or(img_group).unwrap_or(0);
    Ok((uid, gid))
}

/// The topmost layer's copy of `path` (whiteouts are not followed: good enough for passwd).
fn read_from_layers(layers: &[std::path::PathBuf], path: &str) -> Option<String> {
    layers
        .iter()
        .rev()
        .find_map(|l| std::fs::read_to_string(l.join(path)).ok())
}

fn lookup_passwd(layers: &[std::path::PathBuf], name: &str) -> Option<(u32, u32)> {
    let text = read_from_layers(layers, "etc/passwd")?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn lookup_group(layers: &[std::path::PathBuf], name: &str) -> Option<u32> {
    let text = read_from_layers(layers, "etc/group")?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[0] == name).then(|| f[2].parse().ok())?
    })
}

/// Capabilities: upstream's default set, plus `add`, minus `drop` (`ALL` drops every one).
pub fn capabilities(c: &Container) -> Vec<String> {
    let norm = |s: &String| {
        let s = s.to_ascii_uppercase();
        if s.starts_with("CAP_") {
            s
        } else {
            format!("CAP_{s}")
        }
    };
    let caps = c
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref());
    let add: Vec<String> = caps
        .and_then(|c| c.add.as_ref())
        .map(|v| v.iter().map(norm).collect())
        .unwrap_or_default();
    let drop: Vec<String> = caps
        .and_then(|c| c.drop.as_ref())
        .map(|v| v.iter().map(norm).collect())
        .unwrap_or_default();
    let mut out: Vec<String> = if drop.iter().any(|d| d == "CAP_ALL") {
        Vec::new()
    } else {
        DEFAULT_CAPABILITIES
            .iter()
            .map(|s| s.to_string())
            .filter(|c| !drop.contains(c))
            .collect()
    };
    for a in add {
        if a == "CAP_ALL" {
            return caps::all().iter().map(|c| c.to_string()).collect();
        }
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// The process part of the spec.
pub async fn process(
    ctx: &EnvContext<'_>,
    c: &Container,
    image: &ImageConfig,
    layers: &[std::path::PathBuf],
) -> Result<Process, ConfigError> {
    let env = environment(ctx, c, image).await?;
    let env_map: BTreeMap<String, String> = env
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let args = command_line(c, image, &env_map);
    if args.is_empty() {
        return Err(ConfigError("no command specified".into()));
    }
    let (uid, gid) = user(ctx.pod, c, image, layers)?;
    let psc = ctx
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref());
    let mut additional_gids: Vec<u32> = psc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g as u32)
        .collect();
    if let Some(fs) = psc.and_then(|s| s.fs_group) {
        additional_gids.push(fs as u32);
    }
    let csc = c.security_context.as_ref();
    let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
    let no_new_privileges =
        !privileged && csc.and_then(|s| s.allow_privilege_escalation) == Some(false);
    Ok(Process {
        args,
        env,
        cwd: c
            .working_dir
            .clone()
            .or_else(|| image.working_dir.clone())
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| "/".into()),
        uid,
        gid,
        additional_gids,
        capabilities: capabilities(c),
        no_new_privileges,
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expansion_as_upstream() {
        let e = env(&[("A", "1"), ("B", "two")]);
        let cases = [
            ("$(A)", "1"),
            ("x$(B)y", "xtwoy"),
            ("$$(A)", "$(A)"),
            ("$(C)", "$(C)"),
            ("$(A", "$(A"),
            ("cost $5", "cost $5"),
            ("é$(A)", "é1"),
        ];
        for (i, want) in cases {
            assert_eq!(expand(i, &e), want, "{i}");
        }
    }

    #[test]
    fn command_and_args_over_entrypoint_and_cmd() {
        let img = ImageConfig {
            entrypoint: vec!["/ep".into()],
            cmd: vec!["c1".into()],
            ..Default::default()
        };
        let c = |cmd: Option<Vec<&str>>, args: Option<Vec<&str>>| Container {
            name: "c".into(),
            command: cmd.map(|v| v.into_iter().map(String::from).collect()),
            args: args.map(|v| v.into_iter().map(String::from).collect()),
            ..Default::default()
        };
        let e = env(&[("X", "y")]);
        assert_eq!(command_line(&c(None, None), &img, &e), ["/ep", "c1"]);
        assert_eq!(
            command_line(&c(None, Some(vec!["$(X)"])), &img, &e),
            ["/ep", "y"]
        );
        assert_eq!(command_line(&c(Some(vec!["sh"]), None), &img, &e), ["sh"]);
        assert_eq!(
            command_line(&c(Some(vec!["sh"]), Some(vec!["-c", "x"])), &img, &e),
            ["sh", "-c", "x"]
        );
    }

    #[test]
    fn pod_fields_and_resources() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c",
                "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}}]},
            "status": {"podIP": "10.42.0.5"}
        }))
        .unwrap();
        let none = Addresses::default();
        assert_eq!(
            pod_field(&pod, "metadata.labels['app']", none).as_deref(),
            Some("web")
        );
        // Without known addresses, the reported ones.
        assert_eq!(
            pod_field(&pod, "status.podIP", none).as_deref(),
            Some("10.42.0.5")
        );
        assert_eq!(
            pod_field(&pod, "spec.nodeName", none).as_deref(),
            Some("n1")
        );
        assert_eq!(pod_field(&pod, "bogus", none), None);
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let alloc = ResourceList::from_json(&json!({"cpu": "4", "memory": "8Gi"})).unwrap();
        let rf = |r: &str, d: Option<&str>| resource_field(c, r, d, &alloc).unwrap();
        assert_eq!(rf("limits.cpu", None), "1");
        assert_eq!(rf("limits.cpu", Some("1m")), "250");
        assert_eq!(rf("limits.memory", Some("1Mi")), "64");
        assert_eq!(rf("requests.memory", None), "0");
        assert!(resource_field(c, "limits.gpu", None, &alloc).is_err());
        // Issue #29: a container without limits reads the node's allocatable.
        let bare = Container::default();
        let rf = |r: &str, d: Option<&str>| resource_field(&bare, r, d, &alloc).unwrap();
        assert_eq!(rf("limits.cpu", None), "4");
        assert_eq!(rf("limits.cpu", Some("1m")), "4000");
        assert_eq!(rf("limits.memory", None), "8589934592");
        assert_eq!(rf("limits.memory", Some("1Gi")), "8");
        assert_eq!(rf("requests.cpu", None), "0");
    }

    /// Issue #29: the pod's IPs are the sandbox's and the host's the node's, known before the
    /// first container starts, when the pod's status has none yet.
    #[test]
    fn ips_from_the_sandbox_and_the_node() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"}, "spec": {"containers": []}, "status": {}
        }))
        .unwrap();
        let none = Addresses::default();
        assert_eq!(pod_field(&pod, "status.podIP", none), None);
        assert_eq!(pod_field(&pod, "status.podIPs", none).as_deref(), Some(""));
        let pod_ips = ["10.42.0.9".to_string(), "fd00::9".to_string()];
        let host_ips = ["192.168.1.2".to_string()];
        let addrs = Addresses {
            pod_ips: &pod_ips,
            host_ips: &host_ips,
        };
        let f = |path: &str| pod_field(&pod, path, addrs).unwrap();
        assert_eq!(f("status.podIP"), "10.42.0.9");
        assert_eq!(f("status.podIPs"), "10.42.0.9,fd00::9");
        assert_eq!(f("status.hostIP"), "192.168.1.2");
        assert_eq!(f("status.hostIPs"), "192.168.1.2");
    }

    #[test]
    fn service_links() {
        let svc = json!({"metadata": {"name": "my-svc"}, "spec": {"clusterIP": "10.43.0.9",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}});
        let e: BTreeMap<String, String> = service_env(&[svc]).into_iter().collect();
        assert_eq!(e["MY_SVC_SERVICE_HOST"], "10.43.0.9");
        assert_eq!(e["MY_SVC_SERVICE_PORT"], "80");
        assert_eq!(e["MY_SVC_SERVICE_PORT_HTTP"], "80");
        assert_eq!(e["MY_SVC_PORT"], "tcp://10.43.0.9:80");
        assert_eq!(e["MY_SVC_PORT_80_TCP_ADDR"], "10.43.0.9");
    }

    #[test]
    fn capabilities_add_and_drop() {
        let mut c = Container {
            name: "c".into(),
            ..Default::default()
        };
        assert_eq!(capabilities(&c).len(), DEFAULT_CAPABILITIES.len());
        c.security_context = Some(
            serde_json::from_value(json!({
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}))
            .unwrap(),
        );
        assert_eq!(capabilities(&c), ["CAP_NET_BIND_SERVICE"]);
        c.security_context = Some(
            serde_json::from_value(json!({
            "capabilities": {"drop": ["NET_RAW"], "add": ["SYS_ADMIN"]}}))
            .unwrap(),
        );
        let caps = capabilities(&c);
        assert!(!caps.contains(&"CAP_NET_RAW".into()) && caps.contains(&"CAP_SYS_ADMIN".into()));
    }

    #[test]
    fn users_from_security_context_image_and_passwd() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(
            d.path().join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\nweb:x:33:34::/:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(d.path().join("etc/group"), "root:x:0:\nstaff:x:50:\n").unwrap();
        let layers = vec![d.path().to_path_buf()];
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": []}})).unwrap();
        let c = Container {
            name: "c".into(),
            ..Default::default()
        };
        let img = |u: &str| ImageConfig {
            user: Some(u.into()),
            ..Default::default()
        };
        assert_eq!(user(&pod, &c, &img(""), &layers).unwrap(), (0, 0));
        assert_eq!(user(&pod, &c, &img("1000"), &layers).unwrap(), (1000, 0));
        assert_eq!(user(&pod, &c, &img("web"), &layers).unwrap(), (33, 34));
        assert_eq!(
            user(&pod, &c, &img("web:staff"), &layers).unwrap(),
            (33, 50)
        );
        assert!(
            user(&pod, &c, &img("nobody"), &layers)
                .unwrap_err()
                .0
                .contains("unable to find user nobody")
        );
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [],
            "securityContext": {"runAsUser": 2000, "runAsGroup": 3000}}}))
        .unwrap();
        assert_eq!(user(&pod, &c, &img("web"), &layers).unwrap(), (2000, 3000));
    }
}

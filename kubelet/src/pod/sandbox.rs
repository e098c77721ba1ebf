//! The pod sandbox: what a pod's containers share. Its directory under `pods/UID`, the network
//! and IPC namespaces (bound as files there), the pod's address on the bridge, the pod cgroup,
//! and the generated `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname`.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use nix::sched::CloneFlags;

use crate::Deps;
use crate::cgroups::{QosClass, Resources};
use crate::images::RegistryAuth;
use crate::pod::blocking;
use crate::runtime::nsfile;
use crate::runtime::spec::Mount;

#[derive(Debug, thiserror::Error)]
#[error("failed to create pod sandbox: {0}")]
pub struct SandboxError(String);

/// A pod's sandbox on this node.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub uid: String,
    pub dir: PathBuf,
    pub hostname: String,
    /// None for hostNetwork pods.
    pub netns: Option<PathBuf>,
    /// None for hostIPC pods.
    pub ipcns: Option<PathBuf>,
    pub ip: Option<String>,
    pub qos: QosClass,
}

/// The pod's hostname: `spec.hostname` or the pod name, cut to 63 characters as upstream.
pub fn hostname(pod: &Pod) -> String {
    let h = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    let h: String = h.chars().take(63).collect();
    h.trim_end_matches(['-', '.']).to_string()
}

fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network) == Some(true)
}

/// `/etc/hosts` as the kubelet writes it.
pub fn hosts_file(pod: &Pod, ip: Option<&str>, hostname: &str) -> String {
    let mut s = String::from(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
    );
    if let Some(ip) = ip {
        let fqdn = pod
            .spec
            .as_ref()
            .and_then(|sp| sp.subdomain.as_ref())
            .map(|sub| {
                format!(
                    "{hostname}.{sub}.{}.svc.cluster.local\t",
                    pod.metadata.namespace.as_deref().unwrap_or("default")
                )
            })
            .unwrap_or_default();
        s.push_str(&format!("{ip}\t{fqdn}{hostname}\n"));
    }
    for alias in pod
        .spec
        .iter()
        .flat_map(|sp| sp.host_aliases.iter().flatten())
    {
        let names = alias.hostnames.clone().unwrap_or_default().join("\t");
        s.push_str(&format!(
            "\n# Entries added by HostAliases.\n{}\t{names}\n",
            alias.ip
        ));
    }
    s
}

/// Upstream's limits: nameservers beyond the third are dropped (the resolver reads three),
/// search domains beyond the 32nd too.
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCH: usize = 32;

/// `/etc/resolv.conf` for `dnsPolicy`, as upstream's kubelet writes it: `ClusterFirst`
/// (falling back to `Default` when no cluster DNS is configured, or for host-network pods),
/// `ClusterFirstWithHostNet`, `Default` (the host's resolvers, search and options) and
/// `None`, with `dnsConfig` merged in (nameservers and searches appended without duplicates,
/// options replaced by name). The host's loopback resolvers (systemd-resolved's stub) are
/// left out: a pod cannot reach them.
pub fn resolv_conf(
    pod: &Pod,
    cluster_dns: &[std::net::IpAddr],
    domain: &str,
    host: &str,
) -> String {
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let hostnet = spec.and_then(|s| s.host_network) == Some(true);
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let host = k1s_api::dns::ResolvConf::parse(host);
    let host_servers: Vec<String> = host.reachable().iter().map(|ip| ip.to_string()).collect();
    let (host_search, host_options) = (host.search, host.options);
    let cluster = !cluster_dns.is_empty()
        && (policy == "ClusterFirst" && !hostnet || policy == "ClusterFirstWithHostNet");
    let (mut servers, mut search, mut options) = match policy {
        "None" => (Vec::new(), Vec::new(), Vec::new()),
        _ if cluster => (
            cluster_dns.iter().map(|i| i.to_string()).collect(),
            [
                vec![
                    format!("{ns}.svc.{domain}"),
                    format!("svc.{domain}"),
                    domain.to_string(),
                ],
                host_search,
            ]
            .concat(),
            vec!["ndots:5".to_string()],
        ),
        _ => (host_servers, host_search, host_options),
    };
    if let Some(cfg) = spec.and_then(|s| s.dns_config.as_ref()) {
        for n in cfg.nameservers.iter().flatten() {
            if !servers.contains(n) {
                servers.push(n.clone());
            }
        }
        for d in cfg.searches.iter().flatten() {
            if !search.contains(d) {
                search.push(d.clone());
            }
        }
        for o in cfg.options.iter().flatten() {
            let name = o.name.clone().unwrap_or_default();
            options.retain(|x| x.split(':').next() != Some(name.as_str()));
            options.push(match &o.value {
                Some(v) => format!("{name}:{v}"),
                None => name,
            });
        }
    }
    servers.truncate(MAX_NAMESERVERS);
    search.truncate(MAX_SEARCH);
    let mut out = String::new();
    if !search.is_empty() {
        out.push_str(&format!("search {}\n", search.join(" ")));
    }
    for s in servers {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !options.is_empty() {
        out.push_str(&format!("options {}\n", options.join(" ")));
    }
    out
}

impl Sandbox {
    fn paths(deps: &Deps, pod: &Pod) -> Self {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let dir = deps.config.pods_dir().join(&uid);
        let hostnet = host_network(pod);
        let hostipc = pod.spec.as_ref().and_then(|s| s.host_ipc) == Some(true);
        Self {
            hostname: if hostnet {
                nix::unistd::gethostname()
                    .map(|h| h.to_string_lossy().to_string())
                    .unwrap_or_default()
            } else {
                hostname(pod)
            },
            netns: (!hostnet).then(|| dir.join("ns").join("net")),
            ipcns: (!hostipc).then(|| dir.join("ns").join("ipc")),
            ip: None,
            qos: crate::cgroups::resources::qos_class(pod),
            uid,
            dir,
        }
    }

    /// Creates the sandbox (idempotent).
    pub async fn create(deps: &Deps, pod: &Pod) -> Result<Self, SandboxError> {
        let mut sb = Self::paths(deps, pod);
        let err = |what: &str, e: &dyn std::fmt::Display| SandboxError(format!("{what}: {e}"));
        let (dir, cgroups, uid, qos) =
            (sb.dir.clone(), deps.cgroups.clone(), sb.uid.clone(), sb.qos);
        let resources = pod_resources(pod);
        blocking::run(move || {
            std::fs::create_dir_all(&dir).map_err(|e| err("creating the pod directory", &e))?;
            cgroups
                .ensure_pod(&uid, qos, &resources)
                .map_err(|e| err("creating the pod cgroup", &e))
        })
        .await?;
        if let Some(ipc) = &sb.ipcns {
            nsfile::create(ipc, CloneFlags::CLONE_NEWIPC)
                .map_err(|e| err("creating the IPC namespace", &e))?;
        }
        if let Some(net) = &sb.netns {
            nsfile::create(net, CloneFlags::CLONE_NEWNET)
                .map_err(|e| err("creating the network namespace", &e))?;
            let addr = deps
                .network
                .setup(&sb.uid, net)
                .await
                .map_err(|e| err("setting up the pod network", &e))?;
            sb.ip = Some(addr.ip.to_string());
        } else {
            sb.ip = Some(deps.config.node_ip.to_string());
        }
        sb.write_files(deps, pod)
            .map_err(|e| err("writing the pod's /etc files", &e))?;
        Ok(sb)
    }

    /// The sandbox of a pod whose containers were re-adopted after a restart.
    pub async fn open(deps: &Deps, pod: &Pod) -> Result<Self, SandboxError> {
        let mut sb = Self::paths(deps, pod);
        if sb.netns.as_deref().is_some_and(|n| !nsfile::is_bound(n)) {
            return Err(SandboxError("the network namespace is gone".into()));
        }
        sb.ip = match &sb.netns {
            Some(_) => deps.network.address(&sb.uid).map(|a| a.ip.to_string()),
            None => Some(deps.config.node_ip.to_string()),
        };
        Ok(sb)
    }

    fn write_files(&self, deps: &Deps, pod: &Pod) -> std::io::Result<()> {
        let hostnet = host_network(pod);
        let hosts = if hostnet {
            std::fs::read_to_string("/etc/hosts").unwrap_or_default()
        } else {
            hosts_file(pod, self.ip.as_deref(), &self.hostname)
        };
        std::fs::write(self.dir.join("etc-hosts"), hosts)?;
        let host_resolv = std::fs::read_to_string(&deps.config.resolv_conf).unwrap_or_default();
        std::fs::write(
            self.dir.join("resolv.conf"),
            resolv_conf(
                pod,
                &deps.config.cluster_dns,
                &deps.config.cluster_domain,
                &host_resolv,
            ),
        )?;
        std::fs::write(self.dir.join("hostname"), format!("{}\n", self.hostname))
    }

    /// The mounts of container `c`: its volumes and the sandbox's /etc files.
    pub fn mounts(&self, _pod: &Pod, _c: &Container) -> Result<Vec<Mount>, SandboxError> {
        let mut m = Vec::new();
        for (file, dest) in [
            ("etc-hosts", "/etc/hosts"),
            ("resolv.conf", "/etc/resolv.conf"),
            ("hostname", "/etc/hostname"),
        ] {
            m.push(Mount::bind(self.dir.join(file), dest, false));
        }
        Ok(m)
    }

    /// Removes the sandbox: network, namespaces, cgroup, directory.
    pub async fn destroy(self, deps: &Deps) {
        if let Err(e) = deps
            .network
            .teardown(&self.uid, self.netns.as_deref())
            .await
        {
            tracing::warn!(pod_uid = %self.uid, error = %e, "tearing down the pod network");
        }
        for ns in [&self.netns, &self.ipcns].into_iter().flatten() {
            nsfile::remove(ns);
        }
        if let Err(e) = deps.volumes.teardown(&self.uid).await {
            tracing::warn!(pod_uid = %self.uid, error = %e, "tearing down the pod's volumes");
        }
        let (cgroups, uid, qos, dir) = (deps.cgroups.clone(), self.uid.clone(), self.qos, self.dir);
        blocking::run(move || {
            if let Err(e) = cgroups.remove_pod(&uid, qos) {
                tracing::warn!(pod_uid = %uid, error = %e, "removing the pod cgroup");
            }
            remove_pod_dir(&dir);
        })
        .await;
    }

    /// Cleans up after a pod of which only the UID is known.
    pub async fn destroy_by_uid(deps: &Deps, uid: &str) {
        let dir = deps.config.pods_dir().join(uid);
        let _ = deps.network.teardown(uid, None).await;
        let _ = deps.volumes.teardown(uid).await;
        for ns in ["net", "ipc"] {
            nsfile::remove(&dir.join("ns").join(ns));
        }
        let (cgroups, uid) = (deps.cgroups.clone(), uid.to_string());
        blocking::run(move || {
            for q in [
                QosClass::Guaranteed,
                QosClass::Burstable,
                QosClass::BestEffort,
            ] {
                let _ = cgroups.remove_pod(&uid, q);
            }
            remove_pod_dir(&dir);
        })
        .await;
    }
}

/// Removes a pod directory, refusing to cross into anything still mounted under it.
fn remove_pod_dir(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = dir.display().to_string();
    let still: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .collect();
    for m in &still {
        let _ = nix::mount::umount2(*m, nix::mount::MntFlags::MNT_DETACH);
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| m.starts_with(&prefix))
    {
        tracing::warn!(dir = %dir.display(), "mounts remain under the pod directory; not removing it");
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The pod cgroup's limits.
pub fn pod_resources(pod: &Pod) -> Resources {
    crate::cgroups::resources::pod_resources(pod, None)
}

/// Why a device cannot be allowed in a container's cgroup.
#[derive(Debug, thiserror::Error)]
pub enum DeviceRuleError {
    #[error("device {path}: number {number} too large")]
    NumberTooLarge { path: String, number: u64 },
    #[error("device {path}: {source}")]
    Permissions {
        path: String,
        source: crate::cgroups::devices::BadAccess,
    },
}

/// A container cgroup's limits and device access: upstream's default device allow-list plus
/// the device plugins' devices (`nodes`, each with the cgroup permissions its plugin gave), or
/// every device when the container is privileged.
pub fn container_resources<'a>(
    c: &Container,
    privileged: bool,
    nodes: impl IntoIterator<Item = (&'a crate::runtime::spec::DeviceNode, &'a str)>,
) -> Result<Resources, DeviceRuleError> {
    use crate::cgroups::devices::{DeviceKind, DeviceRule, container_rules, parse_access};
    let extra = nodes
        .into_iter()
        .map(|(n, permissions)| {
            let number = |v: u64| {
                u32::try_from(v).map_err(|_| DeviceRuleError::NumberTooLarge {
                    path: n.path.clone(),
                    number: v,
                })
            };
            Ok(DeviceRule {
                kind: if n.block {
                    DeviceKind::Block
                } else {
                    DeviceKind::Char
                },
                major: Some(number(n.major)?),
                minor: Some(number(n.minor)?),
                access: parse_access(permissions).map_err(|source| {
                    DeviceRuleError::Permissions {
                        path: n.path.clone(),
                        source,
                    }
                })?,
            })
        })
        .collect::<Result<Vec<_>, DeviceRuleError>>()?;
    Ok(Resources {
        devices: Some(container_rules(privileged, &extra)),
        ..crate::cgroups::resources::container_resources(c)
    })
}

/// Registry credentials from the pod's imagePullSecrets (`kubernetes.io/dockerconfigjson`
/// secrets; a missing one is skipped, as upstream does).
pub async fn pull_secrets(deps: &Deps, pod: &Pod) -> Vec<RegistryAuth> {
    use base64::Engine;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let r = k1s_api::client::ResourceRef::new("", "v1", "secrets", Some(ns));
    let mut out = Vec::new();
    for s in pod
        .spec
        .iter()
        .flat_map(|s| s.image_pull_secrets.iter().flatten())
    {
        let Ok(secret) = deps.client.get(&r, &s.name).await else {
            tracing::warn!(secret = %s.name, namespace = %ns, "image pull secret not found");
            continue;
        };
        let data = secret["data"][".dockerconfigjson"]
            .as_str()
            .or_else(|| secret["data"][".dockercfg"].as_str())
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        out.extend(crate::images::registries::auth_from_docker_config_json(
            &data,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "web-0", "namespace": "shop"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn hosts_and_hostname() {
        let p = pod(json!({"containers": [], "subdomain": "web",
            "hostAliases": [{"ip": "1.2.3.4", "hostnames": ["a", "b"]}]}));
        assert_eq!(hostname(&p), "web-0");
        let h = hosts_file(&p, Some("10.42.0.9"), "web-0");
        assert!(h.contains("127.0.0.1\tlocalhost"));
        assert!(h.contains("10.42.0.9\tweb-0.web.shop.svc.cluster.local\tweb-0"));
        assert!(h.contains("1.2.3.4\ta\tb"));
    }

    #[test]
    fn resolv_conf_by_policy() {
        let host = "nameserver 192.168.1.1\nsearch lan\n";
        let dns = ["10.43.0.10".parse().unwrap()];
        let cf = pod(json!({"containers": []}));
        let r = resolv_conf(&cf, &dns, "cluster.local", host);
        assert_eq!(
            r,
            "search shop.svc.cluster.local svc.cluster.local cluster.local lan\nnameserver 10.43.0.10\noptions ndots:5\n"
        );
        // No cluster DNS: the host's, without its loopback resolvers, with its options.
        let host2 = "nameserver 127.0.0.53\nnameserver 192.168.1.1\nsearch lan\noptions edns0\n";
        assert_eq!(
            resolv_conf(&cf, &[], "cluster.local", host2),
            "search lan\nnameserver 192.168.1.1\noptions edns0\n"
        );
        // A host-network pod gets the host's with ClusterFirst, the cluster's with
        // ClusterFirstWithHostNet.
        let hn = pod(json!({"containers": [], "hostNetwork": true}));
        assert_eq!(
            resolv_conf(&hn, &dns, "cluster.local", host),
            "search lan\nnameserver 192.168.1.1\n"
        );
        let hn = pod(
            json!({"containers": [], "hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"}),
        );
        assert!(resolv_conf(&hn, &dns, "cluster.local", host).contains("nameserver 10.43.0.10\n"));
        // dnsConfig merges without duplicates; at most three nameservers.
        let merged = pod(json!({"containers": [], "dnsConfig": {
            "nameservers": ["10.43.0.10", "1.1.1.1", "8.8.8.8", "9.9.9.9"],
            "searches": ["lan", "corp"], "options": [{"name": "ndots", "value": "1"}, {"name": "edns0"}]}}));
        assert_eq!(
            resolv_conf(&merged, &dns, "cluster.local", host),
            "search shop.svc.cluster.local svc.cluster.local cluster.local lan corp\n\
             nameserver 10.43.0.10\nnameserver 1.1.1.1\nnameserver 8.8.8.8\noptions ndots:1 edns0\n"
        );
        let none = pod(json!({"containers": [], "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["8.8.8.8"], "options": [{"name": "ndots", "value": "2"}]}}));
        assert_eq!(
            resolv_conf(&none, &dns, "cluster.local", host),
            "nameserver 8.8.8.8\noptions ndots:2\n"
        );
    }
}

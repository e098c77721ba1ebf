//! PodSecurity admission: the Pod Security Standards (`privileged`, `baseline`, `restricted`)
//! chosen by namespace labels, with upstream's checks, check order and messages
//! (`k8s.io/pod-security-admission`).
//!
//! Owns the decision only: parsing `pod-security.kubernetes.io/{enforce,warn,audit}[-version]`
//! labels, evaluating a pod (or a workload's pod template) against a level, and the text of the
//! Forbidden message and of the warnings. It reads nothing from the store; the caller passes
//! the namespace labels and objects as JSON.
//!
//! Scope and deliberate differences:
//! - The checks are those of policy version v1.33 (the API version k1s serves). Every version
//!   label (`latest`, `v1.0` … `v1.33`, or a later `v1.x`) is evaluated with those checks; the
//!   version is kept only for messages (`"restricted:v1.30"`). Upstream evaluates older
//!   versions with older check variants, which differ only for long-gone fields.
//! - User-namespace relaxation (`hostUsers: false`) of runAsNonRoot/runAsUser/procMount is off,
//!   as in v1.33 with default feature gates.
//! - Exemptions (usernames, runtime classes, namespaces) are not configurable: nothing is exempt.
//! - Audit annotations are not produced.

use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;

/// A Pod Security Standards level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// Parses a level label value; an invalid value yields `restricted` and upstream's error
    /// text, as upstream's `ParseLevel`.
    pub fn parse(s: &str) -> Result<Level, (Level, &'static str)> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err((
                Level::Restricted,
                "must be one of privileged, baseline, restricted",
            )),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A policy version: `latest` or `v1.<minor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    V1(u32),
}

impl Version {
    /// Parses a version label value; an invalid value yields `latest` and upstream's error
    /// text, as upstream's `ParseVersion`.
    pub fn parse(s: &str) -> Result<Version, (Version, &'static str)> {
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let bad = (Version::Latest, r#"must be "latest" or "v1.x""#);
        let minor = s.strip_prefix("v1.").ok_or(bad)?;
        let canonical = !minor.is_empty()
            && minor.bytes().all(|b| b.is_ascii_digit())
            && (minor == "0" || !minor.starts_with('0'));
        if !canonical {
            return Err(bad);
        }
        minor.parse().map(Version::V1).map_err(|_| bad)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(m) => write!(f, "v1.{m}"),
        }
    }
}

/// A level at a version, printed `restricted:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED_LATEST: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// The three modes of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Upstream's default configuration: everything `privileged:latest`.
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED_LATEST,
            audit: LevelVersion::PRIVILEGED_LATEST,
            warn: LevelVersion::PRIVILEGED_LATEST,
        }
    }
}

pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// The namespace's policy from its `metadata.labels` (an object, or null), and the label
/// errors as `(field, message)` pairs. As upstream's `PolicyToEvaluate`: an invalid enforce
/// level means `restricted`, an invalid warn or audit level means `privileged` (fail open), an
/// invalid version means `latest`.
pub fn policy_from_labels(labels: &Value) -> (Policy, Vec<(String, String)>) {
    policy_over(Policy::default(), labels)
}

/// [`policy_from_labels`] over configured `defaults` (`--admission-control-config-file`):
/// each label overrides its mode's default.
pub fn policy_over(defaults: Policy, labels: &Value) -> (Policy, Vec<(String, String)>) {
    let mut p = defaults;
    let mut errs = Vec::new();
    let mut err = |label: &str, value: &str, msg: &str| {
        errs.push((
            format!("metadata.labels[{label}]"),
            format!("Invalid value: {value:?}: {msg}"),
        ));
    };
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    for (level_label, version_label, fail_open, slot) in [
        (ENFORCE_LABEL, ENFORCE_VERSION_LABEL, false, &mut p.enforce),
        (AUDIT_LABEL, AUDIT_VERSION_LABEL, true, &mut p.audit),
        (WARN_LABEL, WARN_VERSION_LABEL, true, &mut p.warn),
    ] {
        if let Some(v) = get(level_label) {
            slot.level = match Level::parse(v) {
                Ok(l) => l,
                Err((l, msg)) => {
                    err(level_label, v, msg);
                    if fail_open { Level::Privileged } else { l }
                }
            };
        }
        if let Some(v) = get(version_label) {
            slot.version = Version::parse(v).unwrap_or_else(|(ver, msg)| {
                err(version_label, v, msg);
                ver
            });
        }
    }
    (p, errs)
}

/// The errors upstream reports when a namespace is created or updated with invalid
/// PodSecurity labels: `(field, message)` pairs for a 422 Invalid
/// (`metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "x": must be one of
/// privileged, baseline, restricted`).
pub fn validate_namespace_labels(labels: &Value) -> Vec<(String, String)> {
    policy_from_labels(labels).1
}

/// One failed check: the short reason and the detail that names containers and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

/// `host ports, privileged` (reasons only), as upstream's `ForbiddenReason()`.
pub fn forbidden_reason(v: &[Violation]) -> String {
    v.iter()
        .map(|x| x.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `hostPort (container "c" uses hostPort 80), privileged (...)`, as upstream's
/// `ForbiddenDetail()`.
pub fn forbidden_detail(v: &[Violation]) -> String {
    v.iter()
        .map(|x| {
            if x.detail.is_empty() {
                x.reason.clone()
            } else {
                format!("{} ({})", x.reason, x.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Evaluates a pod's metadata and spec against a level, in upstream's check order: the
/// baseline checks that restricted does not replace, then (baseline) the overlapping baseline
/// checks or (restricted) the restricted checks.
pub fn evaluate(lv: LevelVersion, meta: &Value, spec: &Value) -> Vec<Violation> {
    type Check = fn(&Value, &Value) -> Option<Violation>;
    const BASELINE: &[Check] = &[
        app_armor,
        host_namespaces,
        host_ports,
        privileged,
        proc_mount,
        se_linux_options,
        sysctls,
        windows_host_process,
    ];
    const BASELINE_OVERLAP: &[Check] =
        &[capabilities_baseline, host_path_volumes, seccomp_baseline];
    const RESTRICTED: &[Check] = &[
        allow_privilege_escalation,
        capabilities_restricted,
        restricted_volumes,
        run_as_non_root,
        run_as_user,
        seccomp_restricted,
    ];
    let extra = match lv.level {
        Level::Privileged => return Vec::new(),
        Level::Baseline => BASELINE_OVERLAP,
        Level::Restricted => RESTRICTED,
    };
    BASELINE
        .iter()
        .chain(extra)
        .filter_map(|check| check(meta, spec))
        .collect()
}

/// The 403 message for a pod the enforce level rejects:
/// `pods "x" is forbidden: violates PodSecurity "restricted:latest": ...`.
pub fn forbidden_message(name: &str, lv: LevelVersion, v: &[Violation]) -> String {
    let err = format!("violates PodSecurity \"{lv}\": {}", forbidden_detail(v));
    if name.is_empty() {
        format!("pods is forbidden: {err}")
    } else {
        format!("pods {name:?} is forbidden: {err}")
    }
}

/// A pod the enforced level rejects; reads as upstream's whole Forbidden (403) message
/// ([`forbidden_message`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", forbidden_message(.name, *.level, .violations))]
pub struct PodForbidden {
    /// The pod's name (empty for a generated name).
    pub name: String,
    pub level: LevelVersion,
    pub violations: Vec<Violation>,
}

/// The warning for a pod (or pod template) the warn level would reject.
pub fn warning_message(lv: LevelVersion, v: &[Violation]) -> String {
    format!(
        "would violate PodSecurity \"{lv}\": {}",
        forbidden_detail(v)
    )
}

/// Admission of a pod create (or a significant update, see [`is_significant_pod_update`])
/// in a namespace with the given `metadata.labels`. `Ok` carries the warnings to return;
/// `Err` the refusal, whose text is the full Forbidden (403) message.
pub fn admit_pod(
    defaults: &Policy,
    ns_labels: &Value,
    pod: &Value,
) -> Result<Vec<String>, PodForbidden> {
    let (policy, _errs) = policy_over(*defaults, ns_labels);
    let meta = &pod["metadata"];
    let spec = &pod["spec"];
    let enforced = evaluate(policy.enforce, meta, spec);
    if !enforced.is_empty() {
        let name = meta["name"].as_str().unwrap_or("");
        return Err(PodForbidden {
            name: name.to_owned(),
            level: policy.enforce,
            violations: enforced,
        });
    }
    let warned = evaluate(policy.warn, meta, spec);
    Ok(if warned.is_empty() {
        Vec::new()
    } else {
        vec![warning_message(policy.warn, &warned)]
    })
}

/// The pod template of a workload object, by resource: `spec.template` for deployments,
/// replicasets, statefulsets, daemonsets, jobs and replicationcontrollers;
/// `spec.jobTemplate.spec.template` for cronjobs; `template` for podtemplates.
pub fn pod_template<'a>(resource: &str, obj: &'a Value) -> Option<&'a Value> {
    let t = match resource {
        "deployments"
        | "replicasets"
        | "statefulsets"
        | "daemonsets"
        | "jobs"
        | "replicationcontrollers" => &obj["spec"]["template"],
        "cronjobs" => &obj["spec"]["jobTemplate"]["spec"]["template"],
        "podtemplates" => &obj["template"],
        _ => return None,
    };
    t.is_object().then_some(t)
}

/// Warnings for a workload (`resource` as in [`pod_template`], `obj` the whole object): its pod
/// template is checked against the warn level, never enforced, as upstream does for pod
/// controllers. Resources without a pod template give no warnings.
pub fn warn_template(
    defaults: &Policy,
    ns_labels: &Value,
    resource: &str,
    obj: &Value,
) -> Vec<String> {
    let Some(template) = pod_template(resource, obj) else {
        return Vec::new();
    };
    let (policy, _errs) = policy_over(*defaults, ns_labels);
    let v = evaluate(policy.warn, &template["metadata"], &template["spec"]);
    if v.is_empty() {
        Vec::new()
    } else {
        vec![warning_message(policy.warn, &v)]
    }
}

/// Whether a pod update must be checked again, as upstream: a changed seccomp annotation,
/// container count, container image or per-container seccomp annotation, or a new ephemeral
/// container. Other updates (labels, status, owner references) are allowed without checks.
pub fn is_significant_pod_update(new: &Value, old: &Value) -> bool {
    const POD_SECCOMP: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_SECCOMP: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let ann = |p: &Value, k: &str| p["metadata"]["annotations"][k].as_str().map(String::from);
    if ann(new, POD_SECCOMP) != ann(old, POD_SECCOMP) {
        return true;
    }
    let significant = |c: &Value, oc: &Value| {
        let key = format!("{CONTAINER_SECCOMP}{}", c["name"].as_str().unwrap_or(""));
        c["image"] != oc["image"] || ann(new, &key) != ann(old, &key)
    };
    for field in ["containers", "initContainers"] {
        let (n, o) = (list(&new["spec"][field]), list(&old["spec"][field]));
        if n.len() != o.len() || n.iter().zip(o).any(|(c, oc)| significant(c, oc)) {
            return true;
        }
    }
    let old_eph = list(&old["spec"]["ephemeralContainers"]);
    list(&new["spec"]["ephemeralContainers"]).iter().any(|c| {
        match old_eph.iter().find(|oc| oc["name"] == c["name"]) {
            None => true,
            Some(oc) => significant(c, oc),
        }
    })
}

/// Warnings when a namespace's enforce level changes, as upstream: the first line
/// `existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest"`,
/// then one line per distinct set of reasons, naming the alphabetically first pod:
/// `a: host namespaces, privileged` or `a (and 2 other pods): privileged`. Nothing when the new
/// level is privileged, unchanged, or no pod violates it.
pub fn warn_namespace_update(
    namespace: &str,
    old_labels: &Value,
    new_labels: &Value,
    pods: &[Value],
) -> Vec<String> {
    let (new_policy, errs) = policy_from_labels(new_labels);
    let (old_policy, _) = policy_from_labels(old_labels);
    if !errs.is_empty()
        || new_policy.enforce.level == Level::Privileged
        || new_policy.enforce == old_policy.enforce
    {
        return Vec::new();
    }
    // (reasons, first pod name, count), in order of first appearance.
    let mut groups: Vec<(String, String, usize)> = Vec::new();
    for pod in pods {
        let v = evaluate(new_policy.enforce, &pod["metadata"], &pod["spec"]);
        if v.is_empty() {
            continue;
        }
        let reason = forbidden_reason(&v);
        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
        match groups.iter_mut().find(|g| g.0 == reason) {
            Some(g) => {
                if name < g.1 {
                    g.1 = name;
                }
                g.2 += 1;
            }
            None => groups.push((reason, name, 1)),
        }
    }
    if groups.is_empty() {
        return Vec::new();
    }
    let mut out = vec![format!(
        "existing pods in namespace {namespace:?} violate the new PodSecurity enforce level \"{}\"",
        new_policy.enforce
    )];
    for (reason, name, count) in groups {
        out.push(if count == 1 {
            format!("{name}: {reason}")
        } else {
            format!("{name} (and {} other pods): {reason}", count - 1)
        });
    }
    out
}

// ---- helpers ----

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

/// Init containers, containers, ephemeral containers: upstream's visiting order.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    list(&spec["initContainers"])
        .iter()
        .chain(list(&spec["containers"]))
        .chain(list(&spec["ephemeralContainers"]))
}

fn name(c: &Value) -> String {
    c["name"].as_str().unwrap_or("").to_string()
}

fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn pluralize<'a>(singular: &'a str, plural: &'a str, n: usize) -> &'a str {
    if n == 1 { singular } else { plural }
}

/// `container "a"` or `containers "a", "b"`.
fn containers_phrase(names: &[String]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

fn violation(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
    Some(Violation {
        reason: reason.into(),
        detail: detail.into(),
    })
}

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

// ---- baseline checks ----

fn app_armor(meta: &Value, spec: &Value) -> Option<Violation> {
    const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
    let allowed_type =
        |p: &Value| matches!(p["type"].as_str(), Some("RuntimeDefault" | "Localhost"));
    let mut setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let profile = &spec["securityContext"]["appArmorProfile"];
    if profile.is_object() && !allowed_type(profile) {
        setters.push("pod".to_string());
        bad_values.insert(str_of(&profile["type"]));
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        let p = &c["securityContext"]["appArmorProfile"];
        if p.is_object() && !allowed_type(p) {
            bad.push(name(c));
            bad_values.insert(str_of(&p["type"]));
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    let mut values: Vec<String> = bad_values.into_iter().collect();
    let mut annotations: Vec<String> = meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or("");
            let ok = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
            (!ok).then(|| format!("{k}={v:?}"))
        })
        .collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quote(&values)
        ),
    )
}

fn host_namespaces(_: &Value, spec: &Value) -> Option<Violation> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|f| spec[*f].as_bool() == Some(true))
        .map(|f| format!("{f}=true"))
        .collect();
    if set.is_empty() {
        return None;
    }
    violation("host namespaces", set.join(", "))
}

fn host_ports(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(spec) {
        let mut uses = false;
        for p in list(&c["ports"]) {
            if let Some(hp) = p["hostPort"].as_i64().filter(|&hp| hp != 0) {
                uses = true;
                ports.insert(hp.to_string());
            }
        }
        if uses {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    // String order, as upstream's sorted string set.
    let ports: Vec<String> = ports.into_iter().collect();
    violation(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn privileged(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["privileged"].as_bool() == Some(true))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    )
}

fn proc_mount(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in containers(spec) {
        let pm = &c["securityContext"]["procMount"];
        if !pm.is_null() && pm.as_str() != Some("Default") {
            bad.push(name(c));
            types.insert(str_of(pm));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<String> = types.into_iter().collect();
    violation(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad),
            join_quote(&types)
        ),
    )
}

fn se_linux_options(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |o: &Value| {
        let mut ok = true;
        let t = o["type"].as_str().unwrap_or("");
        if !matches!(
            t,
            "" | "container_t" | "container_init_t" | "container_kvm_t"
        ) {
            ok = false;
            bad_types.insert(t.to_string());
        }
        if !o["user"].as_str().unwrap_or("").is_empty() {
            ok = false;
            set_user = true;
        }
        if !o["role"].as_str().unwrap_or("").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let mut setters = Vec::new();
    let pod_opts = &spec["securityContext"]["seLinuxOptions"];
    if pod_opts.is_object() && !valid(pod_opts) {
        setters.push("pod".to_string());
    }
    let bad: Vec<String> = containers(spec)
        .filter(|c| {
            let o = &c["securityContext"]["seLinuxOptions"];
            o.is_object() && !valid(o)
        })
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    // As upstream, user and role are only mentioned alongside a bad type.
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        let types: Vec<String> = bad_types.into_iter().collect();
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
        if set_user {
            data.push("user may not be set".to_string());
        }
        if set_role {
            data.push("role may not be set".to_string());
        }
    }
    violation(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
        ),
    )
}

/// The sysctls baseline allows (policy v1.32+).
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

fn sysctls(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = list(&spec["securityContext"]["sysctls"])
        .iter()
        .map(|s| s["name"].as_str().unwrap_or(""))
        .filter(|n| !SAFE_SYSCTLS.contains(n))
        .map(String::from)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation("forbidden sysctls", bad.join(", "))
}

fn windows_host_process(_: &Value, spec: &Value) -> Option<Violation> {
    let host_process = |sc: &Value| sc["windowsOptions"]["hostProcess"].as_bool() == Some(true);
    let bad: Vec<String> = containers(spec)
        .filter(|c| host_process(&c["securityContext"]))
        .map(name)
        .collect();
    let mut setters = Vec::new();
    if host_process(&spec["securityContext"]) {
        setters.push("pod".to_string());
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}

/// The capabilities baseline allows to be added.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capabilities_baseline(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(spec) {
        let mut ok = true;
        for cap in list(&c["securityContext"]["capabilities"]["add"]) {
            let cap = str_of(cap);
            if !DEFAULT_CAPABILITIES.contains(&cap.as_str()) {
                ok = false;
                caps.insert(cap);
            }
        }
        if !ok {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let caps: Vec<String> = caps.into_iter().collect();
    violation(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quote(&caps)
        ),
    )
}

fn host_path_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = list(&spec["volumes"])
        .iter()
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad)
        ),
    )
}

fn valid_seccomp(p: &Value) -> bool {
    matches!(p["type"].as_str(), Some("RuntimeDefault" | "Localhost"))
}

/// The pod-level and container-level seccomp settings: `(bad setters, bad values,
/// containers that set nothing while the pod sets no valid profile)`.
fn seccomp_setters(spec: &Value) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    let pod = &spec["securityContext"]["seccompProfile"];
    let mut pod_set = false;
    if pod.is_object() {
        if valid_seccomp(pod) {
            pod_set = true;
        } else {
            setters.push("pod".to_string());
            values.insert(str_of(&pod["type"]));
        }
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        let p = &c["securityContext"]["seccompProfile"];
        if p.is_object() {
            if !valid_seccomp(p) {
                explicit.push(name(c));
                values.insert(str_of(&p["type"]));
            }
        } else if !pod_set {
            implicit.push(name(c));
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    (setters, values.into_iter().collect(), implicit)
}

fn seccomp_bad_setters(setters: &[String], values: &[String]) -> Option<Violation> {
    violation(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.join(" and "),
            join_quote(values)
        ),
    )
}

fn seccomp_baseline(_: &Value, spec: &Value) -> Option<Violation> {
    let (setters, values, _) = seccomp_setters(spec);
    if setters.is_empty() {
        return None;
    }
    seccomp_bad_setters(&setters, &values)
}

// ---- restricted checks ----

fn allow_privilege_escalation(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["allowPrivilegeEscalation"].as_bool() != Some(false))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

fn capabilities_restricted(_: &Value, spec: &Value) -> Option<Violation> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(spec) {
        let caps = &c["securityContext"]["capabilities"];
        if !caps.is_object() {
            missing_drop.push(name(c));
            continue;
        }
        if !list(&caps["drop"]).iter().any(|d| d == "ALL") {
            missing_drop.push(name(c));
        }
        let mut adds = false;
        for a in list(&caps["add"]) {
            if a != "NET_BIND_SERVICE" {
                adds = true;
                forbidden.insert(str_of(a));
            }
        }
        if adds {
            adding.push(name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        let forbidden: Vec<String> = forbidden.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&forbidden)
        ));
    }
    if details.is_empty() {
        return None;
    }
    violation("unrestricted capabilities", details.join("; "))
}

/// Volume sources restricted allows.
const ALLOWED_VOLUME_SOURCES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Restricted volume sources, in upstream's order of precedence.
const NAMED_VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let has = |v: &Value, k: &str| v.get(k).is_some_and(|s| !s.is_null());
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for v in list(&spec["volumes"]) {
        if ALLOWED_VOLUME_SOURCES.iter().any(|k| has(v, k)) {
            continue;
        }
        bad.push(name(v));
        let t = NAMED_VOLUME_SOURCES
            .iter()
            .find(|k| has(v, k))
            .copied()
            .unwrap_or("unknown");
        types.insert(t);
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    violation(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

fn run_as_non_root(_: &Value, spec: &Value) -> Option<Violation> {
    let mut setters = Vec::new();
    let mut pod_non_root = false;
    match spec["securityContext"]["runAsNonRoot"].as_bool() {
        Some(false) => setters.push("pod".to_string()),
        Some(true) => pod_non_root = true,
        None => {}
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match c["securityContext"]["runAsNonRoot"].as_bool() {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_non_root => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return violation(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if !implicit.is_empty() {
        return violation(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicit)
            ),
        );
    }
    None
}

fn run_as_user(_: &Value, spec: &Value) -> Option<Violation> {
    let is_root = |sc: &Value| sc["runAsUser"].as_i64() == Some(0);
    let mut setters = Vec::new();
    if is_root(&spec["securityContext"]) {
        setters.push("pod".to_string());
    }
    let bad: Vec<String> = containers(spec)
        .filter(|c| is_root(&c["securityContext"]))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

fn seccomp_restricted(_: &Value, spec: &Value) -> Option<Violation> {
    let (setters, values, implicit) = seccomp_setters(spec);
    if !setters.is_empty() {
        return seccomp_bad_setters(&setters, &values);
    }
    if !implicit.is_empty() {
        return violation(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_phrase(&implicit)
            ),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(enforce: &str) -> Value {
        json!({ ENFORCE_LABEL: enforce })
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "x"}, "spec": spec})
    }

    fn restricted_ok_container(name: &str) -> Value {
        json!({
            "name": name, "image": "i",
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "runAsNonRoot": true,
                "seccompProfile": {"type": "RuntimeDefault"},
                "capabilities": {"drop": ["ALL"]}
            }
        })
    }

    #[test]
    fn labels_parse_as_upstream() {
        let (p, errs) = policy_from_labels(&json!({
            ENFORCE_LABEL: "baseline",
            ENFORCE_VERSION_LABEL: "v1.30",
            WARN_LABEL: "restricted",
        }));
        assert!(errs.is_empty());
        assert_eq!(p.enforce.to_string(), "baseline:v1.30");
        assert_eq!(p.warn.to_string(), "restricted:latest");
        assert_eq!(p.audit.to_string(), "privileged:latest");

        let (p, errs) = policy_from_labels(&json!({
            ENFORCE_LABEL: "bogus",
            WARN_LABEL: "bogus",
            AUDIT_VERSION_LABEL: "v1.01",
        }));
        assert_eq!(
            p.enforce.level,
            Level::Restricted,
            "invalid enforce fails closed"
        );
        assert_eq!(p.warn.level, Level::Privileged, "invalid warn fails open");
        assert_eq!(p.audit.version, Version::Latest);
        assert_eq!(
            errs[0],
            (
                "metadata.labels[pod-security.kubernetes.io/enforce]".to_string(),
                "Invalid value: \"bogus\": must be one of privileged, baseline, restricted"
                    .to_string()
            )
        );
        assert_eq!(
            errs[1].1,
            "Invalid value: \"v1.01\": must be \"latest\" or \"v1.x\""
        );
        assert_eq!(errs.len(), 3);
        assert_eq!(policy_from_labels(&Value::Null).0, Policy::default());
        for v in [
            "v1",
            "v1.",
            "v2.0",
            "1.2",
            "v1.x",
            "v1.-1",
            "v1.99999999999999",
        ] {
            assert!(Version::parse(v).is_err(), "{v}");
        }
        assert_eq!(Version::parse("v1.0"), Ok(Version::V1(0)));
    }

    #[test]
    fn restricted_message_matches_upstream() {
        let p = pod(json!({"containers": [{"name": "c", "image": "nginx"}]}));
        let err = admit_pod(&Policy::default(), &labels("restricted"), &p).unwrap_err();
        assert_eq!(err.name, "x");
        assert_eq!(err.level.to_string(), "restricted:latest");
        assert_eq!(err.violations.len(), 4);
        assert_eq!(
            err.to_string(),
            "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": \
             allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        let ok = pod(json!({"containers": [restricted_ok_container("c")]}));
        assert_eq!(
            admit_pod(&Policy::default(), &labels("restricted"), &ok),
            Ok(vec![])
        );
        // Pod-level settings cover containers.
        let pod_level = pod(json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "Localhost"}},
            "containers": [{"name": "c", "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]
        }));
        assert_eq!(
            admit_pod(&Policy::default(), &labels("restricted"), &pod_level),
            Ok(vec![])
        );
    }

    #[test]
    fn checks_table() {
        // (level, spec, metadata, expected forbidden detail)
        let cases: Vec<(Level, Value, Value, &str)> = vec![
            (
                Level::Baseline,
                json!({"hostNetwork": true, "hostPID": true, "containers": [{"name": "c"}]}),
                json!({}),
                "host namespaces (hostNetwork=true, hostPID=true)",
            ),
            (
                Level::Baseline,
                json!({"containers": [{"name": "a", "securityContext": {"privileged": true}},
                                                   {"name": "b", "securityContext": {"privileged": true}}]}),
                json!({}),
                "privileged (containers \"a\", \"b\" must not set securityContext.privileged=true)",
            ),
            (
                Level::Baseline,
                json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 80}]}]}),
                json!({}),
                "hostPort (container \"c\" uses hostPorts 80, 8080)",
            ),
            (
                Level::Baseline,
                json!({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}}}]}),
                json!({}),
                "non-default capabilities (container \"c\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add)",
            ),
            (
                Level::Baseline,
                json!({"volumes": [{"name": "h", "hostPath": {"path": "/"}}], "containers": [{"name": "c"}]}),
                json!({}),
                "hostPath volumes (volume \"h\")",
            ),
            (
                Level::Baseline,
                json!({"containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}),
                json!({}),
                "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
            ),
            (
                Level::Baseline,
                json!({"securityContext": {"seLinuxOptions": {"type": "spc_t", "user": "u"}}, "containers": [{"name": "c"}]}),
                json!({}),
                "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set)",
            ),
            (
                Level::Baseline,
                json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_syncookies", "value": "1"}]}, "containers": [{"name": "c"}]}),
                json!({}),
                "forbidden sysctls (kernel.msgmax)",
            ),
            (
                Level::Baseline,
                json!({"securityContext": {"windowsOptions": {"hostProcess": true}}, "containers": [{"name": "c", "securityContext": {"windowsOptions": {"hostProcess": true}}}]}),
                json!({}),
                "hostProcess (pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true)",
            ),
            (
                Level::Baseline,
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "c"}]}),
                json!({}),
                "seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")",
            ),
            (
                Level::Baseline,
                json!({"containers": [{"name": "c", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}),
                json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}}),
                "forbidden AppArmor profiles (container \"c\" and annotation must not set AppArmor profile type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")",
            ),
            (
                Level::Restricted,
                json!({"volumes": [{"name": "h", "hostPath": {}}, {"name": "n", "nfs": {}}, {"name": "s", "secret": {}}, {"name": "u", "weird": {}}],
                                       "containers": [restricted_ok_container("c")]}),
                json!({}),
                "restricted volume types (volumes \"h\", \"n\", \"u\" use restricted volume types \"hostPath\", \"nfs\", \"unknown\")",
            ),
            (
                Level::Restricted,
                json!({"securityContext": {"runAsNonRoot": false, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
                                       "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 0, "capabilities": {"drop": ["ALL"], "add": ["SYS_TIME"]}}}]}),
                json!({}),
                "unrestricted capabilities (container \"c\" must not include \"SYS_TIME\" in securityContext.capabilities.add), \
              runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), \
              runAsUser=0 (pod and container \"c\" must not set runAsUser=0)",
            ),
            (
                Level::Privileged,
                json!({"hostNetwork": true, "containers": [{"name": "c", "securityContext": {"privileged": true}}]}),
                json!({}),
                "",
            ),
            // Malformed input never panics.
            (Level::Restricted, json!("not an object"), json!(null), ""),
            (
                Level::Restricted,
                json!({"containers": "x", "volumes": 3, "securityContext": []}),
                json!(7),
                "",
            ),
        ];
        for (i, (level, spec, meta, want)) in cases.into_iter().enumerate() {
            let lv = LevelVersion {
                level,
                version: Version::Latest,
            };
            let got = forbidden_detail(&evaluate(lv, &meta, &spec));
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn overlapping_baseline_checks_are_replaced_at_restricted() {
        let spec = json!({"volumes": [{"name": "h", "hostPath": {}}], "containers": [restricted_ok_container("c")]});
        let lv = LevelVersion {
            level: Level::Restricted,
            version: Version::Latest,
        };
        let reasons = forbidden_reason(&evaluate(lv, &json!({}), &spec));
        assert_eq!(reasons, "restricted volume types");
    }

    #[test]
    fn warnings_for_pods_and_templates() {
        let ns = json!({ENFORCE_LABEL: "baseline", WARN_LABEL: "restricted", WARN_VERSION_LABEL: "v1.33"});
        let p = pod(
            json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                           "containers": [{"name": "c", "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}),
        );
        assert_eq!(
            admit_pod(&Policy::default(), &ns, &p).unwrap(),
            vec!["would violate PodSecurity \"restricted:v1.33\": allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)".to_string()]
        );
        let deploy = json!({"spec": {"template": {"metadata": {}, "spec": {"hostPID": true, "containers": [restricted_ok_container("c")]}}}});
        assert_eq!(
            warn_template(&Policy::default(), &ns, "deployments", &deploy),
            vec![
                "would violate PodSecurity \"restricted:v1.33\": host namespaces (hostPID=true)"
                    .to_string()
            ]
        );
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [restricted_ok_container("c")]}}}}}});
        assert!(warn_template(&Policy::default(), &ns, "cronjobs", &cron).is_empty());
        assert!(warn_template(&Policy::default(), &ns, "configmaps", &deploy).is_empty());
        assert!(warn_template(&Policy::default(), &ns, "deployments", &json!({})).is_empty());
        // Generated names: no name in the message.
        let unnamed = json!({"spec": {"hostIPC": true, "containers": [{"name": "c"}]}});
        assert_eq!(
            admit_pod(&Policy::default(), &ns, &unnamed)
                .unwrap_err()
                .to_string(),
            "pods is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostIPC=true)"
        );
    }

    #[test]
    fn significant_updates() {
        let old = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c", "image": "i1"}]}});
        let mut relabeled = old.clone();
        relabeled["metadata"]["labels"]["a"] = json!("2");
        assert!(!is_significant_pod_update(&relabeled, &old));
        let mut image = old.clone();
        image["spec"]["containers"][0]["image"] = json!("i2");
        assert!(is_significant_pod_update(&image, &old));
        let mut eph = old.clone();
        eph["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "busybox"}]);
        assert!(is_significant_pod_update(&eph, &old));
        assert!(!is_significant_pod_update(&eph, &eph.clone()));
    }

    #[test]
    fn namespace_update_warnings() {
        let bad = |n: &str| json!({"metadata": {"name": n}, "spec": {"hostNetwork": true, "containers": [{"name": "c"}]}});
        let pods = vec![
            bad("b"),
            bad("a"),
            bad("c"),
            json!({"metadata": {"name": "z"}, "spec": {"containers": [{"name": "c", "securityContext": {"privileged": true}}]}}),
            json!({"metadata": {"name": "ok"}, "spec": {"containers": [{"name": "c"}]}}),
        ];
        let w = warn_namespace_update("ns", &json!({}), &labels("baseline"), &pods);
        assert_eq!(
            w,
            vec![
                "existing pods in namespace \"ns\" violate the new PodSecurity enforce level \"baseline:latest\"".to_string(),
                "a (and 2 other pods): host namespaces".to_string(),
                "z: privileged".to_string(),
            ]
        );
        assert!(
            warn_namespace_update("ns", &labels("baseline"), &labels("baseline"), &pods).is_empty()
        );
        assert!(warn_namespace_update("ns", &json!({}), &labels("privileged"), &pods).is_empty());
        assert!(validate_namespace_labels(&labels("nope")).len() == 1);
    }
}

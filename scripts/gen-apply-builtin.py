#!/usr/bin/env python3
"""Generate the built-in server-side apply type table (apimachinery/src/apply/builtin.rs).

Reads the k8s-openapi 0.29 sources for Kubernetes 1.33 (the `DeepMerge` impls encode the
list/map merge semantics), adds the `+structType=atomic` structs and list-map key defaults
(which k8s-openapi does not encode), and writes a compact text table that `schema.rs` parses.

Marks the struct fields Go always serializes (non-pointer structs, slices and maps without
`omitempty`) from scripts/apply-go-presence.txt, facts of the Go API types kept in the
repository (no registry package reachable here carries k8s.io/api). That file is refreshed
from a k8s.io/api checkout plus k8s.io/apimachinery's pkg/apis/meta/v1/types.go copied to
<api>/_meta/v1/types.go.

Usage: gen-apply-builtin.py <k8s-openapi-src/v1_33> <out.rs> <apply-go-presence.txt>
       gen-apply-builtin.py --extract-presence <k8s.io/api checkout> <apply-go-presence.txt>
scripts/check-generated.sh finds the k8s-openapi sources (a crates.io package) and checks that
regenerating changes nothing.
"""
import os
import re
import sys

EXTRACT = sys.argv[1] == "--extract-presence"
ROOT = sys.argv[1] if not EXTRACT else None
GO_API = sys.argv[2] if EXTRACT else None
OUT = sys.argv[2] if not EXTRACT else None
PRESENCE_FILE = sys.argv[3]
PRESENCE_HEADER = """# Fields Go always serializes, for scripts/gen-apply-builtin.py: `<type> <json field> s|n`.
# `s`: a non-pointer struct (always an object); `n`: a pointer, slice or map without
# `omitempty` (always present, maybe null). Facts of the Go API types of Kubernetes 1.33
# (k8s.io/api, k8s.io/apimachinery meta/v1), which no package registry reachable here
# provides; refresh with `gen-apply-builtin.py --extract-presence <k8s.io/api checkout>`.
"""

# Structs marked `+structType=atomic` in k8s.io/api and k8s.io/apimachinery (1.33).
ATOMIC_STRUCTS = {
    "api.admissionregistration.v1.MatchResources",
    "api.admissionregistration.v1.NamedRuleWithOperations",
    "api.admissionregistration.v1.ParamKind",
    "api.admissionregistration.v1.ParamRef",
    "api.admissionregistration.v1.Variable",
    "api.admissionregistration.v1alpha1.MatchResources",
    "api.admissionregistration.v1alpha1.NamedRuleWithOperations",
    "api.admissionregistration.v1alpha1.ParamKind",
    "api.admissionregistration.v1alpha1.ParamRef",
    "api.admissionregistration.v1beta1.MatchResources",
    "api.admissionregistration.v1beta1.NamedRuleWithOperations",
    "api.admissionregistration.v1beta1.ParamKind",
    "api.admissionregistration.v1beta1.ParamRef",
    "api.admissionregistration.v1beta1.Variable",
    "api.autoscaling.v1.CrossVersionObjectReference",
    "api.core.v1.ConfigMapKeySelector",
    "api.core.v1.EndpointAddress",
    "api.core.v1.EndpointPort",
    "api.core.v1.FileKeySelector",
    "api.core.v1.LocalObjectReference",
    "api.core.v1.NodeSelector",
    "api.core.v1.NodeSelectorTerm",
    "api.core.v1.ObjectFieldSelector",
    "api.core.v1.ObjectReference",
    "api.core.v1.ResourceFieldSelector",
    "api.core.v1.ScopeSelector",
    "api.core.v1.SecretKeySelector",
    "api.core.v1.SecretReference",
    "api.core.v1.TopologySelectorTerm",
    "api.core.v1.TypedLocalObjectReference",
    "api.discovery.v1.EndpointPort",
    "api.networking.v1.ServiceBackendPort",
    "api.rbac.v1.RoleRef",
    "api.rbac.v1.Subject",
    "apimachinery.pkg.apis.meta.v1.LabelSelector",
    "apimachinery.pkg.apis.meta.v1.OwnerReference",
}

# `+default=` values of list-map key fields: (type, json field) -> JSON literal.
KEY_DEFAULTS = {
    ("api.core.v1.ContainerPort", "protocol"): '"TCP"',
    ("api.core.v1.ServicePort", "protocol"): '"TCP"',
}

# k8s-openapi derives some list strategies from the strategic-merge-patch merge key; these are
# the `x-kubernetes-list-type`/`x-kubernetes-list-map-keys` that server-side apply uses in 1.33.
LIST_OVERRIDES = {
    ("api.apps.v1.StatefulSetSpec", "volumeClaimTemplates"): "atomic",
    ("api.batch.v1.JobStatus", "conditions"): "atomic",
    ("api.core.v1.Container", "ports"): "map:containerPort,protocol",
    ("api.core.v1.EphemeralContainer", "ports"): "map:containerPort,protocol",
    ("api.core.v1.PodSpec", "topologySpreadConstraints"): "map:topologyKey,whenUnsatisfiable",
    ("api.core.v1.PodStatus", "hostIPs"): "atomic",
    ("api.core.v1.ServiceSpec", "ports"): "map:port,protocol",
}

# Kinds served with a status subresource (main-resource writes do not own `status`).
STATUS_SUBRESOURCE = {
    ("", "Pod"), ("", "Service"), ("", "Node"), ("", "Namespace"), ("", "PersistentVolume"),
    ("", "PersistentVolumeClaim"), ("", "ResourceQuota"), ("", "ReplicationController"),
    ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
    ("batch", "Job"), ("batch", "CronJob"), ("policy", "PodDisruptionBudget"),
    ("networking.k8s.io", "Ingress"), ("networking.k8s.io", "ServiceCIDR"),
    ("autoscaling", "HorizontalPodAutoscaler"), ("storage.k8s.io", "VolumeAttachment"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("resource.k8s.io", "ResourceClaim"),
}

# Preferred version when a kind is served in several versions of a group.
def version_rank(v):
    m = re.match(r"v(\d+)(alpha|beta)?(\d*)$", v)
    if not m:
        return (0, 0, 0)
    major = int(m.group(1))
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, major, minor)


def go_presence(root):
    """{short type name: {json field: "s" (always an object) | "n" (always present, maybe null)}}."""
    SCALARLIKE = {"Time", "MicroTime", "Quantity", "IntOrString", "Duration", "RawExtension", "FieldsV1", "JSON"}
    structs = {}  # (pkg, name) -> list of (jsonname, type, opts) or ('inline', type)
    for dp, _, fs in os.walk(root):
        if "types.go" not in fs:
            continue
        pkg = os.path.relpath(dp, root).replace("/", ".")
        pkg = "meta.v1" if pkg == "_meta.v1" else pkg
        text = open(os.path.join(dp, "types.go")).read()
        for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", text, re.S | re.M):
            fields = []
            for line in m.group(2).splitlines():
                line = line.strip()
                if line.startswith("//") or not line:
                    continue
                fm = re.match(r'(?:(\w+)\s+)?([\*\[\]\w\.]+(?:\[[^\]]*\][\*\w\.]+)?)\s+`json:"([^"]*)"', line)
                if not fm:
                    continue
                name, typ, tag = fm.groups()
                parts = tag.split(",")
                if "inline" in parts[1:] or (name is None and parts[0] == ""):
                    fields.append(("inline", typ, []))
                elif parts[0] and parts[0] != "-":
                    fields.append((parts[0], typ, parts[1:]))
            structs[(pkg, m.group(1))] = fields
    out = {}
    def base(t):
        return t.split(".")[-1]
    ALIASES = {"metav1": "meta.v1", "v1": "core.v1", "corev1": "core.v1", "api": "core.v1"}
    def find_pkg(pkg, typ):
        b = base(typ)
        if "." in typ:
            q = ALIASES.get(typ.split(".")[0])
            if q and (q, b) in structs:
                return q
        if (pkg, b) in structs:
            return pkg
        for q in ("meta.v1", "core.v1"):
            if (q, b) in structs:
                return q
        return None
    def resolve(pkg, name, seen=()):
        res = {}
        for (j, typ, opts) in structs.get((pkg, name), []):
            if j == "inline":
                t = base(typ.lstrip("*"))
                p = find_pkg(pkg, typ.lstrip("*")) or pkg
                if (p, t) not in seen:
                    res.update(resolve(p, t, seen + ((p, t),)))
                continue
            omit = "omitempty" in opts
            if typ.startswith("*") or typ.startswith("[]") or typ.startswith("map["):
                if not omit and base(typ.lstrip("*[]")) not in SCALARLIKE:
                    res[j] = "n"
            else:
                b = base(typ)
                p = find_pkg(pkg, typ)
                if p and b not in SCALARLIKE:
                    res[j] = "s"
        return res
    out = {}
    for (pkg, name) in structs:
        r = resolve(pkg, name)
        if r:
            out[pkg + "." + name] = r
    # apiextensions and apiregistration types are not in k8s.io/api.
    out.setdefault("apiextensions.v1.CustomResourceDefinition", {}).update({"metadata": "s", "spec": "s", "status": "s"})
    out.setdefault("apiextensions.v1.CustomResourceDefinitionSpec", {}).update({"names": "s", "versions": "n"})
    out.setdefault("apiregistration.v1.APIService", {}).update({"metadata": "s", "spec": "s", "status": "s"})
    return out


def read_presence(path):
    out = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        typ, field, flag = line.split()
        out.setdefault(typ, {})[field] = flag
    return out


if EXTRACT:
    # Every fact of the Go types; the generator applies those of fields it emits.
    facts = go_presence(GO_API)
    with open(PRESENCE_FILE, "w") as f:
        f.write(PRESENCE_HEADER)
        for typ in sorted(facts):
            for field in sorted(facts[typ]):
                f.write(f"{typ} {field} {facts[typ][field]}\n")
    sys.exit(0)

PRESENCE = read_presence(PRESENCE_FILE)


SCALARS = {
    "std::string::String", "bool", "i32", "i64", "f64", "crate::ByteString",
    "crate::apimachinery::pkg::api::resource::Quantity",
    "crate::apimachinery::pkg::util::intstr::IntOrString",
    "crate::apimachinery::pkg::apis::meta::v1::Time",
    "crate::apimachinery::pkg::apis::meta::v1::MicroTime",
}
DEDUCED = {
    "crate::serde_json::Value",
    "crate::apimachinery::pkg::runtime::RawExtension",
    "crate::apimachinery::pkg::apis::meta::v1::FieldsV1",
    "crate::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON",
    "crate::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray",
    "crate::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool",
    "crate::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrStringArray",
}


def rust_to_name(path):
    # crate::api::core::v1::PodSpec -> api.core.v1.PodSpec
    return path[len("crate::"):].replace("::", ".")


structs = {}  # name -> dict(fields=[(json, rusttype, strategy)], resource=(group, version, kind))


def split_generic(s, prefix):
    assert s.startswith(prefix + "<") and s.endswith(">"), (s, prefix)
    return s[len(prefix) + 1:-1]


def parse_file(path):
    text = open(path).read()
    m = re.search(r"// Generated from definition (\S+)", text)
    rel = os.path.relpath(path, ROOT)
    module = os.path.dirname(rel).replace("/", ".")
    tm = re.search(r"^pub struct (\w+)\(pub (.+)\);", text, re.M)
    if tm:
        structs[module + "." + tm.group(1)] = {"alias": tm.group(2), "resource": None}
        return
    sm = re.search(r"^pub struct (\w+) \{\n(.*?)^\}", text, re.S | re.M)
    if not sm:
        return
    name = module + "." + sm.group(1)
    body = sm.group(2)
    rust_fields = {}
    for fm in re.finditer(r"^    pub (r#)?(\w+): (.+),$", body, re.M):
        rust_fields[fm.group(2)] = fm.group(3)
    json_names = {}
    for jm in re.finditer(r'"([^"]+)" => Field::Key_(\w+),', text):
        json_names.setdefault(jm.group(2), jm.group(1))
    strategies = {}
    dm = re.search(r"impl crate::DeepMerge for \w+ \{(.*?)\n\}\n", text, re.S)
    if dm:
        d = dm.group(1)
        for lm in re.finditer(r"merge_strategies::list::(atomic|set)\(&mut self\.(\w+),", d):
            strategies[lm.group(2)] = ("list", lm.group(1))
        for lm in re.finditer(r"merge_strategies::list::map\(\s*&mut self\.(\w+),\s*other\.\w+,\s*&\[(.*?)\],", d, re.S):
            keys = re.findall(r"lhs\.(\w+) == rhs\.", lm.group(2))
            strategies[lm.group(1)] = ("map", keys)
        for lm in re.finditer(r"merge_strategies::map::(atomic|granular)\(&mut self\.(\w+),", d):
            strategies[lm.group(2)] = ("dict", lm.group(1))
    fields = []
    for rname, rty in rust_fields.items():
        if rname not in json_names:
            raise SystemExit(f"{path}: no json name for {rname}")
        fields.append((json_names[rname], rname, rty, strategies.get(rname)))
    res = None
    rm = re.search(r'const GROUP: &\'static str = "([^"]*)";\s*const KIND: &\'static str = "([^"]*)";\s*const VERSION: &\'static str = "([^"]*)";', text)
    if rm:
        res = (rm.group(1), rm.group(2), rm.group(3))
    structs[name] = {"fields": fields, "resource": res, "def": m.group(1) if m else None}


for dirpath, _, files in os.walk(ROOT):
    for f in sorted(files):
        if f.endswith(".rs") and f != "mod.rs":
            parse_file(os.path.join(dirpath, f))


def type_expr(rty, strategy, owner, used, owner_field=None):
    """Returns the table type expression for a Rust field type."""
    t = rty
    while t.startswith("Option<") or t.startswith("Box<") or t.startswith("std::boxed::Box<"):
        t = t[t.index("<") + 1:-1]
    if t.startswith("std::vec::Vec<"):
        elem = split_generic(t, "std::vec::Vec")
        kind = "atomic"
        override = LIST_OVERRIDES.get(owner_field)
        if override and override.startswith("map:"):
            strategy = ("json-map", override[4:].split(","))
        elif override:
            strategy = ("list", override)
        if strategy and strategy[0] == "json-map":
            en = rust_to_name(elem)
            keys = []
            for jk in strategy[1]:
                d = KEY_DEFAULTS.get((en, jk))
                keys.append(jk + ("=" + d if d else ""))
            kind = "map:" + ",".join(keys)
        elif strategy and strategy[0] == "list":
            kind = strategy[1]
        elif strategy and strategy[0] == "map":
            et = elem
            en = rust_to_name(et)
            ej = {r: j for (j, r, _, _) in structs[en]["fields"]}
            keys = []
            for k in strategy[1]:
                jk = ej[k]
                d = KEY_DEFAULTS.get((en, jk))
                keys.append(jk + ("=" + d if d else ""))
            kind = "map:" + ",".join(keys)
        return f"[{kind}]" + type_expr(elem, None, owner, used)
    if t.startswith("std::collections::BTreeMap<std::string::String, "):
        elem = t[len("std::collections::BTreeMap<std::string::String, "):-1]
        kind = "g"
        if strategy and strategy[0] == "dict" and strategy[1] == "atomic":
            kind = "a"
        return "{" + kind + "}" + type_expr(elem, None, owner, used)
    if t in SCALARS:
        return "s"
    if t in DEDUCED:
        return "j"
    if t.startswith("crate::"):
        n = rust_to_name(t)
        if n not in structs:
            raise SystemExit(f"unknown type {t} in {owner}")
        if "alias" in structs[n]:
            return type_expr(structs[n]["alias"], None, owner, used)
        used.add(n)
        return n
    raise SystemExit(f"unhandled type {t} in {owner}")


# Kinds: every top-level resource, preferring the most stable version of a group.
kinds = {}
for name, s in structs.items():
    if s["resource"] and s["resource"][1] and not name.endswith("List"):
        g, k, v = s["resource"]
        if k.endswith("List"):
            continue
        cur = kinds.get((g, k))
        if cur is None or version_rank(v) > version_rank(cur[1]):
            kinds[(g, k)] = (name, v)

out_types = {}
todo = [n for (n, _) in kinds.values()]
seen = set()
while todo:
    n = todo.pop()
    if n in seen:
        continue
    seen.add(n)
    s = structs[n]
    used = set()
    lines = []
    if s["resource"]:
        lines.append("apiVersion s")
        lines.append("kind s")
    for (j, r, rty, strat) in s["fields"]:
        lines.append(f"{j} {type_expr(rty, strat, n, used, (n, j))}")
    out_types[n] = lines
    todo.extend(sorted(used))

# Short aliases keep the table small.
def short(n):
    return (n.replace("apimachinery.pkg.apis.meta.", "meta.")
             .replace("apiextensions_apiserver.pkg.apis.apiextensions.", "apiextensions.")
             .replace("kube_aggregator.pkg.apis.apiregistration.", "apiregistration.")
             .replace("api.", "", 1) if n.startswith("api.") else
            n.replace("apimachinery.pkg.apis.meta.", "meta.")
             .replace("apiextensions_apiserver.pkg.apis.apiextensions.", "apiextensions.")
             .replace("kube_aggregator.pkg.apis.apiregistration.", "apiregistration."))


def shorten_expr(e):
    return re.sub(r"[A-Za-z_][\w.]*\.[A-Z]\w*", lambda m: short(m.group(0)), e)


buf = []
for (g, k), (n, v) in sorted(kinds.items()):
    st = " status" if (g, k) in STATUS_SUBRESOURCE else ""
    buf.append(f"K {g or '-'} {k} {v} {short(n)}{st}")
for n in sorted(out_types):
    atomic = " atomic" if n in ATOMIC_STRUCTS else ""
    buf.append(f"@{short(n)}{atomic}")
    pres = PRESENCE.get(short(n), {})
    for line in out_types[n]:
        j, e = line.split(" ", 1)
        flag = " " + pres[j] if j in pres else ""
        buf.append(f" {j} {shorten_expr(e)}{flag}")

missing = ATOMIC_STRUCTS - set(structs)
if missing:
    print("warning: atomic structs not in k8s-openapi:", sorted(missing), file=sys.stderr)

with open(OUT, "w") as f:
    f.write("// @generated by scripts/gen-apply-builtin.py from k8s-openapi 0.29 (Kubernetes 1.33) and\n")
    f.write("// scripts/apply-go-presence.txt (facts of the Go API types).\n")
    f.write("// Do not edit.\n")
    f.write("//\n")
    f.write("// `K <group|-> <kind> <version> <root type> [status]` lines name the kinds; `@<type> [atomic]`\n")
    f.write("// starts a struct whose fields follow as ` <json name> <type>`. Types: `s` scalar, `j` untyped,\n")
    f.write("// `[atomic]T` `[set]T` `[map:k1,k2=default]T` lists, `{g}T` `{a}T` granular/atomic maps.\n")
    f.write("// A trailing `s` (`n`) marks a field Go always serializes as an object (as null if unset).\n\n")
    f.write("pub(super) const TABLE: &str = r#\"\n")
    for line in buf:
        f.write(line + "\n")
    f.write("\"#;\n")
print(f"{len(kinds)} kinds, {len(out_types)} types, {len(buf)} lines", file=sys.stderr)

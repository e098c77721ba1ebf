#!/usr/bin/env python3
"""Generates tables.rs from the Go sources: the reference that refreshes
scripts/protobuf-go-facts.txt (CI does not run this; scripts/gen-protobuf-tables.py, which
reads crates.io packages plus that facts file, regenerates tables.rs and CI diffs it).

The facts come from the `protobuf:"..."` and `json:"..."` struct tags and Go field
types of the Kubernetes API types, read from git clones of k8s.io/api and
k8s.io/apimachinery at tag REV (nothing is built or executed from them).

Usage: K8S_API_REPO=<k8s.io/api git dir> K8S_APIMACHINERY_REPO=<apimachinery git dir> \
         python3 scripts/gen-protobuf-tables-go.py /tmp/tables.rs
       python3 scripts/gen-protobuf-tables.py --extract-facts <k8s-pb>/src \
         <k8s-openapi>/src/v1_36 /tmp/tables.rs scripts/protobuf-go-facts.txt
(`fetch github:kubernetes/api` and `github:kubernetes/apimachinery` give both git dirs; no
package registry reachable from CI carries them.) Its output names
scripts/gen-protobuf-tables.py in the header, so that both generators write the same bytes.
Adding a package: append it to PKGS here and in gen-protobuf-tables.py. A Go type the
decoder has no `Ty` for (unsigned, float, metav1.Duration) is emitted by name and fails the
build, on purpose.
"""
import os, re, subprocess, sys

API = os.environ.get("K8S_API_REPO") or sys.exit("set K8S_API_REPO to a k8s.io/api git dir")
MACH = os.environ.get("K8S_APIMACHINERY_REPO") or sys.exit(
    "set K8S_APIMACHINERY_REPO to a k8s.io/apimachinery git dir")
PKGS = [  # (repo, dir, pkg key)
    (MACH, "pkg/apis/meta/v1", "meta/v1"),
] + [(API, d, d) for d in """admissionregistration/v1 apps/v1 authentication/v1 authorization/v1
 autoscaling/v1 autoscaling/v2 batch/v1 certificates/v1 coordination/v1 core/v1 discovery/v1 events/v1
 flowcontrol/v1 networking/v1 node/v1 policy/v1 rbac/v1 resource/v1 scheduling/v1 storage/v1""".split()]
IMPORTS = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta/v1",
    "k8s.io/apimachinery/pkg/api/resource": "#resource",
    "k8s.io/apimachinery/pkg/util/intstr": "#intstr",
    "k8s.io/apimachinery/pkg/runtime": "#runtime",
    "k8s.io/apimachinery/pkg/types": "#types",
}
SPECIAL = {
    ("#resource", "Quantity"): "Quantity", ("#intstr", "IntOrString"): "IntOrString",
    ("#runtime", "RawExtension"): "RawExtension", ("meta/v1", "Time"): "Time",
    ("meta/v1", "MicroTime"): "MicroTime", ("meta/v1", "Duration"): "Duration",
    ("meta/v1", "FieldsV1"): "FieldsV1",
}
SCALARS = {"string": "Str", "bool": "Bool", "int32": "I32", "int64": "I64", "uint32": "U32",
           "uint64": "U64", "float64": "F64", "float32": "F32"}

def git(repo, *a):
    return subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True, text=True).stdout

structs = {}    # (pkg, name) -> list of field tuples
named = {}      # (pkg, name) -> underlying go type string (non-struct)
imports_of = {} # (pkg, name) -> alias map
groups = {}     # pkg -> group name
roots = []      # (pkg, name)

REV = os.environ.get("K8S_REV", "v0.36.3")  # k8s.io/api and apimachinery share release tags
loaded = set()
def load_pkg(repo, d, key):
    if key in loaded: return
    loaded.add(key)
    files = [f for f in git(repo, "ls-tree", "--name-only", REV, d + "/").split()
             if f.endswith(".go") and not re.search(r"_test|generated|zz_|_fuzz", f)]
    for f in files:
        src = git(repo, "show", REV + ":" + f)
        m = re.search(r'GroupName\s*=\s*"([^"]*)"', src)
        if m: groups[key] = m.group(1)
        aliases = {}
        for im in re.finditer(r'^\s*(\w+)?\s*"([^"]+)"\s*$', src.split("\n)\n")[0] if "import (" in src else "", re.M):
            alias, path = im.group(1), im.group(2)
            tgt = IMPORTS.get(path) or (path[len("k8s.io/api/"):] if path.startswith("k8s.io/api/") else None)
            if tgt: aliases[alias or path.rsplit("/", 1)[1]] = tgt
        for sm in re.finditer(r'^type (\w+) struct \{\n(.*?)^\}', src, re.M | re.S):
            fields = []
            is_root = False
            for line in sm.group(2).split("\n"):
                line = line.strip()
                if not line or line.startswith("//"): continue
                fm = re.match(r'^(?:(\w+)\s+)?([\*\[\]\w\.]+)\s+`(.*)`$', line) or re.match(r'^(\w+)\s+(\S+)\s+`(.*)`$', line)
                if not fm:
                    if 'protobuf:"' not in line: continue
                    sys.exit("cannot parse field line %r in %s" % (line, f))
                gotype, tags = fm.group(2), fm.group(3)
                if fm.group(1) is None and gotype.endswith("TypeMeta"): is_root = True
                pt = re.search(r'protobuf:"([^"]*)"', tags)
                jt = re.search(r'json:"([^"]*)"', tags)
                if not pt or pt.group(1) == "-": continue
                parts = pt.group(1).split(",")
                num = int(parts[1]); rep = parts[2] == "rep"
                jparts = (jt.group(1) if jt else "").split(",")
                if jparts[0] == "-": continue
                fields.append(dict(num=num, json=jparts[0], omitempty="omitempty" in jparts[1:],
                                   inline="inline" in jparts[1:], gotype=gotype, rep=rep, line=line))
            structs[(key, sm.group(1))] = fields
            imports_of[(key, sm.group(1))] = aliases
            if is_root: roots.append((key, sm.group(1)))
        for tm in re.finditer(r'^type (\w+) (?!struct)([\*\[\]\w\.]+)\s*$', src, re.M):
            named[(key, tm.group(1))] = (tm.group(2), aliases)

for repo, d, key in PKGS:
    load_pkg(repo, d, key)

# ---- resolution
order = []
index = {}
def msg_index(ref):
    if ref not in index:
        index[ref] = len(order); order.append(ref)
    return index[ref]

def resolve_name(pkg, aliases, t):
    if "." in t:
        a, n = t.split(".", 1)
        if a not in aliases: sys.exit("unknown import alias %s in %s" % (a, pkg))
        if not aliases[a].startswith("#"): load_pkg(API, aliases[a], aliases[a])
        return (aliases[a], n)
    return (pkg, t)

def ty_of(pkg, aliases, t, ctx):
    """Returns the Rust `Ty` expression for Go type t (no pointer, no slice)."""
    if t in SCALARS: return SCALARS[t]
    ref = resolve_name(pkg, aliases, t)
    if ref in SPECIAL: return SPECIAL[ref]
    if ref[0] == "#types": return "Str"
    if ref in structs: return "Msg(%d)" % msg_index(ref)
    if ref in named:
        under, al2 = named[ref]
        if under.startswith("[]") and under != "[]byte":
            return "List(&%s)" % ty_of(ref[0], al2, under[2:], ctx)
        if under.startswith("map[") or under.startswith("[]"):
            sys.exit("named %s %s used as value in %s" % (ref, under, ctx))
        return ty_of(ref[0], al2, under, ctx)
    sys.exit("cannot resolve type %s (%s) in %s" % (t, ref, ctx))

def field_expr(pkg, aliases, fd, ctx):
    t = fd["gotype"]; ptr = t.startswith("*")
    if ptr: t = t[1:]
    # expand named maps / slices used as field types
    ref = None
    if not t.startswith("[]") and not t.startswith("map["):
        r = resolve_name(pkg, aliases, t)
        if r in named and named[r][0].startswith("map["):
            pkg, aliases = r[0], named[r][1]; t = named[r][0]
    if t == "[]byte":
        card, ty = "S", "Bytes"
    elif t.startswith("[]"):
        card, ty = "R", ty_of(pkg, aliases, t[2:], ctx)
        if ty.startswith("List"): sys.exit("nested list in %s" % ctx)
        if t[2:] == "byte": sys.exit("byte slice")
    elif t.startswith("map["):
        k, v = re.match(r'map\[([\w\.]+)\](.+)$', t).groups()
        if ty_of(pkg, aliases, k, ctx) != "Str": sys.exit("non-string map key in %s" % ctx)
        card = "M"
        ty = "Bytes" if v == "[]byte" else ty_of(pkg, aliases, v, ctx)
    else:
        ty = ty_of(pkg, aliases, t, ctx)
        card = "I" if fd["inline"] else "S"
    if fd["rep"] != (card in ("R", "M")) and not ty.startswith("List"):
        pass  # upstream `rep`/`opt` labels are not reliable; the Go type decides
    if card in ("R", "M"): emit = "O"
    elif ptr: emit = "P"
    elif fd["omitempty"] or card == "I": emit = "O"
    else: emit = "A"
    return 'f(%d, "%s", %s, %s, %s)' % (fd["num"], fd["json"], ty, card, emit)

root_refs = sorted(roots)
for r in root_refs: msg_index(r)
out_msgs = []
i = 0
while i < len(order):
    ref = order[i]; i += 1
    fds = structs[ref]
    if any(fd["inline"] and not fd["json"] == "" for fd in fds): sys.exit("odd inline")
    exprs = [field_expr(ref[0], imports_of[ref], fd, "%s.%s" % ref) for fd in sorted(fds, key=lambda x: x["num"])]
    nums = [fd["num"] for fd in fds]
    if len(set(nums)) != len(nums): sys.exit("duplicate field numbers in %s" % (ref,))
    out_msgs.append((ref, exprs))

kinds = []
for (pkg, name) in root_refs:
    g = groups[pkg]; v = pkg.split("/")[1]
    av = "%s/%s" % (g, v) if g else v
    kinds.append((av, name, index[(pkg, name)]))
kinds.sort()

o = []
o.append("// @generated by scripts/gen-protobuf-tables.py from the `protobuf`/`json` struct tags of")
o.append("// k8s.io/api and k8s.io/apimachinery %s. Do not edit." % REV)
o.append("")
o.append("//! Generated message tables: protobuf field numbers of the Kubernetes API types")
o.append("//! (stable groups plus `meta/v1`) mapped to their JSON names and value types.")
o.append("")
o.append("use super::schema::{Card::*, Emit::*, Msg, Ty::*, f};")
o.append("")
o.append("/// Message descriptors; `Ty::Msg(n)` refers to `MESSAGES[n]`.")
o.append("pub(super) static MESSAGES: &[Msg] = &[")
for (ref, exprs) in out_msgs:
    o.append('    Msg {')
    o.append('        name: "%s.%s",' % (ref[0].replace("/", "."), ref[1]))
    if exprs:
        o.append('        fields: &[')
        for e in exprs: o.append("            %s," % e)
        o.append('        ],')
    else:
        o.append('        fields: &[],')
    o.append('    },')
o.append("];")
o.append("")
o.append("/// Top-level kinds, sorted by (apiVersion, kind): index into `MESSAGES`.")
o.append("pub(super) static KINDS: &[(&str, &str, u16)] = &[")
for av, k, n in kinds: o.append('    ("%s", "%s", %d),' % (av, k, n))
o.append("];")
open(sys.argv[1], "w").write("\n".join(o) + "\n")
subprocess.run(["rustfmt", "--edition", "2024", sys.argv[1]], check=True)
print("messages", len(out_msgs), "kinds", len(kinds), "fields", sum(len(e) for _, e in out_msgs), file=sys.stderr)

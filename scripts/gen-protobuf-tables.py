#!/usr/bin/env python3
"""Regenerates apimachinery/src/protobuf/tables.rs: protobuf message tables (field number ->
JSON name, type, cardinality, Go omitempty/pointer semantics) for k1s's protobuf body decoder.

Inputs (nothing is built or executed from them):
- the k8s-pb crate's sources (crates.io, pinned in scripts/protobuf-inputs/Cargo.lock): the
  prost code generated from the Kubernetes .proto files gives the messages, field numbers,
  proto scalar/message types and repeated/map labels;
- the k8s-openapi crate's sources for Kubernetes 1.36 (`src/v1_36`, the version the workspace
  uses): Go type names (prost re-cases `PodDNSConfig` as `PodDnsConfig`), JSON field names,
  required (non-`Option`) fields, inlined structs (flattened into their parent there) and
  which kinds exist (`Resource` impls);
- scripts/protobuf-go-facts.txt: the facts neither crate carries (see its header): Go pointer
  vs omitempty vs always-emitted fields where the default below is wrong, the kinds that are
  not `Resource`s in k8s-openapi (options, lists, meta types), and the proto changes of
  Kubernetes 1.36 that the newest k8s-pb release (0.9.0, Kubernetes 1.35) lacks.

Usage: gen-protobuf-tables.py <k8s-pb>/src <k8s-openapi>/src/v1_36 <facts> <out.rs>
       gen-protobuf-tables.py --extract-facts <k8s-pb>/src <k8s-openapi>/src/v1_36 <reference tables.rs> <facts>
scripts/check-generated.sh fetches both crates (`cargo fetch` of scripts/protobuf-inputs)
and checks that regenerating changes nothing.

Refreshing for a new Kubernetes version: produce a reference tables.rs from the Go sources
with scripts/gen-protobuf-tables-go.py (needs git clones of k8s.io/api and
k8s.io/apimachinery, which no registry reachable from CI provides), bump the crates, then
`--extract-facts` writes the facts that make this generator reproduce it (it checks that it
does). Adding a package: append it to PKGS (here and in the Go generator).
"""
import os, re, subprocess, sys

PKGS = """meta/v1 admissionregistration/v1 apps/v1 authentication/v1 authorization/v1 autoscaling/v1
 autoscaling/v2 batch/v1 certificates/v1 coordination/v1 core/v1 discovery/v1 events/v1
 flowcontrol/v1 networking/v1 node/v1 policy/v1 rbac/v1 resource/v1 scheduling/v1
 storage/v1""".split()
SPECIAL = {
    ("#resource", "Quantity"): "Quantity", ("#intstr", "IntOrString"): "IntOrString",
    ("#runtime", "RawExtension"): "RawExtension", ("meta/v1", "Time"): "Time",
    ("meta/v1", "MicroTime"): "MicroTime", ("meta/v1", "Duration"): "Duration",
    ("meta/v1", "FieldsV1"): "FieldsV1",
}
SCALARS = {"string": "Str", "bool": "Bool", "int32": "I32", "int64": "I64", "uint32": "U32",
           "uint64": "U64", "double": "F64", "float": "F32", "bytes": "Bytes"}
FACTS_HEADER = """\
# Facts for scripts/gen-protobuf-tables.py that neither k8s-pb nor k8s-openapi carries, for
# the Kubernetes 1.36 API (k8s.io/api and k8s.io/apimachinery v0.36.3). Written by
# `gen-protobuf-tables.py --extract-facts` from a tables.rs generated from the Go sources.
#
# group <pkg> <group>                 API group of a package without a k8s-openapi kind
# kind <message>                      a top-level kind (embeds TypeMeta) that is not a
#                                     k8s-openapi `Resource` nor a `<Resource>List`
# name <pkg>.<ProstName> <GoName>     Go name of a message k8s-openapi does not define
# json <message> <number> <json>      JSON name the crates do not give
# Proto changes of Kubernetes 1.36 not in k8s-pb 0.9.0 (a Kubernetes 1.35 release):
# message <message>                   a message k8s-pb does not have (fields follow)
# field <message> <number> <json> <S|R|M|I> <proto type or message>  ("" for an inlined
#                                     field's JSON name; #resource.Quantity and the like)
# drop <message> <number>             a field k8s-pb has that 1.36 removed
# Go serialization of singular fields (k8s-openapi has only `Option` or not), where the
# default is wrong. Default: O (omitempty) for a field k8s-openapi does not define; for a
# required (non-`Option`) one, O for a struct and A (always emitted) for the rest; for an
# optional one, P (Go pointer) for a message (Time, Quantity... included), O for the rest:
# emit <message> <json> <A|O|P>
"""


def norm(s):
    return re.sub(r"[^a-z0-9]", "", s.lower())


def lower_camel(snake):
    p = snake.split("_")
    return p[0] + "".join(x[:1].upper() + x[1:] for x in p[1:])


def pkg_key(mod):
    if mod[0] == "api" and len(mod) == 3:
        return "%s/%s" % (mod[1], mod[2])
    if mod[:4] == ("apimachinery", "pkg", "apis", "meta"):
        return "/".join(mod[3:])
    if mod[:2] == ("apimachinery", "pkg") and mod[2] in ("api", "util", "runtime"):
        return "#" + mod[-1]
    return "!" + "/".join(mod)


def parse_pb(src):
    """{(pkg, prost name): [dict(num, rname, card, kind, ref)]} from k8s-pb's prost code."""
    msgs = {}
    for dp, _, fs in sorted(os.walk(src)):
        if "mod.rs" not in fs:
            continue
        mod = tuple(os.path.relpath(dp, src).split(os.sep))
        text = open(os.path.join(dp, "mod.rs")).read()
        if "::prost::Message" not in text:
            continue
        key = pkg_key(mod)
        for sm in re.finditer(r"^pub struct (\w+) \{\n(.*?)^\}", text, re.M | re.S):
            fields = []
            for chunk in sm.group(2).split("#[prost(")[1:]:
                attr, rest = chunk.split(")]", 1)
                fm = re.match(r"\s*pub (?:r#)?(\w+):\s*(.*?),\s*(?:\n\s*///.*)*\s*$", rest, re.S)
                if not fm:
                    sys.exit("cannot parse k8s-pb field %r in %s" % (rest, dp))
                ty = re.sub(r"\s+", "", fm.group(2))
                num = int(re.search(r'tag = "(\d+)"', attr).group(1))
                kind = attr.split(",")[0].split("=")[0].strip()
                mm = re.search(r'btree_map = "string, (\w+)"', attr)
                card = "M" if mm else ("R" if "repeated" in attr else "S")
                if mm:
                    kind = mm.group(1)
                for w in ("::core::option::Option", "::prost::alloc::vec::Vec",
                          "::prost::alloc::boxed::Box", "::prost::alloc::collections::BTreeMap"):
                    if ty.startswith(w + "<"):
                        ty = ty[len(w) + 1:-1].rstrip(",")
                        if w.endswith("BTreeMap"):
                            ty = ty.split(",", 1)[1]
                if ty.startswith("::prost::alloc::boxed::Box<"):
                    ty = ty[len("::prost::alloc::boxed::Box<"):-1].rstrip(",")
                ref = None
                if kind == "message":
                    parts = ty.split("::")
                    m2 = list(mod)
                    while parts[0] == "super":
                        parts.pop(0)
                        m2.pop()
                    ref = (pkg_key(tuple(m2 + parts[:-1])), parts[-1])
                fields.append(dict(num=num, rname=fm.group(1), card=card, kind=kind, ref=ref))
            msgs[(key, sm.group(1))] = fields
    return msgs


def parse_openapi(root):
    """({(pkg, Go name): {json: rust type}}, {(pkg, Go name): apiVersion}) from k8s-openapi."""
    defs, resources = {}, {}
    for dp, _, fs in sorted(os.walk(root)):
        for f in sorted(fs):
            if not f.endswith(".rs") or f == "mod.rs":
                continue
            text = open(os.path.join(dp, f)).read()
            m = re.search(r"// Generated from definition (\S+)", text)
            sm = re.search(r"^pub struct (\w+) \{\n(.*?)^\}", text, re.S | re.M)
            if not m or not sm:
                continue
            d = m.group(1).split(".")
            key = ("%s/%s" % (d[-3], d[-2]), d[-1])
            rf = {fm.group(2): fm.group(3)
                  for fm in re.finditer(r"^    pub (r#)?(\w+): (.+),$", sm.group(2), re.M)}
            jn = {}
            for jm in re.finditer(r'"([^"]+)" => Field::Key_(\w+),', text):
                jn.setdefault(jm.group(2), jm.group(1))
            defs[key] = {jn[r]: t for r, t in rf.items()}
            rm = re.search(r'impl crate::Resource for \w+ \{\s*const API_VERSION: &\'static str = "([^"]*)";', text)
            if rm:
                resources[key] = rm.group(1)
    return defs, resources


def read_facts(path):
    facts = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        facts.append(['' if w == '""' else w for w in line.split()])
    return facts


def split_name(full):
    """"core.v1.Pod" -> ("core/v1", "Pod")."""
    p = full.split(".")
    return ("/".join(p[:-1]), p[-1])


def full_name(ref):
    return "%s.%s" % (ref[0].replace("/", "."), ref[1])


class Model:
    """The protobuf schema (k8s-pb + facts) with the Go names, JSON names and defaults."""

    def __init__(self, pb_src, openapi_root, facts):
        self.defs, self.resources = parse_openapi(openapi_root)
        pb = parse_pb(pb_src)
        lower = {}
        for (pkg, name) in self.defs:
            lower.setdefault((pkg, name.lower()), []).append(name)
        renames = {}
        for fact in facts:
            if fact[0] == "name":
                pn = fact[1].rsplit(".", 1)
                renames[(pn[0].replace(".", "/"), pn[1])] = fact[2]
        goname = {}
        for (pkg, pn) in pb:
            gn = renames.get((pkg, pn))
            if gn is None:
                cands = lower.get((pkg, pn.lower()), [])
                gn = cands[0] if len(cands) == 1 else pn
            goname[(pkg, pn)] = (pkg, gn)
        self.msgs = {}  # (pkg, Go name) -> {num: dict(json, card, kind, ref)}
        for key, fields in pb.items():
            fl = {}
            for fd in fields:
                fd = dict(fd)
                if fd["ref"] is not None:
                    fd["ref"] = goname.get(fd["ref"], fd["ref"])
                fl[fd["num"]] = fd
            self.msgs[goname[key]] = fl
        self.json_fact, self.emit_fact, self.kind_fact, self.groups = {}, {}, [], {}
        for fact in facts:
            op = fact[0]
            if op == "message":
                self.msgs[split_name(fact[1])] = {}
            elif op == "field":
                m, num, js, card, ty = fact[1:]
                kind, ref = (ty, None) if ty in SCALARS else ("message", split_name(ty))
                self.msgs[split_name(m)][int(num)] = dict(
                    num=int(num), rname=None, json=js, card=card, kind=kind, ref=ref)
            elif op == "drop":
                del self.msgs[split_name(fact[1])][int(fact[2])]
            elif op == "json":
                self.json_fact[(split_name(fact[1]), int(fact[2]))] = fact[3]
            elif op == "emit":
                self.emit_fact[(split_name(fact[1]), fact[2])] = fact[3]
            elif op == "kind":
                self.kind_fact.append(split_name(fact[1]))
            elif op == "group":
                self.groups[fact[1]] = fact[2]
            elif op != "name":
                sys.exit("unknown fact %r" % (fact,))
        for key, av in self.resources.items():
            if key[0] in PKGS and key[0] not in self.groups:
                self.groups[key[0]] = av.rsplit("/", 1)[0] if "/" in av else ""
        # Inline fields: message fields with no JSON property in the k8s-openapi parent, which
        # has the child's properties flattened into it.
        self.inline_parent = {}
        for key, fl in self.msgs.items():
            d = self.defs.get(key)
            if d is None:
                continue
            for fd in fl.values():
                if fd["rname"] is None or fd["kind"] != "message" or fd["card"] != "S":
                    continue
                if not any(norm(j) == norm(fd["rname"]) for j in d):
                    fd["card"] = "I"
                    fd["json"] = ""
                    self.inline_parent.setdefault(fd["ref"], key)
        self.global_json = {}
        for d in self.defs.values():
            for j in d:
                self.global_json.setdefault(norm(j), set()).add(j)

    def openapi_def(self, key):
        """The k8s-openapi struct holding `key`'s JSON properties (its own, or its inliner's)."""
        seen = set()
        while key not in self.defs and key in self.inline_parent and key not in seen:
            seen.add(key)
            key = self.inline_parent[key]
        return self.defs.get(key)

    def json_of(self, key, fd):
        if "json" in fd:
            return fd["json"]
        if (key, fd["num"]) in self.json_fact:
            return self.json_fact[(key, fd["num"])]
        d = self.openapi_def(key)
        if d is not None:
            c = [j for j in d if norm(j) == norm(fd["rname"])]
            if len(c) == 1:
                return c[0]
        c = self.global_json.get(norm(fd["rname"]), ())
        if len(c) == 1:
            return next(iter(c))
        return lower_camel(fd["rname"])

    def is_list_wrapper(self, ref):
        """A Go named slice type (`type Verbs []string`): a message `{ repeated T items = 1; }`."""
        fl = self.msgs.get(ref)
        return (ref not in self.defs and fl is not None and list(fl) == [1]
                and fl[1]["card"] == "R" and fl[1].get("rname") == "items")

    def default_emit(self, key, js, fd):
        """The most common Go serialization of a singular field, from what k8s-openapi says."""
        d = self.openapi_def(key)
        rt = d.get(js) if d is not None else None
        msg = fd["kind"] == "message" and not self.is_list_wrapper(fd["ref"])
        if rt is None:  # not in k8s-openapi (options, lists): omitempty
            return "O"
        if not rt.startswith("Option<"):  # required: no omitempty, but `metadata` and the
            return "O" if msg and fd["ref"] not in SPECIAL else "A"  # like are omitempty structs
        return "P" if msg else "O"  # optional: pointer structs, omitempty scalars

    def roots(self):
        roots = set(self.kind_fact)
        for key in self.resources:
            if key[0] in PKGS and key in self.msgs:
                roots.add(key)
                if (key[0], key[1] + "List") in self.msgs:
                    roots.add((key[0], key[1] + "List"))
        return sorted(roots)

    def generate(self):
        """[(name, [(num, json, ty, card, emit)])], [(apiVersion, kind, index)]."""
        order, index = [], {}

        def msg_index(ref):
            if ref not in index:
                index[ref] = len(order)
                order.append(ref)
            return index[ref]

        def ty_of(kind, ref, ctx):
            if kind != "message":
                return SCALARS[kind]
            if ref in SPECIAL:
                return SPECIAL[ref]
            if self.is_list_wrapper(ref):
                it = self.msgs[ref][1]
                return "List(&%s)" % ty_of(it["kind"], it["ref"], ctx)
            if ref not in self.msgs:
                sys.exit("unknown message %s in %s" % (ref, ctx))
            return "Msg(%d)" % msg_index(ref)

        roots = self.roots()
        for r in roots:
            msg_index(r)
        out = []
        i = 0
        while i < len(order):
            key = order[i]
            i += 1
            fields = []
            for num in sorted(self.msgs[key]):
                fd = self.msgs[key][num]
                js = self.json_of(key, fd)
                ty = ty_of(fd["kind"], fd["ref"], full_name(key))
                card = fd["card"]
                if card in ("R", "M", "I"):
                    emit = "O"
                else:
                    emit = self.emit_fact.get((key, js)) or self.default_emit(key, js, fd)
                fields.append((num, js, ty, card, emit))
            out.append((full_name(key), fields))
        kinds = []
        for (pkg, name) in roots:
            g = self.groups[pkg]
            v = pkg.split("/")[1]
            kinds.append(("%s/%s" % (g, v) if g else v, name, index[(pkg, name)]))
        kinds.sort()
        return out, kinds


def render(msgs, kinds, path):
    o = []
    o.append("// @generated by scripts/gen-protobuf-tables.py from the `protobuf`/`json` struct tags of")
    o.append("// k8s.io/api and k8s.io/apimachinery v0.36.3. Do not edit.")
    o.append("")
    o.append("//! Generated message tables: protobuf field numbers of the Kubernetes API types")
    o.append("//! (stable groups plus `meta/v1`) mapped to their JSON names and value types.")
    o.append("")
    o.append("use super::schema::{Card::*, Emit::*, Msg, Ty::*, f};")
    o.append("")
    o.append("/// Message descriptors; `Ty::Msg(n)` refers to `MESSAGES[n]`.")
    o.append("pub(super) static MESSAGES: &[Msg] = &[")
    for name, fields in msgs:
        o.append("    Msg {")
        o.append('        name: "%s",' % name)
        if fields:
            o.append("        fields: &[")
            for fd in fields:
                o.append('            f(%d, "%s", %s, %s, %s),' % fd)
            o.append("        ],")
        else:
            o.append("        fields: &[],")
        o.append("    },")
    o.append("];")
    o.append("")
    o.append("/// Top-level kinds, sorted by (apiVersion, kind): index into `MESSAGES`.")
    o.append("pub(super) static KINDS: &[(&str, &str, u16)] = &[")
    for k in kinds:
        o.append('    ("%s", "%s", %d),' % k)
    o.append("];")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")
    subprocess.run(["rustfmt", "--edition", "2024", path], check=True)


def parse_tables(path):
    """Reads a tables.rs back: ([(name, [(num, json, ty, card, emit)])], [(av, kind, index)])."""
    src = open(path).read()
    msgs = []
    for m in re.finditer(r'Msg \{\s*name: "([^"]+)",\s*fields: &\[(.*?)\],\s*\}', src, re.S):
        fs = []
        for fm in re.finditer(r'f\(\s*(\d+),\s*"([^"]*)",\s*(.*?),\s*([SRMI]),\s*([AOP]),?\s*\)', m.group(2), re.S):
            fs.append((int(fm.group(1)), fm.group(2), re.sub(r"\s+", "", fm.group(3)), fm.group(4), fm.group(5)))
        msgs.append((m.group(1), fs))
    k = src[src.index("static KINDS"):]
    kinds = [(a, b, int(c)) for a, b, c in re.findall(r'\(\s*"([^"]*)",\s*"([^"]*)",\s*(\d+),?\s*\)', k)]
    return msgs, kinds


def extract_facts(pb_src, openapi_root, ref_path, facts_path):
    ref_msgs, ref_kinds = parse_tables(ref_path)
    names = [n for n, _ in ref_msgs]
    base = Model(pb_src, openapi_root, [])
    facts = []
    # Go names of messages k8s-openapi does not define (prost re-cases acronyms).
    by_lower = {}
    for key in base.msgs:
        by_lower.setdefault((key[0], key[1].lower()), []).append(key)
    for n in names:
        key = split_name(n)
        if key in base.msgs:
            continue
        c = by_lower.get((key[0], key[1].lower()), [])
        if len(c) == 1:
            facts.append(["name", full_name(c[0]), key[1]])
    model = Model(pb_src, openapi_root, facts)

    def ty_name(ty):
        if ty.startswith("Msg("):
            return names[int(ty[4:-1])]
        rev = {v: k for k, v in SCALARS.items()}
        if ty in rev:
            return rev[ty]
        for k, v in SPECIAL.items():
            if v == ty:
                return full_name(k)
        sys.exit("cannot express type %s as a field fact" % ty)

    def type_matches(fd, ty):
        if fd["kind"] != "message":
            return SCALARS[fd["kind"]] == ty
        if fd["ref"] in SPECIAL:
            return SPECIAL[fd["ref"]] == ty
        if model.is_list_wrapper(fd["ref"]):
            return ty.startswith("List(")
        return ty.startswith("Msg(") and split_name(names[int(ty[4:-1])]) == fd["ref"]

    structural = []
    for n, fields in ref_msgs:
        key = split_name(n)
        have = model.msgs.get(key)
        if have is None:
            structural.append(["message", n])
            have = {}
        ref_nums = {f[0] for f in fields}
        for num in sorted(have):
            if num not in ref_nums:
                structural.append(["drop", n, str(num)])
        for (num, js, ty, card, emit) in fields:
            fd = have.get(num)
            if fd is not None and fd["card"] == card and type_matches(fd, ty):
                continue
            if fd is not None:
                structural.append(["drop", n, str(num)])
            if ty.startswith("List("):
                sys.exit("cannot express list type of %s %d as a field fact" % (n, num))
            structural.append(["field", n, str(num), js or '""', card, ty_name(ty)])
    for f in structural:
        if f[0] == "field" and f[3] == '""':
            f[3] = ""
    facts += structural
    model = Model(pb_src, openapi_root, facts)
    # kinds and groups
    have_roots = set(model.roots())
    ref_roots = {split_name(names[i]) for (_, _, i) in ref_kinds}
    for r in sorted(ref_roots - have_roots):
        facts.append(["kind", full_name(r)])
    if have_roots - ref_roots:
        sys.exit("k8s-openapi kinds not in the reference: %s" % sorted(have_roots - ref_roots))
    for (av, k, i) in ref_kinds:
        pkg = split_name(names[i])[0]
        g = av.rsplit("/", 1)[0] if "/" in av else ""
        if model.groups.get(pkg) != g and pkg not in [f[1] for f in facts if f[0] == "group"]:
            facts.append(["group", pkg, g])
    model = Model(pb_src, openapi_root, facts)
    # JSON names and emits
    for n, fields in ref_msgs:
        key = split_name(n)
        for (num, js, ty, card, emit) in fields:
            fd = model.msgs[key][num]
            if model.json_of(key, fd) != js:
                if card == "I" or fd.get("card") == "I":
                    sys.exit("inline mismatch: %s %d" % (n, num))
                facts.append(["json", n, str(num), js])
    model = Model(pb_src, openapi_root, facts)
    for n, fields in ref_msgs:
        key = split_name(n)
        for (num, js, ty, card, emit) in fields:
            if card in ("R", "M", "I"):
                continue
            if model.default_emit(key, js, model.msgs[key][num]) != emit:
                facts.append(["emit", n, js, emit])
    with open(facts_path, "w") as f:
        f.write(FACTS_HEADER)
        for fact in facts:
            if fact[0] == "field" and fact[3] == "":
                fact = fact[:3] + ['""'] + fact[4:]
            f.write(" ".join(fact) + "\n")


def main():
    if sys.argv[1] == "--extract-facts":
        pb_src, openapi_root, ref_path, facts_path = sys.argv[2:6]
        extract_facts(pb_src, openapi_root, ref_path, facts_path)
        facts = read_facts(facts_path)
        msgs, kinds = Model(pb_src, openapi_root, facts).generate()
        if (msgs, kinds) != parse_tables(ref_path):
            sys.exit("the extracted facts do not reproduce %s" % ref_path)
        print("facts", len(facts), file=sys.stderr)
        return
    pb_src, openapi_root, facts_path, out = sys.argv[1:5]
    msgs, kinds = Model(pb_src, openapi_root, read_facts(facts_path)).generate()
    render(msgs, kinds, out)
    print("messages", len(msgs), "kinds", len(kinds), "fields",
          sum(len(f) for _, f in msgs), file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks that no import cycle spans more than one module's files (issue #25).

For each crate (`*/src`), builds the graph of the crate's files: an edge from a file to every
file a `crate::`, `super::` or `self::` path in it (or a path through one of its child
modules) names. Re-exports (`pub use`) are not uses, the crate root (lib.rs, main.rs) only
declares, and `#[cfg(test)] mod tests` blocks and comments are left out. A strongly connected
component of that graph whose files belong to more than one top-level module (the first path
segment under src/: `pod/worker.rs` is in `pod`, `container.rs` is `container`) is a cycle
across modules, and fails the check. Cycles inside one module's folder are allowed.

Usage: scripts/check-cycles.py [-v] [CRATE_DIR ...]   (default: every crate of the workspace)
"""
import os
import re
import sys

PATH = re.compile(r'\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{([^;]*?)\})?', re.S)
CHILD_PATH = re.compile(
    r'(?<![A-Za-z0-9_:])(self::)?([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)')
CHILD_DECL = re.compile(r'^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;', re.M)
REEXPORT = re.compile(r'^\s*pub(?:\([a-z]+\))?\s+use\s[^;]*;', re.M)
ROOTS = ('lib.rs', 'main.rs')


def source_files(root):
    files = {}
    for d, _, names in os.walk(root):
        for f in names:
            if f.endswith('.rs'):
                rel = os.path.relpath(os.path.join(d, f), root)
                mod = rel[:-3].split('/')
                if mod[-1] in ('mod', 'lib', 'main'):
                    mod = mod[:-1]
                files[tuple(mod)] = rel
    return files


def code_of(path):
    src = open(path, encoding='utf-8').read()
    tests = re.search(r'#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod tests', src)
    if tests:
        src = src[:tests.start()]
    src = re.sub(r'//[^\n]*', '', src)
    return REEXPORT.sub('', src)


def graph(root):
    files = source_files(root)

    def resolve(path):
        for i in range(len(path), -1, -1):
            hit = files.get(tuple(path[:i]))
            if hit:
                return hit
        return None

    edges = {f: set() for f in files.values()}
    for mod, rel in files.items():
        src = code_of(os.path.join(root, rel))
        here = list(mod)
        targets = []
        children = set(CHILD_DECL.findall(src))
        for m in CHILD_PATH.finditer(src):
            if m.group(2) in children:
                targets.append(here + [m.group(2)] + [p for p in m.group(3).split('::') if p])
        for m in PATH.finditer(src):
            # `super` of `a/b.rs` (module a::b) and of `a/b/mod.rs` (also a::b) is `a`.
            base = [] if m.group(1) == 'crate' else list(mod[:-1])
            parts = [p for p in m.group(2).split('::') if p]
            while parts and parts[0] == 'super':
                base, parts = base[:-1], parts[1:]
            targets.append(base + parts)
            if m.group(4):
                for item in m.group(4).split(','):
                    item = item.strip().split(' as ')[0].strip()
                    if item and '{' not in item:
                        targets.append(base + parts + [x for x in item.split('::') if x])
        for t in targets:
            r = resolve(t)
            if r and r != rel and r not in ROOTS:
                edges[rel].add(r)
    return edges


def components(edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def module_of(rel):
    return rel.split('/')[0] if '/' in rel else rel[:-3]


def main(argv):
    verbose = '-v' in argv
    crates = [a for a in argv if not a.startswith('-')]
    if not crates:
        top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        crates = sorted(os.path.join(top, d) for d in os.listdir(top)
                        if os.path.isdir(os.path.join(top, d, 'src'))
                        and os.path.exists(os.path.join(top, d, 'Cargo.toml')))
    bad = 0
    for crate in crates:
        edges = graph(os.path.join(crate, 'src'))
        for comp in components(edges):
            modules = sorted({module_of(f) for f in comp})
            if len(modules) < 2:
                continue
            bad += 1
            print(f'{os.path.basename(crate)}: an import cycle spans modules {", ".join(modules)}:')
            members = set(comp)
            for f in sorted(comp):
                uses = sorted(w for w in edges[f] if w in members)
                print(f'    {f} -> {", ".join(uses)}')
    if bad:
        print(f'{bad} import cycle(s) across modules: move what both sides use to the lower '
              'one, or to a module of its own', file=sys.stderr)
        return 1
    if verbose:
        print('no import cycle spans more than one module')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

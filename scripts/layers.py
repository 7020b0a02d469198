#!/usr/bin/env python3
"""Which file of a Rust crate uses which: import circles and arrows that run up a layer order.

(A copy of the workplace's ../shared/tools/layers.py, so that `make lint` runs it on a machine
without that folder; docs/architecture.md gives the order.)

    python3 ../shared/tools/layers.py src                       # circles, and the module graph
    python3 ../shared/tools/layers.py src --order error,core,host,node,types,commands,entry,lib

A file uses another when it names a path into it: `use crate::a::b::{c, d::e}`, `crate::a::b`
inline, `super::x` (resolved from the file's own module). Paths are matched to the longest module
that exists as a file, so `crate::glue::types::Rdb` is an arrow to src/glue/types.rs and
`crate::glue::Ctx` one to src/glue/mod.rs. Macro paths (`$crate::`) count too. Test modules
(`#[cfg(test)] mod tests { ... }` at the end of a file) are skipped, as are files named tests.rs.

--order names the top-level modules (the first path segment under src/, a file or a folder)
from the lowest layer to the highest; a module may be given as `a/b` to place a submodule on its
own (e.g. `glue/entry`). An arrow from a lower layer to a higher one is printed as running up.
Modules not named are printed as unplaced. Exit status: 0 when there is no circle and nothing runs
up, 1 otherwise. Standard library only.
"""
import argparse
import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def strip_tests(text):
    # Drop a trailing `#[cfg(test)] mod ... { ... }` block and everything after it: test code may
    # use anything.
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s+\w+\s*\{", text)
    return text[: m.start()] if m else text


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def go(prefix, s):
        i = s.find("{")
        if i < 0:
            for part in split_top(s):
                out.append(prefix + part)
            return
        head = s[:i]
        depth, j = 0, i
        for j in range(i, len(s)):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    break
        inner, rest = s[i + 1 : j], s[j + 1 :]
        for part in split_top(inner):
            go(prefix + head, part)
        if rest.startswith(","):
            go(prefix, rest[1:])

    go("", tree)
    return out


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


def paths_in(text, me):
    found = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)::[^;]*);", text):
        found += expand(m.group(1))
    for m in re.finditer(r"(?<![\w:])\$?crate((?:::\w+)+)", text):
        found.append("crate" + m.group(1))
    for m in re.finditer(r"(?<![\w:])super((?:::\w+)+)", text):
        found.append("super" + m.group(1))
    # A module brought in by `use` (`use crate::glue::{self, Ctx}`, `use crate::node::cluster;`)
    # is then named by its last segment: `glue::migration::verbatim_ok()`.
    aliases = {}
    for p in found:
        segs = [s for s in p.split(" as ")[0].split("::") if s]
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        if len(segs) >= 2:
            aliases[segs[-1]] = segs
    for alias, segs in aliases.items():
        for m in re.finditer(r"(?<![\w:])" + re.escape(alias) + r"((?:::\w+)+)", text):
            found.append("::".join(segs) + m.group(1))
    res = []
    for p in found:
        p = p.split(" as ")[0]
        segs = [s for s in p.split("::") if s and s != "self"] if not p.startswith("self") else [s for s in p.split("::") if s]
        if not segs:
            continue
        if segs[0] == "crate":
            res.append(tuple(segs[1:]))
        elif segs[0] == "super":
            base = list(me)
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            res.append(tuple(base + segs))
        elif segs[0] == "self":
            res.append(tuple(list(me) + segs[1:]))
    return res


def resolve(path, modules):
    for n in range(len(path), 0, -1):
        if path[:n] in modules:
            return path[:n]
    return None


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
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

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            strong(v)
    return [c for c in out if len(c) > 1]


def layer_of(mod, order):
    best = None
    for i, name in enumerate(order):
        key = tuple(name.split("/"))
        if mod[: len(key)] == key and (best is None or len(key) > best[1]):
            best = (i, len(key))
    if best is None and mod == ():
        return order.index("lib") if "lib" in order else None
    return best[0] if best else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", nargs="?", default="src")
    ap.add_argument("--order", help="comma-separated top-level modules, lowest layer first")
    a = ap.parse_args()
    files = {}
    for d, _, names in os.walk(a.src):
        for n in names:
            if n.endswith(".rs") and n != "tests.rs":
                p = os.path.join(d, n)
                files[module_of(a.src, p)] = p
    modules = set(files)
    edges = {}
    for mod, p in files.items():
        text = strip_tests(strip_comments(open(p, encoding="utf-8", errors="replace").read()))
        for path in paths_in(text, mod):
            target = resolve(path, modules)
            if target is not None and target != mod and not (mod[: len(target)] == target):
                edges.setdefault(mod, set()).add(target)
    name = lambda m: os.path.relpath(files[m], a.src)
    bad = 0
    circles = sccs(sorted(modules), edges)
    for c in circles:
        bad += 1
        print(f"circle of {len(c)} files: " + ", ".join(sorted(name(m) for m in c)))
    if a.order:
        order = a.order.split(",")
        unplaced = sorted({name(m) for m in modules if layer_of(m, order) is None})
        if unplaced:
            print("unplaced: " + ", ".join(unplaced))
        for src in sorted(edges):
            ls = layer_of(src, order)
            for dst in sorted(edges[src]):
                ld = layer_of(dst, order)
                if ls is not None and ld is not None and ld > ls:
                    bad += 1
                    print(f"runs up: {name(src)} ({order[ls]}) -> {name(dst)} ({order[ld]})")
    n_edges = sum(len(v) for v in edges.values())
    print(f"{len(modules)} files, {n_edges} arrows, {len(circles)} circles, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

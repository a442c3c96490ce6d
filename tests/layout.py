#!/usr/bin/env python3
# layout.py -- the folder layout's rule (DESIGN.md, "Layout"): includes
# point down the request path, so the folders of src/, models/, simd/ and
# opencl/ include each other without a cycle.  A file's quoted include is
# resolved by name to the folder that holds it (every folder is on the
# include path); the graph of folders must have no cycle, and any cycle
# found is printed with the file and include behind each of its edges.
#
# usage: layout.py SRCDIR
import os
import re
import sys

top = sys.argv[1] if len(sys.argv) > 1 else "."
roots = ["src", "models", "simd", "opencl"]
files = []
for r in roots:
    for dirpath, _, names in os.walk(os.path.join(top, r)):
        for n in names:
            if n.endswith((".c", ".h")):
                files.append(os.path.relpath(os.path.join(dirpath, n), top))
where = {}
for f in files:
    where.setdefault(os.path.basename(f), set()).add(os.path.dirname(f))
# a header the build generates (config.h) is in no folder of the tree
edges = {}
for f in files:
    d = os.path.dirname(f)
    with open(os.path.join(top, f), encoding="utf-8", errors="replace") as fh:
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), re.M):
            for hd in where.get(os.path.basename(m.group(1)), ()):
                if hd != d:
                    edges.setdefault(d, {}).setdefault(hd, f"{f} includes {m.group(1)}")

# Tarjan's strongly connected components: a component of more than one
# folder is a cycle.
index, low, on, stack, comps = {}, {}, set(), [], []
counter = [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, {}):
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
        comps.append(comp)


sys.setrecursionlimit(10000)
for v in sorted(set(where_d for ds in where.values() for where_d in ds)):
    if v not in index:
        visit(v)
bad = [c for c in comps if len(c) > 1]
n_edges = sum(len(t) for t in edges.values())
if not files:
    print(f"no sources under {top}")
    sys.exit(1)
for c in bad:
    print("folders that include each other: " + ", ".join(sorted(c)))
    for a in sorted(c):
        for b, why in sorted(edges.get(a, {}).items()):
            if b in c:
                print(f"  {a} -> {b}: {why}")
if bad:
    sys.exit(1)
print(f"{len(files)} files in {len(comps)} folders, {n_edges} edges between folders, no cycle")

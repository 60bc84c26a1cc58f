#!/usr/bin/env python3
"""tests/check_layers.py - the layering of fs/ (docs/design.md, "Layers"), checked on every
test run: each folder of fs/ is a layer, ranked in fs/LAYERS, and a source file may include
only headers of its own folder and the public headers (named in fs/LAYERS) of lower layers.
Every breach is printed with its file and line; the exit status is 1 if there is any.

  check_layers.py [FS_DIR [OBJ_DIR]]   (default: the fs/ beside this file's folder)

A header name that is no file of fs/ (libc, libfuse, crypto/zcrypt.h) is not fs/'s concern.

With OBJ_DIR (the build's fs/CMakeFiles, holding each source's object file), the calls are
checked too, from the symbols each object defines and needs (nm): a file may call into its own
folder and lower layers only, and the files of one folder may not call each other in a circle
(so that each folder reads bottom up too), but in a folder fs/LAYERS names on a `circle` line
with its reason. Each breach names the two files and the functions.
"""
import collections
import subprocess
import os
import re
import sys


def read_layers(fs):
    """[(folder, {public headers})] from fs/LAYERS, lowest first, and the folders whose files
    may call each other in circles."""
    out, circles = [], set()
    with open(os.path.join(fs, "LAYERS")) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words and words[0] == "circle":
                circles.update(words[1:])
            elif words:
                out.append((words[0], set(words[1:])))
    return out, circles


def symbols(obj):
    """(defined, needed) global symbols of an object file."""
    defined, needed = set(), set()
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        w = line.split()
        if len(w) == 2 and w[0] == "U":
            needed.add(w[1])
        elif len(w) == 3 and w[1] in "TDBRCVW":
            defined.add(w[2])
    return defined, needed


def call_graph(fs, obj_dir):
    """{caller "folder/file.c": {callee "folder/file.c": {symbols}}} over the objects of fs/'s
    sources (an object left behind by a source since moved or removed is not one), and how
    many objects that is."""
    owner, needs = {}, {}
    for root, _, files in os.walk(obj_dir):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            rel = os.path.relpath(os.path.join(root, f), obj_dir).split(os.sep)
            src = "/".join(rel[1:])[:-2]  # zlfscore.dir/file/data.c.o -> file/data.c
            if not os.path.isfile(os.path.join(fs, src)):
                continue
            defined, needs[src] = symbols(os.path.join(root, f))
            for sym in defined:
                owner[sym] = src
    graph = collections.defaultdict(lambda: collections.defaultdict(set))
    for src, syms in needs.items():
        for sym in syms:
            if sym in owner and owner[sym] != src:
                graph[src][owner[sym]].add(sym)
    return graph, len(needs)


def circles_in(graph, files):
    """The strongly connected sets of more than one file among FILES (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in files:
                continue
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(files):
        if v not in index:
            visit(v)
    return out


def check_calls(fs, obj_dir, rank, circles):
    """The breaches of the call rules, as lines, and how many objects were read."""
    (graph, objects), bad = call_graph(fs, obj_dir), []
    folder = lambda f: f.split("/", 1)[0]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if folder(a) in rank and folder(b) in rank and rank[folder(b)] > rank[folder(a)]:
                bad.append(f"fs/{a} calls fs/{b} of a higher layer: "
                           f"{', '.join(sorted(graph[a][b]))}")
    for name in sorted(rank):
        if name in circles:
            continue
        files = {f for f in list(graph) + [g for e in graph.values() for g in e]
                 if folder(f) == name}
        for comp in circles_in(graph, files):
            calls = [f"{a} -> {b} ({', '.join(sorted(graph[a][b])[:3])})"
                     for a in comp for b in comp if b in graph[a]]
            bad.append(f"fs/{name}: files call each other in a circle: {'; '.join(calls)}")
    return bad, objects


def main():
    fs = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fs")
    layers, circles = read_layers(fs)
    rank = {name: i for i, (name, _) in enumerate(layers)}
    public = {name: pub for name, pub in layers}
    where, bad = {}, []
    for name, _ in layers:
        d = os.path.join(fs, name)
        if not os.path.isdir(d):
            bad.append(f"fs/LAYERS names {name}, which is no folder of fs/")
            continue
        for f in os.listdir(d):
            if f in where:
                bad.append(f"{f} is in both fs/{where[f]} and fs/{name}")
            where[f] = name
    for name, pub in layers:
        for h in pub - {f for f, n in where.items() if n == name}:
            bad.append(f"fs/LAYERS: {h} is no header of fs/{name}")
    for entry in sorted(os.listdir(fs)):
        if os.path.isfile(os.path.join(fs, entry)) and entry.endswith((".c", ".h")):
            bad.append(f"fs/{entry} belongs to no layer: move it into one of {sorted(rank)}")
    for f, layer in sorted(where.items()):
        if not f.endswith((".c", ".h")):
            continue
        with open(os.path.join(fs, layer, f), errors="replace") as src:
            for no, line in enumerate(src, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or os.path.basename(m.group(1)) not in where:
                    continue
                h = os.path.basename(m.group(1))
                hl = where[h]
                if hl == layer:
                    continue
                if rank[hl] > rank[layer]:
                    bad.append(f"fs/{layer}/{f}:{no}: includes {h} of fs/{hl}, a higher layer")
                elif h not in public[hl]:
                    bad.append(f"fs/{layer}/{f}:{no}: includes {h}, private to fs/{hl} "
                               f"(its public headers: {' '.join(sorted(public[hl]))})")
    calls = ""
    if len(sys.argv) > 2:
        call_bad, callers = check_calls(fs, sys.argv[2], rank, circles)
        if not callers:
            call_bad.append(f"no object files under {sys.argv[2]}: build first")
        bad += call_bad
        calls = f", calls of {callers} objects checked"
    for b in bad:
        print("check_layers:", b)
    print(f"check_layers: {len(where)} files in {len(layers)} layers{calls}, {len(bad)} breaches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""tests/check_layers.py - the layering of fs/ (docs/design.md, "Layers"), checked on every
test run: each folder of fs/ is a layer, ranked in fs/LAYERS, and a source file may include
only headers of its own folder and the public headers (named in fs/LAYERS) of lower layers.
Every breach is printed with its file and line; the exit status is 1 if there is any.

  check_layers.py [FS_DIR]      (default: the fs/ beside this file's folder)

A header name that is no file of fs/ (libc, libfuse, crypto/zcrypt.h) is not fs/'s concern.
Calls across layers are not checked here; docs/design.md lists the circles left to open.
"""
import os
import re
import sys


def read_layers(fs):
    """[(folder, {public headers})] from fs/LAYERS, lowest first."""
    out = []
    with open(os.path.join(fs, "LAYERS")) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                out.append((words[0], set(words[1:])))
    return out


def main():
    fs = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fs")
    layers = read_layers(fs)
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
    for b in bad:
        print("check_layers:", b)
    print(f"check_layers: {len(where)} files in {len(layers)} layers, {len(bad)} breaches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

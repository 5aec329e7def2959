#!/usr/bin/env python3
"""The layering check of src/: every `crate::<layer>` path (code, `use`, and doc links) in a
layer's files must name that layer or one below it. The layers, top to bottom, are the order
below (README "How it is built"); `error` and `render` sit beneath them all. Test-only code
(everything from a file's first `#[cfg(test)]` on) is not checked. Prints each upward path with
its file and line; exits 1 when there is one, or when a top-level module is in no layer.

Usage: scripts/layers.py [SRC]   (default: src)"""
import os
import re
import sys

LAYERS = ["cli", "prune", "breakglass", "graph", "stack", "cluster", "model", "render", "error"]
RANK = {name: rank for rank, name in enumerate(LAYERS)}


def layer_of(relative_path):
    first = relative_path.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    problems = []
    for entry in sorted(os.listdir(src)):
        if entry in ("lib.rs", "main.rs"):
            continue
        if layer_of(entry) not in RANK:
            problems.append(f"src/{entry}: in no layer (scripts/layers.py LAYERS)")
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            relative = os.path.relpath(path, src)
            layer = layer_of(relative)
            if layer not in RANK:
                continue
            with open(path, encoding="utf-8") as f:
                body = f.read().split("#[cfg(test)]")[0]
            for match in re.finditer(r"crate::(\w+)", body):
                target = match.group(1)
                if target in RANK and RANK[target] < RANK[layer]:
                    line = body[: match.start()].count("\n") + 1
                    problems.append(f"src/{relative}:{line}: {layer} imports {target}, a layer above it")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layering problem(s)", file=sys.stderr)
        return 1
    print(f"layers: {' > '.join(LAYERS)}: every path runs downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())

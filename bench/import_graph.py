"""The import graph of host/phasescope, every import counted (module level, inside functions, and
module names given to importlib as string constants), its cycles, and arrows running back up the
layers. Usage: python3 bench/import_graph.py [ROOT] (issue 30: 0 cycles, 0 arrows back up)."""

import ast
import os
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "host")
#: rooms from the bottom up: an import from a lower room to a higher one runs back up
LAYERS = ["errors", "blas", "resources", "engine", "sources", "formats", "quality", "profiles", "sinks", "view",
          "pipeline", "workloads", "commands", "cli"]


def modules(root):
    for d, _, files in os.walk(os.path.join(root, "phasescope")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                yield (name[:-9] if name.endswith(".__init__") else name), path


def imports(path, known):
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            out.add(node.value)  # importlib.import_module("phasescope.commands.x") and tables of such names
    return {m for m in out if m in known}


def room(mod):
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "phasescope"


def main():
    mods = dict(modules(ROOT))
    graph = {m: imports(p, mods) - {m} for m, p in mods.items()}
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    rank = {r: i for i, r in enumerate(LAYERS)}
    back = sorted((a, b) for a in graph for b in graph[a]
                  if room(a) in rank and room(b) in rank and rank[room(b)] > rank[room(a)])
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports")
    print(f"cycles: {len(sccs)}")
    for s in sccs:
        print("  " + " <-> ".join(s))
    print(f"arrows back up: {len(back)}")
    for a, b in back:
        print(f"  {a} -> {b}")


main()

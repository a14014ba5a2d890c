"""Print the import cycles of one or more packages: between its modules, and between the siblings (modules and
subpackages, each taken whole) at every level of it, as import-linter's `acyclic_siblings` contract sees them.

Usage: python scripts/import_cycles.py [package ...]   (default: tools_app)

Uses grimp (the graph import-linter checks), which counts imports made inside
functions as well as those at module level. A cycle here is a strongly connected
component of more than one module (or sibling); the count is the number of such components.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grimp


def cycles(package: str) -> list[list[str]]:
    """The import cycles between modules of `package`."""
    graph = grimp.build_graph(package, cache_dir=None)
    modules = sorted(graph.modules)
    return _components({m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules) for m in modules})


def sibling_cycles(package: str) -> list[list[str]]:
    """The import cycles between siblings at every level of `package`: each child (a module, or a subpackage with
    everything under it) of each package is one node, an import from anywhere inside one child to anywhere inside
    another is an edge between them."""
    graph = grimp.build_graph(package, cache_dir=None)
    found: list[list[str]] = []
    for parent in sorted(m for m in graph.modules if graph.find_children(m)):
        children = graph.find_children(parent)
        if len(children) < 2:
            continue
        depth = parent.count(".") + 2

        def child_of(module: str, depth: int = depth, parent: str = parent) -> str | None:
            return ".".join(module.split(".")[:depth]) if module.startswith(parent + ".") else None

        edges: dict[str, set[str]] = {child: set() for child in children}
        for module in graph.modules:
            importer = child_of(module)
            if importer is None:
                continue
            for imported in graph.find_modules_directly_imported_by(module) & graph.modules:
                target = child_of(imported)
                if target is not None and target != importer:
                    edges[importer].add(target)
        found += _components({child: sorted(targets) for child, targets in sorted(edges.items())})
    return found


def _components(edges: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    modules = sorted(edges)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def strongconnect(start: str) -> None:
        nonlocal counter
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in modules:
        if module not in index:
            strongconnect(module)
    return found


def main(argv: list[str]) -> int:
    packages = argv or ["tools_app"]
    total = 0
    for package in packages:
        found = cycles(package)
        total += len(found)
        print(f"{package}: {len(found)} import cycle(s) between modules")
        for component in found:
            print(f"  {len(component)} modules: " + ", ".join(component))
        found = sibling_cycles(package)
        total += len(found)
        print(f"{package}: {len(found)} import cycle(s) between siblings (packages taken whole)")
        for component in found:
            print(f"  {len(component)} siblings: " + ", ".join(component))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The packages' layering, read from the source: no cycles between packages, the sans-IO core imports nothing
above it and no IO framework, and the two drivers (the Ray actors and the simulator) stay apart.

How this works: ``import_graph`` parses every module under ``runtime/``, ``actors/``, ``scenarios/`` and
``barriersim/`` with ``ast`` and collects every import in it, at module level and inside functions alike
(``import x``, ``from x import y`` with ``x.y`` when that is a module, relative imports resolved, and
``importlib.import_module("literal")``). Each module is mapped to its package node (``node_of``): every
subpackage of ``runtime`` is one node (``runtime.checkpointing``, ``runtime.network``, ``runtime.sim``, ...),
every top module of ``runtime`` is one node (``runtime.events``, ``runtime.stream_task``, ...), and then
``actors``, ``scenarios``, ``barriersim.report``, ``barriersim.spark``, ``barriersim.rundir`` (the reading of
run directories, below both the report and the Spark analytics), ``barriersim.progress`` (the command line's
phase lines and bars, below the CLI, the sweep and the report), the checks of bad input every front end shares
(``barriersim.errors``, ``barriersim.extras``, ``barriersim.ray_address``) and ``barriersim`` (the rest of the package:
CLI, API, the drivers' entry points). Imports of other distributions become ``ext:<top-level name>``.
``python -m tests.test_package_layering`` prints the node graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# source folder -> the import name it installs as (setup.py)
SOURCE_ROOTS = {"runtime": "barriersim.runtime", "actors": "barriersim.actors", "scenarios": "barriersim.scenarios",
                "barriersim": "barriersim"}
# the sans-IO core's rule (runtime/__init__.py): no Ray, no Spark, no event loop or threads, no wall clock
RUNTIME_FORBIDDEN_EXTERNALS = ("ray", "pyspark", "raydp", "asyncio", "threading", "time")


def module_files() -> dict[str, Path]:
    """``{module name: file}`` of every module of the four source folders."""
    modules = {}
    for folder, prefix in SOURCE_ROOTS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([prefix, *parts])] = path
    return modules


def _imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def node_of(module: str) -> str:
    """The package node a module belongs to (see the module's docstring)."""
    parts = module.split(".")
    if parts[0] != "barriersim":
        return f"ext:{parts[0]}"
    if len(parts) == 1:
        return "barriersim"
    if parts[1] == "runtime":
        return "runtime" if len(parts) == 2 else f"runtime.{parts[2]}"
    if parts[1] in ("actors", "scenarios"):
        return parts[1]
    if parts[1] in ("report", "spark", "rundir", "progress", "errors", "extras", "ray_address"):
        return f"barriersim.{parts[1]}"
    return "barriersim"


def import_graph() -> dict[str, dict[str, set[str]]]:
    """``{node: {imported node: {"importing module -> imported module", ...}}}``, self-imports left out."""
    files = module_files()
    known = set(files)
    graph: dict[str, dict[str, set[str]]] = {}
    for name, path in files.items():
        source = node_of(name)
        edges = graph.setdefault(source, {})
        for imported in _imports_of(name, path, known):
            target = node_of(imported)
            if target != source:
                edges.setdefault(target, set()).add(f"{name} -> {imported}")
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _explain(graph, component: list[str]) -> str:
    members = set(component)
    return "; ".join(sorted(edge for v in component for w, edges in graph.get(v, {}).items() if w in members
                            for edge in edges))


GRAPH = import_graph()


def test_the_graph_sees_imports_inside_functions_and_relative_ones_and_finds_cycles(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from barriersim.spark.session import RayAndSpark\n    from ..spark import session\n")
    found = _imports_of("barriersim.report.m", module, {"barriersim.spark.session"})
    assert {"barriersim.spark.session", "barriersim.spark"} <= found
    assert node_of("barriersim.runtime.network.input.input_channel") == "runtime.network"
    assert cycles({"a": {"b": set()}, "b": {"c": set()}, "c": {"a": set()}, "d": {"a": set()}}) == [["a", "b", "c"]]


def test_every_package_node_is_found():
    nodes = set(GRAPH)
    assert {"runtime.checkpointing", "runtime.network", "runtime.sim", "runtime.events", "runtime.verification",
            "actors", "scenarios", "barriersim.report", "barriersim.spark", "barriersim.rundir", "barriersim"} <= nodes


def test_there_is_no_cycle_between_packages():
    found = cycles(GRAPH)
    assert not found, "\n".join(f"{c}: {_explain(GRAPH, c)}" for c in found)


def test_runtime_imports_no_driver_no_front_end_and_no_io_framework():
    bad = []
    for node, edges in GRAPH.items():
        if not (node == "runtime" or node.startswith("runtime.")):
            continue
        for target, why in edges.items():
            outside = not (target == "runtime" or target.startswith("runtime.") or target.startswith("ext:"))
            if outside or target.removeprefix("ext:") in RUNTIME_FORBIDDEN_EXTERNALS:
                bad += sorted(why)
    assert not bad, "\n".join(bad)


def test_the_ray_driver_and_the_simulator_do_not_import_each_other():
    between = GRAPH.get("actors", {}).get("runtime.sim", set()) | GRAPH.get("runtime.sim", {}).get("actors", set())
    assert not between, "\n".join(sorted(between))


def main() -> int:
    for node in sorted(GRAPH):
        targets = sorted(t for t in GRAPH[node] if not t.startswith("ext:"))
        externals = sorted(t.removeprefix("ext:") for t in GRAPH[node] if t.startswith("ext:"))
        print(f"{node} -> {', '.join(targets) or '-'}")
        print(f"{' ' * len(node)}    (external: {', '.join(externals) or '-'})")
    for component in cycles(GRAPH):
        print(f"CYCLE {component}: {_explain(GRAPH, component)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

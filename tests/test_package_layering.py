"""The layering of the source, read with ``ast``: no import cycle between packages nor between files, the runtime's
top level holds value types that import no subpackage of it, the sans-IO core imports nothing above it and no IO
framework, the two drivers (the Ray actors and the simulator) stay apart, and an import inside a function is of an
optional extra (or of a module that needs one), or in ``LOCAL_IMPORTS_ALLOWED`` with its reason.

How it works: docs/testing.md, "The package layering".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# source folder -> the import name it installs as (setup.py)
SOURCE_ROOTS = {
    "runtime": "barriersim.runtime",
    "actors": "barriersim.actors",
    "scenarios": "barriersim.scenarios",
    "barriersim": "barriersim",
}
# the sans-IO core's rule (runtime/__init__.py): no Ray, no Spark, no event loop or threads, no wall clock
RUNTIME_FORBIDDEN_EXTERNALS = ("ray", "pyspark", "raydp", "asyncio", "threading", "time")
# pyproject.toml's optional extras (ray, spark, report; psutil of test): imported where they are used, so that
# everything else imports without them
OPTIONAL_EXTRAS = ("ray", "raydp", "pyspark", "matplotlib", "psutil")
# the other imports inside functions, (importing module, imported module or its package): why each stays there
LOCAL_IMPORTS_ALLOWED = {
    (
        "barriersim.campaign_cli",
        "barriersim.campaign",
    ): "a campaign loads Hypothesis and the simulator (~0.2 s quiet, 0.7 s loaded) when it runs, not at every start",
    (
        "barriersim.runtime.storage.object_store",
        "pyarrow",
    ): "pyarrow.fs for s3:// only: a subtask's Ray worker, which imports storage, never loads pyarrow (~50 MB)",
}


@dataclass(frozen=True)
class Import:
    """One imported module of one import statement (or ``import_module`` call)."""

    target: str
    line: int
    local: bool  # inside a function


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


def imports_in(name: str, path: Path, known: set[str]) -> list[Import]:
    """Every import of module ``name`` (file ``path``; ``known``: the module names, to tell a module from a name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno, local) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            modules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
            found.extend(Import(module, node.lineno, local) for module in modules)
            if len(modules) < len(node.names):  # names defined in ``target`` itself
                found.append(Import(target, node.lineno, local))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(node.args[0].value, node.lineno, local))
        inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


FILES = module_files()
IMPORTS = {name: imports_in(name, path, set(FILES)) for name, path in FILES.items()}


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
    if parts[1] in ("report", "spark", "rundir", "progress", "errors", "extras", "ray_address", "backends"):
        return f"barriersim.{parts[1]}"
    return "barriersim"


RUNTIME_SUBPACKAGES = {
    name.split(".")[2]
    for name, path in FILES.items()
    if name.startswith("barriersim.runtime.") and path.name == "__init__.py" and name.count(".") == 2
}


def runtime_top_level_as_one(module: str) -> str:
    """``node_of``, with the runtime's top modules counted as one package ``runtime``."""
    node = node_of(module)
    return "runtime" if node.startswith("runtime.") and node.split(".")[1] not in RUNTIME_SUBPACKAGES else node


def import_graph(node=node_of) -> dict[str, dict[str, set[str]]]:
    """``{node: {imported node: {"importing module:line -> imported module", ...}}}``, self-imports left out."""
    graph: dict[str, dict[str, set[str]]] = {}
    for name, imports in IMPORTS.items():
        source = node(name)
        edges = graph.setdefault(source, {})
        for i in imports:
            target = node(i.target)
            if target != source:
                edges.setdefault(target, set()).add(f"{name}:{i.line} -> {i.target}")
    return graph


def module_graph() -> dict[str, dict[str, set[str]]]:
    """The same between modules of the source folders, those inside functions marked ``(in a function)``."""
    graph: dict[str, dict[str, set[str]]] = {name: {} for name in FILES}
    for name, imports in IMPORTS.items():
        for i in imports:
            if i.target in FILES and i.target != name:
                where = " (in a function)" if i.local else ""
                graph[name].setdefault(i.target, set()).add(f"{name}:{i.line}{where} -> {i.target}")
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
    return "; ".join(
        sorted(edge for v in component for w, edges in graph.get(v, {}).items() if w in members for edge in edges)
    )


def extras_needed(module: str, seen: set[str] | None = None) -> set[str]:
    """The optional extras ``module`` imports at module level, itself or through the modules it so imports."""
    seen = set() if seen is None else seen
    needed = set()
    for i in IMPORTS.get(module, ()):
        if i.local:
            continue
        if i.target.split(".")[0] in OPTIONAL_EXTRAS:
            needed.add(i.target.split(".")[0])
        elif i.target in FILES and i.target not in seen:
            seen.add(i.target)
            needed |= extras_needed(i.target, seen)
    return needed


def _allowed_in_a_function(module: str, target: str) -> bool:
    if target.split(".")[0] in OPTIONAL_EXTRAS or (target in FILES and extras_needed(target)):
        return True
    return any(
        (module, prefix) in LOCAL_IMPORTS_ALLOWED
        for prefix in (".".join(target.split(".")[:n]) for n in range(1, target.count(".") + 2))
    )


GRAPH = import_graph()


def test_the_graph_sees_imports_inside_functions_and_relative_ones_and_finds_cycles(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n\ndef f():\n    from barriersim.spark.session import RayAndSpark\n"
        "    from ..spark import session, names\n"
    )
    found = imports_in("barriersim.report.m", module, {"barriersim.spark.session"})
    assert found == [
        Import("os", 1, False),
        Import("barriersim.spark.session", 4, True),
        Import("barriersim.spark.session", 5, True),
        Import("barriersim.spark", 5, True),
    ]
    assert node_of("barriersim.runtime.network.input.input_channel") == "runtime.network"
    assert runtime_top_level_as_one("barriersim.runtime.events") == "runtime"
    assert runtime_top_level_as_one("barriersim.runtime.task.stream_task") == "runtime.task"
    assert cycles({"a": {"b": set()}, "b": {"c": set()}, "c": {"a": set()}, "d": {"a": set()}}) == [["a", "b", "c"]]


def test_every_package_node_is_found():
    nodes = set(GRAPH)
    assert {
        "runtime.checkpointing",
        "runtime.network",
        "runtime.sim",
        "runtime.events",
        "runtime.verification",
        "runtime.faults",
        "runtime.task",
        "actors",
        "scenarios",
        "barriersim.report",
        "barriersim.spark",
        "barriersim.rundir",
        "barriersim",
    } <= nodes


@pytest.mark.parametrize("node", [node_of, runtime_top_level_as_one], ids=["top-modules-apart", "top-level-as-one"])
def test_there_is_no_cycle_between_packages(node):
    graph = import_graph(node)
    found = cycles(graph)
    assert not found, "\n".join(f"{c}: {_explain(graph, c)}" for c in found)


def test_the_runtime_top_level_imports_no_subpackage_of_it():
    """The top holds value types (ids, events, errors, the job graph, ...), below every subpackage."""
    bad = [
        f"{name}:{i.line} -> {i.target}"
        for name, imports in IMPORTS.items()
        if runtime_top_level_as_one(name) == "runtime"
        for i in imports
        if runtime_top_level_as_one(i.target).startswith("runtime.")
    ]
    assert not bad, "\n".join(sorted(bad))


def test_there_is_no_cycle_between_files():
    graph = module_graph()
    found = cycles(graph)
    assert not found, "\n".join(f"{c}: {_explain(graph, c)}" for c in found)


def test_imports_inside_functions_are_of_optional_extras_only():
    bad = [
        f"{FILES[name].relative_to(REPO)}:{i.line}: {i.target}"
        for name, imports in IMPORTS.items()
        for i in imports
        if i.local and not _allowed_in_a_function(name, i.target)
    ]
    assert not bad, (
        "import these at module level (or allow them in LOCAL_IMPORTS_ALLOWED, with the reason):\n" + "\n".join(bad)
    )


def test_every_allowed_import_inside_a_function_is_still_there():
    used = {
        (name, prefix)
        for name, imports in IMPORTS.items()
        for i in imports
        if i.local
        for prefix in (".".join(i.target.split(".")[:n]) for n in range(1, i.target.count(".") + 2))
    }
    assert set(LOCAL_IMPORTS_ALLOWED) <= used, set(LOCAL_IMPORTS_ALLOWED) - used


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
    for graph in (GRAPH, import_graph(runtime_top_level_as_one), module_graph()):
        for component in cycles(graph):
            print(f"CYCLE {component}: {_explain(graph, component)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

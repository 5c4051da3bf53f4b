"""relin's modules import each other without a cycle, counting imports inside functions too.

A cycle that only a function-level import hides still ties two modules into one: neither can be read, tested or
moved alone. The graph is the one :mod:`relin.pipeline.codedeps` walks for DVC's code dependencies (imports under
``if TYPE_CHECKING:`` never run, so they do not count).
"""
import subprocess
import sys

from relin.pipeline.codedeps import SourceTree, _parse_imports

from ..workflow.conftest import ROOT


def import_graph(tree: SourceTree) -> dict[str, set[str]]:
    """Each relin module (``src/relin``, its kernels included) -> the relin modules it imports by name."""
    files = list(tree.package.rglob("*.py"))
    graph: dict[str, set[str]] = {}
    for path in files:
        name = tree.module_name(path)
        # ``from . import x`` names the package too; a package importing its own submodule is no cycle.
        imported = {m for m in _parse_imports(path, tree) if tree.module_file(m) is not None}
        graph[name] = {tree.module_name(tree.module_file(m)) for m in imported} - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle ``[a, b, ..., a]``, or ``[]`` when the graph has none (depth-first, colouring)."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, path)):
                return cycle
        path.pop()
        state[node] = "done"
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return []


def test_relin_has_no_import_cycle():
    cycle = find_cycle(import_graph(SourceTree.checkout(ROOT)))
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_only_the_report_stage_and_the_cli_import_the_report():
    """The report is the end of the pipe: the rules, the manifest and every other stage learn what exists from
    config/ and relin.names, never from report/."""
    graph = import_graph(SourceTree.checkout(ROOT))
    allowed = {"relin.stages.report", "relin.cli"}
    importers = {module for module, imported in graph.items() if not module.startswith("relin.report")
                 and any(m == "relin.report" or m.startswith("relin.report.") for m in imported)}
    assert importers <= allowed, f"modules outside report/ importing it: {sorted(importers - allowed)}"
    assert importers, "the report stage imports report/ (else the graph missed it)"


def test_the_rules_import_nothing_from_the_report():
    rules = sorted((ROOT / "workflow").rglob("*.smk")) + [ROOT / "Snakefile"]
    bad = [path.name for path in rules if "relin.report" in path.read_text()]
    assert not bad, f"rules importing relin.report: {bad}"


def test_a_cycle_is_reported_with_its_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_every_public_kernel_op_stays_a_function_once_its_package_is_imported():
    """`from relin.kernels import <op>` gives the op even after its op directory was imported (an op directory named
    like its op would be set as the package's attribute and shadow the function)."""
    code = ("import importlib, relin.kernels as k\n"
            "for package in sorted(set(k._OPS.values())):\n"
            "    importlib.import_module(f'relin.kernels.{package}')\n"
            "bad = [name for name in k.__all__ if not callable(getattr(k, name))]\n"
            "assert not bad, bad\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr

"""Import hygiene: the model imports without pyspark, in any order, and every export resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

import jetspark.core


def run_python(code: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter, where no jetspark or pyspark module is loaded yet."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_model_imports_without_pyspark():
    result = run_python(
        """
        import sys
        import jetspark.core, jetspark.edges, jetspark.partitioning
        import jetspark.core.traversers
        from jetspark.core import DAG, AbstractProcessor, Processor, Vertex
        from jetspark.edges import Edge, between
        dag = DAG()
        dag.edge(between(dag.new_vertex("a", Processor), dag.new_vertex("b", Processor)))
        dag.validate()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")))
        """
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "first",
    [
        "jetspark.edges",
        "jetspark.edges.edge",
        "jetspark.partitioning",
        "jetspark.core.dag",
        "jetspark.core.abstract_processor",
    ],
)
def test_any_package_can_be_imported_first(first):
    """`edges` uses `core.errors` and `core.dag` uses `edges`: neither order may hit a cycle."""
    run_python(
        f"""
        import {first}
        from jetspark.edges import Edge, EdgeConfig, RoutingPolicy, between, from_
        from jetspark.core import DAG, DagValidationError
        from jetspark.partitioning import DEFAULT
        assert DAG().new_vertex("v", lambda: None).name == "v"
        """
    )


@pytest.mark.parametrize(
    "module",
    ["jetspark.core", "jetspark.core.traversers", "jetspark.edges", "jetspark.partitioning"],
)
def test_every_exported_name_resolves(module):
    package = importlib.import_module(module)
    assert package.__all__
    for name in package.__all__:
        assert getattr(package, name) is not None, name


def test_star_import_of_core_gives_all_names():
    namespace: dict = {}
    exec("from jetspark.core import *", namespace)
    assert set(jetspark.core.__all__) <= set(namespace)


def test_core_lists_its_lazy_names_and_refuses_unknown_ones():
    assert set(jetspark.core.__all__) <= set(dir(jetspark.core))
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        jetspark.core.NoSuchThing  # noqa: B018


def _spark_import_graph() -> dict[str, set[str]]:
    """Module -> the jetspark.core.spark modules it imports (TYPE_CHECKING imports included)."""
    import ast
    import pathlib

    root = pathlib.Path(jetspark.core.__file__).parent / "spark"
    sources: dict[str, pathlib.Path] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        sources[".".join(("jetspark.core.spark", *parts))] = path
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:  # `from package import submodule` imports the module
                    submodule = f"{node.module}.{alias.name}"
                    imported.add(submodule if submodule in sources else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[module] = {m for m in imported if m.startswith("jetspark.core.spark")}
    return graph


def test_core_spark_has_no_import_cycle():
    """core/spark: a room per execution mode and the driver's plumbing, imported one way."""
    graph = _spark_import_graph()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycle = [*path[path.index(target) :], target] if target in path else [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_execution_mode_rooms_import_neither_the_engine_nor_each_other_backwards():
    graph = _spark_import_graph()
    for module, targets in graph.items():
        if module != "jetspark.core.spark" and module != "jetspark.core.spark.engine":
            assert "jetspark.core.spark.engine" not in targets, module
        if module.startswith("jetspark.core.spark.stages"):
            assert not any(".microbatch" in t or ".continuous" in t for t in targets), module

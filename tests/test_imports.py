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

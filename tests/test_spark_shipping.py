"""The zip SparkEngine ships to executors: every source file, and enough to run a job alone.

No Spark runs here; the zip is imported in a fresh interpreter that cannot see the editable
install, as on a worker where jetspark is not installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import msgpack
import pytest

import jetspark.core
from jetspark.core.spark.shipping import build_zip

pytestmark = pytest.mark.timeout(60)

SUBPACKAGES = ("core", "edges", "partitioning", "processors")


def test_the_zip_holds_every_source_file_under_jetspark(tmp_path: Path) -> None:
    root = Path(jetspark.core.__file__).resolve().parent.parent
    sources = {
        f"jetspark/{folder}/{source.relative_to(root / folder).as_posix()}"
        for folder in SUBPACKAGES
        for source in (root / folder).rglob("*.py")
    }
    with zipfile.ZipFile(build_zip(str(tmp_path))) as archive:
        names = set(archive.namelist())
    assert names == {"jetspark/", *sources}


def test_a_job_runs_from_the_zip_alone(tmp_path: Path) -> None:
    """`python -S` skips site processing, so the editable install's finder never loads; the
    site-packages folder comes back only for the runtime dependencies (msgpack, mmh3, numpy)."""
    archive = build_zip(str(tmp_path))
    site_packages = str(Path(msgpack.__file__).resolve().parent.parent)
    code = f"""
        import importlib.util, sys
        sys.path.append({site_packages!r})
        assert importlib.util.find_spec("jetspark") is None, "jetspark is visible without the zip"
        sys.path.insert(0, {archive!r})

        from jetspark.core import DAG, LocalEngine
        from jetspark.edges import between
        from jetspark.processors import flat_map_p, read_list_p, write_list_p

        dag = DAG("zip")
        source = dag.new_vertex("source", read_list_p("lines"))
        split = dag.new_vertex("split", flat_map_p(str.split))
        sink = dag.new_vertex("sink", write_list_p("words"))
        dag.edge(between(source, split)).edge(between(split, sink).distributed())
        engine = LocalEngine(members=2)
        engine.get_list("lines").extend(["a b", "c d e"])
        engine.new_job(dag).join(timeout=20)
        assert sorted(engine.get_list("words")) == ["a", "b", "c", "d", "e"]
        outside = [
            name for name, module in sys.modules.items()
            if name.startswith("jetspark.") and not module.__file__.startswith({archive!r})
        ]
        assert not outside, outside
        print("ran from", sys.modules["jetspark.core"].__file__)
    """
    result = subprocess.run(
        [sys.executable, "-S", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"ran from {archive}/jetspark/core/__init__.py")

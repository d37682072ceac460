"""What a submitted application's console shows besides its own lines (issue 35): nothing under
`jetspark submit` (the `jetspark` console script run by its path, outside the virtualenv);
under a bare spark-submit only what spark-submit's JVM prints before any Python runs; Spark's
log with the documented switches. Assertions are on the lines printed, never on timing."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from test_spark_submit import VENV_BIN

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

APP = """
from jetspark.core import DAG
from jetspark.core.spark import SparkEngine
from jetspark.edges import between
from jetspark.processors import map_p, read_list_p, write_list_p

print("STARTED", flush=True)
engine = SparkEngine()
engine.get_list("words").extend("a b a".split())
dag = DAG("upper")
words = dag.new_vertex("words", read_list_p("words"))
upper = dag.new_vertex("upper", map_p(str.upper))
dag.edge(between(words, upper).distributed())
dag.edge(between(upper, dag.new_vertex("sink", write_list_p("upper"))))
engine.new_job(dag).join()
print("RESULT", sorted(engine.get_list("upper")))
"""
APP_LINES = ["STARTED", "RESULT ['A', 'A', 'B']"]

BEFORE_ANY_PYTHON = [  # spark-submit's JVM, before the driver's Python starts
    re.compile(r"WARNING: Using incubator modules: jdk\.incubator\.vector"),
    re.compile(r"Using Spark's default log4j profile: \S+"),
    re.compile(r"\S+ \S+ WARN Utils: Your hostname, .* resolves to a loopback address: .*"),
    re.compile(r"\S+ \S+ WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address"),
]


def outside_the_virtualenv() -> dict[str, str]:
    """This environment without the virtualenv: not on PATH, no VIRTUAL_ENV, no Spark or
    Python chosen."""
    unset = ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYTHONPATH")
    environment = {key: value for key, value in os.environ.items() if key not in unset}
    path = environment.get("PATH", "").split(os.pathsep)
    environment["PATH"] = os.pathsep.join(entry for entry in path if Path(entry) != VENV_BIN)
    environment.pop("SPARK_LOCAL_IP", None)
    return environment


def printed(command: list[str], cwd: Path, environment: dict[str, str]) -> list[str]:
    """The lines `command` prints on stdout and stderr; fails the test on a non-zero exit."""
    done = subprocess.run(
        command,
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    return done.stdout.splitlines()


def others(lines: list[str]) -> list[str]:
    """`lines` without the application's own."""
    return [line for line in lines if line not in APP_LINES]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    script = tmp_path / "app.py"
    script.write_text(APP)
    return script


def test_jetspark_submit_prints_the_applications_lines_only(app: Path) -> None:
    jetspark = [str(VENV_BIN / "jetspark"), "submit", "--master", "local[2]", str(app)]

    lines = printed(jetspark, app.parent, outside_the_virtualenv())

    assert lines == APP_LINES


def test_a_bare_spark_submit_shows_no_spark_line_once_python_runs(app: Path) -> None:
    """What a bare spark-submit's JVM prints before the driver's Python starts cannot be
    helped from Python; the context's start (Spark's version, the Hadoop warning, the log
    level) prints nothing."""
    environment = outside_the_virtualenv()
    environment["PATH"] = f"{VENV_BIN}{os.pathsep}{environment['PATH']}"
    spark_submit = [str(VENV_BIN / "spark-submit"), "--master", "local[2]", str(app)]

    lines = printed(spark_submit, app.parent, environment)

    assert [line for line in lines if line in APP_LINES] == APP_LINES
    unexplained = [
        line for line in others(lines) if not any(p.fullmatch(line) for p in BEFORE_ANY_PYTHON)
    ]
    assert unexplained == []


def test_with_verbose_the_jvms_start_up_lines_appear_without_the_host_name_warning(
    app: Path,
) -> None:
    jetspark = [str(VENV_BIN / "jetspark"), "--verbose", "submit", "--master", "local[2]"]

    lines = printed([*jetspark, str(app)], app.parent, outside_the_virtualenv())

    assert [line for line in lines if line in APP_LINES] == APP_LINES
    assert any(re.search(r"INFO SparkContext: Running Spark version", line) for line in lines)
    assert not any("resolves to a loopback address" in line for line in lines)

"""jetspark under spark-submit, client mode, as a Spark user runs applications: `SparkEngine()`
in a submitted script uses the context spark-submit sets up (its master, name, conf and
`--py-files`: a module of the user's own, in another folder), with jetspark's defaults where the
user set nothing; the examples and the TF-IDF job run submitted as they are.

Each run is the virtualenv's `spark-submit` in a process of its own, the virtualenv activated
(its `python3` first on PATH, which spark-submit runs the driver with), PYSPARK_PYTHON unset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_cli_console import DOCUMENTS

from jetspark.core.cli import SUBMIT_SCRIPT, main

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

VENV_BIN = Path(sys.executable).parent
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WORDS = ["spark", "jet", "stream", "snapshot", "shuffle", "job", "stage", "jet", "spark"]

USER_MODULE = '''"""A user's processors, in a module of the user's own."""
from jetspark.core import DAG, AbstractProcessor
from jetspark.edges import between
from jetspark.processors import aggregate_by_key_p, read_list_p, whole_item, write_map_p
from jetspark.processors.aggregate import counting


class FirstLetter(AbstractProcessor):
    def try_process0(self, word):
        return self.try_emit(word[0])


def build_dag():
    dag = DAG("first-letters")
    words = dag.new_vertex("words", read_list_p("words"))
    letters = dag.new_vertex("letters", FirstLetter)
    count = dag.new_vertex("count", aggregate_by_key_p([whole_item], counting()))
    sink = dag.new_vertex("sink", write_map_p("counts"))
    dag.edge(between(words, letters))
    dag.edge(between(letters, count).distributed().partitioned(whole_item))
    dag.edge(between(count, sink))
    return dag
'''

SUBMITTED_APP = '''"""A submitted application: SparkEngine(), a module shipped with --py-files."""
import json
import sys

import first_letters

from jetspark.core.spark import SparkEngine

engine = SparkEngine()
engine.get_list("words").extend(WORDS)
engine.new_job(first_letters.build_dag()).join()
conf = engine.context.getConf()
workers = engine.context.parallelize(range(4), 2).map(lambda _: sys.executable).distinct()
print("RESULT " + json.dumps({
    "counts": dict(engine.get_map("counts")),
    "master": engine.context.master,
    "app_name": engine.context.appName,
    "ui": conf.get("spark.ui.enabled"),
    "one_context": SparkEngine().context is engine.context,
    "driver_python": sys.executable,
    "worker_pythons": workers.collect(),
    "module": first_letters.__file__,
}))
'''


def write_project(root: Path) -> tuple[Path, Path]:
    """A user's project: the application in `app/`, its processors in `lib/`; returns both."""
    (root / "app").mkdir(parents=True)
    (root / "lib").mkdir()
    app, module = root / "app" / "submitted.py", root / "lib" / "first_letters.py"
    app.write_text(SUBMITTED_APP.replace("WORDS", repr(WORDS)))
    module.write_text(USER_MODULE)
    return app, module


def spark_submit(
    *arguments: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The virtualenv's spark-submit, the virtualenv activated; fails the test on a non-zero
    exit. spark-submit hands the driver's stderr to its stdout."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYTHONPATH")
    }
    environment["PATH"] = f"{VENV_BIN}{os.pathsep}{environment.get('PATH', '')}"
    environment["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    result = subprocess.run(
        [str(VENV_BIN / "spark-submit"), *arguments],
        cwd=cwd,
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


def submitted_result(output: str) -> dict[str, Any]:
    """What the submitted application printed after `RESULT `."""
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, output[-4000:]
    return json.loads(lines[0].removeprefix("RESULT "))  # type: ignore[no-any-return]


def submit_project(
    root: Path, master: str, *options: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Writes the user's project into `root` and submits its application to `master` with
    spark-submit's `options`, its module as `--py-files`; checks the counts, returns what the
    application printed."""
    app, module = write_project(root)
    submitted = spark_submit(
        "--master", master, *options, "--py-files", str(module), str(app), cwd=root, env=env
    )
    assert "Traceback" not in submitted.stdout + submitted.stderr
    result = submitted_result(submitted.stdout)
    assert result["counts"] == dict(Counter(word[0] for word in WORDS))
    return result


def test_a_submitted_script_runs_on_spark_submits_context(tmp_path: Path) -> None:
    result = submit_project(tmp_path, "local[2]", "--name", "letters-app")
    assert (result["master"], result["app_name"]) == ("local[2]", "letters-app")
    assert result["one_context"] is True
    assert result["ui"] == "false"  # jetspark's default: the user did not ask for the UI
    assert result["worker_pythons"] == [result["driver_python"]]  # one Python
    assert Path(result["module"]).name == "first_letters.py"


def test_the_users_settings_win_over_jetsparks_defaults(tmp_path: Path) -> None:
    """A Python and a UI setting the user gave spark-submit are kept as they are: the workers
    run the virtualenv's python3.X, the driver its python3."""
    python = str(VENV_BIN / f"python{sys.version_info.major}.{sys.version_info.minor}")
    result = submit_project(
        tmp_path,
        "local[1]",
        *("--conf", f"spark.pyspark.python={python}"),
        *("--conf", f"spark.pyspark.driver.python={VENV_BIN / 'python3'}"),
        *("--conf", "spark.ui.enabled=true"),
        env={"SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert (result["master"], result["app_name"]) == ("local[1]", "submitted.py")
    assert result["ui"] == "true"
    assert result["worker_pythons"] == [python] != [result["driver_python"]]


def test_an_example_runs_under_spark_submit_as_it_is(tmp_path: Path) -> None:
    submitted = spark_submit("--master", "local[2]", str(EXAMPLES / "wordcount.py"), cwd=tmp_path)
    assert "starting Spark (local[2]) ..." in submitted.stdout
    assert "distinct words, 14851 in total: match Counter" in submitted.stdout


def test_the_tfidf_job_is_submitted_with_the_submit_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text)
    index = tmp_path / "index"
    submitted = spark_submit(
        "--master",
        "local[2]",
        str(SUBMIT_SCRIPT),
        "tfidf",
        str(docs),
        "--index",
        str(index),
        cwd=tmp_path,
    )
    assert "building the index on Spark local[2] (2 members)" in submitted.stdout
    assert f"index:          {index}" in submitted.stdout
    capsys.readouterr()
    assert main(["search", "parse", "--index", str(index)]) == 0
    assert [line.split()[-1] for line in capsys.readouterr().out.splitlines()] == ["parse.txt"]

"""The `jetspark` console script as pipx or a service manager runs it: by absolute path, the
virtualenv not activated (issue 12). Its Spark workers must run the script's own Python, and
stderr must hold jetspark's progress only: no JVM warnings, no log4j banner, no Spark bars."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jetspark.core.cli import main
from jetspark.core.spark.session import check_master, stop_context

pytestmark = pytest.mark.timeout(400)

SCRIPT = Path(sys.executable).parent / "jetspark"
DOCUMENTS = {
    "parse.txt": "parse the json text\nparse a json document quickly\n",
    "spark.txt": "a spark lights the fuel\nspark clusters process data\n",
    "jet.txt": "jet processes streams of data\nthe json of a stream\n",
}
STAGE_LINE = re.compile(r"^  Spark stage (\d+) finished: \d+ tasks? in \d+\.\d s$")


def run_script(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs the console script with a bare PATH, as if the virtualenv did not exist."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYTHONPATH", "PATH")
    }
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return subprocess.run(
        [str(SCRIPT), *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=350
    )


@pytest.mark.spark
def test_the_console_script_runs_spark_jobs_outside_its_virtualenv(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text)
    built = run_script("tfidf", str(docs), "--engine", "spark", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    for noise in ("WARN", "log4j", "[Stage", "Using incubator modules"):
        assert noise not in built.stderr, built.stderr
    stage_ids = [
        int(m.group(1)) for line in built.stderr.splitlines() if (m := STAGE_LINE.match(line))
    ]
    assert len(stage_ids) >= 2 and len(set(stage_ids)) == len(stage_ids), built.stderr
    found = run_script("search", "parse", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert [line.split()[-1] for line in found.stdout.splitlines()] == ["parse.txt"]


@pytest.mark.spark
def test_verbose_brings_sparks_log_back(tmp_path: Path) -> None:
    explained = run_script("--verbose", "explain", "tfidf", "--master", "local[1]", cwd=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert "log4j" in explained.stderr
    assert "DAG 'tf-idf' on Spark" in explained.stdout


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[2]",
        "local[*]",
        "local[2,3]",
        "spark://127.0.0.1:7077",
        "spark://a:1,b:2",
        "yarn",
        "k8s://https://host:443",
        "local-cluster[2,1,1024]",
    ],
)
def test_master_urls_spark_takes(master: str) -> None:
    check_master(master)


@pytest.mark.parametrize("master", ["nonsense", "local[0]", "spark://host", "local[two]", ""])
def test_malformed_masters_are_refused_before_spark_starts(
    master: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "tfidf", "--master", master]) == 2
    assert f"argument --master: {master!r} is not a Spark master URL" in capsys.readouterr().err


def test_an_unreachable_master_fails_fast(tmp_path: Path) -> None:
    """Nothing listens on the port: a connection check says so before a JVM starts (Spark
    itself retries for about a minute). In a new process: this one may hold a context."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_script("explain", "tfidf", "--master", f"spark://127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"starting Spark (spark://127.0.0.1:{port}) ...\n"
        f"jetspark explain: error: cannot reach the Spark master spark://127.0.0.1:{port} "
        f"(127.0.0.1:{port}: Connection refused): is it running, and is the address right?\n"
    )


class _AccumulatorServer:
    def __init__(self) -> None:
        self.shut_down = threading.Event()

    def shutdown(self) -> None:
        self.shut_down.set()


class _Context:
    """Just what `stop_context` touches of a SparkContext."""

    def __init__(self) -> None:
        self._accumulatorServer: _AccumulatorServer | None = _AccumulatorServer()
        self.server_at_stop: object = "not stopped"

    def stop(self) -> None:
        self.server_at_stop = self._accumulatorServer


def test_stopping_a_context_leaves_its_accumulator_server_to_a_thread() -> None:
    context = _Context()
    server = context._accumulatorServer
    assert server is not None

    stop_context(context)  # type: ignore[arg-type]

    assert context.server_at_stop is None  # SparkContext.stop skips its one-second wait
    assert server.shut_down.wait(timeout=60)


class _Gateway:
    """Just what `stop_context(..., end_jvm=True)` touches of a py4j gateway: `proc` is a
    process that, like PySpark's driver JVM, exits at EOF on its stdin."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
        self.shut_down = False

    def shutdown(self) -> None:
        self.shut_down = True


@pytest.fixture
def own_gateway(monkeypatch: pytest.MonkeyPatch) -> _Gateway:
    """A gateway jetspark launched and PySpark uses (a shared test context's is put back)."""
    from pyspark import SparkContext

    from jetspark.core.spark import session

    gateway = _Gateway()
    monkeypatch.setattr(SparkContext, "_gateway", gateway)
    monkeypatch.setattr(SparkContext, "_jvm", object())
    monkeypatch.setattr(session, "_own_gateway", gateway)
    yield gateway
    gateway.proc.kill()
    gateway.proc.wait()


def test_ending_the_jvm_with_its_context_leaves_nothing_running(own_gateway, capsys) -> None:
    from pyspark import SparkContext

    context = _Context()
    server = context._accumulatorServer
    server.handle_error = lambda request, address: print("Exception occurred", file=sys.stderr)

    stop_context(context, end_jvm=True)  # type: ignore[arg-type]

    assert own_gateway.shut_down and own_gateway.proc.poll() == 0  # exited, not killed
    assert SparkContext._gateway is None and SparkContext._jvm is None  # the next one is new
    server.handle_error(None, None)  # the JVM's exit closes its accumulator connection
    assert capsys.readouterr().err == ""


def test_a_stopped_context_keeps_its_jvm_unless_asked(own_gateway) -> None:
    from pyspark import SparkContext

    stop_context(_Context())  # type: ignore[arg-type]

    assert not own_gateway.shut_down and own_gateway.proc.poll() is None
    assert SparkContext._gateway is own_gateway


def test_a_jvm_jetspark_did_not_launch_is_never_ended(own_gateway, monkeypatch) -> None:
    from jetspark.core.spark import session

    monkeypatch.setattr(session, "_own_gateway", None)  # the user's, or one recording its archive

    stop_context(_Context(), end_jvm=True)  # type: ignore[arg-type]

    assert not own_gateway.shut_down and own_gateway.proc.poll() is None

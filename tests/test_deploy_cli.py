"""The command line and the examples as a user deploying jetspark meets them: `jetspark
--version` and `--submit-script`, the stock-exchange example's help and its `--duration` (counted
from the job's first trades, not from the engine's start-up), and the errors of cluster managers
that cannot run here, in Python terms: a YARN master without HADOOP_CONF_DIR, a Kubernetes API
server that does not answer or does not speak Kubernetes."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_console import run_script
from test_processors_examples import load

from jetspark.core import JobConfig, LocalEngine, ProcessingGuarantee
from jetspark.core.cli import SUBMIT_SCRIPT, main

pytestmark = pytest.mark.timeout(300)

stock = load("stock_exchange")
_JVM_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(.*\)$", re.M)


def test_version_names_jetspark_pyspark_and_python(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == (
        f"jetspark {importlib.metadata.version('jetspark')} "
        f"(pyspark {importlib.metadata.version('pyspark')}, Python {platform.python_version()})\n"
    )


def test_submit_script_is_a_python_file_alone_in_its_folder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """spark-submit runs Python applications from a .py file, and Python puts the file's folder
    first on sys.path: nothing there may shadow a module (a `jetspark.py` would hide the
    package)."""
    assert main(["--submit-script"]) == 0
    script = Path(capsys.readouterr().out.strip())
    assert script == SUBMIT_SCRIPT and script.suffix == ".py" and script.is_file()
    assert [p.name for p in script.parent.iterdir() if p.name != "__pycache__"] == [script.name]


def test_stock_exchange_help_states_the_defaults() -> None:
    text = stock._parser().format_help()
    flat = " ".join(text.split())
    assert "on the local engine" not in flat
    assert "--members N cluster members (default 2)" in flat
    assert "--duration SECONDS run the unbounded job for SECONDS, counted from its first" in flat
    assert "--engine {spark,local} default local; spark under spark-submit" in flat


class StartUpClock:
    """A clock the test moves: it stands still until the test says start-up took `start_up`
    seconds, then advances 0.01 s a reading; `read` is set once it has been read twice."""

    def __init__(self) -> None:
        self.now = 0.0
        self.readings = 0
        self.read = threading.Event()
        self.running = False

    def __call__(self) -> float:
        self.readings += 1
        if self.readings >= 2:
            self.read.set()
        if self.running:
            self.now += 0.01
        return self.now


def test_duration_is_counted_from_the_first_trades_read(tmp_path: Path) -> None:
    """The job reads nothing until the test opens the gate, after 100 s of "start-up" on the
    run's clock; a one-second run still reads trades and reports about one second."""
    gate = threading.Event()

    def gated_trade(n: int) -> object:
        gate.wait()
        return stock.trade(n)

    engine = LocalEngine(members=1)
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    job = engine.new_job(stock.build_streaming_dag(str(tmp_path / "out"), gated_trade), config)
    clock = StartUpClock()
    result: list[float] = []
    runner = threading.Thread(
        target=lambda: result.append(
            stock.run_for(job, 1.0, lambda _: None, clock, lambda: stock._trades_read(job) > 0)
        )
    )
    runner.start()
    assert clock.read.wait(60)
    clock.now = 100.0  # the engine's start-up: the job has read nothing yet
    clock.running = True
    gate.set()
    runner.join(120)
    assert not runner.is_alive()
    assert 1.0 <= result[0] < 2.0
    assert stock._trades_read(job) > 0


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and closes them without a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_kubernetes_api_server_fails_before_spark_starts(tmp_path: Path) -> None:
    """No JVM starts: a connection check names the API server (Spark would retry for seconds
    and print some 380 lines of JVM frames)."""
    port = _free_port()
    master = f"k8s://https://127.0.0.1:{port}"
    result = run_script("explain", "tfidf", "--master", master, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"starting Spark ({master}) ...\n"
        f"jetspark explain: error: cannot reach the Kubernetes API server of {master} "
        f"(127.0.0.1:{port}: Connection refused): is the cluster running, and is the address "
        "the one `kubectl cluster-info` shows?\n"
    )


@pytest.mark.spark
def test_yarn_without_its_configuration_says_what_to_set(tmp_path: Path) -> None:
    """spark-submit refuses a YARN master without HADOOP_CONF_DIR or YARN_CONF_DIR, and its JVM
    exits; that reason is the error (PySpark says only that the gateway exited)."""
    result = run_script("explain", "tfidf", "--master", "yarn", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        "starting Spark (yarn) ...\n"
        "jetspark explain: error: Spark could not start on yarn: When running with master "
        "'yarn' either HADOOP_CONF_DIR or YARN_CONF_DIR must be set in the environment.\n"
    )


@pytest.mark.spark
def test_a_kubernetes_master_that_fails_in_the_jvm_reads_in_python_terms(
    tmp_path: Path, silent_port: int
) -> None:
    """The port answers but speaks no Kubernetes: Spark fails inside the JVM. Its logged errors
    keep one line each, without the exception's body, and the error names the exception and
    its root cause."""
    master = f"k8s://https://127.0.0.1:{silent_port}"
    result = run_script("explain", "tfidf", "--master", master, cwd=tmp_path)
    assert result.returncode == 1
    assert not _JVM_FRAME.search(result.stderr), result.stderr
    assert "Caused by" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith(
        f"jetspark explain: error: Spark could not start on {master}: KubernetesClientException: "
    ), result.stderr
    assert "(root cause: " in last
    assert len(result.stderr.splitlines()) < 15, result.stderr

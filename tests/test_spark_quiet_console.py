"""Noise that reads as failure (issue 25, item 18): what the tasks Spark kills print, Ctrl-C, and
a context stopped right after a job print nothing on a quiet console. The drivers run in child
processes (one SparkContext per process, its console their stderr); every assertion is on what
they printed, never on how long anything took."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_spark_cluster import cluster  # noqa: F401 (the fixture: a cluster for this module)

from jetspark.core.spark.driver_jvm import JvmConsole
from jetspark.core.spark.killed_tasks import KilledTaskOutput

TESTS = Path(__file__).resolve().parent

KILLED_WORKER = [  # what PySpark's daemon printed for each task a cancel killed
    "Traceback (most recent call last):\n",
    '  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/'
    'daemon.py", line 264, in manager\n',
    '  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/'
    'daemon.py", line 95, in worker\n',
    "BrokenPipeError: [Errno 32] Broken pipe\n",
]
KILLED_BARRIER_TASK = (
    'Exception in thread "accept-connections" org.apache.spark.TaskKilledException: Stage '
    "cancelled: [SPARK_JOB_CANCELLED] Job 0 cancelled part of cancelled job group jetspark-1 "
    "SQLSTATE: XXKDA\n"
)
USERS_TRACEBACK = [  # a worker's own failure: it stays
    "Traceback (most recent call last):\n",
    '  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 1, in main\n',
    '  File "/home/me/project/mine.py", line 7, in parse\n',
    "    return int(text)\n",
    "ValueError: invalid literal for int() with base 10: 'x'\n",
]


def passed_on(lines: list[str]) -> list[str]:
    output = KilledTaskOutput()
    kept = [shown for line in lines for shown in output.feed(line)]
    return kept + output.flush()


def test_a_killed_workers_traceback_and_a_killed_tasks_thread_are_dropped():
    lines = ["before\n", *KILLED_WORKER, KILLED_BARRIER_TASK, *KILLED_WORKER, "after\n"]

    assert passed_on(lines) == ["before\n", "after\n"]


def test_other_tracebacks_and_lines_pass_unchanged():
    reset = [*KILLED_WORKER[:3], "ConnectionResetError: [Errno 104] Connection reset by peer\n"]
    other_error = [*KILLED_WORKER[:3], "EOFError\n"]
    lines = [*USERS_TRACEBACK, *other_error, 'Exception in thread "main" java.lang.Error\n']

    assert passed_on(lines) == lines
    assert passed_on(reset) == []
    assert passed_on(KILLED_WORKER[:3]) == KILLED_WORKER[:3]  # the stream ended in it


def console_output(lines: list[str], *, quiet: bool) -> str:
    """What a JvmConsole shows of `lines` written to the JVM's end of its pipe."""
    target = io.StringIO()
    console = JvmConsole(target, quiet=quiet)
    with os.fdopen(os.dup(console.write_end), "w") as jvm_stderr:
        jvm_stderr.writelines(lines)
    console.launched()
    console.failure(timeout=30)  # waits for the pipe's end
    return target.getvalue()


def test_the_quiet_console_drops_what_killed_tasks_print_and_verbose_shows_it():
    lines = ["a line\n", *KILLED_WORKER, KILLED_BARRIER_TASK, *USERS_TRACEBACK]

    assert console_output(lines, quiet=True) == "a line\n" + "".join(USERS_TRACEBACK)
    assert console_output(lines, quiet=False) == "".join(lines)


def run_child(code: str, *arguments: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`code` in a Python of its own, from the tests folder, without the class archive."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
        "JETSPARK_CLASS_ARCHIVE": "off",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    command = [sys.executable, "-c", code, *arguments]
    return subprocess.run(
        command, env=environment, cwd=TESTS, capture_output=True, text=True, timeout=timeout
    )


NOISE = ("Traceback", "Error", "ERROR", "Exception", "\tat ")


def noise_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(word in line for word in NOISE)]


CANCELLED_MICRO_BATCHES = """
import sys, tempfile
from pyspark import cloudpickle
import test_streaming_conformance
from test_streaming_conformance import unbounded_windows_dag
from jetspark.core import DirectorySnapshotStore, JobCancelledError, JobConfig
from jetspark.core import ProcessingGuarantee
from jetspark.core.config import ExecutionMode
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context, stop_context

cloudpickle.register_pickle_by_value(test_streaming_conformance)
work = tempfile.mkdtemp(dir=sys.argv[1])
context = create_context("local[2]", "cancelled-micro-batches")
config = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
    snapshot_interval_millis=500,
    execution_mode=ExecutionMode.MICRO_BATCH,
)
job = SparkEngine(context).new_job(
    unbounded_windows_dag(work + "/out"),
    config,
    snapshot_store=DirectorySnapshotStore(work + "/snapshots"),
)
while job.metrics.batch_count < 3:  # cancelled in the fourth batch
    try:
        job.join(timeout=0.1)
    except TimeoutError:
        continue
job.cancel()
try:
    job.join()
except JobCancelledError:
    print("cancelled")
stop_context(context)
print("stopped")
"""


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_a_cancelled_streaming_job_prints_nothing_on_stderr(tmp_path):
    done = run_child(CANCELLED_MICRO_BATCHES, str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "cancelled\nstopped\n"
    assert noise_in(done.stderr) == []


def interrupted(command: list[str], marker: str) -> tuple[int, str]:
    """Runs `command` in a session of its own with Ctrl-C's default action, sends SIGINT to
    its process group (as a terminal's Ctrl-C does) once `marker` is on its stderr, and
    returns its exit code and stderr."""
    environment = {**os.environ, "JETSPARK_CLASS_ARCHIVE": "off"}
    with subprocess.Popen(
        command,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as process:
        assert process.stderr is not None
        said = []
        for line in process.stderr:
            said.append(line)
            if marker in line:
                os.killpg(process.pid, signal.SIGINT)
                break
        said += process.stderr.readlines()
        return process.wait(timeout=300), "".join(said)


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_ctrl_c_stops_the_cli_with_one_line(tmp_path):
    jetspark = [sys.executable, "-m", "jetspark.core"]
    code, stderr = interrupted(
        [*jetspark, "tfidf", "--index", str(tmp_path / "index")], "building the index"
    )

    assert code == 130, stderr
    assert stderr.endswith("jetspark tfidf: interrupted\n")
    assert noise_in(stderr) == []


CTRL_C_IN_A_JVM_CALL = """
import os, signal, threading, time
from jetspark.core.spark.session import create_context, stop_context

context = create_context("local[1]", "ctrl-c-in-a-jvm-call")
gate = context._jvm.java.util.concurrent.Semaphore(0)


def press_ctrl_c_during_the_call():
    while not gate.hasQueuedThreads():  # the main thread waits inside the JVM
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)  # lets the handler run while the call lasts, then ends the call
    gate.release()


threading.Thread(target=press_ctrl_c_during_the_call, daemon=True).start()
try:
    gate.acquire()
    threading.Event().wait()
except KeyboardInterrupt:
    print("interrupted")
stop_context(context)
"""


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_ctrl_c_inside_a_jvm_call_interrupts_once_the_call_returned():
    """PySpark's handler called the JVM from inside the interrupted call (Py4J's "reentrant
    call", Py4JNetworkError and KeyboardInterrupt tracebacks on the root logger)."""
    done = run_child(CTRL_C_IN_A_JVM_CALL)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "interrupted\n"
    assert noise_in(done.stderr) == []


STOP_AFTER_A_JOB = """
import sys
from jetspark.core import DAG
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context, stop_context
from jetspark.edges import between
from jetspark.processors import aggregate_by_key_p, read_list_p, whole_item, write_map_p
from jetspark.processors.aggregate import counting

context = create_context(sys.argv[1], "stop-after-a-job")
engine = SparkEngine(context, members=2)
engine.get_list("words").extend("a b a".split())
dag = DAG("count")
words = dag.new_vertex("words", read_list_p("words"))
count = dag.new_vertex("count", aggregate_by_key_p([whole_item], counting()))
sink = dag.new_vertex("sink", write_map_p("counts"))
dag.edge(between(words, count).distributed().partitioned(whole_item)).edge(between(count, sink))
engine.new_job(dag).join()
print(sorted(engine.get_map("counts").items()))
stop_context(context)
"""


@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_a_driver_stopping_right_after_its_job_prints_nothing_on_stderr(cluster):  # noqa: F811
    """The job frees the stores it shipped on every executor before it ends, so no removal is
    still outstanding when the context stops the executors (Spark's "Still have 1 requests
    outstanding", half of the runs on the cluster before)."""
    for _ in range(3):
        done = run_child(STOP_AFTER_A_JOB, cluster)

        assert done.returncode == 0, done.stderr
        assert done.stdout == "[('a', 2), ('b', 1)]\n"
        assert noise_in(done.stderr) == []


A_SCRIPT_THAT_NEVER_STOPS_ITS_CONTEXT = """
from jetspark.core.spark.session import create_context

context = create_context("local[1]", "never-stopped")
print(context.parallelize(range(4), 2).map(lambda n: n * n).sum())
"""


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_the_run_that_records_the_class_archive_ends_without_a_traceback(tmp_path):
    """The recording ends the driver JVM at the process's exit, while the context the script
    never stopped still has its accumulator server connected (PySpark's EOFError traceback,
    'Exception occurred during processing of request', before)."""
    environment = {**os.environ, "JETSPARK_CLASS_ARCHIVE": str(tmp_path / "archives")}
    command = [sys.executable, "-c", A_SCRIPT_THAT_NEVER_STOPS_ITS_CONTEXT]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=540)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "14\n"
    assert list((tmp_path / "archives").glob("driver-*.jsa")), done.stderr  # it recorded
    assert noise_in(done.stderr) == []

"""Carrying a processor failure from a Spark task back to the driver as a JobFailedError.

Spark reports a Python task failure to the driver as text inside a Py4JJavaError. The task
therefore raises an error whose message embeds the failure's facts between markers; the driver
finds them and raises the same JobFailedError LocalEngine would, with the remote traceback.
Any other Spark failure is summarised from its text in Python terms (the Python traceback of the
task, or the JVM exception's message), never with JVM stack frames.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import socket
import sys
import traceback
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors.exceptions.captured import CapturedException

from jetspark.core.errors import JobFailedError

_BEGIN, _END = "<<jetspark-failure:", ":jetspark-failure>>"
_PATTERN = re.compile(re.escape(_BEGIN) + r"(\{.*?\})" + re.escape(_END), re.DOTALL)


FAILURE_FIELDS = frozenset(
    {
        "message",
        "vertex_name",
        "processor_index",
        "callback",
        "member",
        "host",
        "cause_type",
        "traceback",
    }
)
"""The facts of a processor's failure that the driver rebuilds its JobFailedError from, each a
str, an int or None: `failure_report`'s keys."""


class TaskFailure(RuntimeError):
    """Raised inside a Spark task; its message carries the failure's facts for the driver."""


def failure_report(error: BaseException, facts: dict[str, Any]) -> dict[str, Any]:
    """The facts of `error` with its traceback text: plain data, whichever way it travels."""
    return {**facts, "traceback": "".join(traceback.format_exception(error))}


def task_failure(error: BaseException, facts: dict[str, Any]) -> TaskFailure:
    """Wraps `error` (with its traceback text) for the trip to the driver."""
    return TaskFailure(f"{_BEGIN}{json.dumps(failure_report(error, facts))}{_END}")


def processor_failure_facts(failure: JobFailedError, member: int) -> dict[str, Any]:
    """What the driver needs to know of a processor's failure on `member`."""
    return {
        "message": str(failure),
        "vertex_name": failure.vertex_name,
        "processor_index": failure.processor_index,
        "callback": failure.callback,
        "member": member,
        "host": socket.gethostname(),
        "cause_type": type(failure.__cause__).__name__ if failure.__cause__ else None,
    }


def failure_facts(error_text: str) -> dict[str, Any] | None:
    """The facts a task embedded in `error_text`, or None when it holds none."""
    match = _PATTERN.search(error_text)
    return json.loads(match.group(1)) if match else None


_TRACEBACK = "Traceback (most recent call last):"
_JVM_FRAME = re.compile(r"^\s*(at [\w$.<>/]+\(.*\)|\.\.\. \d+ more)\s*$")
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_PY4J_PREFIX = re.compile(r"^An error occurred while calling [\w.:$]+\.\s*\n:\s*")
_NO_PYTHON = re.compile(r'Cannot run program "([^"]*)": error=\d+, ([^\n]+)')


def python_traceback(error_text: str) -> str | None:
    """The last Python traceback in the text of a Spark failure (a Py4J error's message), or
    None; it ends at the exception line, before any JVM frame."""
    start = error_text.rfind(_TRACEBACK)
    if start < 0:
        return None
    lines = []
    for line in error_text[start:].splitlines():
        if _JVM_FRAME.match(line) or line.startswith(" SQLSTATE") or not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def spark_error_summary(error_text: str) -> str:
    """A Spark failure in one line without JVM frames: the Python exception of its traceback,
    else the JVM exception's message (the Py4J call prefix dropped)."""
    traceback_text = python_traceback(error_text)
    if traceback_text is not None:
        return traceback_text.splitlines()[-1].strip()
    text = _PY4J_PREFIX.sub("", error_text.strip())
    kept = []
    for line in text.splitlines():
        if _JVM_FRAME.match(line):
            break
        kept.append(line.rstrip())
    return " ".join(part.strip() for part in kept if part.strip()) or type(error_text).__name__


def missing_module(error_text: str) -> str | None:
    """The module an executor could not import, when that is what failed."""
    match = _MISSING_MODULE.search(error_text)
    return match.group(1) if match else None


_NOT_ON_WORKERS = frozenset({"pyspark", "tqdm", "prometheus_client"})
"""Dependencies the workers do not need: Spark brings pyspark; progress bars and the live job
view's metrics are the driver's."""


def jetspark_dependencies() -> frozenset[str]:
    """The import names of the dependencies jetspark's tasks import on the workers (from
    jetspark's installed metadata)."""
    try:
        requirements = importlib.metadata.requires("jetspark") or []
    except importlib.metadata.PackageNotFoundError:
        return frozenset()
    names = (re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0] for r in requirements if "extra" not in r)
    return frozenset(name.lower().replace("-", "_") for name in names) - _NOT_ON_WORKERS


def missing_module_advice(module: str, used_by: dict[str, set[str]], worker_python: str) -> str:
    """What to tell a user whose executors could not import `module`: which vertices need it
    (`used_by`: module -> vertices and edges), and how to get it onto the executors."""
    top = module.partition(".")[0]
    if top in jetspark_dependencies():
        return (
            f"the executors' Python ({worker_python}) cannot import {top}, which jetspark "
            "needs: run the workers with a Python that has jetspark's dependencies (set "
            f"spark.pyspark.python or PYSPARK_PYTHON, e.g. to this driver's {sys.executable}), "
            f"or install them there: pip install {' '.join(sorted(jetspark_dependencies()))}"
        )
    users = sorted(
        {
            where
            for name, places in used_by.items()
            if name == module or name.startswith(f"{module}.") or module.startswith(f"{name}.")
            for where in places
        }
    )
    needed_by = f" (needed by {', '.join(users)})" if users else ""
    return (
        f"the executors cannot import module '{module}'{needed_by}: install it on the workers, "
        f"or ship it with SparkEngine(ship=[{top}]) (the module object, or the path of its "
        "file or package)"
    )


_ITEM_MODULE = re.compile(r"cannot serialize item .* import of module '([\w.]+)' failed")
_SCRIPT_CLASS = re.compile(r"cannot serialize item .* attribute lookup ([\w.]+) on __main__ failed")


def _by_value_hint(message: str) -> str:
    """Advice for an object whose class reached the executors by value (from a shipped module,
    or the driver's script): its objects cross distributed edges with their class, but a
    snapshot keeps objects by reference only, so that a later run restores its own classes."""
    module = _ITEM_MODULE.search(message)
    if module is not None:
        name = module.group(1)
        return (
            f"; module '{name}' reached the executors by value: objects of its classes may "
            "cross distributed edges, but a snapshot needs their module importable: ship it "
            f"with SparkEngine(ship=[<path of {name}>]) or install it on the workers"
        )
    script = _SCRIPT_CLASS.search(message)
    if script is not None:
        return (
            f"; {script.group(1)} is defined in the driver's script (__main__): its objects may "
            "cross distributed edges, but a snapshot needs their class importable: move it "
            "into a module and ship that with SparkEngine(ship=[<path of the module>])"
        )
    return ""


def processor_error(facts: dict[str, Any]) -> JobFailedError:
    """The JobFailedError of a processor's failure in a Spark task, from the facts the task
    reported (`task_failure`), with the task's traceback."""
    return JobFailedError(
        f"{facts['message']} (on member {facts['member']} on host {facts['host']})"
        f"{_by_value_hint(facts['message'])}\n"
        f"--- traceback in the Spark task ---\n{facts['traceback']}",
        vertex_name=facts["vertex_name"],
        processor_index=facts["processor_index"],
        callback=facts["callback"],
        cause_type=facts["cause_type"],
    )


_BARRIER_REFUSED = re.compile(
    r"(?:BarrierJobRunWithDynamicAllocationException|BarrierJobUnsupportedRDDChainException): "
    r"([^\n]*)"
)
_SNAPSHOT_ERROR = re.compile(r"^(?:[\w.]+\.)?SnapshotError: ")
_COORDINATOR_UNREACHABLE = re.compile(
    r"^(?:[\w.]+\.)?UnreachableError: (.*cannot reach the driver's coordinator at .*)$"
)
_LOST_TASK = re.compile(r"Lost task \S+ in stage \S+ \(TID \d+\) \((\S+) executor ([^)\s]+)\)")


def configuration_error(error_text: str) -> bool:
    """Whether the text of a Spark failure says that the job cannot run as the cluster is
    configured, so that running it again would fail the same way: a module the executors
    cannot import, a Python they cannot run, a snapshot store they cannot use (a
    SnapshotError), a driver's coordinator a member cannot reach after its retries, a barrier
    stage Spark refuses."""
    remote = python_traceback(error_text)
    last = remote.splitlines()[-1] if remote else ""
    return (
        missing_module(error_text) is not None
        or _NO_PYTHON.search(error_text) is not None
        or _BARRIER_REFUSED.search(error_text) is not None
        or _SNAPSHOT_ERROR.match(last) is not None
        or _COORDINATOR_UNREACHABLE.match(last) is not None
    )


def spark_job_error(
    failure: BaseException,
    job_name: str,
    modules_used: dict[str, set[str]],
    worker_python: str,
    where: str | None = None,
) -> JobFailedError:
    """The JobFailedError of a Spark job that failed with `failure` (a Py4J error or pyspark's
    captured exception, or an error raised on the driver): a processor's failure as the task
    reported it, a module the executors could not import (`missing_module_advice`), else the
    failure in Python terms. Never a JVM stack. `where`: the failed task's member, host and
    executor, when the caller knows them (else the host and executor Spark's text names)."""
    error_text = str(failure)
    facts = failure_facts(error_text)
    if facts is not None:
        return processor_error(facts)
    # Spark's errors come as Py4J errors, or, once Spark SQL is in use in the process (its
    # handler converts them), as pyspark's captured exceptions
    if not isinstance(failure, (Py4JError, CapturedException)):  # raised on the driver
        return JobFailedError(f"{job_name} failed on Spark: {type(failure).__name__}: {failure}")
    if where is None and (lost := _LOST_TASK.search(error_text)) is not None:
        where = f"host {lost.group(1)}, executor {lost.group(2)}"
    on = f" (on {where})" if where else ""
    failed = f"{job_name} failed on Spark"
    module = missing_module(error_text)
    if module is not None:
        advice = missing_module_advice(module, modules_used, worker_python)
        return JobFailedError(f"{failed}: {advice}{on}")
    if (no_python := _NO_PYTHON.search(error_text)) is not None:
        program, reason = no_python.groups()
        return JobFailedError(
            f"{failed}: the executors cannot run their Python {program!r} "
            f"({reason.strip()}): set PYSPARK_PYTHON (or spark.pyspark.python) to a Python "
            f"every executor has{on}"
        )
    if (refused := _BARRIER_REFUSED.search(error_text)) is not None:
        return JobFailedError(f"{failed}: Spark refuses the job's barrier stage: {refused[1]}")
    remote = python_traceback(error_text)
    if remote and (unreachable := _COORDINATOR_UNREACHABLE.match(remote.splitlines()[-1])):
        return JobFailedError(f"{failed}: {unreachable[1]}{on}")
    details = f"\n--- traceback in the Spark task ---\n{remote}" if remote else ""
    return JobFailedError(f"{failed}: {spark_error_summary(error_text)}{on}{details}")

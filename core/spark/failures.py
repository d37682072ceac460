"""Carrying a processor failure from a Spark task back to the driver as a JobFailedError.

Spark reports a Python task failure to the driver as text inside a Py4JJavaError. The task
therefore raises an error whose message embeds the failure's facts between markers; the driver
finds them and raises the same JobFailedError LocalEngine would, with the remote traceback.
"""

from __future__ import annotations

import json
import re
import traceback
from typing import Any

_BEGIN, _END = "<<jetspark-failure:", ":jetspark-failure>>"
_PATTERN = re.compile(re.escape(_BEGIN) + r"(\{.*?\})" + re.escape(_END), re.DOTALL)


class TaskFailure(RuntimeError):
    """Raised inside a Spark task; its message carries the failure's facts for the driver."""


def task_failure(error: BaseException, facts: dict[str, Any]) -> TaskFailure:
    """Wraps `error` (with its traceback text) for the trip to the driver."""
    details = {**facts, "traceback": "".join(traceback.format_exception(error))}
    return TaskFailure(f"{_BEGIN}{json.dumps(details)}{_END}")


def failure_facts(error_text: str) -> dict[str, Any] | None:
    """The facts a task embedded in `error_text`, or None when it holds none."""
    match = _PATTERN.search(error_text)
    return json.loads(match.group(1)) if match else None

"""The Spark configuration of continuous jobs' own connections, read on the driver at submit.

- `spark.jetspark.heartbeat.interval` (default 1s): how often the driver and each member tell
  each other that they are alive.
- `spark.jetspark.heartbeat.timeout` (default: `spark.network.timeout`, 120s): how long either
  end waits, hearing nothing at all, before it counts the other one as lost.

Times take Spark's own notation (`500ms`, `30s`, `2min`); the members get the driver's values
with their task.
"""

from __future__ import annotations

import dataclasses
from typing import Any

HEARTBEAT_INTERVAL = "spark.jetspark.heartbeat.interval"
HEARTBEAT_TIMEOUT = "spark.jetspark.heartbeat.timeout"
_DEFAULT_INTERVAL = "1s"
_NETWORK_TIMEOUT = "spark.network.timeout"
_DEFAULT_NETWORK_TIMEOUT = "120s"


@dataclasses.dataclass(frozen=True)
class Liveness:
    """How the two ends of a control connection notice that the other one is gone: each sends
    a heartbeat every `interval` seconds, and counts the other as lost once nothing at all came
    from it for `timeout` seconds."""

    interval: float
    timeout: float

    def __post_init__(self) -> None:
        if not 0 < self.interval < self.timeout:
            raise ValueError(
                f"{HEARTBEAT_INTERVAL} ({self.interval:g} s) must be above 0 and below "
                f"{HEARTBEAT_TIMEOUT} ({self.timeout:g} s)"
            )


def liveness_of(context: Any) -> Liveness:
    """The heartbeat settings of `context`'s configuration (module docstring)."""
    conf = context._jsc.sc().conf()  # Spark's own parser of time strings
    network = conf.getTimeAsSeconds(_NETWORK_TIMEOUT, _DEFAULT_NETWORK_TIMEOUT)
    return Liveness(
        interval=conf.getTimeAsMs(HEARTBEAT_INTERVAL, _DEFAULT_INTERVAL) / 1000,
        timeout=conf.getTimeAsMs(HEARTBEAT_TIMEOUT, f"{network}s") / 1000,
    )

"""The Spark configuration of continuous jobs' own connections, read on the driver at submit.

- `spark.jetspark.heartbeat.interval` (default 1s): how often the driver and each member tell
  each other that they are alive.
- `spark.jetspark.heartbeat.timeout` (default: `spark.network.timeout`, 120s): how long either
  end waits, hearing nothing at all, before it counts the other one as lost; also how long a
  connection may take to be made.
- `spark.jetspark.coordinator.port`, `spark.jetspark.member.port` (default 0, any free port):
  the first port the driver's coordinator and each member listen on, then up to
  `spark.port.maxRetries` (16) more, as Spark's own ports.
- The coordinator binds `spark.driver.bindAddress` (default `spark.driver.host`) and the members
  connect to `spark.driver.host`, as Spark's driver does.
- `spark.jetspark.restart.slot.wait` (default 60s): after a lost member, how long a restart
  waits for the cluster to have a free task slot for every member again (a lost executor
  replaced); past it the job restarts on the members it has slots for. A member lost by
  silence (heartbeat timeout: its host vanished) is not waited for.
- `spark.jetspark.link.window` (default 4m): per link of a distributed edge (one upstream to
  one downstream processor on another member), the encoded bytes its sender may have sent that
  the receiver has not moved into the downstream queue yet (besides two queue sizes of entries).
- `spark.jetspark.link.queue` (default 2m): the estimated bytes the receiver of a link lets wait
  in the downstream processor's queue (besides the queue's size in entries).
- `spark.jetspark.queue.maxSize` (default 4m; every execution mode, read by `queue_bytes_of`):
  the estimated bytes each queue between two processors of a member holds, and as much each
  upstream outbox's bucket (besides the edge's queue size in items); an item larger still
  passes, alone.
- `spark.jetspark.staged.maxSize` (default 128m): the sink writes (to named lists and maps,
  encoded) the driver may hold for snapshots not committed yet. Each member keeps its share:
  once the writes it sent exceed it, its processors that saved the snapshot under way wait for
  the commit, and between two snapshots its sinks wait for the next one (the sinks' members
  slow down; nothing is lost), which the driver then starts at once rather than at the interval.
- `spark.jetspark.snapshot.waitLogInterval` (default 60s): how often the driver logs a
  snapshot still under way, how long it has waited and on which processors.

Times take Spark's own notation (`500ms`, `30s`, `2min`), sizes Spark's (`512k`, `4m`); the
members get the driver's values with their task.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jetspark.core.runtime.queue import DEFAULT_QUEUE_BYTES
from jetspark.core.spark.continuous.flow import DEFAULT_LIMITS, ByteLimits

HEARTBEAT_INTERVAL = "spark.jetspark.heartbeat.interval"
HEARTBEAT_TIMEOUT = "spark.jetspark.heartbeat.timeout"
COORDINATOR_PORT = "spark.jetspark.coordinator.port"
MEMBER_PORT = "spark.jetspark.member.port"
RESTART_SLOT_WAIT = "spark.jetspark.restart.slot.wait"
_DEFAULT_SLOT_WAIT = "60s"
LINK_WINDOW = "spark.jetspark.link.window"
LINK_QUEUE = "spark.jetspark.link.queue"
QUEUE_MAX_SIZE = "spark.jetspark.queue.maxSize"
STAGED_MAX_SIZE = "spark.jetspark.staged.maxSize"
_DEFAULT_STAGED_MAX_SIZE = 128 << 20
WAIT_LOG_INTERVAL = "spark.jetspark.snapshot.waitLogInterval"
_DEFAULT_WAIT_LOG_INTERVAL = "60s"
PORT_RETRIES = "spark.port.maxRetries"
_DEFAULT_PORT_RETRIES = 16
_LAST_PORT = 65535
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


@dataclasses.dataclass(frozen=True)
class PortRange:
    """The ports a listener tries in turn: `first`, then up to `retries` more (`first` 0: any
    free port); `key` is the setting that names `first`."""

    first: int
    retries: int
    key: str

    def __post_init__(self) -> None:
        if not 0 <= self.first <= _LAST_PORT:
            raise ValueError(f"{self.key} must be a port from 0 to {_LAST_PORT}, got {self.first}")

    def candidates(self) -> range:
        """The ports to try, in order."""
        if self.first == 0:
            return range(0, 1)
        return range(self.first, min(self.first + self.retries, _LAST_PORT) + 1)

    def text(self) -> str:
        """The ports, for a message."""
        ports = self.candidates()
        if self.first == 0:
            return "any free port"
        return f"port {ports[0]}" if len(ports) == 1 else f"ports {ports[0]}-{ports[-1]}"


@dataclasses.dataclass(frozen=True)
class ContinuousSettings:
    """The settings of a continuous job's connections (module docstring)."""

    liveness: Liveness
    coordinator_ports: PortRange
    member_ports: PortRange
    driver_bind: str
    """The address the coordinator listens on."""
    driver_host: str
    """The address the members connect to."""
    slot_wait: float
    """Seconds a restart waits for a task slot per member before it rescales."""
    links: ByteLimits
    """The byte bounds of the links between members."""
    staged_bytes: int
    """The sink writes the driver may hold for snapshots not committed yet."""
    wait_log_seconds: float
    """How often the driver logs a snapshot still under way."""


def settings_of(context: Any) -> ContinuousSettings:
    """The settings of `context`'s configuration (module docstring)."""
    conf = context._jsc.sc().conf()  # Spark's own parser of time strings
    network = conf.getTimeAsSeconds(_NETWORK_TIMEOUT, _DEFAULT_NETWORK_TIMEOUT)
    liveness = Liveness(
        interval=conf.getTimeAsMs(HEARTBEAT_INTERVAL, _DEFAULT_INTERVAL) / 1000,
        timeout=conf.getTimeAsMs(HEARTBEAT_TIMEOUT, f"{network}s") / 1000,
    )
    retries = conf.getInt(PORT_RETRIES, _DEFAULT_PORT_RETRIES)
    host = conf.get("spark.driver.host", "127.0.0.1")
    return ContinuousSettings(
        liveness,
        PortRange(conf.getInt(COORDINATOR_PORT, 0), retries, COORDINATOR_PORT),
        PortRange(conf.getInt(MEMBER_PORT, 0), retries, MEMBER_PORT),
        driver_bind=conf.get("spark.driver.bindAddress", host),
        driver_host=host,
        slot_wait=conf.getTimeAsMs(RESTART_SLOT_WAIT, _DEFAULT_SLOT_WAIT) / 1000,
        links=ByteLimits(
            window=_size(conf, LINK_WINDOW, DEFAULT_LIMITS.window),
            queue=_size(conf, LINK_QUEUE, DEFAULT_LIMITS.queue),
        ),
        staged_bytes=_size(conf, STAGED_MAX_SIZE, _DEFAULT_STAGED_MAX_SIZE),
        wait_log_seconds=conf.getTimeAsMs(WAIT_LOG_INTERVAL, _DEFAULT_WAIT_LOG_INTERVAL) / 1000,
    )


def queue_bytes_of(context: Any) -> int:
    """`spark.jetspark.queue.maxSize` of `context`'s configuration, in bytes: the byte bound of
    the queues inside every member, in every execution mode (module docstring)."""
    return _size(context._jsc.sc().conf(), QUEUE_MAX_SIZE, DEFAULT_QUEUE_BYTES)


def _size(conf: Any, key: str, default: int) -> int:
    """A size setting in bytes (Spark's notation; a bare number is bytes)."""
    size = int(conf.getSizeAsBytes(key, str(default)))
    if size < 1:
        raise ValueError(f"{key} must be at least 1 byte, got {conf.get(key)!r}")
    return size

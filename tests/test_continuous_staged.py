"""A snapshot that cannot complete holds back a bounded amount of sink writes on the driver
(core/spark/continuous/coordinator.py, member.py; `spark.jetspark.staged.maxSize`).

One branch is stuck on its first item, so no snapshot commits, while another branch writes
to a list sink. The driver used to hold every write for the commit that never came (50 ->
1,348 MB in 40 s). Now the member whose writes it holds past its share holds back its
processors that saved the snapshot, the driver logs how long the snapshot has waited on which
processor (its clock is the test's), and once the processor is released the output is exact,
the driver holding no more than the bound between the later snapshots either (its sinks wait
for the next snapshot, which starts at once: it held 2.16 MB of a 1 MB bound before).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.serialization import encode_batch
from jetspark.core.spark.continuous import coordinator
from jetspark.core.spark.continuous.settings import STAGED_MAX_SIZE
from jetspark.edges import EdgeConfig, between
from jetspark.processors import write_list_p

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]  # 30,000 items through a commit

BOUND = 1 << 20
SHARE = BOUND // 2
"""Each of the two members' share of the driver's staged writes."""
ITEMS = 30_000
SLACK = 2 * EdgeConfig().queue_size * len(encode_batch([(ITEMS, "f" * 64)]))
"""Two queues of the largest items: what the held sink may write past its share."""
LOG_INTERVAL = 60
"""spark.jetspark.snapshot.waitLogInterval's default, in seconds of the test's clock."""


def _item(i: int) -> tuple[int, str]:
    """Item `i`: about 75 encoded bytes, none like another (2.2 MB in all, two bounds)."""
    return i, hashlib.sha256(str(i).encode()).hexdigest()


def _released(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "released"))


class Writer(AbstractProcessor):
    """Processor 1 (on member 1) emits ITEMS items once it has saved the first snapshot, so
    every write comes after that snapshot's barrier, however fast the machine (writes made
    before it belong to the snapshot and are never held); the others emit nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.next = 0
        self.saved = False

    def save_to_snapshot(self) -> bool:
        self.saved = True
        return True

    def complete(self) -> bool:
        if self.context.global_processor_index != 1:
            return True
        if not self.saved:
            return False
        while self.next < ITEMS:
            if not self.try_emit(_item(self.next)):
                return False
            self.next += 1
        return True


class OneItem(AbstractProcessor):
    """Processor 0 (on member 0) emits one item and goes on until the test releases it."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self.emitted = False

    def complete(self) -> bool:
        if self.context.global_processor_index != 0:
            return True
        if not self.emitted:
            self.emitted = self.try_emit("stuck")
        return self.emitted and _released(self.directory)


class Stuck(AbstractProcessor):
    """Takes no item until the test releases it: the snapshot under way never reaches it."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory

    def try_process0(self, item: Any) -> bool:
        return _released(self.directory)


@pytest.fixture
def engine(spark_engine: Any) -> Iterator[Any]:
    """Two members, with the driver's staged writes bounded to BOUND."""
    from jetspark.core.spark import SparkEngine

    conf = spark_engine.context._jsc.sc().conf()
    conf.set(STAGED_MAX_SIZE, str(BOUND))
    try:
        yield SparkEngine(spark_engine.context, members=2)
    finally:
        conf.remove(STAGED_MAX_SIZE)


def _wait_for(condition: Any, job: Any, what: str) -> None:
    """Waits until `condition()` holds while `job` runs; bounded, never a speed check."""
    deadline = time.monotonic() + 180
    while not condition():
        assert not job.status.is_terminal, f"{job.name} ended: {job.status}"
        assert time.monotonic() < deadline, f"{job.name}: {what} did not happen"
        time.sleep(0.05)


def test_a_stuck_branch_holds_the_writing_member_back_within_the_bound(
    engine: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = str(tmp_path)
    now = [0.0]
    monkeypatch.setattr(coordinator, "wait_clock", lambda: now[0])
    dag = DAG("stuck-branch")
    writer = dag.new_vertex("writer", Writer, local_parallelism=1)
    out = dag.new_vertex("out", write_list_p("staged-out"), local_parallelism=1)
    one = dag.new_vertex("one", lambda: OneItem(directory), local_parallelism=1)
    stuck = dag.new_vertex("stuck", lambda: Stuck(directory), local_parallelism=1)
    dag.edge(between(writer, out))
    dag.edge(between(one, stuck))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=50,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        job = engine.new_job(
            dag, config, snapshot_store=DirectorySnapshotStore(str(tmp_path / "snapshots"))
        )
        _wait_for(lambda: job.metrics.staged_bytes > SHARE, job, "staging past a share")
        pattern = re.compile(
            r"snapshot \d+ has waited (\d+) s on stuck#0 on member 0, .*members 1 are held back"
        )

        def logged_waiting_on_stuck() -> bool:
            """True once the driver logged the wait naming the processor; else the test's
            clock moves on by one log interval (the first logs may come before member 0 told
            the driver which of its processors the snapshot waits on)."""
            for record in caplog.records:
                found = pattern.search(record.getMessage())
                if found and int(found[1]) % LOG_INTERVAL == 0:
                    return True
            now[0] += LOG_INTERVAL
            return False

        _wait_for(logged_waiting_on_stuck, job, "the log of the wait")
        emitted = sum(sum(p.emitted_count.values()) for p in job.metrics.of_vertex("writer"))
        assert emitted < ITEMS // 2, "the writing member was not held back"
        stalled = job.metrics.staged_bytes
        assert SHARE < stalled <= BOUND, "the driver held more than the bound while stalled"
        open(os.path.join(directory, "released"), "w").close()
        job.join(240)
    assert sorted(engine.get_list("staged-out")) == [_item(i) for i in range(ITEMS)]
    assert job.metrics.staged_bytes_peak >= stalled
    # after the release too, between two snapshots: the bound, plus what the writing member's
    # sink had taken in when it went over its share and what came before the next barrier
    assert job.metrics.staged_bytes_peak <= BOUND + SLACK
    assert job.metrics.snapshot_count >= 1

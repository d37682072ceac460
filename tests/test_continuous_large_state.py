"""A sliding window over many distinct keys finishes on CONTINUOUS exactly-once with 2 s
snapshots, its windows exactly the plain count (issue 45: over a million keys the job did not
finish in 290 s, one snapshot about every 6 s).

The job, its configuration and its check are bench row 22a's (bench/state_rows.py: every window
of every key once, each count exact), over 100,000 keys here instead of the row's million, to
keep the test run short. Its source holds the second half of its events back until a snapshot
it saved after the first half committed: so at least one snapshot mid-run holds the windows'
state of the keys seen so far, however fast the machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.state_rows import KeyedEvents, continuous_config, run_job
from jetspark.core import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.snapshot_keys import broadcast_key

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

KEYS = 100_000


class HalvesP(AbstractProcessor):
    """Emits its share of `events` (every total-parallelism-th, from its global index), the
    second half only once a snapshot it saved after the first half committed."""

    def __init__(self, events: KeyedEvents) -> None:
        super().__init__()
        self._events = events
        self._position = 0
        self._saved_past_half = False
        self._released = False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._share = range(
            context.global_processor_index, self._events.count, context.total_parallelism
        )
        self._key = broadcast_key(("position", context.global_processor_index))

    def complete(self) -> bool:
        share, half = self._share, len(self._share) // 2
        while self._position < len(share):
            if self._position == half and not self._released:
                return False
            if not self.try_emit(self._events(share[self._position])):
                return False
            self._position += 1
        return True

    def save_to_snapshot(self) -> bool:
        self._saved_past_half = self._position >= len(self._share) // 2
        return self.try_emit_to_snapshot(self._key, self._position)

    def snapshot_committed(self) -> None:
        self._released = self._released or self._saved_past_half

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == self._key:
            self._position = value


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    from jetspark.core.spark import SparkEngine

    return SparkEngine(spark_engine.context, members=2)


def test_a_window_over_many_keys_finishes_exactly_once_with_2_s_snapshots(
    engine: Any, tmp_path: Path
) -> None:
    events = KeyedEvents(KEYS)
    run = run_job(engine, events, continuous_config(), tmp_path, lambda: HalvesP(events))
    state = [sum(report.vertex_bytes.values()) for report in run.snapshots]
    # the snapshot that let the second half go holds, in frames or windows, every key of the
    # first half's last frame at least (a quarter of the keys, each entry some 20 bytes)
    assert max(state) >= KEYS // 4 * 16, state

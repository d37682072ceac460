"""Two attempts publishing one committed snapshot's files at once (issue #32: a fenced member
that already saw the commit, and the new attempt's restore, renamed the same temporary files;
the loser's FileNotFoundError failed the job). Both must succeed, every line published once.

Python switches threads every microsecond here, so the two publishers interleave between
any two steps in every run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import ProcessingGuarantee
from jetspark.core.test_support import TestInbox, TestOutbox, TestProcessorContext
from jetspark.processors import write_file_transactional_p

pytestmark = pytest.mark.usefixtures("frequent_thread_switches")
FILES = 400
RACES = 5


def _sink(out: str) -> Any:
    processor = write_file_transactional_p(out)()
    context = TestProcessorContext().set_processing_guarantee(ProcessingGuarantee.EXACTLY_ONCE)
    processor.init(TestOutbox(1), context)
    return processor


def _race(first: Callable[[], None], second: Callable[[], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as error:  # what either publisher raised is the point
            errors.append(error)

    threads = [threading.Thread(target=run, args=(call,)) for call in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.parametrize("race", range(RACES))
def test_a_fenced_attempt_and_a_restore_publish_one_snapshot_at_once(
    tmp_path: Path, race: int
) -> None:
    out = str(tmp_path / "out")
    fenced = _sink(out)
    saved: list[Any] = []
    for line in range(FILES):  # one sealed file per save, none published yet
        fenced.process(0, TestInbox([line]))
        assert fenced.save_to_snapshot()
        fenced.outbox.drain_snapshot_queue(saved)
    key, value = saved[-1]  # the last save names every sealed file
    restoring = _sink(out)
    errors = _race(
        fenced.snapshot_committed, lambda: restoring.restore_from_snapshot_entry(key, value)
    )
    assert errors == []
    assert jobs.committed_lines(out) == sorted(str(line) for line in range(FILES))

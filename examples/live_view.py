"""A streaming job to watch in the live job view (docs/view.md): page views stamped with the
wall-clock time, counted per page in one-second windows sliding by 100 ms.

    page-views -> insert-watermarks -> count-frames (accumulate_by_frame_p, local partitioned)
        -> count-windows (combine_to_sliding_window_p, distributed partitioned) -> sink

`python examples/live_view.py [--seconds N] [--port P] [--rate R]` starts the view, prints its
address (open it in a browser; Prometheus scrapes `/metrics` there) and runs the job on
LocalEngine with two members, exactly-once with a snapshot a second, for N seconds (default:
until Ctrl-C); then it prints the last window's count per page. Event time is wall-clock epoch
milliseconds, so the view's watermark lag is the job's event-time delay.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from jetspark.core import (
    DAG,
    AbstractProcessor,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.view import JobView
from jetspark.edges import between
from jetspark.processors import (
    accumulate_by_frame_p,
    combine_to_sliding_window_p,
    entry_key,
    insert_watermarks_p,
    write_map_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import (
    TimestampKind,
    emit_by_frame,
    limiting_lag,
    sliding_window_policy,
)

PAGES = ("/", "/docs", "/pricing", "/blog", "/login")
RATE = 2_000
"""Page views a second, over all members."""
LAG_MILLIS = 100
WINDOW = sliding_window_policy(1_000, 100)


class PageView(NamedTuple):
    """One page view: when (epoch ms) and which page."""

    timestamp: int
    page: str


class PageViews(AbstractProcessor):
    """An unbounded source of `rate` page views a second (its share of them), each stamped with
    the wall-clock time it is due at; like a live feed, it starts afresh on a restart."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.started: float | None = None
        self.emitted = 0

    def init(self, outbox: Any, context: Any) -> None:
        super().init(outbox, context)
        self.rate /= context.total_parallelism

    def complete(self) -> bool:
        now = time.time()
        if self.started is None:
            self.started = now
        due = int((now - self.started) * self.rate)
        while self.emitted < due:
            n = self.emitted
            timestamp = int((self.started + n / self.rate) * 1000)
            if not self.try_emit(PageView(timestamp, PAGES[n % 7 % len(PAGES)])):
                return False
            self.emitted += 1
        return False


def view_time(view: PageView) -> int:
    return view.timestamp


def view_page(view: PageView) -> str:
    return view.page


def page_and_count(start: int, end: int, page: str, count: int) -> tuple[str, int]:
    """A window's result as the sink keeps it: the newest count per page."""
    return page, count


def build_dag(rate: float = RATE) -> DAG:
    """The page-view counting DAG, its sink the engine's map "page-counts"."""
    dag = DAG("page-views")
    source = dag.new_vertex("page-views", lambda: PageViews(rate), local_parallelism=1)
    watermarks = dag.new_vertex(
        "insert-watermarks",
        insert_watermarks_p(view_time, limiting_lag(LAG_MILLIS), emit_by_frame(WINDOW)),
    )
    frames = dag.new_vertex(
        "count-frames",
        accumulate_by_frame_p(view_page, view_time, TimestampKind.EVENT, WINDOW, counting()),
    )
    windows = dag.new_vertex(
        "count-windows", combine_to_sliding_window_p(WINDOW, counting(), page_and_count)
    )
    sink = dag.new_vertex("sink", write_map_p("page-counts"))
    dag.edge(between(source, watermarks))
    dag.edge(between(watermarks, frames).partitioned(view_page))
    dag.edge(between(frames, windows).distributed().partitioned(entry_key))
    dag.edge(between(windows, sink))
    return dag


JOB_CONFIG = JobConfig(
    name="page-views",
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
    snapshot_interval_millis=1_000,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Serves the view, runs the job for `--seconds` (or until Ctrl-C), prints the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, help="run this long (default: until Ctrl-C)")
    parser.add_argument("--port", type=int, default=0, help="the view's port (default: any)")
    parser.add_argument("--rate", type=float, default=RATE, help="page views a second")
    args = parser.parse_args(argv)
    with JobView.serve(port=args.port) as view:
        engine = LocalEngine(members=2, job_view=view)
        print(f"live job view: {view.url} (Prometheus: {view.url}metrics)", flush=True)
        job = engine.new_job(build_dag(args.rate), JOB_CONFIG)
        with contextlib.suppress(TimeoutError, KeyboardInterrupt):
            job.join(timeout=args.seconds)
        job.cancel()
        with contextlib.suppress(JobCancelledError):
            job.join()
    for page, count in sorted(engine.get_map("page-counts").items()):
        print(f"{page:10} {count:6,} views in the last window")


if __name__ == "__main__":
    main()

"""A driver process for tests/test_jobs_always_end.py (no tests here).

`python job_end_child.py WORK MODE` starts an unbounded exactly-once job (MODE: `continuous` or
`micro_batch`) on local[2] with its snapshots in WORK/snapshots, stops the SparkContext under
it once its sink received items, and prints one JSON line: the job's status, what `join()`
raised, whether `engine.stop()` returned, and whether the store can be taken again.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from jetspark.core import DAG, DirectorySnapshotStore, ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context
from jetspark.edges import between
from jetspark.processors import stream_journal_p, write_list_p

WAIT_SECONDS = 120.0


def main(work: str, mode: str) -> None:
    context = create_context("local[2]", f"jetspark-end-{mode}")
    engine = SparkEngine(context, members=2)
    engine.get_list("journal").extend(range(100))
    dag = DAG("endless")
    source = dag.new_vertex("source", stream_journal_p("journal"))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("out"))))
    store = DirectorySnapshotStore(f"{work}/snapshots")
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=50,
        execution_mode=ExecutionMode[mode.upper()],
    )
    job = engine.new_job(dag, config, snapshot_store=store)
    deadline = time.monotonic() + WAIT_SECONDS
    while not engine.get_list("out") and time.monotonic() < deadline:
        time.sleep(0.05)
    context.stop()
    raised = None
    try:
        job.join(WAIT_SECONDS)
    except Exception as error:  # what join() raises is the point
        raised = f"{type(error).__name__}: {error}"
    stopper = threading.Thread(target=engine.stop, daemon=True)
    stopper.start()
    stopper.join(WAIT_SECONDS)
    try:
        store.acquire("again").release()
        store_free = True
    except Exception:
        store_free = False
    report = {
        "status": job.status.name,
        "raised": raised,
        "stop_returned": not stopper.is_alive(),
        "store_free": store_free,
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

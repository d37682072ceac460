"""A driver process for test_continuous_rescale.py (no tests here).

`python continuous_rescale_child.py SNAPSHOTS` runs the streaming conformance suite's rescale
(keyed counts, cancelled and continued) in CONTINUOUS at 2, then 3, then 1 members on local[3]:
continuous execution runs every member at once, so 3 members need 3 task slots, which the test
session's local[2] does not have. Prints "exact" when every assertion held.
"""

from __future__ import annotations

import sys

from test_streaming_conformance import continue_at_member_counts

from jetspark.core import DirectorySnapshotStore, ExecutionMode
from jetspark.core.spark.session import create_context, stop_context


def main(snapshots: str) -> None:
    context = create_context("local[3]", "jetspark-continuous-rescale")
    try:
        store = DirectorySnapshotStore(snapshots)
        continue_at_member_counts(context, ExecutionMode.CONTINUOUS, (2, 3, 1), store)
    finally:
        stop_context(context)
    print("exact")


if __name__ == "__main__":
    main(sys.argv[1])

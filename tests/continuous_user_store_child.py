"""A driver script for test_continuous_user_store.py (no tests here): its own subclass of
DirectorySnapshotStore, defined in the script (`__main__`, which no executor can import).

`python continuous_user_store_child.py SNAPSHOTS` runs the streaming conformance suite's keyed
count in CONTINUOUS on local[2] into that store, cancelled and continued from its snapshots
twice (its assertions: exact counts); prints the last run's restarts as JSON.
"""

from __future__ import annotations

import json
import sys

from test_streaming_conformance import continue_at_member_counts

from jetspark.core import DirectorySnapshotStore, ExecutionMode
from jetspark.core.spark.session import create_context, stop_context


class UsersStore(DirectorySnapshotStore):
    """A user's store: by reference, its class is `__main__.UsersStore`, nowhere on an
    executor."""


def main(snapshots: str) -> None:
    context = create_context("local[2]", "jetspark-continuous-user-store")
    try:
        runs = continue_at_member_counts(
            context, ExecutionMode.CONTINUOUS, (2, 2, 2), UsersStore(snapshots)
        )
    finally:
        stop_context(context)
    print(json.dumps({"restarts": [run.metrics.restarts for run in runs]}))


if __name__ == "__main__":
    main(sys.argv[1])

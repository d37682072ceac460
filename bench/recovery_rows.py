"""Rows 19a-c (issues #32, #44): how soon a continuous job commits its first snapshot, how soon it
commits again after a member's process is SIGKILLed, on a Spark standalone cluster spread over
network namespaces (tests/netns_cluster.py: the driver, the master and two workers of one core,
each a host of its own) against local[2], and how soon after a worker's host vanishes (its
network cut, then the worker killed) against the executor SIGKILL on the same cluster.

Each measurement is a driver process of its own (bench/recovery_child.py: the continuous
exactly-once job of the cluster tests, 2 members, a snapshot every 100 ms), the two masters
alternating round by round; the cluster is started once, before the first round. On the
cluster the killed process is the member's executor JVM (the worker starts a new executor), on
local[2] the member's Python worker (the executor there is the driver's JVM). Every run's counts
are checked exact, with at least one restart, before any figure is reported. Row 19c runs
tests/netns_child.py's `host-vanished` job (a heartbeat timeout of 10 s); its goal is the
heartbeat timeout + 10 s. Needs root (the
namespaces); without it the rows are left out, with the reason logged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.report import Goal, Row
from bench.timing import Samples

_CHILD = Path(__file__).with_name("recovery_child.py")
_TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(_TESTS))
import netns_cluster  # noqa: E402 (the tests' cluster, found above)
import spark_cluster_child  # noqa: E402

VANISHED_GOAL_SECONDS = 20.0
"""The heartbeat timeout of the host-vanished job (10 s) + 10 s."""

LOCAL = "local[2]"


def _checked(output: dict[str, Any], where: str) -> dict[str, Any]:
    if not output["exact"] or output["restarts"] < 1:
        raise AssertionError(f"the recovery run on {where} was not exact: {output}")
    return output


def _on_local(work: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(_CHILD), LOCAL, str(work)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"the recovery run on {LOCAL} failed:\n{result.stderr[-4000:]}")
    return _checked(json.loads(result.stdout.strip().splitlines()[-1]), LOCAL)


def _vanished(cluster: netns_cluster.NamespaceCluster, number: int) -> dict[str, Any]:
    """One host-vanished run: worker-1 cut off after the first commit, then killed; the
    worker is back for the next run."""
    work = cluster.shared / f"vanished-{number}"
    work.mkdir()
    argv = [str(_TESTS / "netns_child.py"), netns_cluster.MASTER_URL, str(work), "host-vanished"]
    output = cluster.run_driver_losing(argv, work, "worker-1", vanish=True)
    exact = output["published"] == list(range(spark_cluster_child.NUMBERS))
    if not exact or output["restarts"] < 1 or output["recovery"] is None:
        raise AssertionError(f"the host-vanished run was not exact: {output}")
    return output


def recovery(rounds: int, log: Callable[[str], None]) -> list[Row]:
    """Rows 19a-c, `rounds` alternating rounds; none where namespaces cannot be made."""
    reason = netns_cluster.unavailable()
    if reason is not None:
        log(f"rows 19a-c left out: no network namespaces here ({reason})")
        return []
    cluster = netns_cluster.NamespaceCluster()
    runs: dict[str, list[dict[str, Any]]] = {"cluster": [], "local": [], "vanished": []}
    try:
        cluster.start()
        with tempfile.TemporaryDirectory(prefix="jetspark-recovery-") as local_root:
            for number in range(rounds):
                order = ["cluster", "local"] if number % 2 == 0 else ["local", "cluster"]
                for side in order:
                    if side == "local":
                        runs["local"].append(_on_local(Path(local_root) / str(number)))
                    else:
                        work = cluster.shared / f"recovery-{number}"
                        output = cluster.run_driver(
                            [str(_CHILD), netns_cluster.MASTER_URL, str(work)]
                        )
                        runs["cluster"].append(_checked(output, "the namespace cluster"))
                runs["vanished"].append(_vanished(cluster, number))
    finally:
        cluster.stop()

    def samples(side: str, key: str) -> Samples:
        return Samples(tuple(run[key] for run in runs[side]))

    setting = "CONTINUOUS exactly-once, 2 members, 100 ms snapshots"
    where = "a standalone cluster over network namespaces (driver, master, 2 workers) vs local[2]"
    return [
        Row.compare(
            "19a",
            f"time from `new_job` to the first committed snapshot, {setting}: {where}",
            "s",
            samples("cluster", "first_commit"),
            samples("local", "first_commit"),
        ),
        Row.compare(
            "19b",
            f"time from a member's process SIGKILLed (cluster: its executor JVM; local[2]: its "
            f"Python worker) to the next snapshot committed after the restart, {setting}: {where}",
            "s",
            samples("cluster", "recovery"),
            samples("local", "recovery"),
            extra={"restarts": {side: [run["restarts"] for run in runs[side]] for side in runs}},
        ),
        Row.compare(
            "19c",
            "time from a worker's host vanishing (its network cut, then the worker killed) to "
            "the next snapshot committed after the restart, heartbeat timeout 10 s, vs an "
            f"executor SIGKILLed (19b), {setting}, the namespace cluster",
            "s",
            samples("vanished", "recovery"),
            samples("cluster", "recovery"),
            goal=Goal("<=", VANISHED_GOAL_SECONDS, "s"),
        ),
    ]

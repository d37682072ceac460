"""`jetspark tfidf --master spark://...` whose index directory the executors do not share (issue
#32, item 6): the command says at submit that `--index` must be a directory every executor
reaches, exit 2, instead of failing the job with a task's FileNotFoundError.

The standalone cluster of test_spark_cluster.py (master and two workers on 127.0.0.1) runs the
executors' Python in a mount namespace of its own, where an empty tmpfs covers the directory
the command runs in: the executors see a directory of their own at that path, as the workers of
a real cluster see their own disks, and the command's check is the one it makes in production.
Needs root (`unshare -m`, `mount`), as CI has; skipped with the reason elsewhere.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_continuous_failures import _python_seeing_a_mount, needs_private_mounts
from test_spark_cluster import cluster  # noqa: F401 (the fixture: a cluster for this module)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


@needs_private_mounts
def test_the_default_index_on_a_cluster_the_executors_do_not_share_is_refused_at_submit(
    cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    docs, here = tmp_path / "docs", tmp_path / "here"
    docs.mkdir()
    here.mkdir()
    for name, text in (("a.txt", "spark runs tasks"), ("b.txt", "jet runs tasklets")):
        (docs / name).write_text(text)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": _python_seeing_a_mount(tmp_path, here, "rw"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "jetspark.core", "tfidf", str(docs), "--master", cluster],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("jetspark tfidf: error: --index must be a directory every executor"), (
        error
    )
    assert f"on the cluster {cluster} the executors write the index's parts" in error, error
    assert f"those on {socket.gethostname()}" in error and f"do not see {here}," in error, error
    assert "(the default, ./jetspark-index, is in the directory the command runs in" in error
    assert sorted(os.listdir(here)) == []  # nothing written: no index, no staging directory

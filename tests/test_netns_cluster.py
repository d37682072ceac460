"""A Spark standalone cluster over network namespaces (tests/netns_cluster.py): the driver, the
master and two workers each a host of their own on 198.18.0.0/24, with a private /tmp and one
directory in common. The driver is a script run on the driver's host (tests/netns_child.py,
spark_jobs.py, spark_cluster_child.py, the jetspark command); each test asserts on what it
printed: items, snapshots, restarts and modes, never on time.

Needs root (CI runs as root), `ip`, `unshare` and iptables; skipped with the reason elsewhere.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import netns_child
import netns_cluster
import pytest
import spark_cluster_child
import spark_streaming_child
from spark_jobs import expected

pytestmark = [pytest.mark.netns, pytest.mark.timeout(600)]

TESTS = Path(__file__).resolve().parent
BOOKS = TESTS.parent.parent / "shared" / "data" / "books"
BOOK_COUNT = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[netns_cluster.NamespaceCluster]:
    """One cluster for the module, torn down by name however the tests end."""
    reason = netns_cluster.unavailable()
    if reason is not None:
        pytest.skip(f"no network namespaces here: {reason}")
    cluster = netns_cluster.NamespaceCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def work(cluster: netns_cluster.NamespaceCluster, name: str) -> Path:
    """A fresh directory every host reaches at the same path."""
    directory = cluster.shared / name
    directory.mkdir()
    return directory


def child(cluster: netns_cluster.NamespaceCluster, name: str, mode: str) -> dict[str, Any]:
    """What netns_child.py printed after running `mode` in a fresh work directory."""
    script = str(TESTS / "netns_child.py")
    return cluster.run_driver([script, netns_cluster.MASTER_URL, str(work(cluster, name)), mode])


def numbers_published(output: dict[str, Any]) -> list[int]:
    """Every number the numbers-to-files job of `output`'s mode must publish, once."""
    if output["mode"] == "continuous":
        return list(range(spark_cluster_child.NUMBERS))
    return list(range(spark_streaming_child.NUMBERS))


def test_batch_jobs_give_the_local_engines_verdicts(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    output = child(cluster, "batch", "batch")
    assert output == {name: expected(name) for name in netns_child.BATCH_JOBS}


def _scores(tsv: Path) -> dict[tuple[str, str], float]:
    rows = (line.split("\t") for line in tsv.read_text().splitlines())
    return {(word, document): float(score) for word, document, score in rows}


@pytest.mark.skipif(not BOOKS.is_dir(), reason="the shared books are not beside the repository")
def test_tfidf_over_books_scores_as_the_local_engine(
    cluster: netns_cluster.NamespaceCluster, tmp_path: Path
) -> None:
    """`jetspark tfidf` on the cluster, its documents and index in the shared directory."""
    books = work(cluster, "books")
    smallest = sorted(BOOKS.iterdir(), key=lambda book: book.stat().st_size)[:BOOK_COUNT]
    for book in smallest:
        (books / book.name).symlink_to(book)
    jetspark = str(Path(sys.executable).with_name("jetspark"))
    on_cluster = work(cluster, "tfidf")
    arguments = ["tfidf", str(books), "--master", netns_cluster.MASTER_URL, "--members", "2"]
    arguments += ["--index", str(on_cluster / "index"), "--tsv", str(on_cluster / "out.tsv")]
    result = cluster.run("driver", [jetspark, *arguments], timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"documents:      {BOOK_COUNT} (0 empty)" in result.stdout
    local = cluster.run(
        "driver",
        [
            jetspark,
            "tfidf",
            str(books),
            "--engine",
            "local",
            "--tsv",
            str(on_cluster / "local.tsv"),
        ],
        timeout=600,
    )
    assert local.returncode == 0, local.stderr[-4000:]
    cluster_scores, local_scores = (
        _scores(on_cluster / "out.tsv"),
        _scores(on_cluster / "local.tsv"),
    )
    assert cluster_scores.keys() == local_scores.keys() and len(cluster_scores) > 1000
    for key, score in local_scores.items():
        assert math.isclose(cluster_scores[key], score, rel_tol=1e-9), key


@pytest.mark.parametrize(
    ("command", "private"), [("tfidf", "docs"), ("tfidf", "index"), ("stopwords", "docs")]
)
def test_a_directory_of_the_drivers_own_is_refused_naming_the_hosts(
    cluster: netns_cluster.NamespaceCluster, command: str, private: str
) -> None:
    """`jetspark tfidf` (or `stopwords`) with its documents, or its index, in the driver's
    private /tmp: the executors read the documents and write the index's parts, so the command
    says which hosts do not see the directory before any job runs (before, an unreadable
    document was logged on its executor and the command ended with an empty result, exit 0)."""
    shared = work(cluster, f"{command}-private-{private}")
    docs = cluster.tmp("driver") / f"{command}-docs" if private == "docs" else shared / "docs"
    docs.mkdir()
    for number in range(3):
        (docs / f"doc{number}.txt").write_text(f"alpha beta gamma{number}\n")
    seen_docs = f"/tmp/{command}-docs" if private == "docs" else str(docs)
    index = "/tmp/index" if private == "index" else str(shared / "index")
    jetspark = str(Path(sys.executable).with_name("jetspark"))
    arguments = [command, seen_docs, "--master", netns_cluster.MASTER_URL, "--members", "2"]
    if command == "tfidf":
        arguments += ["--index", index]
    result = cluster.run("driver", [jetspark, *arguments], timeout=600)
    assert result.returncode != 0
    what = "DOCS_DIR" if private == "docs" else "--index"
    assert f"{what} must be a directory every executor reaches at the same path" in result.stderr
    workers = [netns_cluster.address(host) for host in netns_cluster.WORKERS]
    assert all(address in result.stderr for address in workers), result.stderr[-2000:]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mode", ["micro_batch", "continuous"])
def test_a_streaming_job_publishes_every_item_once(
    cluster: netns_cluster.NamespaceCluster, mode: str
) -> None:
    """Exactly-once numbers to transactional files across a distributed partitioned edge."""
    output = child(cluster, f"stream-{mode}", mode)
    assert output["mode"] == mode
    assert output["published"] == numbers_published(output)
    assert output["snapshots"] >= 1 and output["restarts"] == 0


def test_an_executor_killed_mid_stream_restarts_the_job_exactly(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    """CONTINUOUS, one member per worker: an executor JVM SIGKILLed after the first commit; the
    job restarts from its snapshot on the executor the worker starts anew, counts exact."""
    script = str(TESTS / "spark_cluster_child.py")
    directory = str(work(cluster, "executor-kill"))
    arguments = [script, netns_cluster.MASTER_URL, directory, "continuous-executor-kill"]
    output = cluster.run_driver(arguments)
    assert output["killed"], "no executor was running to be killed"
    assert output["restarts"] >= 1
    numbers = range(spark_cluster_child.NUMBERS)
    assert dict(map(tuple, output["counts"])) == Counter(
        n % spark_cluster_child.KEYS for n in numbers
    )


def test_a_firewalled_driver_runs_batch_and_both_streaming_modes(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    """Each host drops every connection but to the ports its settings name: the driver's
    spark.driver.port, spark.driver.blockManager.port and spark.jetspark.coordinator.port, the
    workers' own port, spark.blockManager.port and spark.jetspark.member.port."""
    open_ports = {"driver": netns_child.DRIVER_OPEN_PORTS}
    open_ports |= {worker: netns_child.WORKER_OPEN_PORTS for worker in netns_cluster.WORKERS}
    with cluster.firewall(open_ports):
        output = child(cluster, "firewalled", "firewalled")
    assert output["word_count"] == expected("word_count")
    for mode in ("micro_batch", "continuous"):
        assert output[mode]["mode"] == mode
        assert output[mode]["published"] == numbers_published(output[mode])
        assert output[mode]["snapshots"] >= 1


def test_a_worker_stopped_for_good_leaves_the_continuous_job_one_member_exact(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    """One member per worker; after the first commit worker-1 and its executor are killed and
    not started again: the restart finds one slot, rescales the snapshot to one member and
    publishes every number once. The worker comes back for the other tests."""
    directory = work(cluster, "worker-lost")
    argv = [str(TESTS / "netns_child.py"), netns_cluster.MASTER_URL, str(directory), "worker-lost"]
    output = cluster.run_driver_losing(argv, directory, "worker-1", vanish=False)
    assert output["mode"] == "continuous"
    assert output["published"] == numbers_published(output)
    assert output["restarts"] >= 1 and output["rescales"] >= 1


def test_a_vanished_host_is_replaced_before_spark_notices_it(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    """One member per worker; after the first commit worker-1 is cut off the network, then
    killed. The coordinator hears nothing for the heartbeat timeout, ends the members' stage
    itself and restarts on the one slot left, without the slot wait: when the restart begins,
    Spark still lists the lost executor (it notices only after spark.network.timeout, 120 s),
    and every number is published once (the source's second half held until a snapshot
    committed after the restart)."""
    directory = work(cluster, "host-vanished")
    argv = [
        str(TESTS / "netns_child.py"),
        netns_cluster.MASTER_URL,
        str(directory),
        "host-vanished",
    ]
    output = cluster.run_driver_losing(argv, directory, "worker-1", vanish=True)
    assert output["mode"] == "continuous"
    assert output["published"] == numbers_published(output)
    assert output["restarts"] >= 1 and output["rescales"] >= 1
    driver_and_both_executors = 1 + len(netns_cluster.WORKERS)
    assert output["executors_at_restart"] == driver_and_both_executors


def test_storage_that_is_not_shared_fails_the_job_naming_the_host(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    """The store's path exists on every host, in each one's own /tmp: `new_job` asks the
    executors for a directory the driver made there, and refuses the job before anything of
    it runs, naming a worker's host; nothing is published."""
    for host in netns_cluster.HOSTS:
        (cluster.tmp(host) / "store").mkdir(exist_ok=True)
    output = child(cluster, "unshared-store", "unshared-store")
    assert output["status"] == "REFUSED" and output["published"] == []
    hosts = [netns_cluster.address(worker) for worker in netns_cluster.WORKERS]
    assert any(host in output["error"] for host in hosts), output["error"]


@pytest.mark.kafka
def test_a_kafka_job_on_other_hosts_than_its_broker_writes_every_window_once(
    cluster: netns_cluster.NamespaceCluster,
) -> None:
    """The broker on the master's host, the members on the workers': Kafka to Kafka,
    CONTINUOUS and exactly-once, an executor SIGKILLed after the first commit; every window's
    count is in the sink topic once (tests/kafka_cluster_child.py)."""
    directory = work(cluster, "kafka")
    repository = str(TESTS.parent)
    broker_argv = [sys.executable, "-m", "bench.kafka_broker", "run", str(directory / "broker")]
    broker_argv += ["--host", netns_cluster.address("master")]
    broker = cluster.spawn("master", broker_argv, PYTHONPATH=repository)
    try:
        assert broker.stdout is not None
        announced = broker.stdout.readline()  # "Kafka <version> on HOST:PORT ..." once it answers
        assert " on " in announced, broker.communicate()[1][-4000:]
        bootstrap = announced.split(" on ", 1)[1].split()[0]
        script = str(TESTS / "kafka_cluster_child.py")
        output = cluster.run_driver([script, netns_cluster.MASTER_URL, str(directory), bootstrap])
    finally:
        broker.terminate()  # the broker's runner stops the broker by its PID
        cluster.finish(broker, timeout=120)
    assert output["killed"], "no executor was running to be killed"
    assert output["restarts"] >= 1
    assert output["results"] == output["expected"]

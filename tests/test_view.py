"""The live job view from the outside: a job runs on LocalEngine with a view, and its JSON model,
its /metrics (parsed with prometheus_client's own parser) and its DAG picture hold exactly the
counts, rates, watermarks and snapshots the job produced. Clocks are the tests' own."""

from __future__ import annotations

import http.client
import json
import logging
import queue
import re
import socket
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jetspark.core import (
    DAG,
    AbstractProcessor,
    Job,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.view import JobView
from jetspark.core.view.layered import layers
from jetspark.core.view.model import Rates
from jetspark.core.view.picture import dag_svg
from jetspark.edges import between, from_
from jetspark.processors import insert_watermarks_p, map_p, read_list_p, write_list_p
from jetspark.processors.watermark_policies import limiting_lag

WAIT_SECONDS = 60.0
"""How long a test waits for a job to reach a state before it fails (never a speed claim)."""

SVG = "{http://www.w3.org/2000/svg}"


class FedSource(AbstractProcessor):
    """An unbounded source emitting what the test puts into `feed`, in order."""

    def __init__(self, feed: queue.Queue) -> None:
        self.feed = feed
        self.pending: Any = None

    def complete(self) -> bool:
        while True:
            if self.pending is None:
                try:
                    self.pending = self.feed.get_nowait()
                except queue.Empty:
                    return False
            if not self.try_emit(self.pending):
                return False
            self.pending = None


class Clock:
    """A wall clock the test sets (seconds since the epoch)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {WAIT_SECONDS} s for {what}")
        time.sleep(0.005)


def get(view: JobView, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(view.url.rstrip("/") + path, timeout=WAIT_SECONDS) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def view_id(view: JobView, job: Job) -> int:
    """The view's number for `job`, as its list of jobs gives it."""
    [number] = [j["id"] for j in json.loads(get(view, "/api/jobs")[1]) if j["job_id"] == job.id]
    return number


def model(view: JobView, job: Job) -> dict[str, Any]:
    status, body = get(view, f"/api/jobs/{view_id(view, job)}")
    assert status == 200, body
    return json.loads(body)


def labels_of(view: JobView, job: Job, **more: str) -> frozenset:
    """The labels of `job`'s series in /metrics, and `more`."""
    labels = {"job_id": str(job.id), "job_name": job.name, "view_id": str(view_id(view, job))}
    return frozenset({**labels, **more}.items())


def samples(view: JobView) -> dict[tuple[str, frozenset], float]:
    """/metrics parsed: (sample name, its labels) -> value."""
    status, body = get(view, "/metrics")
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in rows}


@pytest.fixture
def view() -> Iterator[JobView]:
    with JobView.serve(clock=Clock(1_000.0)) as view:
        yield view


def bounded_dag() -> DAG:
    dag = DAG("doubling")
    source = dag.new_vertex("source", read_list_p("numbers"))
    double = dag.new_vertex("double", map_p(lambda x: 2 * x))
    sink = dag.new_vertex("sink", write_list_p("doubled"))
    dag.edge(between(source, double).distributed()).edge(between(double, sink))
    return dag


def streaming_dag(feed: queue.Queue) -> DAG:
    """Event times in, a watermark per new event time (lag 0), into a list."""
    dag = DAG("fed")
    source = dag.new_vertex("source", lambda: FedSource(feed), local_parallelism=1)
    watermarks = dag.new_vertex(
        "insert-watermarks", insert_watermarks_p(lambda t: t, limiting_lag(0))
    )
    sink = dag.new_vertex("sink", write_list_p("seen"))
    dag.edge(between(source, watermarks)).edge(between(watermarks, sink))
    return dag


def run_bounded(view: JobView, members: int = 2) -> tuple[LocalEngine, Job]:
    engine = LocalEngine(members=members, job_view=view)
    engine.get_list("numbers").extend(range(100))
    job = engine.new_job(bounded_dag(), JobConfig(name="doubling"))
    job.join()
    return engine, job


# --------------------------------------------------------------------- the JSON model


def test_the_model_of_a_completed_job_holds_its_exact_counts(view):
    engine, job = run_bounded(view)
    jobs = json.loads(get(view, "/api/jobs")[1])
    assert jobs == [{"id": 1, "job_id": job.id, "name": "doubling", "status": "completed"}]
    shown = model(view, job)
    assert (shown["id"], shown["job_id"]) == (1, job.id)
    assert (shown["name"], shown["status"], shown["execution_mode"]) == (
        "doubling",
        "completed",
        "local",
    )
    assert shown["restarts"] == shown["rescales"] == 0
    assert shown["snapshots"] == [] and shown["batches"] == []
    vertices = by_name(shown["vertices"])
    assert list(vertices) == ["source", "double", "sink"]
    assert [(v["processors"], v["received"], v["emitted"]) for v in vertices.values()] == [
        (2, 0, 100),
        (2, 100, 100),
        (2, 100, 0),
    ]
    assert all(v["watermark"] is None and v["watermark_lag_ms"] is None for v in vertices.values())
    edges = by_name(shown["edges"])
    assert list(edges) == ["source:0 -> double:0", "double:0 -> sink:0"]
    assert edges["source:0 -> double:0"]["routing"] == "unicast, distributed"
    assert [(e["emitted"], e["received"]) for e in edges.values()] == [(100, 100), (100, 100)]
    assert edges["source:0 -> double:0"]["distributed_items"] > 0
    assert edges["double:0 -> sink:0"]["distributed_items"] == 0
    assert sorted(engine.get_list("doubled")) == [2 * n for n in range(100)]


def test_rates_and_watermark_lag_of_a_running_job_follow_the_view_clock():
    clock = Clock(1_000.0)
    feed: queue.Queue = queue.Queue()
    with JobView.serve(clock=clock) as view:
        engine = LocalEngine(job_view=view)
        job = engine.new_job(streaming_dag(feed))
        seen = engine.get_list("seen")

        def feed_until(last: int) -> None:
            """Event times 990_000 + n up to n = last - 1, all through, watermarks too."""
            for event_time in range(len(seen), last):
                feed.put(990_000 + event_time)
            wait_until(lambda: len(seen) == last, f"{last} items in the sink")
            wait_until(
                lambda: job.metrics.of_vertex("sink")[0].last_received_wm == 990_000 + last - 1,
                "the sink's watermark",
            )

        feed_until(10)
        first = model(view, job)
        assert first["status"] == "running"
        assert by_name(first["vertices"])["sink"]["received_per_second"] is None  # one sample
        feed_until(40)
        clock.now = 1_002.0
        second = model(view, job)
        vertices = by_name(second["vertices"])
        assert vertices["source"]["emitted_per_second"] == 15.0  # 30 items in 2 s
        assert vertices["sink"]["received_per_second"] == 15.0
        assert vertices["sink"]["received"] == 40
        assert vertices["sink"]["watermark"] == 990_039
        assert vertices["sink"]["watermark_lag_ms"] == 1_002_000 - 990_039
        assert vertices["source"]["watermark"] is None  # a source receives none
        edges = by_name(second["edges"])
        assert edges["insert-watermarks:0 -> sink:0"]["received_per_second"] == 15.0
        lag = samples(view)[
            ("jetspark_vertex_watermark_lag_seconds", labels_of(view, job, vertex="sink"))
        ]
        assert lag == pytest.approx((1_002_000 - 990_039) / 1000)
        job.cancel()


def test_snapshots_reach_the_model_and_metrics_with_each_vertex_state():
    snapshot_clock = Clock(0.0)
    feed: queue.Queue = queue.Queue()
    with JobView.serve() as view:
        engine = LocalEngine(job_view=view, snapshot_clock=snapshot_clock)
        config = JobConfig(
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=1_000
        )
        job = engine.new_job(streaming_dag(feed), config)
        for event_time in range(5):
            feed.put(event_time)
        wait_until(lambda: len(engine.get_list("seen")) == 5, "5 items in the sink")
        snapshot_clock.now = 10.0
        wait_until(lambda: len(job.metrics.snapshots) == 1, "the first snapshot")
        report = job.metrics.snapshots[0]
        shown = model(view, job)
        [snapshot] = shown["snapshots"]
        assert snapshot["id"] == report.snapshot_id
        assert snapshot["bytes"] == report.bytes > 0
        assert snapshot["duration_seconds"] >= 0
        vertices = by_name(shown["vertices"])
        stored = job.snapshot_store.latest()
        assert stored.snapshot_id == report.snapshot_id
        for name, vertex in vertices.items():
            saved = [p.data for (v, _), p in stored.processors.items() if v == name]
            assert vertex["state_bytes"] == sum(map(len, saved)), name
        assert sum(v["state_bytes"] for v in vertices.values()) == report.bytes
        metrics = samples(view)
        labels = labels_of(view, job)
        assert metrics[("jetspark_job_last_snapshot_id", labels)] == report.snapshot_id
        assert metrics[("jetspark_job_last_snapshot_bytes", labels)] == report.bytes
        state = metrics[
            ("jetspark_vertex_state_bytes", labels_of(view, job, vertex="insert-watermarks"))
        ]
        assert state == vertices["insert-watermarks"]["state_bytes"]
        job.cancel()


def test_rates_compare_with_the_newest_sample_at_least_half_a_second_older():
    rates = Rates()
    assert rates.sample(10.0, {"a": 0}) == {"a": None}
    assert rates.sample(12.0, {"a": 100}) == {"a": 50.0}
    # against 10.0: 12.0 is too recent
    assert rates.sample(12.2, {"a": 110}) == {"a": pytest.approx(50.0)}
    assert rates.sample(13.2, {"a": 160}) == {"a": pytest.approx(50.0)}  # against 12.2
    assert rates.sample(14.0, {"a": 150, "b": 1}) == {"a": None, "b": None}  # a went down


# ------------------------------------------------------------------------- /metrics


def test_metrics_expose_the_counts_of_a_job_in_prometheus_text_format(view):
    _, job = run_bounded(view)
    metrics = samples(view)

    def value(name: str, **labels: str) -> float:
        return metrics[(name, labels_of(view, job, **labels))]

    assert value("jetspark_job_info", status="completed", execution_mode="local") == 1.0
    assert value("jetspark_job_restarts_total") == value("jetspark_job_rescales_total") == 0
    for vertex, received, emitted in [("source", 0, 100), ("double", 100, 100), ("sink", 100, 0)]:
        assert value("jetspark_vertex_received_items_total", vertex=vertex) == received
        assert value("jetspark_vertex_emitted_items_total", vertex=vertex) == emitted
        assert value("jetspark_vertex_queued_items", vertex=vertex) == 0
    assert value("jetspark_vertex_queue_capacity_items", vertex="double") > 0
    edge = {"edge": "source:0 -> double:0", "source": "source", "dest": "double"}
    assert value("jetspark_edge_emitted_items_total", **edge) == 100
    assert value("jetspark_edge_received_items_total", **edge) == 100
    assert value("jetspark_edge_distributed_items_total", **edge) > 0
    assert value("jetspark_edge_distributed_bytes_total", **edge) > 0
    local = {"edge": "double:0 -> sink:0", "source": "double", "dest": "sink"}
    assert value("jetspark_edge_distributed_items_total", **local) == 0
    names = {name for name, _ in metrics}
    assert not any("snapshot" in n or "batch" in n or "watermark" in n for n in names)


def test_metrics_leave_out_a_job_whose_metrics_cannot_be_read_and_the_page_names_it(view, caplog):
    run_bounded(view)
    broken = Job(10_000, "broken-job")

    def failing() -> Any:
        raise RuntimeError("the metrics went away")

    broken.mark_running(failing)
    view.watch(broken, bounded_dag())
    with caplog.at_level(logging.ERROR, logger="jetspark.view"):
        metrics = samples(view)
        status, body = get(view, f"/api/jobs/{view_id(view, broken)}")
    assert {dict(labels).get("job_name") for _, labels in metrics} == {"doubling"}
    assert status == 500
    assert json.loads(body)["error"] == (
        "job 'broken-job': its metrics could not be read: RuntimeError('the metrics went away')"
    )
    assert "broken-job" in caplog.text


# ---------------------------------------------------------------------- the server


def test_the_view_imports_without_pyspark():
    from test_imports import run_python

    result = run_python(
        """
        import sys
        from jetspark.core.view import JobView
        JobView.serve().close()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")))
        """
    )
    assert result.stdout.strip() == "[]"


def test_the_page_is_served_whole_with_no_outside_asset(view):
    status, page = get(view, "/")
    assert status == 200
    assert "<script>" in page and 'id="vertices"' in page and "setTimeout(poll" in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "wall-clock epoch" in page  # what the watermark lag means


def test_unknown_pages_and_jobs_answer_404_in_words(view):
    assert get(view, "/api/jobs/77") == (404, '{"error": "this view watches no job 77"}')
    assert get(view, "/nothing")[0] == 404


def test_bad_arguments_are_refused_in_python_terms(view):
    with pytest.raises(TypeError, match="takes a Job, got str"):
        view.watch("job", bounded_dag())  # type: ignore[arg-type]
    job = Job(1, "named")
    with pytest.raises(TypeError, match="the DAG job 'named' runs, got NoneType"):
        view.watch(job, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="port must be an int from 0 to 65535, got 70000"):
        JobView.serve(port=70_000)


def test_a_port_in_use_is_named():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"the job view cannot listen on 127.0.0.1:{port}"):
            JobView.serve(port=port)


def test_the_view_listens_on_loopback_and_stops_on_close():
    view = JobView.serve()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", view.url)
    assert get(view, "/api/jobs") == (200, "[]")
    view.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(view.url, timeout=5)


def _get_with_host(view: JobView, host: str | None) -> int:
    """The status of GET /api/jobs sent with the Host header `host` (None: without one)."""
    address = urlsplit(view.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=WAIT_SECONDS)
    try:
        connection.putrequest("GET", "/api/jobs", skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_view_refuses_a_foreign_host_a_rebound_dns_name_would_send(caplog):
    with JobView.serve(allowed_hosts=["driver.example.org"]) as view:
        port = urlsplit(view.url).port
        with caplog.at_level(logging.WARNING, logger="jetspark.view"):
            assert _get_with_host(view, f"attacker.example:{port}") == 421
        assert "refused a request for Host 'attacker.example:" in caplog.text
        for accepted in (f"127.0.0.1:{port}", f"localhost:{port}", "[::1]", "Driver.Example.org"):
            assert _get_with_host(view, accepted) == 200, accepted
        assert _get_with_host(view, None) == 200  # not a browser: no rebinding to fear


def test_a_view_keeps_every_running_job_and_forgets_the_oldest_ended_ones(view):
    from jetspark.core.view.server import WATCHED_JOBS

    engine = LocalEngine(job_view=view)
    engine.get_list("numbers").append(1)
    feed: queue.Queue = queue.Queue()
    running = engine.new_job(streaming_dag(feed))
    ended = [engine.new_job(bounded_dag()) for _ in range(WATCHED_JOBS + 2)]
    for job in ended:
        job.join()
    newest = engine.new_job(bounded_dag())
    ids = [j["job_id"] for j in json.loads(get(view, "/api/jobs")[1])]
    assert ids == [running.id] + [j.id for j in ended[-(WATCHED_JOBS - 2) :]] + [newest.id]
    running.cancel()


def test_jobs_of_two_engines_with_one_id_and_name_are_told_apart_and_watched_once(view):
    first = LocalEngine(job_view=view)
    first.get_list("numbers").extend(range(100))
    job = first.new_job(bounded_dag())
    job.join()
    view.watch(job, bounded_dag())  # the engine watches it already
    twin = Job(job.id, job.name)  # another engine's job: its ids count from 1 too
    view.watch(twin, bounded_dag())
    jobs = json.loads(get(view, "/api/jobs")[1])
    assert [(j["id"], j["job_id"], j["name"]) for j in jobs] == [
        (1, job.id, job.name),
        (2, job.id, job.name),
    ]
    sinks = {
        dict(labels)["view_id"]: value
        for (name, labels), value in samples(view).items()
        if name == "jetspark_vertex_received_items_total" and dict(labels)["vertex"] == "sink"
    }
    assert sinks == {"1": 100, "2": 0}


# ---------------------------------------------------------------------- the picture


def diamond() -> DAG:
    """a and b on top; c under a, d under both (a's ordinal 1, distributed); then the sink."""
    dag = DAG("diamond")
    a, b, c, d = (dag.new_vertex(name, map_p(str)) for name in ("a", "b", "c", "d"))
    sink = dag.new_vertex("sink & <co>", write_list_p("x"))
    dag.edge(between(a, c)).edge(between(b, d)).edge(from_(a, 1).to(d, 1).distributed())
    dag.edge(between(c, sink)).edge(from_(d).to(sink, 1))
    return dag


def node_boxes(svg: str) -> dict[str, tuple[float, float]]:
    """Vertex name -> (top, bottom) of its shape in a layered SVG."""
    root = ElementTree.fromstring(svg)
    boxes = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "node":
            rect = group.find(f"{SVG}rect")
            top = float(rect.get("y"))
            boxes[group.find(f"{SVG}title").text] = (top, top + float(rect.get("height")))
    return boxes


def test_without_dot_the_layered_layout_draws_every_vertex_below_its_upstream(caplog):
    dag = diamond()
    with caplog.at_level(logging.WARNING, logger="jetspark.view"):
        svg = dag_svg(dag, dot="no-such-graphviz-program")
    assert "no-such-graphviz-program is not on PATH" in caplog.text
    assert "own layered layout" in caplog.text
    boxes = node_boxes(svg)
    assert set(boxes) == {"a", "b", "c", "d", "sink & <co>"}
    for edge in dag.edges():
        assert boxes[edge.source_name][1] < boxes[edge.dest_name][0], edge
    assert layers(dag) == [["a", "b"], ["c", "d"], ["sink & <co>"]]


def test_layers_order_a_vertex_under_its_upstream_vertices():
    dag = DAG("crossing")
    left, right = dag.new_vertex("left", map_p(str)), dag.new_vertex("right", map_p(str))
    under_right = dag.new_vertex("under-right", map_p(str))
    under_left = dag.new_vertex("under-left", map_p(str))
    dag.edge(between(right, under_right)).edge(between(left, under_left))
    assert layers(dag) == [["left", "right"], ["under-left", "under-right"]]


@pytest.mark.skipif(
    __import__("shutil").which("dot") is None,
    reason="Graphviz's dot is not installed (.ci/run installs the graphviz package)",
)
def test_graphviz_draws_the_dag_with_a_titled_group_per_vertex():
    svg = dag_svg(diamond())
    assert svg.startswith("<svg")
    root = ElementTree.fromstring(svg)
    titles = {g.find(f"{SVG}title").text for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    assert titles == {"a", "b", "c", "d", "sink & <co>"}


def test_the_view_serves_the_picture_of_each_watched_job(view):
    _, job = run_bounded(view)
    status, svg = get(view, f"/api/jobs/{view_id(view, job)}/dag.svg")
    assert status == 200
    assert {"source", "double", "sink"} <= {
        g.find(f"{SVG}title").text
        for g in ElementTree.fromstring(svg).iter(f"{SVG}g")
        if g.get("class") == "node"
    }


# -------------------------------------------------------------------------- Spark


@pytest.mark.spark
def test_a_spark_engine_given_a_view_shows_its_jobs(spark_engine, view):
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2, job_view=view)
    engine.get_list("numbers").extend(range(100))
    job = engine.new_job(bounded_dag(), JobConfig(name="doubling on spark"))
    job.join()
    shown = model(view, job)
    assert (shown["name"], shown["status"]) == ("doubling on spark", "completed")
    vertices = by_name(shown["vertices"])
    assert [(v["received"], v["emitted"]) for v in vertices.values()] == [
        (0, 100),
        (100, 100),
        (100, 0),
    ]
    assert sorted(engine.get_list("doubled")) == [2 * n for n in range(100)]


# ------------------------------------------------------------------------ examples


def test_the_stock_exchange_example_serves_a_view_of_its_job_when_asked(
    tmp_path, capsys, monkeypatch
):
    from test_processors_examples import load

    stock = load("stock_exchange")
    watched: list[str] = []

    class RecordingView(JobView):
        def watch(self, job: Job, dag: DAG) -> None:
            watched.append(job.name)
            super().watch(job, dag)

    monkeypatch.setattr(stock, "JobView", RecordingView)
    stock.main([str(tmp_path / "out"), "--engine", "local", "--view"])
    out = capsys.readouterr().out
    assert re.search(r"^live job view: http://127\.0\.0\.1:\d+/ \(Prometheus: ", out, re.M)
    assert "match a plain Python count" in out
    assert watched == ["stock-exchange"]

"""LocalEngine end to end: the manual's DAGs, every routing policy, priorities, watermarks,
backpressure, metrics and the named stores."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from typing import Any

import pytest
from runtime_processors import (
    FlatMap,
    ListSink,
    ListSource,
    MapSink,
    MapSource,
    Recorder,
    ScriptSource,
    SumByKey,
    received,
)

from jetspark.core import (
    DAG,
    IDLE_MESSAGE,
    Context,
    Inbox,
    JobConfig,
    JobStatus,
    LocalEngine,
    Outbox,
    Processor,
    Watermark,
)
from jetspark.edges import EdgeConfig, between, from_
from jetspark.partitioning import DEFAULT, HASH_CODE, global_processor_of_partition

pytestmark = pytest.mark.timeout(120)

TEXT = [
    f"line {i}: the quick brown fox {i % 7} jumps over the lazy dog {i % 13} and {i % 101}"
    for i in range(3000)
]


def run(
    dag: DAG, members: int = 1, config: JobConfig | None = None, **lists: list[Any]
) -> LocalEngine:
    """Runs `dag` on a fresh engine whose lists are preloaded from `lists`; returns the engine."""
    engine = LocalEngine(members=members)
    for name, items in lists.items():
        engine.get_list(name).extend(items)
    job = engine.new_job(dag, config)
    job.join(timeout=60)
    assert job.status is JobStatus.COMPLETED
    return engine


def word_count_dag(local_parallelism: int) -> DAG:
    """The manual's word count (§8.2.1), with the tokenizer splitting on non-word characters."""
    dag = DAG("word count")
    source = dag.new_vertex("source", lambda: ListSource("lines"), 1)
    tokenize = dag.new_vertex(
        "tokenize", lambda: FlatMap(lambda line: re.findall(r"\w+", line.lower()))
    )
    accumulate = dag.new_vertex("accumulate", SumByKey)
    combine = dag.new_vertex("combine", lambda: SumByKey(lambda e: e[0], lambda e: e[1]))
    sink = dag.new_vertex("sink", lambda: MapSink("counts"), 1)
    for vertex in (tokenize, accumulate, combine):
        vertex.local_parallelism(local_parallelism)
    dag.edge(between(source, tokenize))
    dag.edge(between(tokenize, accumulate).partitioned(lambda word: word, HASH_CODE))
    dag.edge(between(accumulate, combine).distributed().partitioned(lambda entry: entry[0]))
    dag.edge(between(combine, sink))
    return dag


@pytest.mark.parametrize(("members", "local_parallelism"), [(1, 1), (1, 3), (3, 1), (3, 2)])
def test_word_count_matches_a_plain_python_count(members: int, local_parallelism: int) -> None:
    engine = run(word_count_dag(local_parallelism), members, lines=TEXT)
    expected = Counter(w for line in TEXT for w in re.findall(r"\w+", line.lower()))
    assert engine.get_map("counts") == dict(expected)


# --- TF-IDF (manual §8.2.3) ----------------------------------------------------------------

DOCS = {
    1: "the cat sat on the mat\nthe cat ate",
    2: "a dog and a cat\nthe dog barked at the cat",
    3: "the end of the story\nno cat here, a bird",
    4: "bird and dog and cat\nthe bird sang",
}
STOPWORDS = {"the", "a", "and", "on", "at", "of"}


class Stopwords(Processor):
    """Emits the stopword set as one item."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox

    def complete(self) -> bool:
        return self.outbox.offer(frozenset(STOPWORDS))


class Tokenize(Processor):
    """Ordinal 0: the stopwords (must come first); ordinal 1: (doc, line) -> (doc, word)."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self.stopwords: frozenset[str] | None = None
        self.words = FlatMap(self.tokenize)
        self.words.init(outbox, context)

    def tokenize(self, entry: tuple[int, str]) -> list[tuple[int, str]]:
        assert self.stopwords is not None, "a line arrived before the stopwords"
        doc, line = entry
        return [(doc, w) for w in re.findall(r"\w+", line) if w not in self.stopwords]

    def process(self, ordinal: int, inbox: Inbox) -> None:
        if ordinal == 0:
            self.stopwords = inbox.poll()
        else:
            self.words.process(ordinal, inbox)


class TfIdf(Processor):
    """Ordinal 0: the document count; ordinal 1: ((doc, word), tf). Emits the inverted index."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.log_doc_count = 0.0
        self.word_doc_tf: dict[str, list[tuple[int, int]]] = {}
        self.result: list[Any] | None = None

    def process(self, ordinal: int, inbox: Inbox) -> None:
        for item in inbox.queue:  # type: ignore[attr-defined]
            if ordinal == 0:
                self.log_doc_count = math.log(item[1])
            else:
                (doc, word), tf = item
                self.word_doc_tf.setdefault(word, []).append((doc, tf))
        inbox.queue.clear()  # type: ignore[attr-defined]

    def complete(self) -> bool:
        if self.result is None:
            self.result = [
                (word, sorted(_scores(self.log_doc_count, docs)))
                for word, docs in self.word_doc_tf.items()
            ]
        while self.result:
            if not self.outbox.offer(self.result[-1]):
                return False
            self.result.pop()
        return True


def _scores(log_doc_count: float, docs: list[tuple[int, int]]) -> list[tuple[int, float]]:
    idf = log_doc_count - math.log(len(docs))
    return [(doc, tf * idf) for doc, tf in docs]


def tf_idf_reference(docs: dict[int, str] = DOCS) -> dict[str, list[tuple[int, float]]]:
    """The inverted index of `docs`, computed directly."""
    tf = Counter(
        (doc, w)
        for doc, text in docs.items()
        for line in text.split("\n")
        for w in re.findall(r"\w+", line)
        if w not in STOPWORDS
    )
    by_word: dict[str, list[tuple[int, int]]] = {}
    for (doc, word), count in tf.items():
        by_word.setdefault(word, []).append((doc, count))
    return {w: sorted(_scores(math.log(len(docs)), pairs)) for w, pairs in by_word.items()}


def tf_idf_dag() -> DAG:
    """The manual's TF-IDF DAG (§8.2.3): reads the map "docs", writes the map "index"."""
    dag = DAG("tf-idf")
    stopword_source = dag.new_vertex("stopword-source", Stopwords, 1)
    doc_source = dag.new_vertex("doc-source", lambda: MapSource("docs"), 1)
    doc_count = dag.new_vertex("doc-count", lambda: SumByKey(lambda d: "docs"), 1)
    doc_lines = dag.new_vertex(
        "doc-lines",
        lambda: FlatMap(lambda e: [(e[0], line) for line in e[1].split("\n")], cooperative=False),
    )
    tokenize = dag.new_vertex("tokenize", Tokenize, 2)
    tf = dag.new_vertex("tf", SumByKey, 2)
    tf_idf = dag.new_vertex("tf-idf", TfIdf, 2)
    sink = dag.new_vertex("sink", lambda: MapSink("index"), 1)
    dag.edge(between(stopword_source, tokenize).broadcast().priority(-1))
    dag.edge(from_(doc_lines).to(tokenize, 1))
    dag.edge(between(doc_source, doc_count).distributed().broadcast())
    dag.edge(from_(doc_source, 1).to(doc_lines))
    dag.edge(between(tokenize, tf).partitioned(lambda item: item, HASH_CODE))
    dag.edge(between(doc_count, tf_idf).broadcast().priority(-1))
    dag.edge(from_(tf).to(tf_idf, 1).distributed().partitioned(lambda e: e[0][1]))
    dag.edge(between(tf_idf, sink))
    return dag


@pytest.mark.parametrize("members", [1, 2])
def test_tf_idf_dag_builds_the_inverted_index(members: int) -> None:
    engine = LocalEngine(members=members)
    engine.get_map("docs").update(DOCS)
    job = engine.new_job(tf_idf_dag())
    job.join(timeout=60)
    index = engine.get_map("index")
    expected = tf_idf_reference()
    assert index.keys() == expected.keys()
    for word, scores in expected.items():
        assert [doc for doc, _ in index[word]] == [doc for doc, _ in scores]
        assert [score for _, score in index[word]] == pytest.approx([s for _, s in scores])


# --- routing: who received what --------------------------------------------------------------


def routing_dag(edge_fn: Any, scripts: dict[int, list[Any]], lp_up: int, lp_down: int) -> DAG:
    dag = DAG("routing")
    source = dag.new_vertex("source", lambda: ScriptSource(scripts), lp_up)
    sink = dag.new_vertex("sink", Recorder, lp_down)
    dag.edge(edge_fn(between(source, sink)))
    return dag


def delivered(engine: LocalEngine, count: int) -> dict[int, list[Any]]:
    log = engine.get_list("recorded")
    return {index: sorted(received(log, index)) for index in range(count)}


def round_robin(targets: list[int], items: list[Any], upstream: int) -> dict[int, list[Any]]:
    expected: dict[int, list[Any]] = {t: [] for t in targets}
    for j, item in enumerate(items):
        expected[targets[(upstream + j) % len(targets)]].append(item)
    return expected


def merge(*parts: dict[int, list[Any]], count: int) -> dict[int, list[Any]]:
    merged: dict[int, list[Any]] = {i: [] for i in range(count)}
    for part in parts:
        for index, items in part.items():
            merged[index].extend(items)
    return {i: sorted(items) for i, items in merged.items()}


def scripts_for(upstreams: int, per_upstream: int = 6) -> dict[int, list[Any]]:
    return {u: [f"u{u}-{j}" for j in range(per_upstream)] for u in range(upstreams)}


def test_unicast_local_sprays_round_robin_from_the_upstream_offset() -> None:
    scripts = scripts_for(2)
    engine = run(routing_dag(lambda e: e, scripts, 2, 3))
    expected = merge(
        round_robin([0, 1, 2], scripts[0], 0), round_robin([0, 1, 2], scripts[1], 1), count=3
    )
    assert delivered(engine, 3) == expected


def test_unicast_distributed_sprays_over_all_members() -> None:
    scripts = scripts_for(2)  # one source processor per member
    engine = run(routing_dag(lambda e: e.distributed(), scripts, 1, 2), members=2)
    targets = [0, 1, 2, 3]
    expected = merge(
        round_robin(targets, scripts[0], 0), round_robin(targets, scripts[1], 1), count=4
    )
    assert delivered(engine, 4) == expected


@pytest.mark.parametrize(
    ("lp_up", "lp_down", "feeds"),
    [(2, 4, {0: [0, 2], 1: [1, 3]}), (2, 1, {0: [0], 1: [0]}), (3, 2, {0: [0], 1: [1], 2: [0]})],
)
def test_isolated_feeds_each_downstream_from_a_fixed_upstream_set(
    lp_up: int, lp_down: int, feeds: dict[int, list[int]]
) -> None:
    scripts = scripts_for(lp_up)
    engine = run(routing_dag(lambda e: e.isolated(), scripts, lp_up, lp_down))
    parts = [round_robin(feeds[u], scripts[u], u) for u in range(lp_up)]
    assert delivered(engine, lp_down) == merge(*parts, count=lp_down)


def test_isolated_stays_on_each_member() -> None:
    scripts = scripts_for(4)  # LP 2 on 2 members
    engine = run(routing_dag(lambda e: e.isolated(), scripts, 2, 2), members=2)
    assert delivered(engine, 4) == {i: sorted(scripts[i]) for i in range(4)}


@pytest.mark.parametrize(("members", "distributed"), [(1, False), (2, False), (2, True)])
def test_broadcast_delivers_every_item_to_every_candidate(members: int, distributed: bool) -> None:
    scripts = scripts_for(2 * members, 3)
    edge_fn = (lambda e: e.broadcast().distributed()) if distributed else (lambda e: e.broadcast())
    engine = run(routing_dag(edge_fn, scripts, 2, 2), members=members)
    got = delivered(engine, 2 * members)
    for index in range(2 * members):
        member = index // 2
        senders = range(2 * members) if distributed else (2 * member, 2 * member + 1)
        assert got[index] == sorted(item for u in senders for item in scripts[u])


def test_partitioned_distributed_sends_each_key_to_its_owner_on_any_member() -> None:
    scripts = {u: [(f"k{j % 11}", u, j) for j in range(40)] for u in range(4)}
    engine = run(
        routing_dag(lambda e: e.distributed().partitioned(lambda item: item[0]), scripts, 2, 3),
        members=2,
    )
    expected: dict[int, list[Any]] = {i: [] for i in range(6)}
    for items in scripts.values():
        for item in items:
            partition = DEFAULT.partition(item[0], 271)
            expected[global_processor_of_partition(partition, 2, 3)].append(item)
    assert delivered(engine, 6) == {i: sorted(items) for i, items in expected.items()}


def test_partitioned_local_keeps_each_key_on_the_senders_member() -> None:
    scripts = {u: [(j % 11, u, j) for j in range(40)] for u in range(4)}
    engine = run(
        routing_dag(lambda e: e.partitioned(lambda item: item[0], HASH_CODE), scripts, 2, 3),
        members=2,
    )
    expected: dict[int, list[Any]] = {i: [] for i in range(6)}
    for upstream, items in scripts.items():
        member = upstream // 2
        for item in items:
            expected[member * 3 + HASH_CODE.partition(item[0], 271) % 3].append(item)
    assert delivered(engine, 6) == {i: sorted(items) for i, items in expected.items()}


def test_all_to_one_sends_everything_to_one_processor_of_the_cluster() -> None:
    scripts = scripts_for(4, 5)
    engine = run(routing_dag(lambda e: e.distributed().all_to_one(), scripts, 2, 2), members=2)
    got = delivered(engine, 4)
    receivers = [i for i, items in got.items() if items]
    assert len(receivers) == 1
    assert got[receivers[0]] == sorted(item for items in scripts.values() for item in items)


def test_items_crossing_members_are_copies_while_a_member_shares_them() -> None:
    payload = ["mutable"]
    scripts = {0: [payload, payload]}
    engine = run(routing_dag(lambda e: e.distributed(), scripts, 1, 1), members=2)
    log = engine.get_list("recorded")
    first, second = received(log, 0)[0], received(log, 1)[0]
    assert first is payload
    assert second == payload and second is not payload


# --- priority --------------------------------------------------------------------------------


def test_a_lower_priority_number_is_consumed_completely_first() -> None:
    dag = DAG("priority")
    late = dag.new_vertex("late", lambda: ScriptSource(scripts_for(2, 50)), 2)
    early = dag.new_vertex(
        "early",
        lambda: ScriptSource({u: [f"early-{u}-{j}" for j in range(50)] for u in range(2)}),
        2,
    )
    merge_ = dag.new_vertex("merge", Recorder, 2)
    small = EdgeConfig(queue_size=2)
    dag.edge(from_(late).to(merge_, 0).set_config(small))
    dag.edge(from_(early).to(merge_, 1).priority(-1).set_config(small))
    engine = run(dag)
    log = engine.get_list("recorded")
    for index in range(2):
        events = [e for e in log if e[0] == index]
        kinds = [
            ("early" if e[1] == "item" and e[2] == 1 else "late" if e[1] == "item" else e[1:])
            for e in events
        ]
        first_late = kinds.index("late")
        assert kinds.count("early") == 50
        assert kinds[first_late - 1] == ("edge", 1)  # complete_edge(1) before any late item
        assert "early" not in kinds[first_late:]


# --- watermarks ------------------------------------------------------------------------------


class WatermarkSource(Processor):
    """Emits `(name, ts)` items each followed by Watermark(ts); then IDLE_MESSAGE if asked;
    then keeps running until `release` is set, when given."""

    def __init__(
        self,
        name: str,
        stamps: list[int],
        emitted: dict[str, int],
        idle: bool = False,
        release: threading.Event | None = None,
    ) -> None:
        self.name, self.stamps, self.emitted = name, stamps, emitted
        self.idle, self.release = idle, release

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        script: list[Any] = []
        for ts in self.stamps:
            script += [(self.name, ts), Watermark(ts)]
        if self.idle:
            script.append(IDLE_MESSAGE)
        self.script = script

    def complete(self) -> bool:
        while self.script:
            item = self.script[0]
            if not self.outbox.offer(item):
                return False
            if type(item) is Watermark and item != IDLE_MESSAGE:
                self.emitted[self.name] = item.timestamp
            self.script.pop(0)
        if self.release is not None and not self.release.is_set():
            return False
        self.emitted[self.name + " done"] = 1
        return True


class WatermarkChecker(Processor):
    """Records watermarks with the sources' progress at that moment; flags late items."""

    def __init__(
        self,
        seen: list[Any],
        emitted: dict[str, int],
        release_at: int | None = None,
        release: threading.Event | None = None,
    ) -> None:
        self.seen, self.emitted = seen, emitted
        self.release_at, self.release = release_at, release

    def init(self, outbox: Outbox, context: Context) -> None:
        self.current = None

    def process(self, ordinal: int, inbox: Inbox) -> None:
        for name, ts in inbox.queue:  # type: ignore[attr-defined]
            if self.current is not None and ts < self.current:
                self.seen.append(("late", name, ts, self.current))
        inbox.queue.clear()  # type: ignore[attr-defined]

    def try_process_watermark(self, watermark: Watermark) -> bool:
        self.current = watermark.timestamp
        self.seen.append((watermark.timestamp, dict(self.emitted)))
        if self.release is not None and watermark.timestamp == self.release_at:
            self.release.set()
        return True


def watermark_dag(a: Processor, b: Processor, checker: Processor, two_edges: bool) -> DAG:
    dag = DAG("watermarks")
    va = dag.new_vertex("a", lambda: a, 1)
    vb = dag.new_vertex("b", lambda: b, 1)
    vc = dag.new_vertex("check", lambda: checker, 1)
    if two_edges:
        dag.edge(from_(va).to(vc, 0)).edge(from_(vb).to(vc, 1))
    else:  # one edge, two queues: a union vertex in between would do the same
        union = dag.new_vertex("union", lambda: FlatMap(lambda item: [item]), 1)
        dag.edge(from_(va).to(union, 0)).edge(from_(vb).to(union, 1)).edge(between(union, vc))
    return dag


@pytest.mark.parametrize("two_edges", [True, False])
def test_skewed_inputs_coalesce_to_the_minimum(two_edges: bool) -> None:
    emitted: dict[str, int] = {}
    seen: list[Any] = []
    a = WatermarkSource("a", list(range(10, 101, 10)), emitted)
    b = WatermarkSource("b", list(range(5, 51, 5)), emitted)
    run(watermark_dag(a, b, WatermarkChecker(seen, emitted), two_edges))
    assert not [s for s in seen if s[0] == "late"]
    stamps = [s[0] for s in seen]
    assert stamps == sorted(set(stamps))
    assert stamps[-1] >= 50  # b's last; beyond it only if b finished before a
    for ts, progress in seen:  # never above an input that may still send
        running = [progress.get(name, -1) for name in "ab" if f"{name} done" not in progress]
        assert ts <= min(running, default=ts)


def test_an_idle_input_is_excluded_from_coalescing() -> None:
    emitted: dict[str, int] = {}
    seen: list[Any] = []
    release = threading.Event()
    a = WatermarkSource("a", list(range(10, 101, 10)), emitted)
    b = WatermarkSource("b", [5], emitted, idle=True, release=release)
    # b stays alive, idle, until the checker saw 100: without idle exclusion this never ends
    run(watermark_dag(a, b, WatermarkChecker(seen, emitted, 100, release), True))
    stamps = [s[0] for s in seen]
    assert stamps[0] == 5 and stamps[-1] == 100 and stamps == sorted(set(stamps))
    assert set(stamps[1:]) <= set(range(10, 101, 10))


def test_max_watermark_retention_releases_a_lagging_input() -> None:
    emitted: dict[str, int] = {}
    seen: list[Any] = []
    release = threading.Event()
    a = WatermarkSource("a", list(range(10, 101, 10)), emitted)
    b = WatermarkSource("b", [5], emitted, release=release)
    config = JobConfig(max_watermark_retain_millis=20)
    run(watermark_dag(a, b, WatermarkChecker(seen, emitted, 100, release), True), config=config)
    assert seen[0][0] == 5 and seen[-1][0] == 100


def test_watermarks_are_broadcast_whatever_the_routing_policy() -> None:
    dag = DAG()
    source = dag.new_vertex(
        "source", lambda: ScriptSource({0: ["x", Watermark(7), "y", Watermark(9)]}), 1
    )
    sink = dag.new_vertex("sink", Recorder, 3)
    dag.edge(between(source, sink).partitioned(lambda item: item, HASH_CODE))
    engine = run(dag)
    log = engine.get_list("recorded")
    for index in range(3):
        assert [e[2] for e in log if e[0] == index and e[1] == "wm"] == [7, 9]


# --- backpressure ----------------------------------------------------------------------------


class Stubborn(Processor):
    """A source that offers one item per attempt and returns False whenever it is refused."""

    def init(self, outbox: Outbox, context: Context) -> None:
        self.outbox = outbox
        self.next = 0
        self.base = context.global_processor_index * 1000

    def complete(self) -> bool:
        while self.next < 300:
            if not self.outbox.offer(self.base + self.next):
                return False
            self.next += 1
        return True


@pytest.mark.parametrize("members", [1, 2])
def test_queue_size_one_still_delivers_everything(members: int) -> None:
    one = EdgeConfig(queue_size=1)
    dag = DAG("backpressure")
    source = dag.new_vertex("source", Stubborn, 2)
    triple = dag.new_vertex("triple", lambda: FlatMap(lambda x: [x, x, x]), 2)
    sink = dag.new_vertex("sink", lambda: ListSink("out"), 2)
    dag.edge(between(source, triple).set_config(one))
    dag.edge(between(triple, sink).distributed().partitioned(lambda x: x).set_config(one))
    engine = run(dag, members=members)
    expected = [u * 1000 + j for u in range(2 * members) for j in range(300) for _ in range(3)]
    assert sorted(engine.get_list("out")) == expected


# --- metrics, status, stores -----------------------------------------------------------------


def test_metrics_count_items_per_processor_and_edge() -> None:
    engine = LocalEngine(members=3)
    engine.get_list("lines").extend(TEXT)
    job = engine.new_job(word_count_dag(2))
    job.join(timeout=60)
    words = sum(len(re.findall(r"\w+", line)) for line in TEXT)
    metrics = job.metrics
    assert sum(p.received_count[0] for p in metrics.of_vertex("accumulate")) == words
    assert sum(p.emitted_count[0] for p in metrics.of_vertex("tokenize")) == words
    assert len(metrics.of_vertex("combine")) == 6
    local = metrics.edge("tokenize", "accumulate")
    distributed = metrics.edge("accumulate", "combine")
    assert (local.emitted_count, local.received_count) == (words, words)
    assert local.distributed_items == 0
    assert distributed.distributed_items > 0 and distributed.distributed_bytes > 0
    assert distributed.queues_size == 0 and distributed.queues_capacity == 6 * 6 * 1024
    assert all(p.received_batches[0] >= 1 for p in metrics.of_vertex("accumulate"))


def test_status_moves_to_completed_and_stores_are_shared() -> None:
    engine = LocalEngine()
    engine.get_list("in").extend([1, 2, 3])
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("in"))
    sink = dag.new_vertex("sink", lambda: ListSink("out"))
    dag.edge(between(source, sink))
    job = engine.new_job(dag, JobConfig(name="copy"))
    assert job.status in (JobStatus.NOT_STARTED, JobStatus.RUNNING, JobStatus.COMPLETED)
    job.join(timeout=60)
    assert job.status is JobStatus.COMPLETED and job.name == "copy"
    assert engine.get_list("out") == [1, 2, 3]
    assert engine.get_list("out") is engine.stores.get_list("out")
    job.cancel()  # a no-op once ended
    assert job.status is JobStatus.COMPLETED

"""examples/pipeline/ (the Jet training course's labs as pipelines) and docs/pipeline.md: every
example runs on the local engine and its results equal a plain Python computation over the
same trades or text; two run on Spark; every Python block of the chapter runs as written and
prints what the chapter says it prints."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "pipeline"
CHAPTER = ROOT / "docs" / "pipeline.md"
TRADES = 400
LOCAL = ["--engine", "local", "--members", "2", "--trades", str(TRADES)]

sys.path.insert(0, str(EXAMPLES))  # the examples import runner and trading, as scripts do
from trading import BROKERS, COMPANIES, MAX_DISORDER_MILLIS, trades  # noqa: E402


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"pipeline_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first_line(out: str) -> str:
    return out.splitlines()[0]


# --- the examples on the local engine, each against plain Python ------------------------------


def test_transform_and_filter(capsys):
    big = load("transform_filter").main([*LOCAL, "--min-value", "50000"])
    expected = [
        (t.ticker, t.quantity, t.price / 100, t.quantity * t.price / 100)
        for t in trades(TRADES)
        if t.quantity * t.price >= 50_000 * 100
    ]
    assert 0 < len(expected) < TRADES
    assert sorted(big) == sorted(expected)
    out = capsys.readouterr().out
    assert first_line(out) == (
        "transform-and-filter: ran on the local engine (2 members), mode local, completed"
    )
    assert f"{len(expected)} of {TRADES} trades are worth $50,000 or more:" in out


def test_hash_join_enriches_every_trade(capsys):
    enriched = load("hash_join").main(LOCAL)
    expected = [
        (t.time, t.ticker, COMPANIES[t.ticker], BROKERS[t.broker], t.quantity)
        for t in trades(TRADES)
    ]
    assert sorted(enriched) == sorted(expected)
    out = capsys.readouterr().out
    per_broker = Counter(BROKERS[t.broker] for t in trades(TRADES))
    for name, count in per_broker.items():
        assert f"  {name:<22} {count:>5,}\n" in out


def test_context_lookup_streams_until_every_trade_is_named(capsys):
    named = load("context_lookup").main(LOCAL)
    expected = [(t.time, COMPANIES[t.ticker], t.quantity, t.price) for t in trades(TRADES)]
    assert sorted(named) == sorted(expected)
    assert first_line(capsys.readouterr().out) == (
        "context-lookup: ran on the local engine (2 members), mode local, "
        "cancelled once its results were in"
    )


def check_rolling(rolling: list) -> None:
    """Per ticker, one result per trade, whatever order the trades of a ticker were read in:
    the counts are 1..n, totals and highest prices grow with the count, and the last result is
    the plain sum and maximum."""
    by_ticker = defaultdict(list)
    for trade in trades(TRADES):
        by_ticker[trade.ticker].append(trade)
    results = defaultdict(list)
    for ticker, result in rolling:
        results[ticker].append(result)
    assert results.keys() == by_ticker.keys()
    for ticker, own in by_ticker.items():
        ordered = sorted(results[ticker], key=lambda r: r[0])
        assert [count for count, _, _ in ordered] == list(range(1, len(own) + 1))
        totals = [total for _, total, _ in ordered]
        assert totals == sorted(totals) and len(set(totals)) == len(totals)
        tops = [top.price for _, _, top in ordered]
        assert tops == sorted(tops)
        assert totals[-1] == sum(t.quantity for t in own)
        assert tops[-1] == max(t.price for t in own)


def test_rolling_aggregate(capsys):
    rolling = load("rolling_aggregate").main(LOCAL)
    check_rolling(rolling)
    out = capsys.readouterr().out
    apple = [t for t in trades(TRADES) if t.ticker == "AAPL"]
    shares = sum(t.quantity for t in apple)
    assert f"  AAPL  {len(apple):>5,} trades {shares:>9,} shares" in out


def expected_sliding_counts(window: int, slide: int) -> dict[tuple[int, str], int]:
    """(window end, ticker) -> trades in [end - window, end), for every window holding one."""
    counts: Counter = Counter()
    for trade in trades(TRADES):
        first_end = (trade.time // slide + 1) * slide
        for end in range(first_end, first_end + window, slide):
            counts[(end, trade.ticker)] += 1
    return dict(counts)


def check_sliding(results: list, example) -> None:
    got = {(r.timestamp, r.key): r.value for r in results}
    assert len(got) == len(results)  # each window and ticker once
    assert got == expected_sliding_counts(example.WINDOW_MILLIS, example.SLIDE_MILLIS)


def test_sliding_window_counts_per_ticker(capsys):
    example = load("sliding_window")
    check_sliding(example.main(LOCAL), example)
    out = capsys.readouterr().out
    expected = expected_sliding_counts(example.WINDOW_MILLIS, example.SLIDE_MILLIS)
    end = min(end for end, _ in expected) + 1_000
    row = " ".join(f"{expected.get((end, t), 0):>5}" for t in COMPANIES)
    assert re.search(rf"^  \d\d:\d\d:\d\d\.\d{{3}} +{row}$", out, re.M)


def expected_sessions(timeout: int) -> list[tuple]:
    """Per ticker, trades no further than `timeout` after the previous one (in event time)
    share a session; its end is the last trade's time plus `timeout` (Jet's rule)."""
    times = defaultdict(list)
    for trade in trades(TRADES):
        times[trade.ticker].append((trade.time, trade.quantity))
    sessions = []
    for ticker, events in times.items():
        events.sort()
        current: list = []
        for time, quantity in events:
            if current and time > current[-1][0] + timeout:
                sessions.append(session_of(ticker, current, timeout))
                current = []
            current.append((time, quantity))
        sessions.append(session_of(ticker, current, timeout))
    return sorted(sessions)


def session_of(ticker: str, events: list, timeout: int) -> tuple:
    return (ticker, events[0][0], events[-1][0] + timeout, len(events), sum(q for _, q in events))


def test_session_window(capsys):
    example = load("session_window")
    sessions = example.main(LOCAL)
    expected = expected_sessions(example.SESSION_TIMEOUT_MILLIS)
    assert example.SESSION_TIMEOUT_MILLIS > MAX_DISORDER_MILLIS
    assert sorted(sessions) == expected
    assert f"{len(expected)} sessions: " in capsys.readouterr().out


@pytest.mark.parametrize("remote", [False, True])
def test_service_lookup_names_what_the_context_lookup_names(remote, capsys):
    named = load("service_lookup").main([*LOCAL, *(["--remote"] if remote else [])])
    expected = [(t.time, COMPANIES[t.ticker], t.quantity, t.price) for t in trades(TRADES)]
    assert sorted(named) == sorted(expected)
    assert first_line(capsys.readouterr().out) == (
        "service-lookup: ran on the local engine (2 members), mode local, "
        "cancelled once its results were in"
    )


def test_price_drops(capsys):
    """Which trade of a ticker is "previous" depends on the order the journal's partitions were
    read in: each alert is a real trade, one that dropped more than the threshold below another
    trade's price of its ticker, alerted once; in stream order there are alerts."""
    example = load("price_drops")
    alerts = example.main(LOCAL)
    prices = defaultdict(set)
    for trade in trades(TRADES):
        prices[trade.ticker].add(trade.price)
    own = {(t.time, t.ticker, t.price) for t in trades(TRADES)}
    assert len({(time, ticker) for time, ticker, _, _ in alerts}) == len(alerts)
    for time, ticker, previous, price in alerts:
        assert (time, ticker, price) in own
        assert previous in prices[ticker] and previous - price > example.DROP_CENTS
    last: dict = {}
    in_stream_order = 0
    for trade in trades(TRADES):
        if trade.ticker in last and last[trade.ticker] - trade.price > example.DROP_CENTS:
            in_stream_order += 1
        last[trade.ticker] = trade.price
    assert in_stream_order > 0
    assert f" price drops of more than $70 in {TRADES} trades:" in capsys.readouterr().out


def test_early_results_count_every_trade(capsys):
    """Final counts equal the plain ones, every early count is at most its window's final one,
    and the window of the latest trade, which never closes, shows only early results."""
    example = load("early_results")
    results = example.main(LOCAL)
    expected: Counter = Counter()
    for trade in trades(TRADES):
        end = (trade.time // example.WINDOW_MILLIS + 1) * example.WINDOW_MILLIS
        expected[(end, trade.ticker)] += 1
    finals = {(r.timestamp, r.key): r.value for r in results if not r.is_early}
    assert len(finals) == sum(not r.is_early for r in results)  # each window and ticker once
    assert all(expected[window] == count for window, count in finals.items())
    for result in results:
        if result.is_early and (result.timestamp, result.key) in finals:
            assert result.value <= finals[(result.timestamp, result.key)]
    latest = example.latest_counts(results)
    assert {window: r.value for window, r in latest.items()} == dict(expected)
    last = max(trades(TRADES), key=lambda t: t.time)
    end = (last.time // example.WINDOW_MILLIS + 1) * example.WINDOW_MILLIS
    assert latest[(end, last.ticker)].is_early
    assert "of them early; the latest per window:" in capsys.readouterr().out


def write_books(directory: Path) -> tuple[Path, Path]:
    books = directory / "books"
    books.mkdir()
    (books / "one.txt").write_text("The quick brown fox\njumps over the lazy dog.\n")
    (books / "two.txt").write_text("A fox, a dog; the FOX again!\n\nJet-lagged fox.\n")
    (books / "notes.md").write_text("fox fox fox (not a .txt: not read)\n")
    stopwords = directory / "stopwords.txt"
    stopwords.write_text("a\nthe\n\nover\n")
    return books, stopwords


def test_word_count_over_a_directory(tmp_path, capsys):
    books, stopwords = write_books(tmp_path)
    counts = load("word_count").main(
        [str(books), "--stopwords", str(stopwords), "--top", "2", "--members", "2"]
    )
    words = Counter(
        word
        for book in ("one.txt", "two.txt")
        for word in re.findall(r"\w+", (books / book).read_text().lower())
        if word not in {"a", "the", "over"}
    )
    assert counts == dict(words)
    out = capsys.readouterr().out
    assert f"{len(words)} distinct words, {sum(words.values())} in all; the top 2:" in out
    assert "  fox                 4\n  dog                 2\n" in out


def test_word_count_defaults_to_the_shared_data():
    beside_the_repository = ROOT.parent / "shared" / "data"
    assert beside_the_repository == load("word_count").DATA


EXAMPLE_VERTICES = {
    "transform_filter": (
        lambda m: m.build_pipeline(10, 1),
        ["journalSource(trade)", "fused(filter, map)", "listSink(big-trades)"],
    ),
    "hash_join": (
        lambda m: m.build_pipeline(10),
        [
            "journalSource(trade)",
            "mapSource(companies)",
            "mapSource(brokers)",
            "3-way hash-join-collector1",
            "3-way hash-join-collector2",
            "3-way hash-join-joiner",
            "listSink(enriched)",
        ],
    ),
    "context_lookup": (
        lambda m: m.build_pipeline(),
        ["streamJournalSource(trades)", "map-using-context", "listSink(named-trades)"],
    ),
    "service_lookup": (
        lambda m: m.build_pipeline(),
        ["streamJournalSource(trades)", "map-using-service", "listSink(named-trades)"],
    ),
    "price_drops": (
        lambda m: m.build_pipeline(10),
        ["journalSource(trade)", "map-stateful-keyed", "listSink(price-drops)"],
    ),
    "early_results": (
        lambda m: m.build_pipeline(),
        [
            "streamJournalSource(trades)",
            "tumbling-window",
            "listSink(early-counts)",
        ],
    ),
    "rolling_aggregate": (
        lambda m: m.build_pipeline(),
        ["streamJournalSource(trades)", "rolling-aggregate", "listSink(rolling)"],
    ),
    "sliding_window": (
        lambda m: m.build_pipeline(10),
        [
            "journalSource(trade)",
            "sliding-window-step1",
            "sliding-window-step2",
            "listSink(trade-counts)",
        ],
    ),
    "session_window": (
        lambda m: m.build_pipeline(10),
        ["journalSource(trade)", "session-window", "listSink(sessions)"],
    ),
    "word_count": (
        lambda m: m.build_pipeline("BOOKS", "*.txt", frozenset()),
        [
            "filesSource(BOOKS/*.txt)",
            "fused(flat-map, filter)",
            "group-and-aggregate-step1",
            "group-and-aggregate-step2",
            "mapSink(counts)",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_VERTICES))
def test_examples_plan_the_dags_their_docstrings_draw(name):
    build, vertices = EXAMPLE_VERTICES[name]
    module = load(name)
    dag = build(module).to_dag()
    assert sorted(v.name for v in dag.vertices()) == sorted(vertices)
    for vertex in vertices:
        assert vertex in module.__doc__


# --- two examples on Spark: a batch job (stages) and a streaming one (continuous) ---------------


@pytest.mark.spark
def test_sliding_window_on_spark(spark_engine, capsys):
    example = load("sliding_window")
    results = example.main(["--engine", "spark", "--trades", str(TRADES)], spark_engine.context)
    check_sliding(results, example)
    assert re.match(
        r"sliding-window: ran on Spark local\[2\] \(2 members\), mode stages",
        first_line(capsys.readouterr().out),
    )


@pytest.mark.spark
def test_rolling_aggregate_on_spark(spark_engine, capsys):
    rolling = load("rolling_aggregate").main(
        ["--engine", "spark", "--trades", str(TRADES)], spark_engine.context
    )
    check_rolling(rolling)
    assert "mode continuous, cancelled once its results were in" in first_line(
        capsys.readouterr().out
    )


# --- docs/pipeline.md: every Python block runs, in order, and prints what it says ---------------


def chapter_blocks() -> list[tuple[int, str]]:
    """(line number, code) of each ```python block of the chapter."""
    text = CHAPTER.read_text()
    return [
        (text[: match.start()].count("\n") + 1, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S)
    ]


def printed_expectation(code: str) -> str | None:
    """The lines after a block's `# prints:` comment, without their `# `, or None."""
    lines = code.splitlines()
    if "# prints:" not in lines:
        return None
    after = lines[lines.index("# prints:") + 1 :]
    return "".join(f"{line[2:]}\n" for line in after if line.startswith("#"))


def test_every_python_block_of_the_chapter_runs_as_written(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    blocks = chapter_blocks()
    assert len(blocks) >= 10
    namespace: dict = {"__name__": "pipeline_chapter"}
    for line, code in blocks:
        if code.startswith("# fragment"):
            compile(code, f"docs/pipeline.md:{line}", "exec")  # at least it parses
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/pipeline.md:{line}", "exec"), namespace)
        expected = printed_expectation(code)
        if expected is not None:
            assert out.getvalue() == expected, f"the block at docs/pipeline.md:{line}"


def stage_instances() -> dict[str, list]:
    """One instance of each stage interface, by the cheatsheet's heading."""
    from jetspark.core.pipeline import Pipeline, Sources, WindowDefinition

    p = Pipeline.create()
    batch = p.draw_from(Sources.list("a"))
    stream = p.draw_from(Sources.stream_journal("b")).add_timestamps(len, 0)
    window = WindowDefinition.tumbling(10)
    batch_keyed, stream_keyed = batch.grouping_key(len), stream.grouping_key(len)
    return {
        "Pipeline": [p],
        "GeneralStage (BatchStage and StreamStage)": [batch, stream],
        "BatchStage": [batch],
        "StreamStage": [stream],
        "GeneralStageWithKey (BatchStageWithKey and StreamStageWithKey)": [
            batch_keyed,
            stream_keyed,
        ],
        "BatchStageWithKey": [batch_keyed],
        "StreamStageWithKey": [stream_keyed],
        "StageWithWindow": [stream.window(window)],
        "StageWithKeyAndWindow": [stream_keyed.window(window)],
    }


def cheatsheet_rows() -> list[tuple[str, str, str]]:
    """(heading, Jet 0.7 cell, jetspark cell) of every row of the cheatsheet's tables."""
    text = CHAPTER.read_text()
    sheet = text[text.index("### Cheatsheet") : text.index("### The examples")]
    rows, heading = [], None
    for line in sheet.splitlines():
        if line.startswith("#### "):
            heading = line[5:]
        elif line.startswith("| ") and not line.startswith("| Jet 0.7 |"):
            jet, jetspark, _ = (cell.strip() for cell in line.strip("|").split("|"))
            rows.append((heading, jet, jetspark))
    return rows


def test_every_jetspark_name_of_the_cheatsheet_exists():
    instances = stage_instances()
    rows = cheatsheet_rows()
    assert len(rows) >= 60 and {heading for heading, _, _ in rows} == instances.keys()
    for heading, jet, jetspark in rows:
        if jetspark.startswith("—"):
            continue
        path = re.match(r"`([A-Za-z_.]+)", jetspark)[1].split(".")
        for instance in instances[heading]:
            if path[0] == type(instance).__name__:
                path = path[1:]
            target = instance
            for name in path:
                assert hasattr(target, name), f"{heading}: {jet} -> {jetspark}"
                target = getattr(target, name)

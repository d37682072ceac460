"""The stock-exchange example unbounded on LocalEngine: `--duration` runs the endless journal
exactly-once into the transactional file sink, `--snapshots` lets a later run continue.

Every run here counts its duration and snapshot interval in trading time (`--clock trading`,
5 ms per trade read), so it reads the same trades and takes its snapshots at about the same
trades however busy the machine is: nothing here depends on how much a wall-clock second does.

The committed output is checked here against a count of our own (per 100 ms frame, then
summed per window), not the example's: every window once, with the exact count, and no window
missing before the last one every sink processor reached.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_processors_examples import load

from jetspark.core import Job, SnapshotStore

pytestmark = pytest.mark.timeout(180)

stock = load("stock_exchange")


def committed(out: Path) -> dict[str, list]:
    """File name -> its windows, of the published `part-*` files."""
    return {
        path.name: [stock.parse_line(line) for line in path.read_text().splitlines()]
        for path in sorted(out.glob("part-*"))
    }


def frame_counts(max_end: int) -> Counter:
    """(end of the 100 ms frame, ticker) -> trades, for every trade up to `max_end`."""
    frames: Counter = Counter()
    n = 0
    while stock.START_MILLIS + n * stock.TRADE_SPACING_MILLIS - 249 < max_end:
        t = stock.trade(n)
        frames[t.timestamp - t.timestamp % 100 + 100, t.ticker] += 1
        n += 1
    return frames


def check_exact(files: dict[str, list]) -> list:
    """Asserts the windows of `files` are exactly once, exact, and complete up to the last
    end every sink processor reached; returns them."""
    windows = [w for ws in files.values() for w in ws]
    assert windows, "nothing was committed"
    keys = Counter((w.end, w.ticker) for w in windows)
    assert [k for k, n in keys.items() if n > 1] == [], "a window was committed twice"
    frames = frame_counts(max(w.end for w in windows))
    for w in windows:
        plain = sum(frames[end, w.ticker] for end in range(w.end - 900, w.end + 1, 100))
        assert w.trades == plain, f"{w}: plain Python counts {plain}"
    last_by_processor: dict[str, int] = {}
    for name, ws in files.items():
        index = name.split("-")[1]
        last_by_processor[index] = max([w.end for w in ws], default=0)
    complete_until = min(last_by_processor.values())
    expected = {
        (end, ticker)
        for (frame_end, ticker) in frames
        for end in range(frame_end, frame_end + 1000, 100)
        if end <= complete_until
    }
    assert expected - keys.keys() == set(), "a window is missing"
    return windows


def run(
    out: Path,
    snapshots: Path | None,
    *extra: str,
    trading_seconds: int = 40,
    min_snapshots: int = 1,
) -> None:
    """One unbounded run of `trading_seconds` of trading (200 trades a second), a snapshot due
    every 2 s of it, that ends only once `min_snapshots` snapshots of the run are committed
    (`ending_after_snapshots`)."""
    argv = [str(out), "--duration", str(trading_seconds), "--clock", "trading"]
    argv += ["--snapshot-interval", "2000", *extra]
    with pytest.MonkeyPatch.context() as patch:
        ending_after_snapshots(patch, min_snapshots)
        stock.main(argv + (["--snapshots", str(snapshots)] if snapshots else []))


def ending_after_snapshots(patch: pytest.MonkeyPatch, count: int) -> None:
    """Makes the example's run loop see no trading time pass until `count` snapshots of the run
    are committed, a condition on snapshots instead of on how far the machine got.

    The trading clock runs from the first offset any source processor read to the highest any
    read. The processors read their journal partitions at rates the thread scheduler decides,
    and a run that continues at another member count restores them at different offsets, so
    that clock can run far ahead of the slowest processor, whose barrier every snapshot waits
    for: on a loaded machine a run of 160 s of trading sometimes ended before its first commit.
    """
    stores: list[stock.CountingStore] = []
    run_for = stock.run_for

    class RecordedStore(stock.CountingStore):
        def __init__(self, store: SnapshotStore) -> None:
            super().__init__(store)
            stores.append(self)

    def run_for_after_snapshots(
        job: Job,
        duration: float,
        progress: Callable[[float], None],
        clock: Callable[[], float],
        *rest: Any,
    ) -> float:
        (store,) = stores

        def held_until_committed() -> float:
            return clock() if store.saved >= count else 0.0

        return run_for(job, duration, progress, held_until_committed, *rest)

    patch.setattr(stock, "CountingStore", RecordedStore)
    patch.setattr(stock, "run_for", run_for_after_snapshots)


def snapshots_taken(text: str) -> int:
    """The count of snapshots in a run's summary line."""
    return int(re.search(r"([\d,]+) snapshots? taken", text).group(1).replace(",", ""))


def test_an_unbounded_run_commits_exact_windows_and_keeps_closing_them(tmp_path, capsys):
    out = tmp_path / "out"
    run(out, None, "--members", "2", trading_seconds=240, min_snapshots=2)
    text = capsys.readouterr().out
    windows = check_exact(committed(out))
    # Event time ran far past the bounded run's 30 s: the watermarks kept the windows closing.
    assert max(w.end for w in windows) - stock.START_MILLIS > 60_000
    assert re.search(r"\d\.\d s: [\d,]+ trades read, [\d,]+ windows committed", text)
    # 240 s of trading is 48,000 offsets; the metrics count in outbox batches, hence the slack.
    assert int(re.search(r"([\d,]+) trades read in this run", text)[1].replace(",", "")) >= 40_000
    assert snapshots_taken(text) >= 2
    assert "the windows match a plain Python count" in text
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_a_second_run_with_the_snapshots_continues_without_duplicates(tmp_path, capsys):
    out, snapshots = tmp_path / "out", tmp_path / "snapshots"
    run(out, snapshots)
    first = committed(out)
    first_end = max(w.end for w in check_exact(first))
    text = capsys.readouterr().out
    assert "continuing" not in text and snapshots_taken(text) >= 1
    run(out, snapshots)
    assert "continuing from snapshot" in capsys.readouterr().out
    union = committed(out)
    assert max(w.end for w in check_exact(union)) > first_end
    for name, windows in first.items():  # what was committed stays as it was
        assert union[name] == windows


def test_trades_appended_to_a_file_are_committed_exactly_once_across_runs(tmp_path, capsys):
    """`--source files DIR`: a generator appends the trades to DIR/trades.log as the job reads
    it; the next run (after a writer killed mid-line left a partial line) goes on exactly."""
    out, snapshots, trades = tmp_path / "out", tmp_path / "snapshots", tmp_path / "trades"
    run(out, snapshots, "--source", "files", str(trades))
    first = committed(out)
    first_end = max(w.end for w in check_exact(first))
    assert "appended to" in capsys.readouterr().out
    written = (trades / "trades.log").read_text().splitlines()
    assert written[:3] == [stock.trade_line(stock.trade(n)) for n in range(3)]
    with open(trades / "trades.log", "a") as file:
        file.write(stock.trade_line(stock.trade(len(written)))[:7])
    run(out, snapshots, "--source", "files", str(trades), "--members", "3")
    assert "continuing from snapshot" in capsys.readouterr().out
    union = committed(out)
    assert max(w.end for w in check_exact(union)) > first_end
    for name, windows in first.items():
        assert union[name] == windows
    lines = (trades / "trades.log").read_text().splitlines()
    assert lines == [stock.trade_line(stock.trade(n)) for n in range(len(lines))]


def test_continuing_at_other_member_counts_reuses_no_file_name(tmp_path, capsys):
    """3 -> 2 -> 3 members: sink processor 2 comes back and must not overwrite its old files."""
    out, snapshots = tmp_path / "out", tmp_path / "snapshots"
    seen: dict[str, list] = {}
    for members in ("3", "2", "3"):
        run(out, snapshots, "--members", members)
        assert snapshots_taken(capsys.readouterr().out) >= 1
        files = committed(out)
        assert {name: files[name] for name in seen} == seen
        seen = files
    check_exact(seen)
    assert any(name.startswith("part-00002-") for name in seen)


def test_unbounded_usage_errors_exit_2(tmp_path, capsys):
    def exit_code(*argv: str) -> int:
        with pytest.raises(SystemExit) as exit_:
            stock.main(list(argv))
        return exit_.value.code

    assert exit_code(str(tmp_path / "a"), "--snapshots", str(tmp_path / "s")) == 2
    assert exit_code("--duration", "1", "--snapshots", str(tmp_path / "s")) == 2
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "part-00000-00000000").write_text("")
    assert exit_code(str(tmp_path / "old"), "--duration", "1") == 2
    assert exit_code("--source", "files", str(tmp_path / "t")) == 2  # bounded: no --source
    assert exit_code("--duration", "1", "--source", "kafka") == 2
    assert "holds the output of an earlier run" in capsys.readouterr().err

"""The regression guard: benchmark rows on the working tree against a git ref, in one run.

    python -m bench --compare main                       # the default rows, 3 rounds
    python -m bench --compare HEAD~3 --rows 2d,13a --rounds 5

The ref is checked out into a temporary git worktree. Each round runs `python -m bench --rows
GROUPS --rounds 1` once on each side, in an order that alternates from round to round: the
working tree's bench with the working tree's jetspark, the ref's bench with the ref's jetspark
(each side's package is put first on PYTHONPATH, and each has a class archive directory of its
own). A row's figure is jetspark's own (the row's subject: seconds, events/s, ms, MB); its
ratio new / old is taken per round (paired) and reported as the median with its minimum and
maximum. A row more than `SLOWER_BY` worse on the median (for rates, lower) is flagged, and the
command then exits with status 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bench.timing import Samples

Result = TypeVar("Result")

IN_COMPARISON = "JETSPARK_BENCH_COMPARISON"
"""Set for each side's `python -m bench`: a run of every row then leaves the docs' tables alone."""
SLOWER_BY = 0.10
"""How much worse than the ref a row's median may be before it is flagged."""
GROUP_ROWS = {
    "wordcount": ("1a", "1b", "1c"),
    "files": ("1d", "1e"),
    "tfidf": ("2",),
    "process": ("2d", "2e", "2f"),
    "fixed": ("2b", "2c"),
    "local": ("3",),
    "partitioner": ("4a", "4b", "4c"),
    "shuffle": ("5a", "5b", "5c"),
    "scaling": ("6a",),
    "members": ("6b",),
    "memory": ("7a", "7b"),
    "streaming": ("13a", "13b", "13c", "13e"),
    "watermark": ("13d",),
    "inference": ("14a", "14b", "14c"),
    "pipeline": ("18a", "18b", "18c"),
    "recovery": ("19a", "19b", "19c"),
    "kafka": ("20a", "20b", "20c"),
    "service": ("21a",),
    "state": ("22a", "22b"),
}
"""The rows each group of `python -m bench --rows` produces (latency: every row 15*, 16*, 17*)."""
BATCH_GROUPS = tuple(
    group
    for group in GROUP_ROWS
    # 18c streams; kafka needs a broker; state runs a million keys, a minute a round
    if group
    not in ("streaming", "watermark", "inference", "pipeline", "recovery", "kafka", "state")
)
DEFAULT_ROWS = (*BATCH_GROUPS, "13a", "15e")
"""What `--compare` runs unless `--rows` says otherwise."""
_LATENCY_PREFIXES = ("15", "16", "17")
_PACKAGES = ("core", "edges", "partitioning", "processors")
"""The folders that make up the `jetspark` package (`pyproject.toml`'s package-dir)."""


def group_of(row: str) -> str:
    """The `--rows` group that produces `row` (a row number such as 2d, or a group's name)."""
    if row in GROUP_ROWS or row == "latency":
        return row
    for group, numbers in GROUP_ROWS.items():
        if row in numbers:
            return group
    if row.startswith(_LATENCY_PREFIXES):
        return "latency"
    raise ValueError(f"unknown row {row!r}: a row number (2d, 13a, 15e, ...) or a group name")


def wanted(selection: Sequence[str], number: str) -> bool:
    """Whether the row `number` is one `selection` (row numbers and group names) asks for."""
    return any(
        number == chosen
        or (chosen in GROUP_ROWS and number in GROUP_ROWS[chosen])
        or (chosen == "latency" and number.startswith(_LATENCY_PREFIXES))
        for chosen in selection
    )


@dataclass(frozen=True)
class Comparison:
    """One row: jetspark's figure per round on the working tree (new) and on the ref (old)."""

    number: str
    unit: str
    new: Samples
    old: Samples

    @property
    def ratio(self) -> Samples:
        """new / old, round by round."""
        return self.new.over(self.old)

    @property
    def higher_is_better(self) -> bool:
        """Rates (events/s, keys/s): more is better; times, latencies and sizes: less."""
        return self.unit.endswith("/s")

    @property
    def worse_by(self) -> float:
        """How much worse the median is than the ref's, as time taken (0.25: 25% slower; a rate
        20% lower is 25% slower), negative if better."""
        median = self.ratio.median
        return (1 / median if self.higher_is_better else median) - 1

    @property
    def verdict(self) -> str:
        """The change in words: '20% slower', '15% lower' (a rate), '5% faster'."""
        median = self.ratio.median
        if self.higher_is_better:
            return f"{abs(1 - median):.0%} {'lower' if median < 1 else 'higher'}"
        return f"{abs(median - 1):.0%} {'slower' if median > 1 else 'faster'}"

    @property
    def flagged(self) -> bool:
        """More than SLOWER_BY worse."""
        return self.worse_by > SLOWER_BY


def comparisons(
    new_runs: Sequence[Mapping[str, Any]],
    old_runs: Sequence[Mapping[str, Any]],
    selection: Sequence[str],
) -> tuple[list[Comparison], list[str]]:
    """The selected rows found in every round's JSON of both sides (`python -m bench --json`),
    paired round by round; and a line for each selected row missing from a side."""
    rounds = len(new_runs)
    if rounds != len(old_runs) or rounds == 0:
        raise ValueError("each side needs the same number of rounds, at least one")
    new, old = _figures(new_runs), _figures(old_runs)
    missing = []
    rows = []
    for number in dict.fromkeys([*new, *old]):
        if not wanted(selection, number):
            continue
        if len(new.get(number, ())) < rounds or len(old.get(number, ())) < rounds:
            side = "the working tree" if len(new.get(number, ())) < rounds else "the ref"
            missing.append(f"{number}: not measured in every round on {side}")
            continue
        unit = new[number][0][0]
        rows.append(
            Comparison(
                number,
                unit,
                Samples(tuple(value for _, value in new[number])),
                Samples(tuple(value for _, value in old[number])),
            )
        )
    return rows, missing


def _figures(runs: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[str, float]]]:
    """Per row number, (unit, jetspark's median) of each run that has it."""
    figures: dict[str, list[tuple[str, float]]] = {}
    for run in runs:
        for row in run["rows"]:
            figures.setdefault(row["number"], []).append((row["unit"], row["jetspark"]["median"]))
    return figures


def table(rows: Sequence[Comparison], missing: Sequence[str], ref: str, rounds: int) -> str:
    """The comparison as a markdown table, flagged rows marked, missing rows listed after it."""
    lines = [
        f"jetspark's figure per row, working tree (new) vs {ref} (old), {rounds} alternating "
        "round(s); new ÷ old is the median (min-max) of the per-round ratios.",
        "",
        "| # | new | old | new ÷ old | |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        verdict = f"✗ {row.verdict}" if row.flagged else ""
        spread = f"{row.ratio.median:.2f} ({row.ratio.low:.2f}-{row.ratio.high:.2f})"
        lines.append(
            f"| {row.number} | {_figure(row.new, row.unit)} | {_figure(row.old, row.unit)} | "
            f"{spread} | {verdict} |"
        )
    lines += [f"- {line}" for line in missing]
    return "\n".join(lines) + "\n"


def _figure(samples: Samples, unit: str) -> str:
    value = samples.median
    return f"{value:,.3g} {unit}" if value < 1000 else f"{value:,.0f} {unit}"


def alternate_sides(
    sides: Sequence[str], rounds: int, run: Callable[[str, int], Result]
) -> dict[str, list[Result]]:
    """`run(side, round)` once per side and round, the sides' order rotating every round;
    each side's results in round order."""
    results: dict[str, list[Result]] = {side: [] for side in sides}
    for round_index in range(rounds):
        shift = round_index % len(sides)
        for side in [*sides[shift:], *sides[:shift]]:
            results[side].append(run(side, round_index))
    return results


@contextlib.contextmanager
def checked_out(repository: Path, ref: str, directory: Path) -> Iterator[Path]:
    """`ref` of `repository` checked out (detached) into a new worktree under `directory`,
    removed again on the way out; a ValueError naming `ref` if git does not know it."""
    found = _git(repository, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if found.returncode != 0:
        raise ValueError(f"git does not know {ref!r} in {repository}")
    commit = found.stdout.strip()
    tree = directory / f"ref-{commit[:12]}"
    _git(repository, "worktree", "add", "--detach", str(tree), commit)
    try:
        yield tree
    finally:
        _git(repository, "worktree", "remove", "--force", str(tree), check=False)
        _git(repository, "worktree", "prune", check=False)


def _git(repository: Path, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", "-C", str(repository), *argv], capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(argv)} failed: {done.stderr.strip()}")
    return done


def package_path(tree: Path, directory: Path) -> Path:
    """A directory to put on PYTHONPATH so that `import jetspark` is `tree`'s sources: a
    `jetspark` folder of links to its package folders."""
    package = directory / "jetspark"
    package.mkdir(parents=True)
    for name in _PACKAGES:
        if (tree / name).is_dir():
            (package / name).symlink_to(tree / name, target_is_directory=True)
    return directory


def side_environment(python_path: Path, **settings: str) -> dict[str, str]:
    """This process's environment with `python_path` (a side's `package_path`) first on
    PYTHONPATH, and `settings` added."""
    inherited = os.environ.get("PYTHONPATH")
    path = os.pathsep.join(filter(None, [str(python_path), inherited]))
    return {**os.environ, "PYTHONPATH": path, **settings}


def run_bench(
    tree: Path, python_path: Path, archives: Path, arguments: Sequence[str], json_file: Path
) -> Mapping[str, Any]:
    """`python -m bench ARGUMENTS --json FILE` in `tree` with `python_path` first on PYTHONPATH
    and class archives in `archives`; the JSON it wrote."""
    environment = side_environment(
        python_path, JETSPARK_CLASS_ARCHIVE=str(archives), **{IN_COMPARISON: "1"}
    )
    done = subprocess.run(
        [sys.executable, "-m", "bench", *arguments, "--json", str(json_file)],
        cwd=tree,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -m bench in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(json_file.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def compare(
    ref: str,
    selection: Sequence[str],
    rounds: int,
    options: Sequence[str],
    log: Callable[[str], None],
) -> int:
    """Runs the comparison and prints its table; 1 if a row is flagged, else 0. `options`:
    further `python -m bench` options for both sides (--mb, --master, --smoke, --corpus)."""
    groups = sorted({group_of(row) for row in selection})
    working_tree = Path(__file__).resolve().parent.parent
    arguments = ["--rows", ",".join(groups), "--rounds", "1", *options]
    with tempfile.TemporaryDirectory(prefix="jetspark-compare-") as scratch:
        root = Path(scratch)
        with checked_out(working_tree, ref, root) as old_tree:
            trees = {"new": working_tree, "old": old_tree}
            paths = {
                side: package_path(tree, root / f"path-{side}") for side, tree in trees.items()
            }

            def run(side: str, round_index: int) -> Mapping[str, Any]:
                log(f"round {round_index + 1}/{rounds}: {side} ({trees[side]}) ...")
                json_file = root / f"{side}-{round_index}.json"
                archives = root / f"archives-{side}"
                return run_bench(trees[side], paths[side], archives, arguments, json_file)

            results = alternate_sides(("new", "old"), rounds, run)
    rows, missing = comparisons(results["new"], results["old"], selection)
    print(table(rows, missing, ref, rounds))
    return 1 if any(row.flagged for row in rows) else 0

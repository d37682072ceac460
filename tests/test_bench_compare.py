"""`python -m bench --compare REF`'s logic with made-up timings: which rows it compares, the
paired ratios and their spread, which rows it flags, the alternating rounds, and the ref's
temporary worktree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.compare import (
    GROUP_ROWS,
    alternate_sides,
    checked_out,
    comparisons,
    group_of,
    package_path,
    table,
)
from bench.run import ROWS, _parse


def run_of(**rows: tuple[str, float]) -> dict[str, Any]:
    """A `python -m bench --json` document: row number -> (unit, jetspark's median)."""
    return {
        "rows": [
            {"number": number, "unit": unit, "jetspark": {"median": value}}
            for number, (unit, value) in rows.items()
        ]
    }


def test_each_row_is_new_over_old_round_by_round_with_its_spread():
    new = [
        run_of(**{"2d": ("s", 9.0)}),
        run_of(**{"2d": ("s", 12.0)}),
        run_of(**{"2d": ("s", 10.0)}),
    ]
    old = [
        run_of(**{"2d": ("s", 10.0)}),
        run_of(**{"2d": ("s", 10.0)}),
        run_of(**{"2d": ("s", 8.0)}),
    ]

    (row,), missing = comparisons(new, old, ["2d"])

    assert missing == []
    assert row.ratio.values == (0.9, 1.2, 1.25)
    assert (row.ratio.median, row.ratio.low, row.ratio.high) == (1.2, 0.9, 1.25)
    assert row.flagged  # 20% slower on the median
    assert "| 2d | 10 s | 10 s | 1.20 (0.90-1.25) | ✗ 20% slower |" in table([row], [], "main", 3)


@pytest.mark.parametrize(
    ("unit", "new", "old", "flagged"),
    [
        ("s", 10.9, 10.0, False),  # 9% slower: within the margin
        ("s", 11.2, 10.0, True),
        ("s", 5.0, 10.0, False),  # faster
        ("ms", 3.5, 3.0, True),  # latency: more is worse
        ("MB", 600.0, 500.0, True),
        ("events/s", 0.85e6, 1.0e6, True),  # a rate: less is worse
        ("events/s", 0.95e6, 1.0e6, False),
        ("keys/s", 2.0e6, 1.0e6, False),
    ],
)
def test_a_row_more_than_ten_percent_worse_is_flagged(unit, new, old, flagged):
    (row,), _ = comparisons([run_of(x=(unit, new))], [run_of(x=(unit, old))], ["x"])
    assert row.flagged is flagged
    assert ("✗" in table([row], [], "main", 1)) is flagged


def test_the_verdict_says_slower_for_times_and_lower_for_rates():
    (time_row,), _ = comparisons([run_of(x=("s", 12.0))], [run_of(x=("s", 10.0))], ["x"])
    (rate_row,), _ = comparisons([run_of(x=("keys/s", 8.0))], [run_of(x=("keys/s", 10.0))], ["x"])
    assert (time_row.verdict, rate_row.verdict) == ("20% slower", "20% lower")
    assert "| x | 8 keys/s | 10 keys/s | 0.80 (0.80-0.80) | ✗ 20% lower |" in table(
        [rate_row], [], "main", 1
    )


def test_groups_and_row_numbers_select_rows_and_a_row_missing_on_a_side_is_reported():
    new = [run_of(**{"1a": ("s", 1.0), "1b": ("s", 1.0), "2d": ("s", 1.0), "15e": ("ms", 3.0)})]
    old = [run_of(**{"1a": ("s", 1.0), "1b": ("s", 1.0), "15e": ("ms", 3.0)})]

    rows, missing = comparisons(new, old, ["wordcount", "2d", "latency"])

    assert [row.number for row in rows] == ["1a", "1b", "15e"]
    assert missing == ["2d: not measured in every round on the ref"]
    assert [row.number for row in comparisons(new, old, ["1b"])[0]] == ["1b"]


def test_both_sides_need_the_same_rounds():
    with pytest.raises(ValueError, match="same number of rounds"):
        comparisons([run_of()], [], ["2d"])


def test_rows_map_to_the_bench_groups_that_produce_them():
    assert [group_of(row) for row in ("2d", "13a", "13d", "15e", "17", "memory")] == [
        "process",
        "streaming",
        "watermark",
        "latency",
        "latency",
        "memory",
    ]
    with pytest.raises(ValueError, match="unknown row '9z'"):
        group_of("9z")


def test_every_group_of_the_bench_is_known():
    assert [*GROUP_ROWS, "latency"] == sorted(ROWS, key=[*GROUP_ROWS, "latency"].index)


def test_the_command_line_defaults_to_the_batch_rows_and_13a_and_15e():
    args = _parse(["--compare", "main"])
    assert args.rows[:2] == ["wordcount", "files"] and args.rows[-2:] == ["13a", "15e"]
    assert _parse(["--compare", "main", "--rows", "2d,13a"]).rows == ["2d", "13a"]
    with pytest.raises(SystemExit):
        _parse(["--compare", "main", "--rows", "2d,9z"])
    with pytest.raises(SystemExit):
        _parse(["--rows", "2d"])  # row numbers only with --compare


def test_the_sides_alternate_from_round_to_round():
    calls: list[tuple[str, int]] = []

    def run(side: str, round_index: int) -> dict[str, Any]:
        calls.append((side, round_index))
        return {"side": side, "round": round_index}

    results = alternate_sides(("new", "old"), 3, run)

    assert calls == [("new", 0), ("old", 0), ("old", 1), ("new", 1), ("new", 2), ("old", 2)]
    assert [result["round"] for result in results["old"]] == [0, 1, 2]


def git(repository: Path, *argv: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repository), *argv], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A repository whose HEAD~1 has core/version.txt 'old' and HEAD has 'new'."""
    root = tmp_path / "repo"
    (root / "core").mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    for version in ("old", "new"):
        (root / "core" / "version.txt").write_text(version)
        git(root, "add", "core")
        git(root, "commit", "-q", "-m", version)
    return root


def test_the_ref_is_checked_out_into_a_worktree_removed_afterwards(repository, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (repository / "core" / "version.txt").write_text("uncommitted")

    with checked_out(repository, "HEAD~1", scratch) as tree:
        assert (tree / "core" / "version.txt").read_text() == "old"
        assert str(tree) in git(repository, "worktree", "list")

    assert not tree.exists()
    assert str(tree) not in git(repository, "worktree", "list")
    assert (repository / "core" / "version.txt").read_text() == "uncommitted"


def test_the_worktree_is_removed_when_the_run_fails(repository, tmp_path):
    with (
        pytest.raises(RuntimeError, match="bench failed"),
        checked_out(repository, "HEAD", tmp_path) as tree,
    ):
        raise RuntimeError("bench failed")
    assert not tree.exists()
    assert str(tree) not in git(repository, "worktree", "list")


def test_an_unknown_ref_is_an_error_naming_it(repository, tmp_path):
    unknown = checked_out(repository, "no-such-branch", tmp_path)
    with pytest.raises(ValueError, match="git does not know 'no-such-branch'"), unknown:
        pass


def test_the_package_path_makes_jetspark_the_trees_own(tmp_path):
    tree = tmp_path / "tree"
    (tree / "core").mkdir(parents=True)
    (tree / "core" / "__init__.py").write_text("")
    path = package_path(tree, tmp_path / "path")

    environment = {**os.environ, "PYTHONPATH": str(path)}
    printed = subprocess.run(
        [sys.executable, "-c", "import jetspark.core; print(jetspark.core.__file__)"],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert Path(printed.strip()).resolve() == (tree / "core" / "__init__.py").resolve()
    assert sorted(os.listdir(path / "jetspark")) == ["core"]  # only the folders the tree has

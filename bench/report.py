"""The results of a run: rows of ratios, the machine they ran on, the table and the JSON.

Every row compares jetspark (the subject) with a baseline measured in the same run: the ratio
is subject / baseline of the row's unit, per round, so for times lower is better and for rates
higher is better; the goal says which.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.timing import Samples


@dataclass(frozen=True)
class Goal:
    """What a row should reach: `ratio <= limit` or `>=`, or the same of jetspark's own median
    (`unit` given: an absolute goal, such as keys per second)."""

    op: str
    limit: float
    unit: str = ""

    def met(self, row: Row) -> bool:
        """Whether the row reaches the goal."""
        value = row.subject.median if self.unit else row.ratio.median
        return value <= self.limit if self.op == "<=" else value >= self.limit

    def __str__(self) -> str:
        limit = (
            f"{self.limit / 1e6:g} M {self.unit}"
            if self.limit >= 1e5
            else f"{self.limit:g} {self.unit}".rstrip()
        )
        return f"{'≤' if self.op == '<=' else '≥'} {limit}"


@dataclass(frozen=True)
class Row:
    """One line of the table: jetspark vs a baseline, in one unit, with the paired ratio."""

    number: str
    title: str
    unit: str
    """"s", "ms", "MB", "keys/s", "items/s"."""
    subject: Samples
    baseline: Samples
    ratio: Samples
    goal: Goal | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further numbers for the JSON (sizes, counts, per-size times)."""

    @staticmethod
    def compare(
        number: str, title: str, unit: str, subject: Samples, baseline: Samples, **more: Any
    ) -> Row:
        """A row whose ratio is `subject / baseline`, round by round."""
        return Row(number, title, unit, subject, baseline, subject.over(baseline), **more)

    def as_json(self) -> dict[str, Any]:
        """The row with every sample."""
        return {
            "number": self.number,
            "title": self.title,
            "unit": self.unit,
            "jetspark": self.subject.as_json(),
            "baseline": self.baseline.as_json(),
            "ratio": self.ratio.as_json(),
            "goal": str(self.goal) if self.goal else None,
            "goal_met": self.goal.met(self) if self.goal else None,
            "note": self.note,
            **self.extra,
        }


def _quantity(samples: Samples, unit: str) -> str:
    value = samples.median
    if math.isnan(value):
        return "—"
    if unit.endswith("/s"):
        return f"{value / 1e6:.2f} M {unit}" if value >= 1e5 else f"{value:,.0f} {unit}"
    return f"{value:.3g} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def _ratio(samples: Samples) -> str:
    if math.isnan(samples.median):
        return "—"
    if len(samples.values) == 1:
        return f"{samples.median:.2f}"
    return f"{samples.median:.2f} ({samples.low:.2f}-{samples.high:.2f})"


def markdown(rows: list[Row], machine: dict[str, Any], command: str, rounds: int) -> str:
    """The table, headed by the machine and the command that produced it."""
    lines = [
        f"Machine: {machine_line(machine)}.",
        f"Command: `{command}`; {rounds} round(s), medians, (min-max) of the per-round ratios; "
        f"{machine['date']}, commit {machine['commit']}.",
        "",
        "| # | benchmark | jetspark | baseline | ratio | goal |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        goal = ""
        if row.goal is not None:
            verdict = "" if math.isnan(row.ratio.median) else "✓" if row.goal.met(row) else "✗"
            goal = f"{row.goal} {verdict}".rstrip()
        title = f"{row.title} ({row.note})" if row.note else row.title
        lines.append(
            f"| {row.number} | {title} | {_quantity(row.subject, row.unit)} | "
            f"{_quantity(row.baseline, row.unit)} | {_ratio(row.ratio)} | {goal} |"
        )
    return "\n".join(lines) + "\n"


def machine_line(machine: dict[str, Any]) -> str:
    """The machine in one line."""
    return (
        f"{machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']:.1f} GiB, "
        f"{machine['os']}, Python {machine['python']}, pyspark {machine['pyspark']}, "
        f"Java {machine['java']}"
    )


def machine_facts(java_version: str | None = None) -> dict[str, Any]:
    """Cores, CPU, memory, OS and the versions that decide the numbers, read from the system."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "pyspark": metadata.version("pyspark"),
        "numpy": metadata.version("numpy"),
        "java": java_version or _java_version(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": measured_commit(),
    }


def measured_commit() -> str:
    """The commit of the code measured: HEAD's short hash, 'with changes' when the working tree
    differs from it (untracked files aside), or 'unknown' outside a git checkout."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} with changes" if changed else head


def _git(*argv: str) -> str:
    """What `git argv...` prints in this repository, stripped."""
    repository = Path(__file__).resolve().parent.parent
    return subprocess.run(
        ["git", "-C", str(repository), *argv],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _java_version() -> str:
    """`java -version`'s version string (it prints to stderr), or "unknown"."""
    try:
        printed = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    first = printed.splitlines()[0] if printed else ""
    return first.split('"')[1] if first.count('"') >= 2 else first or "unknown"


def write_json(
    path: Path, rows: list[Row], machine: dict[str, Any], command: str, options: dict[str, Any]
) -> None:
    """The whole run as JSON: machine, command, options, and every row with all its samples."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": machine,
        "command": command,
        "options": options,
        "rows": [row.as_json() for row in rows],
    }
    path.write_text(json.dumps(document, indent=2, allow_nan=True) + "\n", encoding="utf-8")

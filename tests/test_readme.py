"""The README is the front door: under 300 lines with a table of contents, and every Python
block in it runs and prints what the README says it prints (the `# [...]` or `# True` line
after its last print; a block without a print runs without raising)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def run(block: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
    return printed.getvalue().strip()


def expected_output(block: str) -> str:
    if "print(" not in block:
        return ""  # no print of its own (TestSupport narrates): it must run without raising
    said = re.findall(r"^# (.+)$", block, re.M)
    assert said, "a README block must say what it prints, as a comment after its print"
    return said[-1]


def test_the_readme_leads_in_under_300_lines_with_contents() -> None:
    lines = README.splitlines()
    assert len(lines) <= 300
    assert lines[0] == "# jetspark"
    assert "**Contents:**" in "\n".join(lines[:15])
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:3] == ["## Quickstart", "## A first pipeline", "## The Pipeline API"]


@pytest.mark.parametrize("index", [0, 1, 2, 3, 4])
def test_the_local_blocks_print_what_the_readme_says(index: int) -> None:
    block = BLOCKS[index]
    assert "SparkEngine()" not in block.split("#")[0]
    printed, expected = run(block), expected_output(block)
    assert printed == expected or not expected


@pytest.mark.spark
def test_the_streaming_recipe_continues_exactly_once_on_spark(spark_engine: Any) -> None:
    recipe = BLOCKS[5]
    assert "ExecutionMode.CONTINUOUS" in recipe
    assert run(recipe) == expected_output(recipe) == "True"


def test_every_python_block_is_tested() -> None:
    assert len(BLOCKS) == 6

"""The README's code runs and prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_the_dag_example_counts_words_and_draws_the_dot_shown():
    example = _blocks("python")[0]
    printed = io.StringIO()
    namespace: dict[str, object] = {"__name__": "readme_example"}
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "README.md", "exec"), namespace)
    expected_result = re.search(r"^# (\[.*\])$", example, re.M)
    assert expected_result is not None
    assert printed.getvalue().strip() == expected_result.group(1)
    assert namespace["dag"].to_dot().strip() == _blocks("dot")[0].strip()  # type: ignore[attr-defined]

"""Every `python examples/...` command an example's module docstring shows runs from the
repository root and exits 0, as a new user would type it: its optional `[...]` parts left out
(the defaults the docstring shows), `--engine local` where the example takes an engine, and for
a command that would run long (or for ever) the small size or bound its docstring offers."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EXAMPLES = sorted([*ROOT.glob("examples/*.py"), *ROOT.glob("examples/*/*.py")])

QUICKER: dict[str, tuple[str, ...]] = {
    "examples/live_view.py": ("--seconds", "1"),
    "examples/digits_inference.py": ("--rate", "2000"),
    "examples/pipeline/word_count.py": ("--glob", "a*.txt"),
    "examples/stock_exchange.py --duration SECONDS": ("--clock", "trading"),
}
"""Options from the docstring that bound a command which would otherwise run long or for ever
(the key: the command as the docstring gives it, optional parts left out)."""

PLACEHOLDERS = {"SECONDS": "1"}
"""Values for the required placeholders of a command."""

NEEDS = {"examples/kafka_stock_exchange.py": pytest.mark.kafka}
"""Commands that need more than Python (a Kafka broker: Java and its jars)."""


def commands_in(example: Path) -> list[str]:
    """The `python examples/...` commands of `example`'s docstring, each on one line, inline
    (between backticks) or in an indented block with its indented continuation lines."""
    docstring = ast.get_docstring(ast.parse(example.read_text(encoding="utf-8"))) or ""
    inline = re.findall(r"`(python examples/[^`]+)`", docstring)
    blocks = re.findall(r"^ {4}(python examples/.*(?:\n {8}.*)*)", docstring, re.M)
    return [" ".join(command.split()) for command in [*inline, *blocks]]


def required_part(command: str) -> str:
    """`command` without its optional parts (nested `[...]` included)."""
    while (shorter := re.sub(r"\s*\[[^\[\]]*\]", "", command)) != command:
        command = shorter
    return command


def runnable(command: str) -> list[str]:
    """The argument list to run `command`: its required part, its placeholders filled, on the
    local engine, bounded as QUICKER says."""
    required = required_part(command).removeprefix("python ")
    script = required.split()[0]
    words = [PLACEHOLDERS.get(word, word) for word in required.split()]
    if "--engine" in command:
        words += ["--engine", "local"]
    quicker = QUICKER.get(required) or QUICKER.get(script, ())
    for option in quicker[::2]:
        assert option in command, f"{option} is not an option the docstring of {script} shows"
    return [sys.executable, *words, *quicker]


COMMANDS = [
    pytest.param(command, id=command, marks=[NEEDS[str(e.relative_to(ROOT))]])
    if str(e.relative_to(ROOT)) in NEEDS
    else pytest.param(command, id=command)
    for e in EXAMPLES
    for command in commands_in(e)
]


def test_every_runnable_example_shows_its_command() -> None:
    shown = {command.split()[1] for command in (param.values[0] for param in COMMANDS)}
    without = [
        str(example.relative_to(ROOT))
        for example in EXAMPLES
        if str(example.relative_to(ROOT)) not in shown and "__main__" in example.read_text()
    ]
    assert without == []


@pytest.mark.parametrize("command", COMMANDS)
def test_the_command_runs_as_its_docstring_says(
    command: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    environment = {**os.environ, "TMPDIR": str(tmp_path)}
    environment.pop("PYTHONPATH", None)
    arguments = runnable(command)
    if "--bootstrap-servers" in command:  # the run's broker, as the docstring's option allows
        broker = request.getfixturevalue("kafka_broker")
        arguments += ["--bootstrap-servers", broker.bootstrap_servers]
    try:
        finished = subprocess.run(
            arguments, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=PATIENCE
        )
    except subprocess.TimeoutExpired as expired:  # what it printed says where it stopped
        pytest.fail(f"still running after {PATIENCE} s:\n{_tail(expired.stdout, expired.stderr)}")
    assert finished.returncode == 0, _tail(finished.stdout, finished.stderr)


PATIENCE = 100
"""Seconds a command may run before the test fails with its output so far: below pytest's
timeout, which would show only this process's stack (a bound on failures; commands take
seconds)."""


def _tail(stdout: str | bytes | None, stderr: str | bytes | None) -> str:
    def text(output: str | bytes | None) -> str:
        return output.decode(errors="replace") if isinstance(output, bytes) else output or ""

    return f"{text(stdout)[-2000:]}\n{text(stderr)[-4000:]}"


def test_a_missing_data_path_is_named_with_how_to_pass_another(tmp_path: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "examples/pipeline/word_count.py", str(tmp_path / "no-books")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert finished.returncode == 2
    assert str(tmp_path / "no-books") in finished.stderr
    assert "BOOKS_DIR" in finished.stderr
    assert "Traceback" not in finished.stderr

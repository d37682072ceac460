"""The user's documentation on deploying and starting out says what is so: the Quickstart is two
commands in a virtualenv of its own and leaves nothing git would track, the README links the
deployment guide and cites no document the repository does not have, and docs/tfidf.md shows as
many Spark stages finishing as the TF-IDF job has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from jetspark.core.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))


def _section(text: str, title: str) -> str:
    """The `## title` section of a markdown text, up to the next `## `."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.M | re.S)
    assert match is not None, f"no section {title!r}"
    return match.group(1)


def test_the_quickstart_is_two_commands_in_a_virtualenv_of_its_own() -> None:
    quickstart = _section(README, "Quickstart")
    commands = re.search(r"```console\n(.*?)```", quickstart, re.S)
    assert commands is not None
    assert commands.group(1).splitlines() == [
        "pip install -e '.[test]' && jetspark tfidf && jetspark search \"parse json\"",
        "python -m pytest",
    ]
    before = quickstart[: commands.start()]
    assert "`python3 -m venv .venv && . .venv/bin/activate`" in before


@pytest.mark.parametrize("path", [".venv/bin/python", "jetspark-index/part-00000"])
def test_what_the_quickstart_writes_into_the_clone_is_ignored_by_git(path: str) -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", path], cwd=ROOT, capture_output=True, text=True
    )
    assert ignored.returncode == 0, f"git would track {path}"


def test_the_readme_links_the_deployment_guide() -> None:
    documentation = _section(README, "Documentation")
    assert "[deploying](docs/deploy.md)" in documentation
    assert (ROOT / "docs" / "deploy.md").is_file()


@pytest.mark.parametrize("document", ["README.md", *(f"docs/{p.name}" for p in DOCS)])
def test_the_documentation_cites_only_documents_the_repository_has(document: str) -> None:
    assert "DESIGN.md" not in (ROOT / document).read_text(encoding="utf-8")


@pytest.mark.spark
def test_the_tfidf_run_shown_finishes_as_many_stages_as_the_job_has(
    capsys: pytest.CaptureFixture[str], spark_engine: object
) -> None:
    text = (ROOT / "docs" / "tfidf.md").read_text(encoding="utf-8")
    run = re.search(r"```console\n\$ jetspark tfidf.*?```", text, re.S)
    assert run is not None
    shown = re.findall(r"^  Spark stage (\d+) finished", run.group(0), re.M)
    context = spark_engine.context  # type: ignore[attr-defined]
    assert main(["explain", "tfidf", "--members", "2"], spark=context) == 0
    stages = re.search(r"on Spark: 2 members, (\d+) stages", capsys.readouterr().out)
    assert stages is not None
    assert shown == [str(n) for n in range(int(stages.group(1)))]

"""The benchmark table says which commit it measured."""

from __future__ import annotations

import re

from bench.report import machine_facts, markdown, measured_commit


def test_the_table_names_the_commit_measured():
    machine = {**machine_facts("17"), "commit": "1234abc with changes"}
    header = markdown([], machine, "python -m bench", 3).splitlines()[1]
    assert header.endswith(", commit 1234abc with changes.")


def test_the_commit_is_heads_short_hash_saying_whether_the_tree_differs():
    assert re.fullmatch(r"[0-9a-f]{7,40}( with changes)?|unknown", measured_commit())

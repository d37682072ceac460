"""A continuous job cancelled and continued at 2, then 3, then 1 members (issue #24's rescale):
in a driver process of its own on local[3], since every member needs a task slot at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from driver_scripts import run_driver_script

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

CHILD = Path(__file__).with_name("continuous_rescale_child.py")


def test_a_continuous_job_continues_at_three_members_then_at_one(tmp_path: Path) -> None:
    assert run_driver_script(CHILD, str(tmp_path / "snapshots")) == "exact"

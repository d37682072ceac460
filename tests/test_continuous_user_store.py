"""A snapshot store of the user's own class, defined in the driver's script, restored in
CONTINUOUS: what the driver tells a member travels by value, as the task's function does.
Before, each member failed to unpickle the run's welcome ("Can't get attribute 'UsersStore' on
<module 'pyspark.daemon'>"), which counted as a lost member until the restarts ran out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from driver_scripts import run_driver_script

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

CHILD = Path(__file__).with_name("continuous_user_store_child.py")


def test_a_restore_from_a_store_class_of_the_drivers_script_runs_exact(tmp_path: Path) -> None:
    output = json.loads(run_driver_script(CHILD, str(tmp_path / "snapshots")))
    assert output == {"restarts": [0, 0, 0]}

"""The suite's own rule for two workers (tests/conftest.py): a federation on Ray started by a test
outside the Ray group's files fails that test before Ray starts, so a new Flower test cannot run
beside another Ray on the second worker unnoticed."""

from __future__ import annotations

from pathlib import Path

import conftest
import pytest
from conftest import RAY_FILES, RAY_GROUP, RayOutsideItsGroup

import simulations.runner as runner


def test_a_flower_run_outside_the_ray_files_fails_before_ray_starts():
    assert __file__.rsplit("/", 1)[-1] not in RAY_FILES
    with pytest.raises(RayOutsideItsGroup, match="test_suite_groups.py"):
        runner.run_simulation()  # refused before its arguments are read


class Item:
    def __init__(self, name: str, slow: bool = False) -> None:
        self.path, self.marks = Path("tests") / name, [pytest.mark.slow.mark] if slow else []

    def get_closest_marker(self, name):
        return next((mark for mark in self.marks if mark.name == name), None)

    def add_marker(self, marker):
        self.marks.append(marker.mark)


def test_the_ray_files_form_one_group_and_the_slow_tests_come_last():
    ray_file = sorted(RAY_FILES)[0]
    items = [Item(ray_file, slow=True), Item("test_mechanisms.py"), Item(ray_file)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [(item.path.name, item.get_closest_marker("slow") is not None) for item in items] == [
        ("test_mechanisms.py", False),
        (ray_file, False),
        (ray_file, True),
    ]
    groups = [[mark.args[0] for mark in item.marks if mark.name == "xdist_group"] for item in items]
    assert groups == [[], [RAY_GROUP], [RAY_GROUP]]

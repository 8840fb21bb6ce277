"""The suite's own rule for two workers (tests/conftest.py): the tests that start Ray are one unit
of work, and a federation on Ray started by a test outside it fails that test before Ray starts,
so a new Flower test cannot run beside another Ray on the second worker unnoticed."""

from __future__ import annotations

from types import SimpleNamespace

import conftest
import pytest
from conftest import DEPLOYMENT_GROUP, RAY_FILES, RAY_GROUP, RayOutsideItsGroup

import simulations.runner as runner


def test_a_federation_outside_the_ray_unit_fails_before_ray_starts():
    assert conftest.work_unit(conftest._running[0].nodeid) is None
    with pytest.raises(RayOutsideItsGroup, match="test_suite_groups.py"):
        runner.run_simulation()  # refused before its arguments are read


def test_the_ray_files_are_one_work_unit_of_the_two_workers():
    """What xdist's scheduler gets from the conftest hook (`-n 2`, xdist's `load` distribution): every
    test of the Ray files in one unit, every other test a unit of its own."""
    options = {"dist": "load", "tx": ["popen", "popen"], "numprocesses": 2}
    config = SimpleNamespace(getvalue=options.get, option=SimpleNamespace(**options))
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    ray_tests = [f"tests/{name}::test_x[a-b]" for name in sorted(RAY_FILES)]
    ray_tests += ["tests/test_simulate.py::test_flwr_run_x", "tests/test_x.py::test_y_under_flower[Flower-z]"]
    assert {scheduler._split_scope(nodeid) for nodeid in ray_tests} == {RAY_GROUP}
    deployment = ("tests/test_deployment.py::test_tls", "tests/test_deployment.py::test_a_node_killed_x")
    assert {scheduler._split_scope(nodeid) for nodeid in deployment} == {DEPLOYMENT_GROUP}
    for other in ("tests/test_mechanisms.py::test_y[1]", "tests/test_simulate.py::test_local_engine"):
        assert scheduler._split_scope(other) == other
    assert conftest.pytest_xdist_make_scheduler(SimpleNamespace(getvalue={"dist": "loadfile"}.get), None) is None


def test_the_slow_tests_come_last():
    items = [
        SimpleNamespace(name="slow", get_closest_marker={"slow": True}.get),
        SimpleNamespace(name="quick", get_closest_marker={}.get),
    ]
    conftest.pytest_collection_modifyitems(None, items)
    assert [item.name for item in items] == ["quick", "slow"]

"""`simulate` begins a local Ray's start as soon as its last check has passed (`RayStart.ahead`),
and the run's own `RayStart.begin_for` takes that start over when it asks for the same backend; a
start for another backend, or one no run took over, is closed. No Ray is started here: `begin` and
`close` are recorded instead."""

from __future__ import annotations

import pytest

import simulations.runner as runner
from ldpfed.config import Config
from ldpfed.tasks import validated
from simulations.runner import RayStart


@pytest.fixture
def recorded(monkeypatch):
    """RayStart's begin and close recorded (no process started); Ray not running."""
    calls = []
    monkeypatch.setattr(RayStart, "begin", lambda self: calls.append(("begin", self)))
    monkeypatch.setattr(RayStart, "close", lambda self: calls.append(("close", self)))
    monkeypatch.setattr(runner, "ray_running", lambda: False)
    monkeypatch.setattr(runner, "_AHEAD", [])
    return calls


def config(**options) -> Config:
    return validated(Config().with_options({"cpus": 2, **options}))


def test_the_run_takes_over_the_start_begun_ahead_for_its_backend(recorded):
    with RayStart.ahead(config(), nodes=1):
        [(step, early)] = recorded
        assert step == "begin"
        assert RayStart.begin_for(config(), nodes=1) is early  # not begun twice
    assert recorded == [("begin", early)]  # the run closes what it took over, not the block


def test_a_start_for_another_backend_is_closed_before_the_run_begins_its_own(recorded):
    with RayStart.ahead(config(), nodes=1):
        own = RayStart.begin_for(config(), nodes=2)  # two nodes: two CPUs for Ray, another backend
    (_, early), *rest = recorded
    assert own is not early
    assert rest == [("close", early), ("begin", own)]


def test_a_start_no_run_took_over_is_closed_at_the_block_s_end(recorded):
    with pytest.raises(RuntimeError), RayStart.ahead(config(), nodes=1):
        raise RuntimeError("the run failed before it asked for Ray")
    (_, early), last = recorded
    assert last == ("close", early)
    assert runner._AHEAD == []


@pytest.mark.parametrize("options", [{"engine": "local"}, {"ray-address": "127.0.0.1:6379", "cpus": 0}])
def test_no_start_ahead_on_the_local_engine_nor_for_a_cluster(recorded, options):
    with RayStart.ahead(config(**options), nodes=1):
        pass
    assert recorded == []

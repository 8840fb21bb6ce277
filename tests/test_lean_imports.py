"""What a process imports, by what it does: a Flower node (clients.client_app, its tuple node half and
a round of it) loads none of the accountants, the planners, the audit, the train protocol or the
plotting and data-frame libraries, which only the server half and some commands need; `ldpfed
simulate`'s own modules leave the planners to a run with --budget. And the light name tables that
let the config check options without those modules (ldpfed.accounting.names) equal the registries.

Each import check runs a fresh interpreter and reads its `sys.modules` (what was imported, not how
long it took: timings live in benchmarks/bench_startup.py)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfed.accounting as accounting
from ldpfed.accounting import accountants, names
from ldpfed.config import Config

ROOT = Path(__file__).resolve().parents[1]

# A node as `ldpfed simulate` runs it: the ClientApp's module, a tuple node half built from the
# harness's config (made here without validating it: the harness validates, the node does not), and
# one round of it; then the modules that it loaded, of those given on the command line.
NODE_PROBE = """
import json, sys
import clients.client_app
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.node_halves import node_half

options, watched = json.loads(sys.argv[1]), json.loads(sys.argv[2])
config = Config().with_options(options)
pids = [0, 1, 2]
node = node_half(config, pids, seeds.data_seed(0), {pid: 11 + pid for pid in pids})
answer = node.reply(1, {}, pids)
assert not answer.failures, answer.failures
print(json.dumps([name for name in watched if name in sys.modules]))
"""
# What a node never needs. dp_accounting: the package (its `dp_event` module alone, which
# ldpfed.accounting.library loads without the package, is how a node builds events).
NODE_NEVER = ("dp_accounting", "pandas", "matplotlib", "ldpfed.planning", "ldpfed.audit", "ldpfed.protocols.train")
# Still loaded through modules that import them at their top: ldpfed.protocols.base
# (`from ldpfed.accounting import PrivacyLedger`, the server's ledger: the accountants and with them
# scipy.stats), ldpfed.samplers.discrete_gaussian and ldpfed.frequency.thresholding (scipy.optimize,
# used only where a calibration runs).
NODE_NEVER_ACCOUNTING = ("ldpfed.accounting.accountants", "scipy.stats", "scipy.optimize")
TUPLE_NODES = {
    "mean": {"task": "mean", "clients": 3, "users": 300, "dims": 4},
    "frequency": {"task": "frequency", "clients": 3, "users": 300, "dims": 2},
}


def loaded(probe: str, *args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@functools.cache
def loaded_by_a_node(task: str) -> frozenset[str]:
    watched = json.dumps([*NODE_NEVER, *NODE_NEVER_ACCOUNTING])
    return frozenset(loaded(NODE_PROBE, json.dumps(TUPLE_NODES[task]), watched))


@pytest.mark.parametrize("task", TUPLE_NODES)
def test_a_tuple_node_loads_no_planner_audit_train_protocol_or_plotting(task):
    assert not loaded_by_a_node(task) & set(NODE_NEVER)


@pytest.mark.parametrize("task", TUPLE_NODES)
def test_a_tuple_node_loads_no_accountant_nor_scipy_stats_and_optimize(task):
    assert not loaded_by_a_node(task) & set(NODE_NEVER_ACCOUNTING)


SIMULATE_PROBE = """
import json, sys
import simulations.cli
print(json.dumps([name for name in json.loads(sys.argv[1]) if name in sys.modules]))
"""


def test_the_simulate_command_s_module_leaves_the_planners_to_budget_runs():
    assert loaded(SIMULATE_PROBE, json.dumps(["ldpfed.planning", "ldpfed.planning.run", "pandas", "matplotlib"])) == []


def test_the_accountant_names_and_default_delta_are_the_registry_s():
    assert list(names.ACCOUNTANT_NAMES) == accountants.available()
    assert names.DEFAULT_DELTA_TARGET == accountants.DEFAULT_DELTA_TARGET == accounting.DEFAULT_DELTA_TARGET
    assert names.check_accountant(" RDP ") == accountants.create_accountant(" RDP ").name == "rdp"
    with pytest.raises(ValueError, match="unknown accountant 'moments'; available: basic, advanced, rdp, pld"):
        names.check_accountant("moments")
    with pytest.raises(ValueError, match="unknown accountant 'moments'"):
        Config().with_options({"accountant": "moments"}).validated()


def test_the_accounting_package_loads_each_name_from_its_module():
    for name in accounting.__all__:
        value = getattr(accounting, name)
        assert value is getattr(sys.modules[f"ldpfed.accounting.{accounting._HOMES[name]}"], name)
    assert set(accounting.__all__) <= set(dir(accounting))
    assert accounting.trust is sys.modules["ldpfed.accounting.trust"]  # a submodule, imported on first use
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        accounting.nothing  # noqa: B018


# A local run of the mean task with --out (privacy.csv after every round, at 10^5 clients after
# the first), then the dp-accounting modules it loaded.
LOCAL_RUN_PROBE = """
import json, sys
from ldpfed.cli.main import app
try:
    app(sys.argv[2:])
except SystemExit as stop:
    assert not stop.code, stop.code
print(json.dumps([name for name in json.loads(sys.argv[1]) if name in sys.modules]))
"""


def test_a_pure_epsilon_run_writes_its_privacy_files_without_the_dp_accounting_package(tmp_path):
    """Its rounds are generic eps-DP events: basic, advanced and pld (closed form) account them
    without dp-accounting, and rdp refuses them without asking the package (~0.2-1.6 s of CPU)."""
    run = ["simulate", "--engine", "local", "--task", "mean", "--clients", "20", "--users", "200", "--dims", "3"]
    run += ["--rounds", "2", "--no-plot", "--out", str(tmp_path / "run")]
    assert loaded(LOCAL_RUN_PROBE, json.dumps(["dp_accounting", "dp_accounting.rdp", "dp_accounting.pld"]), *run) == []
    header, first = (tmp_path / "run" / "privacy.csv").read_text().splitlines()[:2]
    totals = dict(zip(header.split(","), first.split(",")))
    assert (totals["basic_epsilon"], totals["rdp_epsilon"], totals["rdp_delta"]) == ("4.0", "", "")


def test_rdp_refuses_a_generic_round_as_dp_accounting_s_own_accountant_does():
    from dp_accounting.rdp import RdpAccountant as LibraryRdpAccountant

    from ldpfed.accounting.events import CalibratedDpEvent, EpsilonDeltaDpEvent

    for event in (EpsilonDeltaDpEvent(2.0), EpsilonDeltaDpEvent(1.0, 1e-6)):
        assert not LibraryRdpAccountant().supports(event)
        assert "has no RDP curve" in accountants.get("rdp").unsupported(event)
        calibrated = CalibratedDpEvent(event, *event.guarantee())
        assert "has no RDP curve" in accountants.get("rdp").unsupported(calibrated)


LEDGER_PROBE = """
import json, sys
from ldpfed.accounting import accountants, events
event = eval(sys.argv[1], vars(events))
ledger = __import__("ldpfed.accounting.ledger", fromlist=["PrivacyLedger"]).PrivacyLedger()
for round in (1, 2, 3):
    ledger.record_round([0, 1], round, event, "m")
ledger.totals_csv(1e-5)
print(json.dumps([accountants.accounted_without_library(event), "dp_accounting" in sys.modules]))
"""


@pytest.mark.parametrize(
    "event, without_library",
    [
        ("pure_round(1.0)", True),
        ("legacy_event(1.0, 1e-6, 'x')", True),
        ("not_private('clean values')", True),
        ("CalibratedDpEvent(pure_round(2.0), 2.0, 0.0)", False),
        ("gaussian_round(1.2)", False),
        ("gaussian_round(1.2, sample_rate=0.1)", False),
    ],
)
def test_the_driver_s_warm_up_skips_dp_accounting_only_where_the_accountants_never_load_it(event, without_library):
    """`accounted_without_library` (what the driver preloads while Ray starts) agrees with what
    accounting three rounds of the event under every accountant imports."""
    without, imported = json.loads(
        subprocess.run(
            [sys.executable, "-c", LEDGER_PROBE, event],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
            check=True,
        ).stdout.splitlines()[-1]
    )
    assert without is (not imported) is without_library


WARM_UP_PROBE = """
import json, sys
from ldpfed.config import Config
from ldpfed.protocols import nodes
from ldpfed.protocols.nodes import NodeSet, local_round
from ldpfed.protocols.session import World
from ldpfed.tasks.run import bind_data, layout, node_half, server_half

config = Config().with_options(json.loads(sys.argv[1])).validated()
world = World.from_config(config, noise_seed=1)
bound = bind_data(config, world.data)
server = server_half(bound, world.data, world.server)
server.ready_to_aggregate()
typed = len(nodes._add_rows.signatures)
nodes_ = NodeSet(layout(bound), lambda pids: node_half(bound, pids, world.data, world.secrets_of(pids)))
local_round(server, nodes_, 1)
print(json.dumps([typed, len(nodes._add_rows.signatures)]))
"""


@pytest.mark.parametrize("task", TUPLE_NODES)
def test_a_tuple_server_s_warm_up_types_the_addition_its_first_round_uses(task):
    """`ready_to_aggregate` (what the Flower driver runs while its Ray starts) types the kernel that
    adds the replies for the very arrays round 1 gives it: round 1 compiles nothing more."""
    options = {**TUPLE_NODES[task], "engine": "local", "rounds": 1}
    typed, after_round_1 = loaded(WARM_UP_PROBE, json.dumps(options))
    assert typed >= 1 and after_round_1 == typed


def test_a_prediction_loads_no_scipy_stats():
    """`ldpfed predict` (the mean task's CLT prediction, every dimension reported): scipy.stats is
    imported only by what computes with it (the binomial of m < d reports, the audits' laws, the
    closed-form pld composition), none of which a prediction runs (~0.6 s of CPU)."""
    assert (
        loaded(LOCAL_RUN_PROBE, json.dumps(["scipy.stats"]), "predict", "--mechanism", "laplace", "--epsilon", "1")
        == []
    )

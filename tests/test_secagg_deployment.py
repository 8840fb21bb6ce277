"""The deployed ServerApp (`flwr run`, server/server_app.py) never runs the local trust model in
place of the one its run config asks for, and never runs canaries: it fails with one line before
any message goes out. Called without a federation: a grid that fails the test if it is used."""

from __future__ import annotations

import pytest
from flwr.app import Context, RecordDict

from ldpfed.config import Config
from server import server_app
from server.server_app import RunFailed


class UnusedGrid:
    """Any use of the grid means the ServerApp started a run it should have refused."""

    def __getattr__(self, name):
        raise AssertionError(f"the ServerApp used the grid ({name}) instead of refusing the run config")


def _context(**values) -> Context:
    return Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={**Config().to_flat(), **values})


SECAGG = {"privacy.trust": "secagg", "privacy.max-epsilon": 4.0, "privacy.max-delta": 1e-5, "federation.clients": 4}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (SECAGG, r"^trust = 'secagg' is not available under flwr run: .*ldpfed simulate --trust secagg"),
        (
            {"run.task": "train", "data.name": "digits", "privacy.trust": "central", "privacy.max-epsilon": 4.0},
            r"^trust = 'central' is not available under flwr run",
        ),
        (
            {"run.task": "train", "data.name": "digits", "training.canaries": 2},
            r"^canaries = 2 is not available under flwr run: the canaries' inclusion coins live with the simulation",
        ),
    ],
    ids=["secagg", "central", "canaries"],
)
def test_the_deployed_server_app_refuses_what_it_cannot_host(values, expected):
    context = _context(**values)
    server_app.run_config(context)  # a valid run config: the refusal is the deployment's, not validation's
    with pytest.raises(RunFailed, match=expected):
        server_app.main(UnusedGrid(), context)


def test_the_deployed_server_app_refusal_is_one_line_in_the_run_log(caplog):
    with caplog.at_level("ERROR", logger="flwr"), pytest.raises(RunFailed):
        server_app.main(UnusedGrid(), _context(**SECAGG))
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith("ldpfed: error: trust = 'secagg'") and "\n" not in errors[0]


def test_the_deployed_server_app_accepts_local_trust_without_canaries():
    config = server_app.run_config(_context())
    server_app.check_deployable(config)  # no exception: the local model is what it runs
    assert config.privacy.trust == "local" and config.training.canaries == 0

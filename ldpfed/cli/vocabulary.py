"""One meaning per option name across ldpfed's commands.

An option that several commands take means the same thing in each: its `--help` there contains the
meaning below (tests/test_cli_bad_input.py reads every registered command against this table).
Where the meaning is the same but the unit differs (a budget per user, per value, of one round...),
the name stays and the help names its unit, one of UNITS. Where meanings differ, the names differ:
`--clip` is an L2 norm bound everywhere, `--coordinate-clip` a per-coordinate one; `--delta` pairs
with `--epsilon`, `--target-delta` is where a composed total is read off.
"""

from __future__ import annotations

MEANINGS = {
    "--epsilon": "budget eps",
    "--epsilons": "budgets eps",
    "--delta": "the delta of the (eps, delta) guarantee",
    "--target-delta": "the delta at which the composed total eps is reported",
    "--clip": "L2 clipping norm C",
    "--coordinate-clip": "per-coordinate clipping bound C",
    "--dims": "dimensions d",
    "--users": "users n",
    "--report-dims": "dimensions each user reports, m",
    "--rounds": "rounds",
    "--budget": "a client's total",
    "--sample-rate": "Poisson sampling rate",
    "--noise-multiplier": "noise sd / sensitivity",
    "--k": "the noise's parameter k",
    "--out": "directory for",
}
# The units of a budget: the options whose help must name one.
UNITS = ("per user", "per client and round", "of one round of one client", "per value", "of one release")
UNIT_OPTIONS = ("--epsilon", "--epsilons", "--delta")

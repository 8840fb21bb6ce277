"""The command line of the project's scripts (scripts/ that write docs/results, benchmarks/):
their plain flags from keyword defaults, so that each script states only its flags and defaults."""

from __future__ import annotations

import argparse


def script_parser(doc: str, /, **defaults) -> argparse.ArgumentParser:
    """A parser described by the first line of the script's `doc`, with one flag per keyword, in
    order: `report_dims=100` is --report-dims, an int defaulting to 100 (the default's type is the
    flag's); `json=False` is a switch, off unless given. A flag that needs more (a help text, choices,
    no default) is added to the parser returned."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return parser

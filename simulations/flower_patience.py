"""Flower's SuperLink or SuperNode with a longer start deadline for the processes it runs tasks in.

What a deployment on a loaded machine needs (docs/deployment.md, "A loaded machine"):

    python -m simulations.flower_patience flower-superlink ARGS...
    python -m simulations.flower_patience --task-start-seconds 600 flower-supernode ARGS...

A SuperNode (Flower 1.42) runs each ClientApp message in a process of its own, `flwr-clientapp`,
and a SuperLink each ServerApp in one, `flwr-serverapp`. Their SuperExec claims the task, which
hands it a token valid for HEARTBEAT_DEFAULT_INTERVAL (30 s), and starts the process with it; the
process must call back (its first heartbeat, or the pull of its task's input) before the token
expires. Past that, the SuperLink's or SuperNode's state drops the token and puts the task back to
pending: the late call is refused ("Runtime task-token authentication failed", HTTP 401), the
process exits, and a new process claims the task, to fail the same way. Before its first call a
process imports Flower, about 2 s of CPU: where other work leaves it a tenth of a core (load 18 on
2 cores) that takes longer than 30 s, and every ClientApp fails for ever while `flwr run` shows
nothing and `flwr ls` says the run is running.

Flower has no option for that deadline: the state modules read it by name (`claim_task`). This
entry point sets it in the state modules, then runs the named Flower command in this process, with
the arguments that follow: a claimed task waits `--task-start-seconds` (default 300) for its process
to call back, and a running one is still given Flower's own 60 s between heartbeats
(HEARTBEAT_PATIENCE x HEARTBEAT_DEFAULT_INTERVAL, which the module's patience is scaled to keep).
The cost: a task process that dies before its first call is replaced after that many seconds,
not 30.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

import flwr.common.constant as constant
import flwr.supercore.corestate.in_memory_corestate as in_memory_state
import flwr.supercore.corestate.sql_corestate as sql_state

COMMANDS = ("flower-superlink", "flower-supernode")
TASK_START_SECONDS = 300.0


def allow_task_start(seconds: float) -> None:
    """A claimed task's token lives `seconds` until its process calls back; once the task runs,
    Flower's own interval between heartbeats is kept (in this process' state modules)."""
    running = constant.HEARTBEAT_PATIENCE * constant.HEARTBEAT_DEFAULT_INTERVAL
    for state in (in_memory_state, sql_state):
        state.HEARTBEAT_DEFAULT_INTERVAL = seconds
        state.HEARTBEAT_PATIENCE = running / seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m simulations.flower_patience", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task-start-seconds",
        type=float,
        default=TASK_START_SECONDS,
        help=f"how long a task's process may take to start (Flower: {constant.HEARTBEAT_DEFAULT_INTERVAL} s)",
    )
    parser.add_argument("command", choices=COMMANDS, help="the Flower command to run")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    if not args.task_start_seconds > 0:
        parser.error(f"--task-start-seconds must be > 0, got {args.task_start_seconds:g}")
    allow_task_start(args.task_start_seconds)
    (command,) = entry_points(group="console_scripts", name=args.command)
    sys.argv = [args.command, *args.arguments]
    sys.exit(command.load()())


if __name__ == "__main__":
    main()

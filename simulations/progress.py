"""A per-round progress display on stderr (rich), with the start-up's steps before the first round
(Ray up, the nodes up, round 1's nodes replied), and the closing summary for humans."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import ldpfed.tasks as tasks
from ldpfed.cli.common import log_console
from ldpfed.config import Config
from ldpfed.protocols import seeds

if TYPE_CHECKING:
    from server.strategy import Replies

SPENT = "every client's budget is spent"
STEP_SECONDS = 1.0  # off a terminal, a start-up step's line at most this often (the last one always)


# the summary's figures the console shows, in this order (those a run has)
SUMMARY_KEYS = [
    "task",
    "trust",
    "clients",
    "rounds",
    "mechanism",
    "flower_strategy",
    "noise_multiplier",
    "clipping",
    "sample_rate",
    "final_clip",
    "local_epsilon_per_round",
    "shuffled_epsilon_per_round",
    "noise_sampler",
    "private",
    "privacy_reasons",
    "noise_seed",
    "epsilon",
    "aggregator",
    "deviation",
    "final_accuracy",
    "best_accuracy",
    "final_loss",
    "users",
    "dims",
    "final_mse",
    "mean_mse",
    "final_mse_plain_mean",
    "predicted_mse_plain_mean",
    "mean_mse_over_rounds",
    "noise_measured_over_predicted",
    "diagnostics",
    "clients_failed_total",
    "last_round_with_reports",
    "budget_exhausted_after_round",
    "epsilon_spent_max_per_client",
    "delta_spent_max_per_client",
    "seconds",
    "seconds_per_round",
]


class QuietProgress:
    """A progress sink that shows nothing: `simulations.federation.run` calls `start(stream)`, then
    under Flower `ray_up(nodes)` once Ray is up and `replies(replies)` as the nodes' replies come
    in (`server.strategy.Replies`), then `update(row)` with each round's metrics row, then `stop()`.
    Subclasses override the step they use (keep the rows, time the rounds, stop the run after a
    round)."""

    def start(self, stream) -> None:
        pass

    def ray_up(self, nodes: int) -> None:
        pass

    def replies(self, replies: Replies) -> None:
        pass

    def update(self, row: dict) -> None:
        pass

    def stop(self) -> None:
        pass


class RowCollector(QuietProgress):
    """Keeps each round's metrics row in `rows` (a list of its own unless one is given)."""

    def __init__(self, rows: list | None = None) -> None:
        self.rows = [] if rows is None else rows

    def update(self, row: dict) -> None:
        self.rows.append(row)


class RoundProgress(QuietProgress):
    """Each round's line; before the first, the start-up's steps with the seconds since `start`:
    on a terminal in the live bar, elsewhere (a log, a pipe) as lines of their own."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.progress: Progress | None = None
        self.console: Console | None = None
        self.started = time.monotonic()
        self.step_shown: tuple[float, float, int] = (0.0, 0.0, 0)  # (batch pushed_at, shown at, replies)

    def start(self, stream) -> None:
        self.console = log_console(stream)  # a log gets each round's line whole, not wrapped at 80 columns
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[last]}"),
            console=self.console,
        )
        self.description = f"{self.config.run.engine} {self.config.run.task}: {self.config.federation.clients} clients"
        self.started = time.monotonic()
        starting = "starting Ray..." if self.config.run.engine == "flower" else ""
        if self.console.is_terminal:  # a live bar on a terminal; a log gets the round lines alone
            self.progress.start()
        elif starting:  # Ray's start takes 15-30 s: say so before the first round's line
            self.console.print(f"{self.description}: {starting}", highlight=False)
        self.task_id = self.progress.add_task(self.description, total=self.config.run.rounds, last=starting)

    def ray_up(self, nodes: int) -> None:
        self.step(f"Ray up; starting {plural(nodes, 'node')}...")

    def replies(self, replies: Replies) -> None:
        """The nodes up (their answer to the partition query: each one's Ray actor has started and
        loaded the ClientApp), then round 1 sent and its nodes that replied (each built its clients
        and ran them), until the round's own line. A line per change, at most one per STEP_SECONDS off a
        terminal but for the last node up."""
        nodes = plural(replies.sent, "node")
        if replies.kind == "query" and replies.arrived:
            text = f"{replies.arrived} of {nodes} up"
        elif replies.server_round == 1 and replies.waiting:
            done = f": {replies.arrived} of {nodes} replied" if replies.arrived else f" started on {nodes}"
            text = f"round 1{done}"
        else:
            return
        batch, shown_at, shown = self.step_shown
        if replies.pushed_at == batch and replies.arrived == shown:
            return
        now, last = time.monotonic(), replies.kind == "query" and not replies.waiting
        if replies.pushed_at == batch and now - shown_at < STEP_SECONDS and not last and not self.console.is_terminal:
            return
        self.step_shown = (replies.pushed_at, now, replies.arrived)
        self.step(text)

    def step(self, text: str) -> None:
        """A start-up step: the live bar's last column on a terminal (beside its clock), else a line
        of its own with the seconds since `start`."""
        if self.progress is None:
            return
        if self.console.is_terminal:
            self.progress.update(self.task_id, last=text)
        else:
            seconds = time.monotonic() - self.started
            self.console.print(f"{self.description}: {text} ({seconds:.1f} s)", highlight=False)

    def update(self, row: dict) -> None:
        if self.progress is None:
            return
        idle = row["clients_sampled"] == 0 and row.get("clients_stopped_by_budget")  # nothing estimated (NaN)
        if idle:
            result = (
                f"no reports: {SPENT if row.get('budget_exhausted') else 'the budget stopped every sampled client'}"
            )
        elif "accuracy" in row:  # a training round
            result = f"acc {row['accuracy']:.3f} loss {row['loss']:.3f}"
            ratio = row.get("noise_ratio")
            if ratio is not None and not math.isnan(ratio):  # measured this round
                measured, predicted = row["measured_squared_distance"], row["predicted_squared_distance"]
                result += f"; noise |agg - clean|^2 {measured:.3g} (predicted {predicted:.3g})"
        elif self.config.aggregation.aggregator == "mean":
            result = f"mse {row['mse']:.3g} (predicted {row['predicted_mse']:.3g})"
        else:  # the prediction is the plain mean's (analysis.md): never beside another aggregator's MSE alone
            result = (
                f"mse {self.config.aggregation.aggregator} {row['mse']:.3g}, plain mean "
                f"{row['mse_plain_mean']:.3g} (predicted {row['predicted_mse']:.3g})"
            )
        failed = f", {row['clients_failed']} failed ({row['failure_reasons']})" if row["clients_failed"] else ""
        spent = "not private" if row["epsilon_spent"] is None else f"eps spent {row['epsilon_spent']:.3g}"
        line = f"round {row['round']}: {result}; {row['clients_replied']} replied{failed}; {spent}"
        if row.get("budget_exhausted") and not idle:
            line += f"; {SPENT}: later rounds have no reports"
        self.progress.console.print(line, highlight=False)
        self.progress.update(self.task_id, advance=1, last="")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def print_summary(self, summary: dict) -> None:
        engine = "Flower, Ray backend" if summary.get("engine") == "flower" else "local engine, no Flower"
        table = Table(title=f"ldpfed simulate ({engine})", show_header=False)
        units = {  # every epsilon says what it is a budget of
            "epsilon": f"epsilon ({tasks.get(summary['task']).epsilon_label(summary)})",
            "epsilon_spent_max_per_client": (
                f"epsilon_spent_max_per_client (total, {summary.get('accountant', self.config.privacy.accountant)})"
            ),
        }
        if summary.get("private") is False:  # one spelling with the JSON: no finite epsilon
            table.add_row(units["epsilon"], "none (not private)")
        for key in SUMMARY_KEYS:
            if key in summary and summary[key] is not None:
                value = summary[key]
                table.add_row(units.get(key, key), f"{value:.4g}" if isinstance(value, float) else str(value))
        Console().print(table)
        for guarantee in summary.get("guarantees", []):  # which party gets which figure
            Console().print(guarantee_line(guarantee), highlight=False, soft_wrap=True, markup=False)
        exhausted = summary.get("budget_exhausted_after_round")
        if exhausted is not None and exhausted < summary["rounds_finished"]:
            Console().print(
                f"every client's budget was spent after round {exhausted}: rounds {exhausted + 1}-"
                f"{summary['rounds_finished']} had no reports; the final figures are round "
                f"{summary['last_round_with_reports']}'s.",
                highlight=False,
            )
        if summary.get("privacy_qualification"):  # a user-chosen noise seed: it may be guessed
            Console().print(
                f"private: {summary['privacy_qualification']} (it was given with --noise-seed)",
                highlight=False,
                soft_wrap=True,
            )
        if summary.get("scale"):  # a data file with --domain: MSE on the normalised scale
            Console().print(summary["scale"]["note"] + ".", highlight=False)
        if self.config.output.out:
            Console().print(f"results written to {self.config.output.out}/", highlight=False)
            if summary.get("noise_seed") in (seeds.OS_ENTROPY, seeds.USER_CHOSEN):
                secret = f"{self.config.output.out}/noise_secret"
                Console().print(
                    f'replay the run\'s noise with --noise-seed "$(cat {secret})"; keep {secret} from '
                    + ("whoever sees the released models" if summary.get("trust") == "central" else "the server"),
                    highlight=False,
                    soft_wrap=True,
                    markup=False,
                )


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def guarantee_line(guarantee: dict) -> str:
    """One party's guarantee in words: its (eps, delta), or that it has none."""
    if guarantee["epsilon"] is None:
        return f"against {guarantee['party']}: no guarantee"
    delta = f", delta {guarantee['delta']:.3g}" if guarantee.get("delta") else ""
    return f"against {guarantee['party']}: eps {guarantee['epsilon']:.4g}{delta} in total, {guarantee['unit']}"


class TrustProgress(RoundProgress):
    """The per-round lines of a `--trust shuffle|central` run: its figure (MSE or accuracy), who took
    part, and the privacy spent against the server so far."""

    def start(self, stream) -> None:
        super().start(stream)
        self.progress.update(self.task_id, description=f"{self.config.run.engine} {self.config.privacy.trust}")

    def update(self, row: dict) -> None:
        if self.progress is None:
            return
        if "accuracy" in row:
            result = f"acc {row['accuracy']:.3f} loss {row['loss']:.3f}"
        elif row.get("mse") is None:
            result = "no reports"
        else:
            result = f"mse {row['mse']:.3g} from {row['reports']} shuffled reports"
        parts = [f"round {row['round']}: {result}"]
        if row.get("clients_replied") is not None:
            parts.append(f"{row['clients_replied']} replied")
        if row.get("clients_stopped_by_budget"):
            parts.append(f"{row['clients_stopped_by_budget']} stopped by the budget")
        if row.get("epsilon_spent") is not None:
            against = "the analyst" if self.config.privacy.trust == "shuffle" else "the released models"
            parts.append(f"eps spent against {against} {row['epsilon_spent']:.3g}")
        self.progress.console.print("; ".join(parts), highlight=False)
        self.progress.update(self.task_id, advance=1, last="")

"""The files a federation leaves under `--out DIR` (spec: federated.md, Outputs).

- config.toml: the resolved options (written first; `--config` reads it back);
- metrics.csv: one row per finished round, rewritten after every round, and privacy.csv: each
  client's privacy totals so far (ldpfed.accounting: `private`, reasons, every accountant's
  epsilon, null when not private), rewritten with it after every round up to 10^4 clients; above,
  after a round that ends at least ten seconds after the run's start and the last rewrite, and at
  least 19x what that rewrite took (at 10^5 clients a rewrite costs tens of ms against a round of
  about a hundred, so rewriting it every round would double the round; this way the rewrites
  between rounds cost at most 5% of the run, and none in a run of ten seconds), and always at the
  end, an interrupted end (Ctrl-C, SIGTERM) included: its `rounds` column says which rounds each
  total covers;
- summary.json, privacy.json (the accountants, `private` and its reasons, where the clients' noise
  came from, and the totals of each distinct client history with its number of clients: no
  record per client), privacy_entries.csv (the ledger's inputs: each round's clients as runs of
  consecutive ids, with the mechanism and event; `ldpfed.accounting.read_entries` gives one row per
  client and round) and plot.png at the end (with the Recorder's `plot` off, `plot_run` draws it later from
  metrics.csv and config.toml). The per-client files are columns rendered
  once per distinct history (ldpfed.accounting.ledger), so writing them is O(clients) string work;
- noise_secret (written by the harness of `ldpfed simulate`, owner-only): the noise root the
  clients' secrets derive from, to replay the run with `--noise-seed`.
Every write goes through `ldpfed.outputs.OutputDir`: the directory was checked
before any work (writable; no other run's results unless `overwrite`), and each write replaces
its files atomically, all of them or none, so an interrupted run leaves complete files.
Without `--out` nothing is written. A non-private run has no finite epsilon in any of them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldpfed.config import Config, load_file, to_toml
from ldpfed.outputs import FIXED_LAYOUT, OutputDir, add_to_manifest, csv_records, records_csv, save_figure
from ldpfed.validation import LDPValueError

if TYPE_CHECKING:
    import pandas as pd

COMMAND = "simulate"
PRIVACY_SHARE = 0.05  # at most this share of a run's time goes to rewriting privacy.csv between rounds
PRIVACY_EVERY_ROUND = 10_000  # up to this many clients privacy.csv is rewritten after every round
PRIVACY_INTERVAL_S = 10.0  # above, at least this long between the run's start and rewrites of it


def output_dir(config: Config) -> OutputDir:
    """The run's checked results directory (`output.out`, `output.overwrite`); call before any work."""
    return OutputDir.prepare(config.output.out or None, overwrite=config.output.overwrite, command=COMMAND)


class Recorder:
    """Writes a run's files as it goes (module docstring). `plot`: draw plot.png at the end (None:
    the config's `output.plot`, `--no-plot` leaving it out); without it `plot_run`
    draws the same figure later from the run's files, and a run's output work is then no more than
    rendering and writing its tables (matplotlib's import alone is ~0.5 s of CPU)."""

    def __init__(self, config: Config, output: OutputDir | None = None, plot: bool | None = None) -> None:
        self.config = config
        self.plot = config.output.plot if plot is None else bool(plot)
        self.rows: list[dict] = []
        self.output = output_dir(config) if output is None else output
        self.output.write({"config.toml": to_toml(config)})
        self._privacy_written, self._privacy_cost = time.perf_counter(), 0.0  # when (the start), and its cost

    def add_round(self, row: dict, ledger) -> None:
        self.rows.append(row)
        if not self.output.enabled:
            return
        files = {"metrics.csv": metrics_table(self.rows)}
        started = time.perf_counter()
        wait = max(PRIVACY_INTERVAL_S, self._privacy_cost / PRIVACY_SHARE - self._privacy_cost)  # >= 19x its cost
        if self.config.federation.clients > PRIVACY_EVERY_ROUND and started - self._privacy_written < wait:
            self.output.write(files)  # privacy.csv was rewritten recently (module docstring)
            return
        self.output.write({**files, "privacy.csv": privacy_table(ledger, self.config)})
        self._privacy_written = time.perf_counter()
        self._privacy_cost = self._privacy_written - started

    def finish(self, summary: dict, ledger, data_files: dict | None = None) -> None:
        """The end-of-run files; `data_files`: the task's files about its data (e.g. label counts;
        their figures left out when `plot` is off)."""
        if not self.output.enabled:
            return
        data_files = {name: data for name, data in (data_files or {}).items() if self.plot or not _figure(data)}
        if not self.rows:  # stopped before its first round ended: a finished (interrupted) run, nothing to plot
            self.output.write({"summary.json": summary})
            return
        self.output.write(
            {
                "summary.json": summary,
                "privacy.csv": privacy_table(ledger, self.config),
                "privacy.json": qualified(ledger.state_dict(self.config.delta_target, per_client=False), summary),
                ENTRIES: ledger.entries_csv(),
                **({PLOT: plot_rounds(number_columns(self.rows), self.config)} if self.plot else {}),
                **data_files,
            }
        )


ENTRIES = "privacy_entries.csv"  # the ledger's inputs: a row per round and run of consecutive client ids
PLOT, METRICS, CONFIG = "plot.png", "metrics.csv", "config.toml"


def plot_run(run_dir: str | Path) -> Path:
    """Draw a run's plot.png from its files, the figure the run draws at its end (`Recorder`'s
    `plot`): the rounds from metrics.csv (read back to the rows' values, `csv_records`), the title's
    settings from config.toml; the file is added to the directory's manifest. Returns its path."""
    directory = Path(run_dir)
    for name in (METRICS, CONFIG):
        if not (directory / name).is_file():
            raise LDPValueError(f"{directory} has no {name}: not the output directory of a `simulate` run")
    rows = csv_records((directory / METRICS).read_text())
    if not rows:
        raise LDPValueError(f"{directory / METRICS} has no finished round to plot")
    path = save_figure(directory / PLOT, plot_rounds(number_columns(rows), load_file(directory / CONFIG)))
    add_to_manifest(directory, [PLOT])
    return path


def _figure(content) -> bool:
    return hasattr(content, "savefig")  # as `ldpfed.outputs.write_content` tells a figure


def metrics_table(rows: list[dict]):
    """metrics.csv: the rows rendered as pandas would render them (`records_csv`, no pandas import:
    ~0.3 s of CPU in a run that writes nothing else with it), or pandas' frame for other values."""
    text = records_csv(rows)
    if text is not None:
        return text
    import pandas as pd  # lazily, with pyarrow: a Flower node imports this module, never the Recorder

    return pd.DataFrame(rows)


def number_columns(rows: list[dict]) -> dict[str, np.ndarray]:
    """The rows' numeric columns as float arrays (NaN where a row has no value), what plot_rounds
    reads (as it reads a DataFrame's columns); columns of text are left out."""
    columns = {}
    for key in dict.fromkeys(key for row in rows for key in row):
        try:
            columns[key] = np.array([np.nan if row.get(key) is None else row[key] for row in rows], dtype=float)
        except (TypeError, ValueError):
            continue
    return columns


def privacy_table(ledger, config: Config):
    """Each client's privacy totals (privacy.csv): rendered once per distinct client history
    (`PrivacyLedger.totals_csv`), or the ledger's frame for a ledger without it."""
    if hasattr(ledger, "totals_csv"):
        return ledger.totals_csv(config.delta_target)
    return ledger.to_frame(config.delta_target)


def qualified(state: dict, summary: dict) -> dict:
    """The ledger's record with the summary's qualification of `private` and the noise's source next
    to `private` (a user-chosen noise seed: private only against a server that cannot guess it),
    and, in a run with canaries, the in-run audit's verdict beside the accounted eps (`canary_audit`:
    the verdict the summary holds, so privacy.json says what summary.json says)."""
    keys = ("privacy_qualification", "noise_seed")
    record = {}
    for key, value in state.items():
        record[key] = value
        if key == "private":
            record.update({name: summary.get(name) for name in keys})
    if "canary_audit" in summary:
        record["canary_audit"] = summary["canary_audit"]
    return record


def plot_rounds(frame: pd.DataFrame | dict, config: Config):
    """Accuracy and loss per round (train), or measured vs predicted MSE per round (mean); beside it
    the aggregate noise measured vs predicted (train), the clip and the noise on the sum (central)
    or the clients that replied and failed. A series the run does not have is left out. `frame`:
    the rounds as a DataFrame or as {column: values} (`number_columns`).

    Drawn once, at the end of a run, so it is built for speed (at 10^5 clients a run takes a few
    seconds): a bare Figure (no pyplot, nothing registered globally), fixed margins instead of
    tight_layout and a tight bounding box (each a full extra draw);
    `FIXED_LAYOUT` tells `ldpfed.outputs` to save it as laid out."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(10, 3.6))
    figure.subplots_adjust(**_MARGINS)
    setattr(figure, FIXED_LAYOUT, True)
    axes = figure.subplots(1, 2)
    title = f"{config.run.task}: {config.federation.clients} clients, "
    if config.privacy.trust == "central":
        title += "central trust"
    else:
        title += config.privacy.mechanism + (f" eps={config.privacy.epsilon:g}" if config.noisy else "")
        title += ", shuffle trust" if config.privacy.trust == "shuffle" else ""
    if "accuracy" in frame:  # a training run
        panels = (
            ("test accuracy", (("accuracy", "o", "-", None),)),
            (
                "||noisy mean - clean mean||^2",
                (
                    ("measured_squared_distance", "o", "-", "measured"),
                    ("predicted_squared_distance", "", "--", "predicted (CLT)"),
                ),
            )
            if "measured_squared_distance" in frame
            else (
                "clip / noise sd on the sum",
                (("clip", "o", "-", "clip"), ("noise_stddev_of_sum", "x", "-", "noise sd")),
            ),
        )
    else:
        measured = f"measured ({config.aggregation.aggregator})" if config.privacy.trust == "local" else "measured"
        panels = (
            (
                "MSE",
                (
                    ("mse", "o", "-", measured),
                    ("mse_plain_mean", "x", "-", "measured (plain mean)"),
                    ("predicted_mse", "", "--", "predicted (CLT)"),
                ),
            ),
            ("clients", (("clients_replied", "o", "-", "replied"), ("clients_failed", "x", "-", "failed"))),
        )
    for axis, (label, series) in zip(axes, panels):
        for column, marker, style, name in series:
            if column in frame:
                axis.plot(frame["round"], frame[column], marker=marker or None, linestyle=style, label=name)
        axis.set_ylabel(label)
        if any(name for column, _, _, name in series if column in frame):
            axis.legend()
        axis.set_xlabel("round")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
    figure.suptitle(title)
    return figure


# plot_rounds's margins (fractions of its 10 x 3.6 in figure): room for the y labels and tick
# labels (up to ~7 characters, e.g. 1.2e-05 or 100000), the x label, and the title on top.
_MARGINS = {"left": 0.08, "right": 0.985, "bottom": 0.15, "top": 0.88, "wspace": 0.28}

"""The run's figures: the label-counts figure (one artist per class whatever the number of clients,
its stacks the clients' cumulative counts), a run's plot.png skipped on request and drawn later
from the run's files (`plot_run`) with the same pixels, and the CSV read-back it draws from."""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest

from ldpfed.accounting import legacy_event
from ldpfed.accounting.ledger import PrivacyLedger
from ldpfed.config import Config
from ldpfed.data.partition_counts import COLUMNS, GAPS_UP_TO, counts_figure, label_count_files, label_counts
from ldpfed.outputs import FIXED_LAYOUT, MANIFEST, OutputDir, csv_records, records_csv, write_content
from ldpfed.protocols.recorder import Recorder, number_columns, plot_run
from ldpfed.validation import LDPValueError


def _counts(clients: int, classes: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, 7 * clients)
    labels[:classes] = np.arange(classes)  # every class present: a column each
    return label_counts(labels, np.array_split(rng.permutation(labels.size), clients))


@pytest.mark.parametrize("clients", [5, GAPS_UP_TO + 1])
def test_each_class_is_one_patch_stacked_on_the_classes_below_it(clients):
    counts = _counts(clients, 4)
    figure = counts_figure(counts)
    (axis,) = figure.axes
    assert len(axis.patches) == 4  # one artist per class, not one per client and class
    below = np.zeros(clients)
    for patch, column in zip(axis.patches, counts.columns):
        steps, edges, baseline = patch.get_data()
        bars = slice(None, None, 2) if clients <= GAPS_UP_TO else slice(None)  # gaps interleaved up to GAPS_UP_TO
        assert np.array_equal(baseline[bars], below)
        below = below + counts[column].to_numpy()
        assert np.array_equal(steps[bars], below)
        if clients <= GAPS_UP_TO:  # a gap is an empty step between two bars 0.9 wide
            assert np.array_equal(steps[1::2], baseline[1::2])
            assert np.allclose(edges[1::2] - edges[0::2], 0.9)
        else:
            assert np.allclose(np.diff(edges), 1.0)
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["0", "1", "2", "3"]


def test_beyond_the_columns_each_column_is_the_mean_of_its_clients():
    group = 3
    counts = _counts(group * COLUMNS, 3, seed=1)
    figure = counts_figure(counts)
    (axis,) = figure.axes
    assert len(axis.patches) == 3
    means = counts.to_numpy(dtype=float).reshape(COLUMNS, group, 3).mean(axis=1)  # independent: by reshape
    steps, edges, baseline = axis.patches[-1].get_data()
    assert steps.size == COLUMNS and np.allclose(steps, means.sum(axis=1))
    assert np.allclose(baseline, means[:, :2].sum(axis=1))
    assert np.allclose(edges, np.arange(COLUMNS + 1) * group - 0.5)
    assert f"mean of {group} clients" in axis.get_xlabel()


def test_the_legend_up_to_twenty_classes_fits_right_of_the_axes(tmp_path):
    figure = counts_figure(_counts(12, 20))
    assert getattr(figure, FIXED_LAYOUT) and len(figure.legends[0].get_texts()) == 20
    renderer = figure.canvas.get_renderer()
    legend, axes = figure.legends[0].get_window_extent(renderer), figure.axes[0].get_window_extent(renderer)
    assert axes.x1 < legend.x0 and legend.x1 <= figure.bbox.width and legend.y0 >= 0
    write_content(tmp_path / "counts.png", figure)
    assert (tmp_path / "counts.png").stat().st_size > 0
    assert not counts_figure(_counts(12, 21)).legends  # tab20 has 20 colours: no legend beyond


# --- plot.png on request -----------------------------------------------------------------------------


def _rows(seed: int, rounds: int) -> list[dict]:
    """A mean run's rows with random figures (some missing), as the session records them."""
    rng = np.random.default_rng(seed)
    return [
        {
            "round": r,
            "clients_sampled": 40,
            "clients_replied": int(rng.integers(30, 41)),
            "clients_failed": int(rng.integers(0, 3)),
            "failed_partitions": "3,7" if r % 2 else "",
            "users_reported": 400,
            "mse": float(rng.lognormal(-4, 1)),
            "mse_plain_mean": None if r == 2 else float(rng.lognormal(-4, 1)),
            "predicted_mse": float(rng.lognormal(-4, 0.1)),
            "epsilon_spent": 2.0 * r,
            "seconds": float(rng.random()),
        }
        for r in range(1, rounds + 1)
    ]


def _record(out, rows: list[dict], plot: bool) -> None:
    config = Config().with_options({"clients": 40, "users": 400, "epsilon": 2.0, "mechanism": "laplace"})
    ledger = PrivacyLedger()
    recorder = Recorder(config, OutputDir.prepare(out, command="simulate"), plot=plot)
    for row in rows:
        ledger.record_round(range(40), row["round"], legacy_event(2.0, None, "laplace"), "laplace")
        recorder.add_round(row, ledger)
    recorder.finish({"task": "mean"}, ledger, label_count_files(_counts(40, 3)))  # a figure among the data files


def _pixels(path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"))


def test_a_run_without_its_figure_draws_it_later_with_the_same_pixels(tmp_path):
    rows = _rows(seed=3, rounds=5)
    _record(tmp_path / "drawn", rows, plot=True)
    _record(tmp_path / "later", rows, plot=False)
    later = tmp_path / "later"
    assert not (later / "plot.png").exists() and "plot.png" not in json.loads((later / MANIFEST).read_text())["files"]
    assert (tmp_path / "drawn" / "label_counts.png").is_file() and not (later / "label_counts.png").exists()
    assert label_count_files(_counts(4, 2), plot=False).keys() == {"label_counts.csv"}
    for name in ("metrics.csv", "privacy.csv", "privacy_entries.csv", "summary.json", "label_counts.csv"):
        assert (later / name).read_bytes() == (tmp_path / "drawn" / name).read_bytes()
    assert plot_run(later) == later / "plot.png"
    assert np.array_equal(_pixels(later / "plot.png"), _pixels(tmp_path / "drawn" / "plot.png"))
    manifest = json.loads((later / MANIFEST).read_text())
    assert manifest["files"][-1] == "plot.png" and manifest["command"] == "simulate"


def test_plot_run_refuses_a_directory_without_a_runs_files(tmp_path):
    with pytest.raises(LDPValueError, match="has no metrics.csv"):
        plot_run(tmp_path)
    (tmp_path / "metrics.csv").write_text("round,mse\n")
    (tmp_path / "config.toml").write_text("")
    with pytest.raises(LDPValueError, match="no finished round"):
        plot_run(tmp_path)


def test_a_simulate_runs_figure_drawn_later_has_the_same_pixels(tmp_path):
    """End to end: a local mean run's plot.png and the one plot_run draws from a copy of its directory
    without it."""
    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    out = tmp_path / "run"
    arguments = ["simulate", "--engine", "local", "--clients", "3", "--users", "60", "--rounds", "3"]
    result = CliRunner().invoke(app, [*arguments, "--out", str(out)])
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "plot.png").unlink()
    drawn = CliRunner().invoke(app, ["plot", str(copy)])
    assert drawn.exit_code == 0 and "plot.png" in drawn.output, drawn.output
    assert np.array_equal(_pixels(copy / "plot.png"), _pixels(out / "plot.png"))
    refused = CliRunner().invoke(app, ["plot", str(tmp_path / "nowhere")])
    assert refused.exit_code == 2 and "has no metrics.csv" in refused.output


def test_simulate_no_plot_writes_every_file_but_the_figure(tmp_path):
    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    out = tmp_path / "run"
    arguments = ["simulate", "--engine", "local", "--clients", "3", "--users", "60", "--rounds", "2", "--no-plot"]
    result = CliRunner().invoke(app, [*arguments, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert not (out / "plot.png").exists() and (out / "metrics.csv").is_file() and (out / "summary.json").is_file()
    assert "plot = false" in (out / "config.toml").read_text()


def test_numbers_read_back_from_csv_are_the_numbers_written():
    """200 random tables of numbers, bools and missing values (and a text column): the figure's
    input (`number_columns`) from the CSV read back equals that from the rows, bit for bit."""
    rng = random.Random(11)

    def draw(kind: int):
        return [None, rng.random() < 0.5, rng.randrange(-(10**9), 10**9),
                rng.random() * 10 ** rng.randrange(-300, 300), float("nan"), float("inf"), -0.0,
                np.float64(rng.gauss(0, 1)), np.int64(rng.randrange(99))][kind]  # fmt: skip

    for _ in range(200):
        kinds = [rng.randrange(9) for _ in range(rng.randrange(1, 5))]
        rows = [{"text": "a, b", **{f"c{c}": draw(k) for c, k in enumerate(kinds)}} for _ in range(rng.randrange(1, 6))]
        back = number_columns(csv_records(records_csv(rows)))
        for column, values in number_columns(rows).items():
            assert np.array_equal(back[column], values, equal_nan=True), (column, rows)
        assert [row["text"] for row in csv_records(records_csv(rows))] == ["a, b"] * len(rows)

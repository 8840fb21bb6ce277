"""`ldpfed simulate`: an LDP federation under Flower (Ray backend), registered on ldpfed's CLI
through the `ldpfed.commands` entry point (so ldpfed itself never imports Flower)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ldpfed.cli.common import handle_errors, print_json
from simulations import config as simulation_config

HELP = """Run an LDP federation under Flower: --task mean (tuple collection; measured vs predicted
MSE) or --task train (federated LDP-SGD: FedAvg of the privatized updates, re-calibrated by
--aggregator, with the aggregate noise measured against its CLT prediction). With no options: the default job
(configs/default.toml: mean of 10,000 users in 10 dimensions held by 10 clients, Laplace at eps 2,
measured vs predicted MSE over 5 rounds)."""


def register(app: typer.Typer) -> None:
    app.command("simulate", help=HELP)(simulate)


@handle_errors
def simulate(
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file of options (flags override it)."),
    task: Optional[str] = typer.Option(None, help="mean | train"),
    clients: Optional[int] = typer.Option(None, help="Number of Flower clients (supernodes)."),
    rounds: Optional[int] = typer.Option(None, help="Federated rounds."),
    seed: Optional[int] = typer.Option(None, help="Seed of data, partition, sampling and noise."),
    cpus_per_client: Optional[float] = typer.Option(None, help="CPUs Ray reserves per client."),
    cpus: Optional[int] = typer.Option(None, help="CPUs Ray may use in total (0 = all)."),
    fraction: Optional[float] = typer.Option(None, help="Fraction of clients sampled per round (train)."),
    mechanism: Optional[str] = typer.Option(None, help="LDP mechanism (train also: none)."),
    epsilon: Optional[float] = typer.Option(None, help="Budget per user (mean) or per client and round (train)."),
    delta: Optional[float] = typer.Option(None, help="delta for approximate mechanisms (0 = pure)."),
    report_dims: Optional[int] = typer.Option(None, help="Dimensions each user reports, m (0 = all)."),
    aggregator: Optional[str] = typer.Option(
        None, help="mean | l1 | l2 | hdr4me | james-stein; train also fedavg (Flower's FedAvg aggregation)."
    ),
    alpha: Optional[float] = typer.Option(None, help="Confidence level of the aggregator."),
    deviation: Optional[str] = typer.Option(
        None, help="train: deviation model of the re-calibration, plug-in (spread of the updates) | model."
    ),
    engine: Optional[str] = typer.Option(
        None, help="flower (Ray) | local (same client/server code in this process, no Flower; for sweeps)."
    ),
    measure_noise: Optional[int] = typer.Option(
        None, help="train, SIMULATION ONLY: 1 = clients also send their clean clipped update so the server "
        "can measure the aggregate noise (never aggregated); 0 = off.",
    ),
    users: Optional[int] = typer.Option(None, help="Users in total, split over the clients (mean)."),
    dims: Optional[int] = typer.Option(None, help="Dimensions of a tuple (mean)."),
    tuples: Optional[str] = typer.Option(None, help="Synthetic set or file of tuples (mean)."),
    data: Optional[str] = typer.Option(None, help="synthetic-fedprox | digits | mnist | cifar10 (train)."),
    data_dir: Optional[str] = typer.Option(None, help="Directory with mnist/cifar10 files."),
    partition: Optional[str] = typer.Option(None, help="iid | k-classes | dirichlet (train)."),
    classes_per_client: Optional[int] = typer.Option(None, help="k for --partition k-classes."),
    dirichlet_alpha: Optional[float] = typer.Option(None, help="alpha for --partition dirichlet."),
    model: Optional[str] = typer.Option(None, help="logreg | mlp | cnn (train)."),
    local_steps: Optional[int] = typer.Option(None, help="Local SGD steps per round, E."),
    lr: Optional[float] = typer.Option(None, help="Client learning rate."),
    batch_size: Optional[int] = typer.Option(None, help="Client minibatch size."),
    clip: Optional[float] = typer.Option(None, help="Clipping bound C of a client update."),
    fail_clients: Optional[str] = typer.Option(
        None, help="Fault injection: comma-separated partition ids that raise in every round (e.g. 3,5)."
    ),
    out: Optional[Path] = typer.Option(None, help="Directory for metrics.csv, summary.json, config.toml, plot.png."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    verbose: bool = typer.Option(False, "--verbose", help="Show Flower's and Ray's logs."),
) -> None:
    flags = dict(locals())
    for key in ("config_file", "json_output", "verbose"):
        flags.pop(key)
    if flags["out"] is not None:
        flags["out"] = str(flags["out"])
    config = simulation_config.resolve(config_file, flags)
    preflight(config)

    from simulations.progress import RoundProgress
    from simulations.runner import run

    progress = RoundProgress(config)
    summary = run(config, progress, verbose=verbose)
    if json_output:
        print_json(summary)
    else:
        progress.print_summary(summary)


def preflight(config) -> None:
    """Fail before Flower starts on what can be checked in this process (data present, names)."""
    if config.task == "mean":
        from simulations.mean_task import dataset, mechanism

        mechanism(config)
        dataset(config)
    else:
        from simulations.train_task import check_setup

        check_setup(config)

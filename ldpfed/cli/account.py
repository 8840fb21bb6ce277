"""`ldpfed account`: a client's total privacy loss over T rounds of one mechanism, by a chosen
accountant (spec: gradient-noise.md, Accounting across rounds; ldpfed.accounting)."""

from __future__ import annotations

import typer
from rich.table import Table

from ldpfed.accounting import (
    ACCOUNTANTS,
    DEFAULT_DELTA_TARGET,
    CalibratedDpEvent,
    GaussianDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
    create_accountant,
    describe_event,
    event_to_dict,
    round_epsilon,
    round_event,
)
from ldpfed.cli.common import console, handle_errors, print_json
from ldpfed.cli.main import app
from ldpfed.validation import LDPValueError, check_fraction, check_positive_int

GUARANTEE_ACCOUNTANTS = ("basic", "advanced")  # compose each round's stated (eps, delta)


def round_cost(mechanism: str, epsilon, delta, noise_multiplier, sample_rate, accountant: str):
    """One round's event. A Gaussian round given by its noise multiplier gets, for basic and
    advanced composition, the per-round eps at the per-round --delta (dp_accounting's PLD)."""
    needs_guarantee = accountant in GUARANTEE_ACCOUNTANTS
    bare_gaussian = noise_multiplier is not None and epsilon is None
    if bare_gaussian and delta is not None and not needs_guarantee:
        raise LDPValueError(
            f"--delta is the per-round delta of basic/advanced composition; the {accountant} accountant "
            "reports eps at --target-delta"
        )
    event = round_event(mechanism, epsilon=epsilon, delta=None if bare_gaussian else delta,
                        noise_multiplier=noise_multiplier, sample_rate=sample_rate)
    if bare_gaussian and needs_guarantee:
        if delta is None:
            raise LDPValueError(f"the {accountant} accountant needs the per-round --delta of a Gaussian round")
        delta = check_fraction(delta, "--delta")
        event = CalibratedDpEvent(event, round_epsilon(event, delta), delta)
    return event


def noise_multiplier_of(event) -> float | None:
    inner = event.event if isinstance(event, CalibratedDpEvent) else event
    inner = inner.event if isinstance(inner, PoissonSampledDpEvent) else inner
    return inner.noise_multiplier if isinstance(inner, GaussianDpEvent) else None


@app.command("account")
@handle_errors
def account_command(
    mechanism: str = typer.Option(..., "--mechanism", "-m", help="Randomizer name (see `ldpfed mechanisms`), or none."),
    epsilon: float = typer.Option(None, "--epsilon", "-e", help="Budget per round (pure mechanisms; Gaussian with --delta)."),
    noise_multiplier: float = typer.Option(None, "--noise-multiplier", "-z", help="Gaussian: noise sd / sensitivity."),
    delta: float = typer.Option(None, "--delta", help="Per-round delta (Gaussian calibration, or basic/advanced composition)."),
    rounds: int = typer.Option(..., "--rounds", "-T", help="Rounds the client takes part in."),
    sample_rate: float = typer.Option(None, "--sample-rate", "-q", help="Gaussian: Poisson sampling probability per round."),
    accountant: str = typer.Option("pld", "--accountant", "-a", help=f"One of {', '.join(ACCOUNTANTS)}."),
    target_delta: float = typer.Option(
        DEFAULT_DELTA_TARGET, "--target-delta", help="delta of the reported eps (rdp, pld; advanced's slack)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Compose T rounds of one mechanism: epsilon, delta and the accountant used."""
    chosen = create_accountant(accountant)  # unknown names fail here
    rounds = check_positive_int(rounds, "--rounds")
    target_delta = check_fraction(target_delta, "--target-delta")
    event = round_cost(mechanism, epsilon, delta, noise_multiplier, sample_rate, chosen.name)
    reason = chosen.unsupported(event)
    if reason is not None:
        raise LDPValueError(reason)
    spent = chosen.compose(SelfComposedDpEvent(event, rounds)).spent(target_delta)
    result = {
        "mechanism": mechanism,
        "accountant": chosen.name,
        "accountant_description": chosen.description,
        "rounds": rounds,
        "epsilon_per_round": epsilon,
        "delta_per_round": delta,
        "noise_multiplier": noise_multiplier_of(event),
        "sample_rate": sample_rate,
        "target_delta": target_delta,
        "event": event_to_dict(event),
        **{key: value for key, value in spent.to_dict().items() if key != "accountant"},
    }
    if as_json:
        print_json(result)
        return
    table = Table(title=f"{rounds} x {describe_event(event)}, {chosen.description}")
    for column in ("accountant", "epsilon", "delta", "private"):
        table.add_column(column)
    shown = "not private" if not spent.private else f"{spent.epsilon:.6g}"
    table.add_row(chosen.name, shown, "" if spent.delta is None else f"{spent.delta:.3g}", str(spent.private))
    console.print(table)
    for why in spent.reasons:
        console.print(f"not private: {why}")

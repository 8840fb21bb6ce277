"""`ldpfed account`: a client's total privacy loss over T rounds of one mechanism, by a chosen
accountant (spec: gradient-noise.md, Accounting across rounds; ldpfed.accounting)."""

from __future__ import annotations

import typer
from rich.table import Table

from ldpfed.accounting import (
    ACCOUNTANTS,
    DEFAULT_DELTA_TARGET,
    CalibratedDpEvent,
    DiscreteGaussianDpEvent,
    DiscreteGaussianVectorDpEvent,
    GaussianDpEvent,
    PlrvoDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
    create_accountant,
    describe_event,
    event_to_dict,
    round_epsilon,
    round_event,
)
from ldpfed.cli.common import OUTPUTS_EPILOG, console, handle_errors, print_json
from ldpfed.cli.options import delta_option, epsilon_option, json_option, mechanism_option, sampler_option
from ldpfed.gradient_noise import PLRVO, InidGaussian, parse_layers, read_profile
from ldpfed.samplers.float_slack import SLACK_RULE
from ldpfed.samplers.safe_grid import check_sampler
from ldpfed.validation import LDPValueError, canonical_name, check_fraction, check_positive, check_positive_int

GUARANTEE_ACCOUNTANTS = ("basic", "advanced")  # compose each round's stated (eps, delta)
PLRVO_OPTIONS = ("--k", "--theta", "--clip", "--dims")
PROFILE_OPTIONS = ("--layers", "--profile")
PLRVO_ACCOUNTANTS = {
    "joint": "PLRV-O joint moments accountant (one sampling decision covers all coordinates; sound)",
    "paper": "PLRV-O paper-faithful moments accountant (per-coordinate sampling; understates eps, not a guarantee)",
    "rdp": "dp_accounting-style RDP composition of the joint accountant's per-step RDP (coarser order grid)",
}


def plrvo_account(k, theta, clip, dims, sample_rate, rounds, target_delta, accountant, sampler="safe") -> dict:
    """T steps of PLRV-O (gradient-noise.md, PLRV-O) by the joint, paper or rdp accountant."""
    if None in (k, theta, dims):
        raise LDPValueError("plrvo needs --k, --theta and --dims (and --clip, --sample-rate)")
    accountant = "joint" if accountant is None else canonical_name(accountant)
    if accountant not in PLRVO_ACCOUNTANTS:
        raise LDPValueError(f"plrvo's --accountant must be one of {', '.join(PLRVO_ACCOUNTANTS)}, got {accountant!r}")
    noise = PLRVO(
        check_positive_int(dims, "--dims"),
        k=k,
        theta=theta,
        clip=clip,
        sample_rate=1.0 if sample_rate is None else sample_rate,
        steps=rounds,
        delta=target_delta,
        sampler="safe" if sampler is None else sampler,
    )
    event = PlrvoDpEvent(noise.k, noise.theta, noise.clip, noise.dims, noise.sample_rate, noise.sampler)
    if accountant == "rdp":
        spent = create_accountant("rdp").compose(SelfComposedDpEvent(event, rounds)).spent(target_delta)
        epsilon, order = spent.epsilon, None
    else:
        epsilon, order = noise.epsilon(accountant)
    return {
        "mechanism": "plrvo",
        "accountant": accountant,
        "accountant_description": PLRVO_ACCOUNTANTS[accountant],
        "rounds": rounds,
        "k": noise.k,
        "theta": noise.theta,
        "clip": noise.clip,
        "params": noise.dims,
        "sample_rate": noise.sample_rate,
        "mean_abs_noise": noise.mean_abs(),
        "target_delta": target_delta,
        "event": event_to_dict(event),
        "epsilon": epsilon,
        "delta": target_delta,
        "order": order,
        "private": True,
        "sound": accountant != "paper",
        "reasons": [],
        "sampler": noise.sampler,
        "sampler_description": noise.sampler_description,
    }


def read_sensitivities(layers, profile):
    """The i.n.i.d. Gaussian's profile D_i from --layers or --profile (None when neither is given)."""
    if layers is not None and profile is not None:
        raise LDPValueError("give --layers or --profile, not both")
    if layers is None and profile is None:
        return None
    return parse_layers(layers) if layers is not None else read_profile(profile)


def inid_noise(layers, profile, noise_multiplier, sampler: str):
    """The i.n.i.d. Gaussian of the profile at noise multiplier z (None without a profile)."""
    sensitivities = read_sensitivities(layers, profile)
    if sensitivities is None:
        return None
    return InidGaussian(sensitivities, noise_multiplier=noise_multiplier, sampler=sampler)


def inid_profile_record(noise) -> dict | None:
    """i.n.i.d. Gaussian: the per-coordinate scales the profile gets at noise multiplier z."""
    if noise is None:
        return None
    if noise.floating_point_safe:
        sampler = (
            f"{noise.sampler_description}: accounted as its discrete Gaussian's RDP curve plus the "
            "sampler's float slack (float_slack)"
        )
    else:
        sampler = (
            "continuous: this command accounts the (Poisson-sampled) continuous Gaussian, NOT floating-point "
            "safe; --sampler safe accounts the safe sampler (discrete Gaussian, rdp, no sampling)"
        )
    return {
        "dims": noise.dims,
        "l1_profile": float(noise.profile.sum()),
        "scale_min": float(noise.scales.min()),
        "scale_max": float(noise.scales.max()),
        "mse_per_round": noise.mse(),
        "sampler": sampler,
        "note": "the profile sets the noise scales only: Mahalanobis sensitivity 1/z whatever the profile",
    }


def safe_inid_event(noise, epsilon, delta, sample_rate, accountant: str):
    """One round of the safe i.n.i.d. Gaussian given by its noise multiplier: its own event (the
    discrete Gaussian with its sampler's float slack over the profile's d coordinates)."""
    if noise is None:
        raise LDPValueError(
            f"inid-gaussian --sampler safe needs {' or '.join(PROFILE_OPTIONS)} (its float slack grows "
            "with the number of coordinates)"
        )
    if epsilon is not None or delta is not None or sample_rate is not None:
        raise LDPValueError(
            "inid-gaussian --sampler safe is accounted by --noise-multiplier alone (no --epsilon, "
            "--delta or --sample-rate: the discrete Gaussian has no Poisson-subsampled bound in "
            "ldpfed)"
        )
    if accountant != "rdp":
        raise LDPValueError(f"inid-gaussian --sampler safe is accounted by the rdp accountant only, not {accountant}")
    return noise.event()


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
    event = round_event(
        mechanism,
        epsilon=epsilon,
        delta=None if bare_gaussian else delta,
        noise_multiplier=noise_multiplier,
        sample_rate=sample_rate,
    )
    if bare_gaussian and needs_guarantee:
        if delta is None:
            raise LDPValueError(f"the {accountant} accountant needs the per-round --delta of a Gaussian round")
        delta = check_fraction(delta, "--delta")
        event = CalibratedDpEvent(event, round_epsilon(event, delta), delta)
    return event


def noise_multiplier_of(event) -> float | None:
    """z of a Gaussian round; for the safe (discrete) Gaussian, s / sensitivity in grid steps,
    whose continuous Gaussian bounds its RDP (not its PLD: see DiscreteGaussianDpEvent)."""
    inner = event.event if isinstance(event, CalibratedDpEvent) else event
    inner = inner.event if isinstance(inner, PoissonSampledDpEvent) else inner
    if isinstance(inner, DiscreteGaussianDpEvent):
        return inner.sigma / inner.sensitivity
    return inner.noise_multiplier if isinstance(inner, (GaussianDpEvent, DiscreteGaussianVectorDpEvent)) else None


@handle_errors
def account_command(
    mechanism: str = mechanism_option(..., "Randomizer name (see `ldpfed mechanisms`), or none."),
    epsilon: float = epsilon_option(None, " of one round of one client (pure mechanisms; Gaussian with --delta)"),
    noise_multiplier: float = typer.Option(None, "--noise-multiplier", "-z", help="Gaussian: noise sd / sensitivity."),
    delta: float = delta_option(" of one round of one client (Gaussian; basic, advanced)"),
    rounds: int = typer.Option(..., "--rounds", "-T", help="Rounds the client takes part in."),
    sample_rate: float = typer.Option(None, "--sample-rate", "-q", help="Gaussian: Poisson sampling rate q per round."),
    accountant: str = typer.Option(
        None,
        "--accountant",
        help=f"One of {', '.join(ACCOUNTANTS)} (default pld); plrvo: joint (default), paper, rdp.",
    ),
    target_delta: float = typer.Option(
        DEFAULT_DELTA_TARGET,
        "--target-delta",
        help="The delta at which the composed total eps is reported (rdp, pld; advanced's slack).",
    ),
    k: float = typer.Option(None, "--k", help="plrvo: the noise's parameter k, the Gamma shape of the inverse scale."),
    theta: float = typer.Option(None, "--theta", help="plrvo: Gamma scale theta of the inverse scale."),
    clip: float = typer.Option(None, "--clip", help="plrvo: per-example L2 clipping norm C (default 1)."),
    dims: int = typer.Option(
        None, "--dims", "-d", help="plrvo: dimensions d of the gradient (the model's parameters n)."
    ),
    layers: str = typer.Option(
        None, "--layers", help="inid-gaussian: per-layer clipping C1:d1,C2:d2,... (noise scales)."
    ),
    profile: str = typer.Option(None, "--profile", help="inid-gaussian: file of per-coordinate sensitivities D_i."),
    sampler: str = sampler_option(
        "safe for plrvo, which accounts what the safe sampler draws; continuous for inid-gaussian, the sampled "
        "Gaussian, whose safe sampler (the discrete Gaussian with its float slack) needs --layers/--profile, rdp "
        "and no --sample-rate"
    ),
    as_json: bool = json_option("one JSON object instead of a table"),
) -> None:
    """Compose T rounds of one mechanism: epsilon, delta and the accountant used."""
    key = canonical_name(mechanism)
    rounds = check_positive_int(rounds, "--rounds")
    target_delta = check_fraction(target_delta, "--target-delta")
    given = dict(zip(PLRVO_OPTIONS, (k, theta, clip, dims)))
    if key != "plrvo" and any(value is not None for value in given.values()):
        raise LDPValueError(f"{', '.join(PLRVO_OPTIONS)} apply to plrvo only")
    if key != "inid-gaussian" and (layers is not None or profile is not None):
        raise LDPValueError(f"{' and '.join(PROFILE_OPTIONS)} apply to inid-gaussian only")
    if key == "plrvo":
        if epsilon is not None or noise_multiplier is not None or delta is not None:
            raise LDPValueError(
                "plrvo is accounted from --k, --theta, --clip, --dims (no --epsilon, --noise-multiplier, --delta)"
            )
        clip = 1.0 if clip is None else check_positive(clip, "--clip")
        result = plrvo_account(k, theta, clip, dims, sample_rate, rounds, target_delta, accountant, sampler)
        print_json(result) if as_json else _show_plrvo(result, rounds, target_delta)
        return
    if sampler is not None and key != "inid-gaussian":
        raise LDPValueError("--sampler applies to plrvo and inid-gaussian only")
    safe = key == "inid-gaussian" and check_sampler(sampler or "continuous") == "safe"
    chosen = create_accountant(("rdp" if safe else "pld") if accountant is None else accountant)  # names fail here
    noise = None
    if key == "inid-gaussian" and (noise_multiplier is not None or safe):
        if noise_multiplier is None:
            raise LDPValueError("inid-gaussian is accounted by its --noise-multiplier")
        noise = inid_noise(
            layers, profile, check_positive(noise_multiplier, "--noise-multiplier"), "safe" if safe else "continuous"
        )
    if safe:
        event = safe_inid_event(noise, epsilon, delta, sample_rate, chosen.name)
    else:
        event = round_cost(mechanism, epsilon, delta, noise_multiplier, sample_rate, chosen.name)
    reason = chosen.unsupported(event)
    if reason is not None:
        raise LDPValueError(reason)
    spent = chosen.compose(SelfComposedDpEvent(event, rounds)).spent(target_delta)
    round_settings = {"epsilon_per_round": epsilon, "delta_per_round": delta, "sample_rate": sample_rate}
    result = _record(mechanism, chosen, rounds, round_settings, target_delta, event, spent)
    if key == "inid-gaussian":
        result["sampler"] = "safe" if safe else "continuous"
        result["profile"] = inid_profile_record(noise)
    print_json(result) if as_json else _show(rounds, event, chosen, spent)


def _show_plrvo(result: dict, rounds: int, target_delta: float) -> None:
    console.print(
        f"{rounds} x PLRV-O (k={result['k']:g}, theta={result['theta']:g}, C={result['clip']:g}, "
        f"n={result['params']}, q={result['sample_rate']:g}, sampler {result['sampler']}), "
        f"{result['accountant_description']}: "
        f"epsilon {result['epsilon']:.6g} at delta {target_delta:g}"
    )


def _record(mechanism: str, chosen, rounds: int, round_settings: dict, target_delta: float, event, spent) -> dict:
    """The JSON record: the round's settings and event, what T rounds spend, and the float slack in it."""
    result = {
        "mechanism": mechanism,
        "accountant": chosen.name,
        "accountant_description": chosen.description,
        "rounds": rounds,
        "epsilon_per_round": round_settings["epsilon_per_round"],
        "delta_per_round": round_settings["delta_per_round"],
        "noise_multiplier": noise_multiplier_of(event),
        "sample_rate": round_settings["sample_rate"],
        "target_delta": target_delta,
        "event": event_to_dict(event),
        **{
            name: value
            for name, value in spent.to_dict().items()
            if name != "accountant" and not name.startswith("float_slack")
        },
    }
    if spent.private:  # the samplers' float slack composed into epsilon (ldpfed.samplers.float_slack)
        result["float_slack"] = {
            "epsilon": spent.float_slack_epsilon,
            "delta": spent.float_slack_delta,
            "rule": SLACK_RULE if spent.float_slack_epsilon else "no sampler slack to compose",
        }
    return result


def _show(rounds: int, event, chosen, spent) -> None:
    table = Table(title=f"{rounds} x {describe_event(event)}, {chosen.description}")
    for column in ("accountant", "epsilon", "delta", "private"):
        table.add_column(column)
    shown = "not private" if not spent.private else f"{spent.epsilon:.6g}"
    table.add_row(chosen.name, shown, "" if spent.delta is None else f"{spent.delta:.3g}", str(spent.private))
    console.print(table)
    if spent.private and spent.float_slack_epsilon:
        console.print(
            f"included: the sampler's float slack, eps {spent.float_slack_epsilon:.3g} and delta "
            f"{spent.float_slack_delta:.3g} over the {rounds} rounds (ldpfed.samplers.float_slack)"
        )
    for why in spent.reasons:
        console.print(f"not private: {why}")


def register(app: typer.Typer) -> None:
    app.command("account", epilog=OUTPUTS_EPILOG)(account_command)

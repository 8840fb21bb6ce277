"""The options that several commands declare alike, each defined once here: its flag, its default
and the part of its help that holds for every command; a command adds only what is its own (which
files its --out holds, what its --json prints, which sampler it draws with by default).

typer copies an option's definition for each command that declares it, so one object serves all.
"""

from __future__ import annotations

import typer

from ldpfed.config import option_default

OVERWRITE = typer.Option(
    False, "--overwrite", help="Replace the results of an earlier run in --out (ldpfed's files only)."
)


def out_option(files: str):
    """--out DIR: where the command writes `files`, checked before any work (ldpfed.outputs.OutputDir)."""
    return typer.Option(None, "--out", help=f"Directory for {files}; checked first.")


def json_option(prints: str):
    """--json: JSON on stdout instead of the tables; `prints` says what, e.g. "one JSON object"."""
    return typer.Option(False, "--json", help=f"Print {prints}.")


def mechanism_option(default, names: str):
    """--mechanism/-m: the randomizer(s) to use; `names` says which the command takes."""
    return typer.Option(default, "--mechanism", "-m", help=names)


# --epsilon, --delta, --report-dims: the meaning (ldpfed.cli.vocabulary) once; each command appends
# its `detail` (its unit, its default; with the leading space or comma) and the factory ends the sentence.
def epsilon_option(default, detail: str):
    """--epsilon/-e: a budget eps; `detail` says per what (ldpfed.cli.vocabulary.UNITS)."""
    return typer.Option(default, "--epsilon", "-e", help=f"Budget eps{detail}.")


def delta_option(detail: str):
    """--delta: the delta that pairs with the budget eps (approximate mechanisms), per what `detail` says."""
    return typer.Option(None, "--delta", help=f"The delta of the (eps, delta) guarantee{detail}.")


def report_dims_option(detail: str):
    """--report-dims/-k: the dimensions m each user reports of its d; `detail`: the command's default."""
    return typer.Option(None, "--report-dims", "-k", help=f"Dimensions each user reports, m{detail}.")


def sampler_option(default: str):
    """--sampler: how a mechanism draws its noise, safe (ldpfed.samplers) or continuous; `default`
    says which the command uses when it is not given."""
    return typer.Option(
        None, "--sampler", help=f"safe | continuous (default: {default}; continuous is NOT floating-point safe)."
    )


# The training options that compare --task train and plan --task train pass to ldpfed.config.
MODEL = typer.Option(None, "--model", help=f"train: logreg | mlp | cnn (default {option_default('model')}).")
CLIENTS = typer.Option(
    None, "--clients", help=f"train: clients N of the federation (default {option_default('clients')})."
)
CLIP = typer.Option(
    None,
    "--clip",
    help=f"train: L2 clipping norm C of a client update (gradient noises; default {option_default('clip')}).",
)
COORDINATE_CLIP = typer.Option(
    None,
    "--coordinate-clip",
    help="train: per-coordinate clipping bound C, each to [-C, C] "
    f"(scalar mechanisms; default {option_default('coordinate-clip')}).",
)

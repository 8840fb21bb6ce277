"""Central DP-SGD with numeric (Gaussian) or GeoDP perturbation (spec: directional.md, GeoDP;
gradient-noise.md, Accounting). No Flower: one trainer holds all the data.

Each step draws a batch (Poisson: every example joins with probability q = B/N, round(N/B) steps
per epoch; shuffle: a fresh permutation per epoch cut into batches of B), computes per-example
gradients with torch.func (vmap of grad over `functional_call`), clips each to L2 norm C and
releases the batch gradient:
- numeric: (sum of clipped + N(0, (sigma C)^2 I)) / B;
- geodp: `ldpfed.directional.geodp.GeoDP` (magnitude and per-example-averaged angles, each with
  its Gaussian noise); centred windows use the previous released gradient (public) as reference;
- none: the mean of the clipped gradients, no noise (NOT private; the noise-free baseline);
- the gradient noises of gradient-noise.md (ldpfed.gradient_noise), on the sum of clipped
  gradients, divided by B: inid-gaussian (per-layer clipping, C_l = C / sqrt(L) for L layers,
  s_i^2 = z^2 D_i ||D||_1: accounted as the Gaussian of noise multiplier z), plrvo (--k, --theta;
  accounted by the joint accountant through `PlrvoDpEvent`, Poisson sampling only), r1smg and
  product-noise (calibrated per step to --noise-epsilon/--noise-delta with D = C, as published;
  their guarantee does not hold, so the run is NOT private);
then it takes an SGD step.
Samplers (--sampler; mechanisms.md, Floating-point safety): numeric and geodp are safe (the
safe i.n.i.d. Gaussian of ldpfed.gradient_noise: grid rounding plus exact discrete Gaussian
integers, one DiscreteGaussianVectorDpEvent per release) with shuffled batches, the default
there; under Poisson sampling, which has no subsampled bound for the discrete Gaussian, the
default is the continuous sampler, and asking for safe is an error. A private run with a
continuous sampler says in `guarantee_assumes` (JSON and console) that its epsilon holds for exact
real-valued noise only: the float sampler is NOT floating-point safe and the audit refutes it.
The privacy cost of the whole run comes from dp-accounting's RDP
accountant (`geodp.training_event`); `epsilon` is reported at `target_delta` under the
neighbouring relation the batch sampling fits, named in the record (`neighbouring_relation`):
add/remove one example for Poisson sampling, replace one example for shuffled fixed-size batches
(one batch per epoch holds the replaced example, its clipped sum moves by up to 2C: an epoch is one
release at multiplier sigma/2; GeoDP's direction keeps sigma; ldpfed.directional.geodp).

Randomness: the data split and the model initialization come from `seed` (public: it is in the
summary); the batches and the noise from two streams spawned (SeedSequence) from a secret: OS
entropy, or `noise_seed` to reproduce a run, which no output records. Whoever could re-draw the
noise (from a recorded or guessable seed) could subtract it from the released model, and knowing
the Poisson batches voids their amplification. Never torch's or numpy's global state.
Diagnostics (not private, computed by the trainer that holds the data anyway): per step, the cosine
between the released gradient and the clean mean clipped gradient, and the share of its energy in
the first 1% of coordinates.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

import ldpfed.gradient_noise as gradient_noises
from ldpfed.directional import cosine, leading_energy_share
from ldpfed.directional import windows as win
from ldpfed.directional.geodp import (
    RELATION_DESCRIPTIONS,
    SAMPLINGS,
    GeoDP,
    neighbouring_relation,
    numeric_noise,
    rdp_epsilon,
    training_event,
)
from ldpfed.gradient_noise import GUARANTEE_FAILS
from ldpfed.gradient_noise.profile import clip_layers
from ldpfed.protocols.seeds import fresh_secret
from ldpfed.training.local import evaluate
from ldpfed.training.models import build_model
from ldpfed.validation import LDPValueError, canonical_name, check_fraction, check_positive, check_positive_int
from simulations.mia import member_split, membership_inference

PERTURBATIONS = ("numeric", "geodp", "none", *gradient_noises.available())
ACCOUNTANT = "rdp (ldpfed.accounting: dp_accounting RdpAccountant)"
# The Gaussian noise is drawn with numpy's standard_normal: a continuous sampler, not floating-point
# safe in the sense of mechanisms.md (as in Opacus and TF Privacy); said in every private result.
NOISE_SAMPLER = "continuous (numpy standard_normal; not floating-point safe)"
# What `private: true` rests on when the noise comes from a float sampler (said in the JSON and the console).
FLOAT_ASSUMPTION = (
    "exact real-valued noise: epsilon is that of the ideal continuous law, but the float sampler that draws "
    "it is NOT floating-point safe (Mironov 2012) and the audit refutes such samplers (docs/results/audit.md); "
    "the safe sampler is (--sampler safe; numeric, geodp and inid-gaussian need --sampling shuffle for it)"
)
NOISE_SAMPLERS = ("safe", "continuous")  # of the gradient noises that have both (inid-gaussian, plrvo)


@dataclass(frozen=True)
class DPSGDConfig:
    """One central DP-SGD run (`ldpfed dpsgd`): the noise and its sampler, how batches are sampled,
    the data and the model."""

    perturbation: str = "numeric"
    noise_multiplier: float = 1.0
    batch_size: int = 64
    epochs: int = 5
    lr: float = 0.5
    clip: float = 1.0
    beta: float = 1.0
    window: str = "fixed"
    sampling: str = "poisson"
    data: str = "digits"
    data_dir: str | None = None
    model: str = "logreg"
    target_delta: float = 1e-5
    seed: int = 0
    k: float | None = None  # plrvo: Gamma shape; product-noise: k (searched from noise_delta if None)
    theta: float | None = None  # plrvo: Gamma scale
    noise_epsilon: float | None = None  # r1smg, product-noise: the per-step claim; inid-laplace: per-step pure eps
    noise_delta: float | None = None
    # safe (integer noise on a grid) | continuous; None: safe, except numeric and geodp under Poisson
    # sampling, which are continuous (the discrete Gaussian has no Poisson-subsampled bound)
    noise_sampler: str | None = None
    # secret seed of the batches and the noise (None: OS entropy); never recorded in the results
    noise_seed: int | None = None

    def __post_init__(self) -> None:
        set_ = lambda key, value: object.__setattr__(self, key, value)  # noqa: E731
        perturbation = canonical_name(self.perturbation)
        if perturbation not in PERTURBATIONS:
            raise LDPValueError(f"perturbation must be one of {PERTURBATIONS}, got {self.perturbation!r}")
        set_("perturbation", perturbation)
        sampling = canonical_name(self.sampling)
        if sampling not in SAMPLINGS:
            raise LDPValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        set_("sampling", sampling)
        set_("noise_multiplier", check_positive(self.noise_multiplier, "noise_multiplier"))
        set_("batch_size", check_positive_int(self.batch_size, "batch_size"))
        set_("epochs", check_positive_int(self.epochs, "epochs"))
        set_("lr", check_positive(self.lr, "lr"))
        set_("clip", check_positive(self.clip, "clip"))
        set_("beta", win.check_beta(self.beta))
        set_("window", win.check_window(self.window))
        set_("target_delta", check_fraction(self.target_delta, "target_delta"))
        set_("seed", check_positive_int(self.seed, "seed", minimum=0))
        if self.noise_seed is not None:
            set_("noise_seed", check_positive_int(self.noise_seed, "noise_seed", minimum=0))
        for name in ("k", "theta", "noise_epsilon"):
            if getattr(self, name) is not None:
                set_(name, check_positive(getattr(self, name), name))
        if self.noise_delta is not None:
            set_("noise_delta", check_fraction(self.noise_delta, "noise_delta"))
        needs = {
            "plrvo": ("k", "theta"),
            "r1smg": ("noise_epsilon", "noise_delta"),
            "product-noise": ("noise_epsilon",),
            "inid-laplace": ("noise_epsilon",),
        }
        missing = [name for name in needs.get(perturbation, ()) if getattr(self, name) is None]
        if missing:
            raise LDPValueError(f"perturbation {perturbation} needs {', '.join(missing)}")
        if perturbation == "product-noise" and self.k is None and self.noise_delta is None:
            raise LDPValueError("product-noise needs k or noise_delta (to search k)")
        noise_sampler = self.noise_sampler
        if noise_sampler is None:
            noise_sampler = "continuous" if perturbation in ("numeric", "geodp") and sampling == "poisson" else "safe"
        noise_sampler = str(noise_sampler).strip().lower()
        if noise_sampler not in NOISE_SAMPLERS:
            raise LDPValueError(f"noise_sampler must be one of {NOISE_SAMPLERS}, got {self.noise_sampler!r}")
        set_("noise_sampler", noise_sampler)
        if self.safe_noise and perturbation in ("inid-gaussian", "numeric", "geodp") and sampling == "poisson":
            raise LDPValueError(
                f"{perturbation}'s safe sampler (discrete Gaussian) has no Poisson-subsampled RDP bound in "
                "ldpfed: use sampling 'shuffle', or noise_sampler 'continuous' (NOT floating-point safe)"
            )
        if perturbation == "plrvo" and sampling != "poisson":
            raise LDPValueError("plrvo is accounted for Poisson sampling only (sampling='poisson')")

    @property
    def safe_noise(self) -> bool:
        """The run's noise is floating-point safe (numeric, geodp, inid-gaussian, inid-laplace or plrvo;
        sampler safe)."""
        return (
            self.perturbation in ("numeric", "geodp", "inid-gaussian", "inid-laplace", "plrvo")
            and self.noise_sampler == "safe"
        )

    @property
    def noise_sampler_description(self) -> str:
        from ldpfed.samplers.safe_grid import SAFE_DESCRIPTION

        return SAFE_DESCRIPTION if self.safe_noise else NOISE_SAMPLER

    @property
    def private(self) -> bool:
        return self.perturbation != "none" and not gradient_noises.guarantee_fails(self.perturbation)


def gradient_noise(config: DPSGDConfig, layer_sizes: list[int], sample_rate: float, steps: int):
    """(noise on the sum of clipped gradients, per-layer clips) for the gradient-noise perturbations."""
    from ldpfed.gradient_noise import PLRVO, R1SMG, InidGaussian, InidLaplace, ProductNoise, layer_profile

    dims, clip = sum(layer_sizes), config.clip
    if config.perturbation == "numeric":  # safe numeric DP-SGD: the one-layer profile, s = sigma C (+ rounding)
        return InidGaussian(layer_profile([clip], [dims]), noise_multiplier=config.noise_multiplier, sampler="safe"), [
            clip
        ]
    if config.perturbation == "inid-gaussian":
        clips = [clip / math.sqrt(len(layer_sizes))] * len(layer_sizes)
        return InidGaussian(
            layer_profile(clips, layer_sizes), noise_multiplier=config.noise_multiplier, sampler=config.noise_sampler
        ), clips
    if config.perturbation == "inid-laplace":  # per-layer L2 clips C/sqrt(L): profile sqrt(d_l) C_l bounds the L1 shift
        clips = [clip / math.sqrt(len(layer_sizes))] * len(layer_sizes)
        return InidLaplace(
            layer_profile(clips, layer_sizes), epsilon=config.noise_epsilon, sampler=config.noise_sampler
        ), clips
    if config.perturbation == "plrvo":
        return PLRVO(
            dims,
            k=config.k,
            theta=config.theta,
            clip=clip,
            sample_rate=min(1.0, sample_rate),
            steps=steps,
            delta=config.target_delta,
            sampler=config.noise_sampler,
        ), [clip]
    if config.perturbation == "r1smg":
        return R1SMG(dims, epsilon=config.noise_epsilon, delta=config.noise_delta, sensitivity=clip), [clip]
    return ProductNoise(dims, epsilon=config.noise_epsilon, delta=config.noise_delta, k=config.k, sensitivity=clip), [
        clip
    ]


def per_example_gradients(model, params: dict, x, y):
    """Per-example gradients of the cross-entropy, flattened: a (batch, d) torch tensor (vmap(grad))."""
    import torch
    from torch.func import functional_call, grad, vmap

    def loss(p, xi, yi):
        logits = functional_call(model, p, (xi.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(logits, yi.unsqueeze(0))

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)


def _batches(config: DPSGDConfig, n: int, rng: np.random.Generator):
    """Index arrays of each step's batch (see the module docstring); also returns q."""
    q = min(1.0, config.batch_size / n)
    if config.sampling == "poisson":
        steps = max(1, round(n / config.batch_size))
        for _ in range(config.epochs * steps):
            yield np.flatnonzero(rng.random(n) < q)
    else:
        for _ in range(config.epochs):
            order = rng.permutation(n)
            for start in range(0, n, config.batch_size):
                yield order[start : start + config.batch_size]


def steps_per_epoch(config: DPSGDConfig, n: int) -> int:
    if config.sampling == "poisson":
        return max(1, round(n / config.batch_size))
    return math.ceil(n / config.batch_size)


def load(config: DPSGDConfig):
    """(data set, training inputs, training labels) as torch tensors."""
    import torch

    from ldpfed.data.federated import load_federated

    data = load_federated(config.data, 1, seed=config.seed, data_dir=config.data_dir)
    x_train, y_train = data.train_data()
    return data, torch.as_tensor(x_train), torch.as_tensor(y_train)


def train(config: DPSGDConfig, data, x_all, y_all, *, seed: int, noise_seed: int | None = None, progress=None) -> dict:
    """Train a fresh model (initialized from `seed`) on (x_all, y_all) with DP-SGD, the batches and
    the noise from `noise_seed` (None: OS entropy); returns the model, the per-epoch test history,
    the diagnostics and the step count."""
    import torch

    n = int(y_all.numel())
    if config.batch_size > n:
        raise LDPValueError(f"batch_size must be at most the {n} training examples, got {config.batch_size}")
    model = build_model(config.model, data.input_shape, data.num_classes, seed=seed)
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    shapes = [(name, p.shape, p.numel()) for name, p in params.items()]
    dims = sum(size for _, _, size in shapes)
    secret = fresh_secret() if noise_seed is None else noise_seed
    batch_rng, noise_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(secret).spawn(2))
    geodp = None
    if config.perturbation == "geodp":
        geodp = GeoDP(
            config.noise_multiplier,
            config.clip,
            config.batch_size,
            config.beta,
            config.window,
            sampler=config.noise_sampler,
        )

    per_epoch = steps_per_epoch(config, n)
    noise, layer_sizes, layer_clips = None, [size for _, _, size in shapes], [config.clip]
    if config.perturbation in gradient_noises.available() or (config.perturbation == "numeric" and config.safe_noise):
        noise, layer_clips = gradient_noise(config, layer_sizes, config.batch_size / n, config.epochs * per_epoch)
    if len(layer_clips) == 1:
        layer_sizes = [dims]
    history, cosines, shares, reference = [], [], [], None
    for step, index in enumerate(_batches(config, n, batch_rng), start=1):
        if index.size:
            gradients = per_example_gradients(model, params, x_all[index], y_all[index]).double().numpy()
        else:  # an empty Poisson batch still releases noise
            gradients = np.zeros((0, dims))
        clipped_sum = clip_layers(gradients, layer_sizes, layer_clips).sum(axis=0)
        clean = clipped_sum / config.batch_size
        if noise is not None:  # the noise's own release of the sum (a safe sampler rounds it to its grid)
            released = noise.perturb(clipped_sum, noise_rng) / config.batch_size
        elif config.perturbation == "numeric":
            released = numeric_noise(gradients, config.clip, config.noise_multiplier, config.batch_size, noise_rng)
        elif config.perturbation == "geodp":
            released = geodp.privatize(gradients, noise_rng, reference=reference)  # empty batch: noise only
            reference = released
        else:
            released = clean
        cosines.append(float(cosine(released, clean)[0]))
        shares.append(float(leading_energy_share(released)[0]))
        update = torch.as_tensor(released, dtype=torch.float32)
        offset = 0
        for name, shape, size in shapes:
            params[name] -= config.lr * update[offset : offset + size].reshape(shape)
            offset += size
        if step % per_epoch == 0:
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(params[name])
            loss, accuracy = evaluate(model, *data.test)
            history.append({"epoch": step // per_epoch, "test_loss": loss, "test_accuracy": accuracy})
            if progress is not None:
                progress(history[-1])
    return {
        "model": model,
        "history": history,
        "steps": config.epochs * per_epoch,
        "train_examples": n,
        "parameters": dims,
        "cosines": cosines,
        "shares": shares,
        "geodp": geodp,
        "noise": noise,
    }


def laplace_privacy_record(config: DPSGDConfig, train_examples: int, steps: int) -> dict:
    """inid-laplace: each step is pure noise_epsilon-DP for one per-layer-clipped gradient added or
    removed (the sum moves within the profile's L1 bound). Poisson sampling at rate q amplifies it
    to log(1 + q (e^eps - 1)) (Balle, Barthe & Gaboardi 2018; add/remove one). Shuffled epochs
    (replace one: the batch sum moves by up to twice that bound) cost 2 noise_epsilon per epoch.
    The rounds are composed by dp_accounting's PLD of the generic eps-DP mechanism."""
    from dp_accounting import SelfComposedDpEvent

    from ldpfed.accounting import create_accountant, pure_round

    if config.sampling == "poisson":
        rate = min(1.0, config.batch_size / train_examples)
        event = SelfComposedDpEvent(pure_round(math.log1p(rate * math.expm1(config.noise_epsilon))), steps)
    else:
        event = SelfComposedDpEvent(pure_round(2.0 * config.noise_epsilon), config.epochs)
    epsilon = create_accountant("pld").compose(event).get_epsilon(config.target_delta)
    return {
        "private": True,
        "epsilon": float(epsilon),
        "accountant": "pld (dp_accounting; amplified pure eps per step)",
        "dp_event": str(event),
    }


def safe_epsilon(event, target_delta: float) -> dict:
    """epsilon of a safe-sampler run by ldpfed's rdp accountant, and its samplers' float slack on its
    own (the eps it adds to the ideal discrete Gaussian's curve, the part of delta it takes)."""
    from ldpfed.accounting import create_accountant
    from ldpfed.samplers.float_slack import SLACK_RULE

    spent = create_accountant("rdp").compose(event).spent(target_delta)
    return {
        "epsilon": spent.epsilon,
        "float_slack": {"epsilon": spent.float_slack_epsilon, "delta": spent.float_slack_delta, "rule": SLACK_RULE},
    }


def privacy_record(config: DPSGDConfig, train_examples: int, steps: int, parameters: int = 0) -> dict:
    """The run's privacy cost from dp-accounting (or the not-private record). A private record
    names the neighbouring relation its epsilon assumes and, for a sampler that is not
    floating-point safe, the assumption the guarantee rests on."""
    if not config.private:
        return {
            "private": False,
            "epsilon": None,
            "accountant": None,
            "neighbouring_relation": None,
            "noise_sampler": config.noise_sampler_description,
            "not_private_reason": _not_private_reason(config),
        }
    relation = neighbouring_relation(config.sampling)
    return {
        **_private_record(config, train_examples, steps, parameters),
        "neighbouring_relation": relation,
        "neighbouring_relation_description": RELATION_DESCRIPTIONS[relation],
        "noise_sampler": config.noise_sampler_description,
        "guarantee_assumes": None if config.safe_noise else FLOAT_ASSUMPTION,
    }


def _not_private_reason(config: DPSGDConfig) -> str:
    if gradient_noises.guarantee_fails(config.perturbation):
        return f"{config.perturbation}: {GUARANTEE_FAILS} (gradient-noise.md)"
    return "perturbation none: gradients released without noise"


def _private_record(config: DPSGDConfig, train_examples: int, steps: int, parameters: int) -> dict:
    """epsilon, accountant and event of a private run (see `privacy_record`)."""
    if config.perturbation == "plrvo":
        from dp_accounting import SelfComposedDpEvent

        from ldpfed.accounting import PlrvoDpEvent

        rate = min(1.0, config.batch_size / train_examples)
        event = SelfComposedDpEvent(
            PlrvoDpEvent(config.k, config.theta, config.clip, parameters, rate, config.noise_sampler), steps
        )
        return {
            "private": True,
            "epsilon": rdp_epsilon(event, config.target_delta),
            "accountant": "rdp of the PLRV-O joint accountant (ldpfed.accounting.PlrvoDpEvent)",
            "dp_event": str(event),
        }
    if config.perturbation == "inid-laplace":
        return laplace_privacy_record(config, train_examples, steps)
    # inid-gaussian: one release of d coordinates per step, as numeric (the profile sets scales only)
    perturbation = "numeric" if config.perturbation == "inid-gaussian" else config.perturbation
    if config.safe_noise:  # shuffled epochs, discrete Gaussian releases (RDP only), with the samplers' float slack
        event = training_event(
            perturbation,
            config.noise_multiplier,
            sampling=config.sampling,
            sample_rate=1.0,
            steps=steps,
            epochs=config.epochs,
            sampler="safe",
            dims=parameters,
        )
        return {
            "private": True,
            **safe_epsilon(event, config.target_delta),
            "accountant": "rdp of the discrete Gaussian (ldpfed.accounting.DiscreteGaussianVectorDpEvent)",
            "dp_event": str(event),
        }
    event = training_event(
        perturbation,
        config.noise_multiplier,
        sampling=config.sampling,
        sample_rate=min(1.0 - 1e-12, config.batch_size / train_examples),
        steps=steps,
        epochs=config.epochs,
    )
    return {
        "private": True,
        "epsilon": rdp_epsilon(event, config.target_delta),
        "accountant": ACCOUNTANT,
        "dp_event": str(event),
    }


def run(config: DPSGDConfig, progress=None, *, mia: bool = False, shadows: int = 8) -> dict:
    """Train with DP-SGD and return the JSON-ready summary (accuracy, epsilon, diagnostics).

    With `mia`, the model trains on a random half of the training data and a membership-inference
    report (simulations/mia.py, `shadows` reference models) is added. `progress(row)` gets each
    epoch's test row (a reference model's with its "model", e.g. "shadow model 1/8").
    """
    started = time.perf_counter()
    data, x_all, y_all = load(config)
    members = None
    if mia:
        members = member_split(int(y_all.numel()), config.seed)
        result = train(
            config,
            data,
            x_all[members],
            y_all[members],
            seed=config.seed,
            noise_seed=config.noise_seed,
            progress=progress,
        )
    else:
        result = train(config, data, x_all, y_all, seed=config.seed, noise_seed=config.noise_seed, progress=progress)
    final = result["history"][-1]
    public = {key: value for key, value in asdict(config).items() if key != "noise_seed"}
    summary = {
        "command": "dpsgd",
        **public,
        "batch_and_noise_randomness": "os entropy" if config.noise_seed is None else "secret noise-seed (not recorded)",
        **privacy_record(config, result["train_examples"], result["steps"], result["parameters"]),
        "sample_rate": config.batch_size / result["train_examples"],
        "steps": result["steps"],
        "train_examples": result["train_examples"],
        "parameters": result["parameters"],
        "accuracy": final["test_accuracy"],
        "loss": final["test_loss"],
        "history": result["history"],
        "mean_cosine_to_clean": float(np.mean(result["cosines"])),
        "mean_leading_energy_share": float(np.mean(result["shares"])),
        "noise_sd": _noise_sd(config, result["geodp"], result["parameters"], result["noise"]),
    }
    if mia:
        trained = []

        def train_shadow(x, y, seed):
            trained.append(seed)
            label = f"shadow model {len(trained)}/{shadows}"
            tagged = None if progress is None else lambda row: progress({**row, "model": label})
            return train(config, data, x, y, seed=seed, noise_seed=seed, progress=tagged)["model"]

        summary["mia"] = membership_inference(
            train_shadow, config.seed, x_all, y_all, members, result["model"], shadows=shadows
        )
    summary["elapsed_s"] = time.perf_counter() - started
    return summary


def _noise_sd(config: DPSGDConfig, geodp: GeoDP | None, dims: int, noise=None) -> dict | None:
    if noise is not None:
        sd = np.sqrt(noise.coordinate_variance()) / config.batch_size
        return {
            "per_coordinate": float(np.sqrt(np.mean(sd**2))),
            "min": float(sd.min()),
            "max": float(sd.max()),
            "noise": noise.describe(),
        }
    if config.perturbation == "numeric":
        return {"per_coordinate": config.noise_multiplier * config.clip / config.batch_size}
    if geodp is not None:
        magnitude, angle = geodp.noise_sd(dims)
        return {"magnitude": magnitude, "per_angle": angle, "sampler": geodp.sampler}
    return None

"""A node's batched privatization against the per-client loop it replaced (not a test).

For each privatizer: a (clients, d) block privatized by `privatize_rows` (one call, one generator
per client) and by a loop of `privatize(row, rng)` over the clients (the old TrainNode path), with
the same generators; the ratio loop / batched in the same run (best of `--repeats`, CPU time of
this process). The outputs are bit-identical (tests/test_privatize_rows.py); the gain is the
per-call overhead (validation, mechanism lookup, mask and assembly passes) paid once per block
instead of once per client. The draws themselves stay one per row until a sampler overrides
`Mechanism.perturb_rows` with one compiled call over the block.

    python benchmarks/bench_privatize_rows.py [--clients 500] [--dims 650] [--repeats 3]
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks.timing import best
from ldpfed.directional.privatizer import DirectionalPrivatizer
from ldpfed.training.noise_privatizer import NoisePrivatizer
from ldpfed.training.privatize import UpdatePrivatizer
from scripts.arguments import script_parser

CASES = {  # name: privatizer for updates of d coordinates
    "laplace, m = Wang's (1)": lambda dims: UpdatePrivatizer("laplace", 2.0, 0.05),
    "piecewise, m = min(d, 1000)": lambda dims: UpdatePrivatizer("piecewise", 2.0, 0.05, report_dims=min(dims, 1000)),
    "inid-gaussian (safe)": lambda dims: NoisePrivatizer("inid-gaussian", epsilon=2.0, delta=1e-5, clip=0.05),
    "ldpvec laplace, eps 8": lambda dims: DirectionalPrivatizer("laplace", 8.0, 0.05),
}


def main() -> None:
    args = script_parser(__doc__, clients=500, dims=650, repeats=3).parse_args()
    updates = np.random.default_rng(0).normal(scale=0.05, size=(args.clients, args.dims))
    rngs = lambda: [np.random.default_rng([k, 1]) for k in range(args.clients)]  # noqa: E731
    print(f"clients {args.clients}, d {args.dims}, best of {args.repeats} (CPU s); load {os.getloadavg()[0]:.1f}")
    print(f"{'privatizer':28s} {'loop s':>8s} {'batched s':>10s} {'loop/batched':>13s}")
    for name, build in CASES.items():
        privatizer = build(args.dims)
        privatizer.privatize_rows(updates[:2], rngs()[:2])  # calibrate and cache before timing

        def loop():
            return np.stack([privatizer.privatize(row, rng) for row, rng in zip(updates, rngs())])

        def batched():
            return privatizer.privatize_rows(updates, rngs())

        looped, batch = best(loop, args.repeats), best(batched, args.repeats)
        print(f"{name:28s} {looped:8.3f} {batch:10.3f} {looped / batch:13.2f}")


if __name__ == "__main__":
    main()

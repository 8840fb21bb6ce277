"""OLH at scale against pure-LDP's OLH, and the server's estimation step against the number of users.

    python benchmarks/bench_frequency_oracles.py [--users 1000000] [--dims 1024] [--epsilon 4.0]
        [--baseline-users 2000] [--repeats 3]

1. OLH end to end (every user's perturbation, then the server's estimate of all d frequencies):
   ldpfed's `olh` on `--users` users (vectorized clients; support counting compiled, O(k) memory)
   against pure-LDP 1.2.0's `LHClient`/`LHServer` with use_olh=True (Cormode, Maddock and Maple,
   PVLDB 2021; the library researchers use). pure-LDP privatises and aggregates one user per Python
   call, and its server hashes every category with xxhash for each user: its cost is exactly linear
   in users, so it is timed on `--baseline-users` users and scaled to `--users` (at 10^6 users and
   d = 1024 it would run ~10^9 xxhash calls, tens of minutes). Ratio = pure-LDP / ldpfed, same run.
2. The server's estimation step (`estimate` on given reports) of each oracle at n and 4n users:
   the time ratio should be ~4 (linear in users).
Times: best of `--repeats`, CPU time of this process (the compiled kernels are warmed up first).
Skips the comparison with a message when pure-LDP is not installed (`pip install pure-ldp`).
"""

from __future__ import annotations

import os

import numpy as np

import ldpfed.frequency as frequency
from benchmarks.timing import best
from scripts.arguments import script_parser

LINEAR_ORACLES = ("grr", "olh", "blh", "hadamard", "subset-selection", "hcms")


def ldpfed_olh(categories: np.ndarray, epsilon: float, d: int) -> np.ndarray:
    oracle = frequency.get("olh", epsilon, d)
    return oracle.estimate(oracle.perturb(categories, np.random.default_rng(1)))


class _EncodingXXHash:
    """pure-LDP 1.2.0 hashes str(index); xxhash >= 4 takes bytes only. This stand-in for the
    module encodes first; its own cost per call is measured and taken off pure-LDP's time."""

    def __init__(self, module):
        self._module = module

    def xxh32(self, data, seed=0):
        return self._module.xxh32(data.encode() if isinstance(data, str) else data, seed=seed)


def shim_overhead(calls: int = 200_000) -> float:
    """Seconds per call the stand-in adds over a direct xxh32 of bytes (encoding included, so the
    correction favours pure-LDP)."""
    import xxhash

    shim = _EncodingXXHash(xxhash)
    direct = best(lambda: [xxhash.xxh32(b"517", seed=i).intdigest() for i in range(calls)], 3)
    wrapped = best(lambda: [shim.xxh32("517", seed=i).intdigest() for i in range(calls)], 3)
    return max(0.0, wrapped - direct) / calls


def pure_ldp_olh(categories: np.ndarray, epsilon: float, d: int) -> np.ndarray:
    import xxhash
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer, lh_client, lh_server

    lh_client.xxhash = lh_server.xxhash = _EncodingXXHash(xxhash)

    client = LHClient(epsilon=epsilon, d=d, use_olh=True)
    server = LHServer(epsilon=epsilon, d=d, use_olh=True)
    for value in categories:
        server.aggregate(client.privatise(int(value) + 1))  # pure-LDP's items are 1..d by default
    return server.estimate_all(range(1, d + 1), suppress_warnings=True)


def compare_olh(args, categories: np.ndarray) -> None:
    try:
        import pure_ldp  # noqa: F401
    except ImportError:
        print("pure-LDP is not installed (pip install pure-ldp): OLH comparison skipped")
        return
    ldpfed_seconds = best(lambda: ldpfed_olh(categories, args.epsilon, args.dims), args.repeats)
    sample = categories[: args.baseline_users]
    measured = best(lambda: pure_ldp_olh(sample, args.epsilon, args.dims), 1)
    pure_seconds = (measured - shim_overhead() * sample.size * (args.dims + 1)) * categories.size / sample.size
    print(f"OLH, n = {categories.size:,}, d = {args.dims}, eps = {args.epsilon:g}")
    print(f"  ldpfed olh (perturb + estimate): {ldpfed_seconds:8.2f} s")
    print(f"  pure-LDP LH use_olh (from {sample.size:,} users, scaled; stand-in's cost off): {pure_seconds:8.1f} s")
    print(f"  ratio pure-LDP / ldpfed: {pure_seconds / ldpfed_seconds:,.0f}x")


def server_linearity(args, categories: np.ndarray) -> None:
    print(f"server estimate, d = {args.dims}, eps = {args.epsilon:g}: CPU s at n and 4n users")
    quarter = categories[: categories.size // 4]
    for name in LINEAR_ORACLES:
        oracle = frequency.get(name, args.epsilon, args.dims)
        rng = np.random.default_rng(2)
        reports = [oracle.perturb(part, rng) for part in (quarter, categories)]
        oracle.estimate(reports[0][:1000])  # warm-up (compiles the kernel on first use)
        small, large = (best(lambda r=r: oracle.estimate(r), args.repeats) for r in reports)
        print(f"  {name:18s} n {quarter.size:>9,}: {small:7.3f} s   4n: {large:7.3f} s   ratio {large / small:5.2f}")


def main() -> None:
    args = script_parser(__doc__, users=1_000_000, dims=1024, epsilon=4.0, baseline_users=2000, repeats=3).parse_args()
    categories = np.random.default_rng(0).integers(0, args.dims, size=args.users)
    ldpfed_olh(categories[:1000], args.epsilon, args.dims)  # warm-up: compile the counting kernel
    print(f"load {os.getloadavg()[0]:.1f}")
    compare_olh(args, categories)
    server_linearity(args, categories)


if __name__ == "__main__":
    main()

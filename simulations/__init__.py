"""Runners and experiments of LDP federations (spec: federated.md).

The protocols live in `ldpfed.protocols` (Flower-free); `clients/` and `server/` are thin Flower
adapters around them; this package is the harness that plays the world (`federation`: seeds,
engines, diagnostics) and the commands built on it. The core library reaches it only through entry
points (`simulate`, `dpsgd`, `compare --task train|trust`); the results-page generators that drive it
live in `scripts/`.
"""

"""Runners and experiments of LDP federations (spec: federated.md).

The protocols live in `ldpfed.protocols` (Flower-free); `clients/` and `server/` are thin Flower
adapters around them; this package is the harness that plays the world (`federation`: seeds,
engines, diagnostics) and the experiments built on it. Nothing imports it but the CLI, through
entry points (`simulate`, `compare --task train`).
"""

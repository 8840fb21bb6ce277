"""Flower simulations of LDP federations (spec: federated.md).

The Flower apps in `clients/` and `server/` are thin: they call the task logic here
(`mean_task`, `train_task`), which in turn calls the ldpfed library. `ldpfed` itself never imports
Flower; `simulations.cli` adds the `simulate` command to ldpfed's CLI through an entry point.
"""

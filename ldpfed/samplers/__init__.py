"""Floating-point-safe sampling (spec: mechanisms.md, Floating-point safety; Mironov 2012).

The floor every randomizer stands on: random words (`words`), grids and exact rounding to them
(`grid`, `grid_noise`), exact integer noise (`discrete_gaussian`, `discrete_laplace`), the grids of
the gradient noises (`safe_grid`, `plrvo_safe`) and the float slack a grid adds to a guarantee
(`float_slack`). Nothing here knows of mechanisms, accountants or federations.
"""

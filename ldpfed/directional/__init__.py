"""Directional perturbation of gradients in hyperspherical coordinates (spec: directional.md).

- `spherical`: exact O(d) transforms between vectors and (magnitude, angles).
- `windows`: angle clipping into fixed or reference-centred windows of width beta*pi.
- `rotation`: the public randomized Hadamard rotation.
- `ldpvec`: LDPVec for federated LDP-SGD (`LDPVec(...).perturb(updates, rng)`), its budget split
  and exact angle-noise statistics.
- `geodp`: GeoDP for central DP-SGD, with additive RDP accounting.
- `diagnostics`: cosine to the clean update and energy in the leading coordinates.
- `neighbours`: worst-case neighbouring inputs and the density ratio of the polar release.

Pure numpy; never imports Flower, torch or simulations/.
"""

from ldpfed.directional.diagnostics import cosine, leading_energy_share
from ldpfed.directional.ldpvec import MAGNITUDES, BudgetSplit, LDPVec
from ldpfed.directional.rotation import ROTATIONS
from ldpfed.directional.spherical import from_spherical, to_spherical
from ldpfed.directional.windows import WINDOWS

__all__ = [
    "MAGNITUDES",
    "ROTATIONS",
    "WINDOWS",
    "BudgetSplit",
    "LDPVec",
    "cosine",
    "from_spherical",
    "leading_energy_share",
    "to_spherical",
]

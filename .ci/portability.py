"""Reruns the tests marked `float_portable` where floating-point details can change a result:
at every numpy SIMD dispatch level this CPU offers below its best, and with torch on 1 and 2
intra-op threads (`LDPFED_TORCH_THREADS`, read by tests/conftest.py).

The levels are read from numpy at run time (the dispatch targets it was built with that this CPU
supports, in numpy's ascending order); level k disables every target above it through
`NPY_DISABLE_CPU_FEATURES`, down to numpy's baseline. An AVX-512 machine thus also runs the AVX2
and baseline kernels, an AVX2 machine the baseline ones. Exits with the first failing run's code.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

try:  # numpy >= 2
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
except ImportError:  # numpy 1.x
    from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "float_portable"]


def runs() -> list[tuple[str, dict[str, str]]]:
    """(label, extra environment) of every rerun."""
    targets = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    plan = []
    for level in range(len(targets) - 1, -1, -1):  # the level just below the best first
        disabled = targets[level:]
        best = targets[level - 1] if level else "baseline"
        plan.append(
            (f"numpy {best} (disabled: {' '.join(disabled)})", {"NPY_DISABLE_CPU_FEATURES": " ".join(disabled)})
        )
    plan += [(f"torch on {threads} thread(s)", {"LDPFED_TORCH_THREADS": str(threads)}) for threads in (1, 2)]
    return plan


def marked_files() -> list[str]:
    """The test files holding marked tests (collected once: the reruns skip the rest's imports)."""
    listing = subprocess.run([*PYTEST, "--collect-only"], capture_output=True, text=True, check=True).stdout
    return sorted({line.split("::")[0] for line in listing.splitlines() if "::" in line})


def main() -> int:
    targets = " ".join(name for name in __cpu_dispatch__ if __cpu_features__.get(name)) or "none"
    print(f"numpy {np.__version__}: dispatch targets on this CPU: {targets}", flush=True)
    files = marked_files()
    for label, extra in runs():
        print(f"--- float_portable tests, {label}", flush=True)
        code = subprocess.call([*PYTEST, *files], env={**os.environ, **extra})
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())

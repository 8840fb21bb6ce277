"""What a result depends on besides its inputs: versions, commit, SIMD level, torch, Python, OS.

`environment()` is the record every output directory's manifest carries (`ldpfed.outputs`), that
`ldpfed --version --verbose` prints (`describe`) and that a results page's "Run:" line shortens
(`short_summary`). Nothing heavy is imported to build it:
- versions of ldpfed, numpy, torch, flwr, ray and dp-accounting from the installed distributions'
  metadata (`importlib.metadata`); a package that is not installed is None;
- git: the commit and whether tracked files differ from it, when ldpfed is imported from a git
  checkout (its source directory's parent is the work tree's top); None when installed as a
  package, when git is missing or when it does not answer within GIT_TIMEOUT seconds;
- numpy's SIMD: the baseline it was built for, the dispatch targets it was built with, those this
  CPU (less `NPY_DISABLE_CPU_FEATURES`) enables, the highest of them (`level`: the kernels that run),
  and the CPU features numpy detected;
- torch: intra- and inter-op threads, the device a run would pick (cuda when available), CUDA and
  cuDNN versions, read only when torch is already imported by the process (importing it costs
  seconds and hundreds of MB, and a run that never imported it did not use it); None otherwise.
  The manifest is rewritten at every write, so a training run's carries it once torch is loaded;
- Python's version and implementation, and the OS (`platform.platform()`) and machine.
The parts that cannot change during a process (versions, git, numpy, Python, OS) are read once.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("ldpfed", "numpy", "torch", "flwr", "ray", "dp-accounting")
GIT_TIMEOUT = 3.0  # seconds for each git call
SOURCE = Path(__file__).resolve().parent  # the ldpfed package directory


def versions() -> dict[str, str | None]:
    """{distribution: version or None} of PACKAGES, from the installed metadata (no imports)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _git(*args: str, cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(source: Path = SOURCE) -> dict[str, object] | None:
    """{"commit": full hash, "dirty": tracked files differ} of the checkout ldpfed runs from, else None."""
    top = _git("rev-parse", "--show-toplevel", cwd=source)
    if not top or Path(top).resolve() != source.parent:
        return None
    commit = _git("rev-parse", "HEAD", cwd=source)
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=source)
    if not commit or status is None:
        return None
    return {"commit": commit, "dirty": bool(status)}


def numpy_simd() -> dict[str, object]:
    """numpy's SIMD build and what this CPU runs of it (the same reading as .ci/portability.py)."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath
    features = dict(umath.__cpu_features__)
    enabled = [name for name in umath.__cpu_dispatch__ if features.get(name)]
    return {
        "level": enabled[-1] if enabled else "baseline",
        "baseline": list(umath.__cpu_baseline__),
        "dispatch": list(umath.__cpu_dispatch__),
        "dispatch_enabled": enabled,
        "disabled_by_env": os.environ.get("NPY_DISABLE_CPU_FEATURES") or None,
        "cpu_features": sorted(name for name, on in features.items() if on),
    }


def torch_state(load: bool = False) -> dict[str, object] | None:
    """torch's threads, device and CUDA/cuDNN versions, if this process has imported torch (or `load`
    and torch is installed: `ldpfed --version --verbose` pays the import); else None."""
    if load and "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except ImportError:
            return None
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return None
    cuda = bool(torch.cuda.is_available())
    cudnn = torch.backends.cudnn.version() if cuda and torch.backends.cudnn.is_available() else None
    return {
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "device": f"cuda ({torch.cuda.get_device_name(0)})" if cuda else "cpu",
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
    }


@functools.lru_cache(maxsize=1)
def _static() -> dict[str, object]:
    return {
        "versions": versions(),
        "git": git_state(),
        "numpy_simd": numpy_simd(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": platform.platform(),
        "machine": platform.machine(),
    }


def environment(load_torch: bool = False) -> dict[str, object]:
    """The manifest's `environment` record (module docstring); a new dict at each call. `load_torch`
    imports torch to describe it even if this process has not."""
    static = _static()
    return {**static, "versions": dict(static["versions"]), "torch": torch_state(load_torch)}


def short_summary(env: dict[str, object]) -> str:
    """One line for a results page: versions, numpy's SIMD level, torch threads/device, Python, OS."""
    present = {name: version for name, version in env["versions"].items() if version}
    parts = [f"ldpfed {present.pop('ldpfed', '?')}"]
    numpy = present.pop("numpy", None)
    if numpy:
        parts.append(f"numpy {numpy} ({env['numpy_simd']['level']})")
    torch, state = present.pop("torch", None), env.get("torch")
    if torch:
        parts.append(f"torch {torch}" + (f" ({state['threads']} threads, {state['device']})" if state else ""))
    parts += [f"{name} {version}" for name, version in present.items()]
    parts.append(f"Python {env['python'].split()[-1]}, {platform.system() or env['os']} {env['machine']}")
    return ", ".join(parts)


def describe(env: dict[str, object]) -> str:
    """Lines for `ldpfed --version --verbose`: every field of the record."""
    git, simd, torch = env["git"], env["numpy_simd"], env["torch"]
    lines = [f"{name}: {version or 'not installed'}" for name, version in env["versions"].items()]
    lines.append(
        f"git: {git['commit']}{' (uncommitted changes)' if git['dirty'] else ''}" if git else "git: not a checkout"
    )
    lines.append(
        f"numpy SIMD: {simd['level']} (baseline {' '.join(simd['baseline']) or 'none'}; "
        f"dispatch {' '.join(simd['dispatch_enabled']) or 'none'} of {' '.join(simd['dispatch']) or 'none'}"
        + (f"; disabled {simd['disabled_by_env']}" if simd["disabled_by_env"] else "")
        + ")"
    )
    lines.append(f"CPU features: {' '.join(simd['cpu_features']) or 'none'}")
    if torch:
        lines.append(
            f"torch: {torch['threads']} threads ({torch['interop_threads']} inter-op), {torch['device']}, "
            f"CUDA {torch['cuda'] or 'none'}, cuDNN {torch['cudnn'] or 'none'}"
        )
    else:
        lines.append("torch: not imported")
    lines += [f"Python: {env['python']}", f"OS: {env['os']} ({env['machine']})"]
    return "\n".join(lines)

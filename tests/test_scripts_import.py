"""Every module under simulations/, scripts/ and benchmarks/ imports: a name moved inside ldpfed breaks
a results script at once here, not when its page is next regenerated."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for folder in ("simulations", "scripts", "benchmarks")
    for path in (ROOT / folder).glob("*.py")
    if path.name != "__init__.py"
)


@pytest.mark.parametrize("module", SCRIPTS)
def test_script_imports(module):
    importlib.import_module(module)

"""The environment record of every output directory's manifest (ldpfed.manifest): each field read
from its source, checked against an independent reading (git, numpy and torch asked directly, in a
fresh process where the reading depends on the process's state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ldpfed import manifest

ROOT = manifest.SOURCE.parent


def _fresh(code: str, **env: str) -> dict:
    """The JSON a fresh interpreter prints after running `code` (environment `env` added)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **env}, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_versions_come_from_the_installed_packages_and_a_missing_one_is_null(monkeypatch):
    found = manifest.versions()
    assert list(found) == list(manifest.PACKAGES)
    assert found["numpy"] == np.__version__
    monkeypatch.setattr(manifest, "PACKAGES", ("numpy", "ldpfed-no-such-package"))
    assert manifest.versions() == {"numpy": np.__version__, "ldpfed-no-such-package": None}


def test_git_names_the_checkouts_head_and_whether_tracked_files_changed(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    state = manifest.git_state()
    assert state is not None and state["commit"] == head.stdout.strip()

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    package = tmp_path / "ldpfed"
    package.mkdir()
    (package / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    clean = manifest.git_state(package)
    assert clean is not None and clean["dirty"] is False and len(clean["commit"]) == 40
    (tmp_path / "untracked.txt").write_text("results")  # an --out directory inside the checkout
    assert manifest.git_state(package)["dirty"] is False
    (package / "code.py").write_text("x = 2\n")
    assert manifest.git_state(package) == {"commit": clean["commit"], "dirty": True}


def test_git_is_null_outside_a_checkout_inside_another_repository_or_without_git(tmp_path, monkeypatch):
    assert manifest.git_state(tmp_path) is None  # not a checkout
    nested = tmp_path / "site-packages" / "ldpfed"  # installed inside some other repository's tree
    nested.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert manifest.git_state(nested) is None
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert manifest.git_state() is None


def test_numpys_simd_level_follows_the_cpu_features_numpy_enables():
    simd = manifest.numpy_simd()
    enabled = simd["dispatch_enabled"]
    assert simd["level"] == (enabled[-1] if enabled else "baseline")
    assert set(enabled) <= set(simd["dispatch"]) and set(enabled) <= set(simd["cpu_features"])
    if not enabled:
        pytest.skip("numpy runs its baseline kernels on this CPU: no level to disable")
    code = "import json; from ldpfed.manifest import numpy_simd; print(json.dumps(numpy_simd()))"
    lowered = _fresh(code, NPY_DISABLE_CPU_FEATURES=enabled[-1])
    assert lowered["level"] != simd["level"] and enabled[-1] not in lowered["dispatch_enabled"]
    assert lowered["disabled_by_env"] == enabled[-1]


def test_torch_is_described_only_once_imported():
    code = (
        "import json, sys; from ldpfed.manifest import environment; "
        "print(json.dumps([environment()['torch'], 'torch' in sys.modules]))"
    )
    assert _fresh(code) == [None, False]  # building the record imports no torch
    torch = pytest.importorskip("torch")
    code = (
        "import json, torch; torch.set_num_threads(1); from ldpfed.manifest import environment; "
        "print(json.dumps(environment()['torch']))"
    )
    state = _fresh(code)
    assert state["threads"] == 1
    assert state["device"].startswith("cuda") == torch.cuda.is_available()
    assert state["cuda"] == torch.version.cuda


def test_the_record_is_json_and_its_summaries_name_every_version():
    env = manifest.environment(load_torch=True)
    assert json.loads(json.dumps(env)) == env
    assert env["python"].endswith(sys.version.split()[0])
    text, line = manifest.describe(env), manifest.short_summary(env)
    for name, version in env["versions"].items():
        if version:
            assert f"{name}: {version}" in text and f"{name} {version}" in line
    assert f"({env['numpy_simd']['level']})" in line and "\n" not in line


@pytest.mark.parametrize("order", [["--version", "--verbose"], ["--verbose", "--version"]])
def test_version_verbose_prints_what_a_manifest_records(order):
    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    result = CliRunner().invoke(app, order)
    assert result.exit_code == 0, result.output
    first, *rest = result.output.splitlines()
    assert first.startswith("ldpfed ") and "\n".join(rest).strip() == manifest.describe(
        manifest.environment(load_torch=True)
    )
    plain = CliRunner().invoke(app, ["--version"])
    assert plain.output.strip() == first

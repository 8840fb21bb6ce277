"""A results page's run stamp names the date and the commit of the code that generated it."""

import re
import subprocess

from simulations import provenance


def test_stamp_names_head_commit_and_date():
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=provenance.ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    stamp = provenance.run_stamp()
    assert re.fullmatch(r"Run: \d{4}-\d{2}-\d{2}, commit [0-9a-f]{7,}( \+ uncommitted changes)?\.", stamp), stamp
    assert f"commit {head}" in stamp


def test_stamp_outside_a_checkout_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    assert re.fullmatch(r"Run: \d{4}-\d{2}-\d{2}, no git checkout\.", provenance.run_stamp())

"""A results page's run stamp names the date and the commit of the code that generated it."""

import re
import subprocess

from scripts import provenance


def test_stamp_names_head_commit_and_date():
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=provenance.ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    stamp = provenance.run_stamp()
    assert re.fullmatch(
        r"Run: \d{4}-\d{2}-\d{2}, commit [0-9a-f]{7,}( \+ uncommitted changes)?"
        r"; ldpfed \S+, numpy \S+ \(\w+\)(, .*)?\.",
        stamp,
    ), stamp
    assert f"commit {head}" in stamp


def test_stamp_outside_a_checkout_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    assert re.fullmatch(r"Run: \d{4}-\d{2}-\d{2}, no git checkout; ldpfed .*\.", provenance.run_stamp())


def test_stamp_counts_code_changes_not_the_results_being_written(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    (tmp_path / "docs" / "results").mkdir(parents=True)
    page, code = tmp_path / "docs" / "results" / "page.md", tmp_path / "script.py"
    page.write_text("old\n")
    code.write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    page.write_text("new\n")  # what a results script does while it runs
    assert "uncommitted" not in provenance.run_stamp()
    code.write_text("x = 2\n")
    assert " + uncommitted changes; ldpfed " in provenance.run_stamp()

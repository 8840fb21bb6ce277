"""`ldpfed.outputs`: destinations checked before work, written atomically,
all files or none, Ctrl-C safe. The commands' use of it: tests/test_cli_outputs.py."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ldpfed.outputs import MANIFEST, Interrupted, OutputDir, _sigint_held_back
from ldpfed.validation import LDPValueError


# ---- OutputDir.prepare --------------------------------------------------------------------------
def test_prepare_refuses_a_file_and_a_path_below_a_file(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(LDPValueError, match="exists and is not a directory"):
        OutputDir.prepare(a_file, command="test")
    with pytest.raises(LDPValueError, match="is a file"):
        OutputDir.prepare(a_file / "sub" / "dir", command="test")


def test_prepare_refuses_an_unwritable_location(tmp_path):
    if Path("/proc").is_dir():  # a read-only place even for root
        with pytest.raises(LDPValueError, match="cannot be written"):
            OutputDir.prepare("/proc/ldpfed-out/run", command="test")
    if os.geteuid() != 0:  # root ignores permission bits
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        with pytest.raises(LDPValueError, match="cannot be written"):
            OutputDir.prepare(locked / "run", command="test")


def test_prepare_writes_nothing_and_missing_directories_appear_at_the_first_write(tmp_path):
    out = tmp_path / "new" / "run"
    output = OutputDir.prepare(out, command="test")
    assert not (tmp_path / "new").exists() and list(tmp_path.iterdir()) == []
    output.write({"a.txt": "hello"})
    assert (out / "a.txt").read_text() == "hello"
    manifest = json.loads((out / MANIFEST).read_text())
    assert {key: manifest[key] for key in ("command", "files")} == {"command": "test", "files": ["a.txt"]}
    assert set(manifest["environment"]) == {"versions", "git", "numpy_simd", "torch", "python", "os", "machine"}
    assert manifest["environment"]["versions"]["numpy"] == np.__version__


def test_the_manifest_is_rewritten_only_when_a_write_changes_it(tmp_path):
    """A round's rewrite of the same file leaves the manifest as it is (the same file on disk); a
    new file's first write lists it; after `discard` the next write writes it again."""
    output = OutputDir.prepare(tmp_path / "run", command="test")
    output.write({"metrics.csv": "round\n1\n"})
    first = (tmp_path / "run" / MANIFEST).stat()
    output.write({"metrics.csv": "round\n1\n2\n"})
    assert (tmp_path / "run" / MANIFEST).stat().st_ino == first.st_ino  # not replaced
    output.write({"summary.json": {}})
    assert (tmp_path / "run" / MANIFEST).stat().st_ino != first.st_ino
    assert json.loads((tmp_path / "run" / MANIFEST).read_text())["files"] == ["metrics.csv", "summary.json"]
    output.discard()
    output.write({"metrics.csv": "round\n"})
    assert json.loads((tmp_path / "run" / MANIFEST).read_text())["files"] == ["metrics.csv"]


def test_another_runs_results_are_refused_then_replaced_with_overwrite(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("metrics.csv", "summary.json", "plot.png"):  # a simulate run's files, no manifest
        (out / name).write_text("old")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(LDPValueError, match="holds results of another run.*--overwrite"):
        OutputDir.prepare(out, command="compare")
    output = OutputDir.prepare(out, overwrite=True, command="compare")
    assert (out / "metrics.csv").read_text() == "old"  # nothing removed before the new results exist
    output.write({"summary.json": {"a": 1}})
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "notes.txt", "summary.json"]
    output.write({"runs.csv": pd.DataFrame({"x": [1]})})  # a second write of the same run adds to it
    assert json.loads((out / MANIFEST).read_text())["files"] == ["summary.json", "runs.csv"]
    with pytest.raises(LDPValueError, match="another run"):
        OutputDir.prepare(out, command="compare")


def test_a_directory_of_other_files_is_accepted(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    OutputDir.prepare(tmp_path, command="test").write({"summary.json": [1]})
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_failing_write_leaves_no_file_and_no_temporary(tmp_path):
    output = OutputDir.prepare(tmp_path / "run", command="test")

    class Unserializable:
        pass

    with pytest.raises(TypeError):
        output.write({"a.csv": pd.DataFrame({"x": [1]}), "b.json": {"bad": Unserializable()}})
    assert list(tmp_path.iterdir()) == []  # no file, no temporary, and the new directory is gone
    (tmp_path / "kept").mkdir()
    with pytest.raises(TypeError):
        OutputDir.prepare(tmp_path / "kept", command="test").write({"b.json": Unserializable()})
    assert list((tmp_path / "kept").iterdir()) == []  # an existing directory stays


def test_sigint_during_the_renames_is_raised_after_them():
    hits = []
    # Python's own SIGINT handler, whatever the suite inherited (a background job starts with SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _sigint_held_back():
                os.kill(os.getpid(), signal.SIGINT)
                hits.append("block finished")
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert hits == ["block finished"]


def test_ctrl_c_inside_the_block_says_what_is_on_disk(tmp_path):
    with pytest.raises(Interrupted, match="nothing written to"):
        with OutputDir.prepare(tmp_path / "a", command="test"):
            raise KeyboardInterrupt
    with pytest.raises(Interrupted, match="holds complete x.txt"):
        with OutputDir.prepare(tmp_path / "b", command="test") as output:
            output.write({"x.txt": "1"})
            raise KeyboardInterrupt

"""Which code made a results page: the date and commit of the working tree at generation time.

A page says when and from what it was generated, so that a reader can check out that commit and
regenerate it; uncommitted changes are said too, since the commit alone would not reproduce them
(changes to the results pages themselves excepted: a script writing its page changes them).
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

from ldpfed.manifest import environment, short_summary

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "docs/results"


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def run_stamp() -> str:
    """'Run: YYYY-MM-DD, commit abc1234; ldpfed 0.1.0, numpy 2.4.6 (X86_V3), ...' (UTC date; 'no git
    checkout' or '+ uncommitted changes' when so; then the output manifest's environment, short)."""
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    commit = _git("rev-parse", "--short", "HEAD")
    environment_line = short_summary(environment())
    if not commit:
        return f"Run: {date}, no git checkout; {environment_line}."
    # The results a script is writing (docs/results) are not the code that made them.
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RESULTS}")
    dirty = " + uncommitted changes" if changed else ""
    return f"Run: {date}, commit {commit}{dirty}; {environment_line}."

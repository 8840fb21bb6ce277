"""Which code made a results page: the date and commit of the working tree at generation time.

A page says when and from what it was generated, so that a reader can check out that commit and
regenerate it; uncommitted changes are said too, since the commit alone would not reproduce them
(changes to the results pages themselves excepted: a script writing its page changes them).
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "docs/results"


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def run_stamp() -> str:
    """'Run: YYYY-MM-DD, commit abc1234' (UTC date; 'no git checkout' or '+ uncommitted changes' when so)."""
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return f"Run: {date}, no git checkout."
    # The results a script is writing (docs/results) are not the code that made them.
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RESULTS}")
    dirty = " + uncommitted changes" if changed else ""
    return f"Run: {date}, commit {commit}{dirty}."

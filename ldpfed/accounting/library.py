"""dp-accounting's event classes (`dp_accounting.dp_event`) without the rest of the library.

`import dp_accounting` (or any of its submodules) runs the package's `__init__`, which imports its
PLD, RDP and calibration code and with them scipy.stats and scipy.signal: about 1.5 s of a process'
start, which a Flower node pays on its first message although it only builds events (its ledger
entries are the server's). `dp_event.py` itself imports only `attr`. `dp_event` here is that module,
loaded under its own name from the installed package; when the package is imported later (an
accountant that composes), its `__init__` finds the module in `sys.modules` and uses it, so there is
one set of event classes either way. Code that accounts imports dp-accounting's PLD and RDP parts
where it runs them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

MODULE = "dp_accounting.dp_event"


def _load_dp_event() -> ModuleType:
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    if "dp_accounting" in sys.modules:  # the package is up: its own module
        return importlib.import_module(MODULE)
    package = importlib.util.find_spec("dp_accounting")  # finds the package without importing it
    spec = importlib.util.spec_from_file_location(MODULE, Path(package.submodule_search_locations[0]) / "dp_event.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return module


dp_event = _load_dp_event()

"""Flower's node actor for a local Ray's workers, imported as they start (Ray's
`preload_python_modules`, simulations.runner.NODE_MODULES), without Flower's simulation entry points.

Flower's `ClientAppActor` lives in `flwr.simulation.ray_transport.ray_actor`; importing it runs the
`flwr.simulation` package's `__init__`, which imports the in-process runner and, through it, the
SuperLink's state stores (SQLAlchemy, Alembic, FastAPI): 1-1.8 s of CPU in every worker, for code
that only the driver runs. Here the package is registered first with its path (its submodules
import as usual) and its `__init__` deferred to the first name read from it (`deferred_package`),
then the actor's module is imported. A worker that reads one of the package's names still gets it.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

SIMULATION_PACKAGE = "flwr.simulation"
ACTOR_MODULE = "flwr.simulation.ray_transport.ray_actor"


def deferred_package(name: str) -> ModuleType | None:
    """Register package `name` (not imported yet) without running its `__init__`, which runs on the
    first attribute read that the package's path and spec do not answer; None when `name` is already
    imported or is not a package found on the path (then nothing is done)."""
    if name in sys.modules:
        return None
    spec = importlib.util.find_spec(name)  # imports the parent packages, not `name`
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None
    package = importlib.util.module_from_spec(spec)

    def initialize(attribute: str):
        del package.__getattr__  # once: from here on the package is an ordinary module
        spec.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = initialize
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)
    return package


deferred_package(SIMULATION_PACKAGE)
importlib.import_module(ACTOR_MODULE)

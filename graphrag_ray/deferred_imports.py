"""Deferred package initialisers for two dependencies whose ``__init__`` imports far more than we use.

``openai.types/__init__`` builds every API's pydantic models (~0.4 s; we need chat and embeddings), and
``lance_namespace_urllib3_client/__init__`` imports a REST client for every namespace operation (~0.6 s; LanceDB
only needs its ``models`` subpackage). Together that is about half a ``graphrag-ray query`` command and part of
every Ray worker's start-up.

``install()`` registers such a package in ``sys.modules`` before anything imports it, as a module with its real
``__spec__``/``__path__`` whose ``__init__`` has not run. Submodules import normally; an attribute that names a
submodule imports just that submodule; any other attribute (a re-exported class, ``__all__``) runs the real
``__init__`` first, so behaviour is unchanged — only later, and often never. Python 3.15's lazy imports
(PEP 810) are the standard form of this; until then this is scoped to the two packages above.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

DEFERRED_PACKAGES = ("openai.types", "openai.types.responses", "openai.types.chat",
                     "lance_namespace_urllib3_client")


class DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs on first use of a name that is not one of its submodules."""

    def __getattr__(self, name: str):
        state = self.__dict__
        if state.get("_deferred_init_done") or (name.startswith("__") and name != "__all__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        folder = Path(state["__path__"][0])
        if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file():
            return importlib.import_module(f"{self.__name__}.{name}")
        self.run_init()
        return getattr(self, name)

    def run_init(self) -> None:
        state = self.__dict__
        if state.get("_deferred_init_done"):
            return
        state["_deferred_init_done"] = True  # set first: names looked up while __init__ runs must not re-enter
        self.__spec__.loader.exec_module(self)


def _package_spec(dotted: str):
    top = importlib.util.find_spec(dotted.split(".")[0])  # a top-level name: located, not imported
    if top is None or not top.submodule_search_locations:
        return None
    folder = Path(list(top.submodule_search_locations)[0]).joinpath(*dotted.split(".")[1:])
    init = folder / "__init__.py"
    if not init.is_file():
        return None
    return importlib.util.spec_from_file_location(dotted, init, submodule_search_locations=[str(folder)])


def install() -> None:
    """Register the deferred packages; a no-op for any already imported, missing or laid out differently."""
    for dotted in DEFERRED_PACKAGES:
        if dotted.split(".")[0] in sys.modules or dotted in sys.modules:
            continue
        try:
            spec = _package_spec(dotted)
        except (ImportError, ValueError, OSError):
            spec = None
        if spec is None:
            continue
        module = importlib.util.module_from_spec(spec)
        module.__class__ = DeferredPackage
        sys.modules[dotted] = module


def import_igraph():
    """igraph, imported as if matplotlib were absent (unless something already loaded it): its drawing module
    imports matplotlib.pyplot whenever matplotlib is installed (~0.5 s per process, e.g. with the eval extra),
    and we never draw with igraph - it keeps its own stand-in for a missing matplotlib."""
    if "igraph" in sys.modules or "matplotlib" in sys.modules:
        return importlib.import_module("igraph")
    sys.modules["matplotlib"] = None  # type: ignore[assignment]  # `import matplotlib` raises ImportError
    try:
        return importlib.import_module("igraph")
    finally:
        if "matplotlib" in sys.modules and sys.modules["matplotlib"] is None:
            del sys.modules["matplotlib"]

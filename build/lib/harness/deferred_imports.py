"""Modules that a library imports at its own import but uses only later, if
ever, imported on first use instead.

gymnax imports seaborn and matplotlib.pyplot at import for its drawing code
(MinAtar Pong, bsuite Catch): about 1.3 s of a run's start-up on the
reference CPU, for a run that never draws. `defer(names)` puts a stand-in
for each such module into `sys.modules`; the first attribute read from it
imports the real module (which then replaces the stand-in) and answers from
it, so code that does draw gets all of it.

The standard library's `importlib.util.LazyLoader` cannot do this: its
module loads on any attribute access, and an `import` statement reads the
module's `__spec__`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

# gymnax's drawing modules (its envs' `render` and `gymnax.visualize`).
GYMNAX_DRAWING = ("seaborn", "matplotlib.pyplot")


class _Deferred(types.ModuleType):
    """Stands in for a module not imported yet (see the module docstring)."""

    def __init__(self, name: str, spec: importlib.machinery.ModuleSpec):
        super().__init__(name)
        self.__spec__ = spec  # what the import system reads: a module fully set up

    def __getattr__(self, attr: str):  # only for attributes the stand-in lacks
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        module = importlib.import_module(name)
        return getattr(module, attr)


def defer(names: tuple[str, ...]) -> None:
    """A stand-in for each module in `names` that is neither imported yet nor
    missing (a missing one stays missing, so its import fails as usual)."""
    for name in names:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)  # imports the parent package of a submodule
        except ImportError:
            continue
        if spec is not None:
            sys.modules[name] = _Deferred(name, spec)

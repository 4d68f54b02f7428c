"""How a peer's module is imported from its checkout: loaded fresh from the
checkout's folder and not left in `sys.modules` (`import_fresh`), with empty
stand-ins for the packages it imports but the side-by-side never runs
(`stand_ins`). What a peer needs that the harness does not install is
checked first (`peers.check`, from `peer_checkouts.CHECKOUTS`). A checkout that cannot be used raises `PeerError`."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class PeerError(ValueError):
    """A peer checkout that cannot be used; the message says why."""


@contextlib.contextmanager
def stand_ins(unused: dict[str, tuple[str, ...]], **attributes: Any) -> Iterator[None]:
    """Empty modules (with `attributes`) for the packages in `unused` that
    are not installed, registered for an import and removed after it."""
    added = []
    for package, names in unused.items():
        if importlib.util.find_spec(package) is not None:
            continue
        for name in names:
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
            added.append(name)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


def import_fresh(path: str | Path, folder: Path, module_name: str, siblings: tuple[str, ...], stand_ins) -> Any:
    """`module_name` imported from `folder`, it and its `siblings` (plain
    file names such as `utils`) loaded fresh and not left in `sys.modules`."""
    sys.path.insert(0, str(folder))
    names = (module_name, *siblings)
    try:
        with stand_ins:
            for name in names:
                sys.modules.pop(name, None)
            module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001  (whatever the peer's import raises, named once)
        raise PeerError(f"--against {path}: importing {folder / module_name}.py failed: {error!r}") from error
    finally:
        sys.path.remove(str(folder))
        for name in siblings:
            sys.modules.pop(name, None)
    if module.__file__ is None or Path(module.__file__).resolve().parent != folder:
        raise PeerError(f"--against {path}: imported another module named {module_name} ({module.__file__})")
    return module

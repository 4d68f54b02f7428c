"""Where the peers' checkouts live: `nox -s peers` clones each peer at the
commit its side-by-side entries were written against into the git-ignored
`.peers/` folder of the repository, and `--against NAME` (or `--against
all`) finds it there. A path still works for a checkout of one's own. A
machine with no network (an accelerator lent for a run) gets the folder
carried with the working tree.

Standard library only: `noxfile.py` loads this file by its path, before the
project is installed."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Checkout(NamedTuple):
    title: str  # as its authors write it
    url: str
    commit: str  # the commit the entries and their shims were checked against
    folder: str  # what the entries import: the only folder checked out (with the root's files)
    files: tuple[str, ...]  # the files of `folder` the entries load; they tell the checkout
    # What those files import that the harness does not install (module ->
    # package; the `peers` extra): checked before any entry runs.
    needs: dict[str, str]


FOLDER = ".peers"
CHECKOUTS = {
    "purejaxrl": Checkout(
        "PureJaxRL",
        "https://github.com/luchris429/purejaxrl",
        "31756b197773a52db763fdbe6d635e4b46522a73",
        "purejaxrl",
        ("ppo.py", "wrappers.py"),
        {"distrax": "distrax"},
    ),
    "xland-minigrid": Checkout(
        "xland-minigrid",
        "https://github.com/dunnolab/xland-minigrid",
        "0d306d1414dcb6e451358d94e7d9a91879462ee1",
        "training",
        ("train_single_task.py", "nn.py", "utils.py"),
        {"distrax": "distrax"},
    ),
    "pgx": Checkout(
        "pgx",
        "https://github.com/sotetsuk/pgx",
        "079b2d730e3845c25d49d99e0ccf9a374dd04cb9",
        "examples/alphazero",
        ("train.py", "network.py"),
        {"haiku": "dm-haiku", "omegaconf": "omegaconf"},
    ),
}
ALL = "all"


class MissingCheckout(ValueError):
    """A peer named by `--against` that `nox -s peers` has not cloned."""


def folder(root: Path) -> Path:
    return Path(root) / FOLDER


def resolve(value: str, root: Path) -> list[Path]:
    """The checkouts `--against VALUE` names: a peer's name (its folder under
    `.peers/`), `all` (every peer there), or a path as given."""
    if value != ALL and value not in CHECKOUTS:
        return [Path(value)]
    names = list(CHECKOUTS) if value == ALL else [value]
    missing = [name for name in names if not (folder(root) / name).is_dir()]
    if missing:
        raise MissingCheckout(
            f"--against {value}: no checkout of {', '.join(missing)} in {folder(root)}/; "
            "`nox -s peers` clones the peers there (or give the path of a checkout of your own)"
        )
    return [folder(root) / name for name in names]


def clone_commands(name: str, root: Path, source: str | None = None) -> list[list[str]]:
    """The git commands that put peer `name` at its commit in `.peers/NAME`:
    cloned from its URL (or from `source/NAME`, a local mirror for a machine
    without network) unless already there, then checked out at the commit,
    only the folders its entries import (a sparse checkout)."""
    checkout = CHECKOUTS[name]
    target = folder(root) / name
    commands = []
    if not (target / ".git").exists():
        origin = str(Path(source) / name) if source else checkout.url
        commands.append(["git", "clone", "--quiet", "--no-checkout", origin, str(target)])
    commands.append(["git", "-C", str(target), "sparse-checkout", "set", checkout.folder])
    commands.append(["git", "-C", str(target), "checkout", "--quiet", "--detach", checkout.commit])
    return commands

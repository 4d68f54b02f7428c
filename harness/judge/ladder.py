"""An Elo ladder's committed tournament: the anchors of a spec's
`strength.anchors` (algorithms.alphazero.anchors) play each other, both
colours, once; their ratings, fitted by maximum likelihood (Bradley-Terry on
the Elo scale, a draw half a win, the random player at 0), are written to
`results/ladders/<suite>-<id>.json` beside the references. Every run that
asks for the ladder is rated against those fixed numbers, so that two runs'
ratings, on any device, are on one scale.

A run reads the ratings here (`anchors_of`); `harness ladder` makes the
file (harness.sessions.ladder)."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from algorithms.alphazero.ladder import LOGIT_PER_ELO, Anchor
from harness.judge.references import results_folder

FORMAT = 1
LADDERS = "ladders"
ZERO = "random"  # the anchor rated 0 by definition


class LadderError(Exception):
    """A ladder that cannot be used or made; reported without a traceback."""


class PairResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    first: str  # the pair's first anchor, whose results these are
    second: str
    wins: int
    draws: int
    losses: int


class RatedAnchor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rating: float
    standard_error: float  # from the likelihood's curvature, the zero anchor's rating held at 0


class LadderRecord(BaseModel):
    """`results/ladders/<suite>-<id>.json`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: int
    env: str  # suite/id
    anchors: dict[str, RatedAnchor]
    games_per_pair: int
    seed: int
    pairs: list[PairResult]
    seconds: float  # the tournament's wall time, its compile included
    git: dict[str, str]
    versions: dict[str, str]
    fingerprint: dict[str, str]


def ladder_path(spec_path: str | Path, suite: str, env_id: str) -> Path:
    """Where the ladder of a spec's env lives: `results/ladders/<suite>-<id>.json`."""
    return results_folder(spec_path) / LADDERS / f"{suite}-{env_id}.json"


def _read(path: Path) -> tuple[LadderRecord, str]:
    """The ladder at `path` and its sha256 (which committed ratings a run
    was rated against), from one read of the file."""
    try:
        data = path.read_bytes()
        return LadderRecord.model_validate_json(data), hashlib.sha256(data).hexdigest()
    except FileNotFoundError:
        raise LadderError(f"no committed ladder {path}: make it with `harness ladder SPEC`") from None
    except ValidationError as error:
        raise LadderError(f"{path} is not a ladder record: {error.errors()[0]['msg']}") from None


def load(path: Path) -> LadderRecord:
    return _read(path)[0]


def two_player_problem(num_players: int, where: str) -> str | None:
    """Why an env cannot have an Elo ladder, or None."""
    if num_players != 2:
        return f"an Elo ladder rates two-player games; {where} has {num_players} player(s)"
    return None


def anchors_of(path: Path, names: tuple[str, ...], env: str) -> tuple[tuple[Anchor, ...], str]:
    """`names` with their ratings in the ladder at `path`, and the file's
    sha256; or LadderError."""
    record, digest = _read(path)
    if record.env != env:
        raise LadderError(f"{path} rates anchors of {record.env}, not {env}")
    missing = [name for name in names if name not in record.anchors]
    if missing:
        raise LadderError(
            f"{', '.join(missing)} has no rating in {path} (it rates {', '.join(record.anchors)});"
            " add it to strength.anchors and play the tournament again (`harness ladder SPEC`)"
        )
    return tuple(Anchor(name, record.anchors[name].rating) for name in names), digest


def fit(names: list[str], pairs: list[PairResult]) -> dict[str, RatedAnchor]:
    """Every anchor's maximum-likelihood Elo rating from the pairs' results
    (Newton's method; `ZERO` held at 0) and its standard error. LadderError
    where some anchors never scored against the others (no finite rating)."""
    index = {name: i for i, name in enumerate(names)}
    k = len(names)
    score = np.zeros((k, k))  # score[i, j]: i's points against j
    for pair in pairs:
        i, j = index[pair.first], index[pair.second]
        score[i, j] += pair.wins + 0.5 * pair.draws
        score[j, i] += pair.losses + 0.5 * pair.draws
    _check_connected(names, score)
    games = score + score.T
    free = [i for i in range(k) if names[i] != ZERO]
    x = np.zeros(k)  # ratings in logistic units
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x[:, None] - x[None, :])))
        gradient = (score - games * p).sum(axis=1)
        weight = games * p * (1 - p)
        hessian = np.diag(weight.sum(axis=1)) - weight
        step = np.linalg.solve(hessian[np.ix_(free, free)], gradient[free])
        x[free] += step
        if np.abs(step).max() < 1e-10:
            break
    covariance = np.linalg.inv(hessian[np.ix_(free, free)])
    errors = np.zeros(k)
    errors[free] = np.sqrt(np.diag(covariance))
    return {
        name: RatedAnchor(rating=float(x[i] / LOGIT_PER_ELO), standard_error=float(errors[i] / LOGIT_PER_ELO))
        for i, name in enumerate(names)
    }


def _check_connected(names: list[str], score: np.ndarray) -> None:
    """A finite maximum-likelihood rating for every anchor needs every group
    of anchors to have scored against the rest: the graph of "scored
    against" strongly connected."""
    k = len(names)
    reach = (score > 0) | np.eye(k, dtype=bool)
    for _ in range(k):
        reach = reach | ((reach.astype(int) @ reach.astype(int)) > 0)
    for i, j in itertools.product(range(k), repeat=2):
        if not reach[i, j]:
            raise LadderError(
                f"{names[i]} never scored, directly or through others, against {names[j]}: no finite ratings;"
                " add anchors between them or play more games"
            )


def write(record: LadderRecord, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.model_dump(mode="json"), indent=2) + "\n")

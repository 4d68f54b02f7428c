"""The typed record of a finished run: `results.json`, an MLflow artifact of
every run and, for a published spec, its reference in `results/`. Made by
harness.sessions.results, read by the judges (reproduce, compare) and the CLI.

Unknown keys are kept (a newer harness may add some); a missing required
key or a value of the wrong type is a `ValueError` naming it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

FORMAT = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Curves(_Model):
    """A metric's values per seed at fixed env steps."""

    env_steps: list[int]
    metrics: dict[str, dict[str, list[float]]]  # metric -> seed (as a string) -> value per env step


EMPTY_CURVES = Curves(env_steps=[], metrics={})


class WallTime(_Model):
    """Where a run's wall time went, in seconds (harness.sessions.training)."""

    startup: float  # from the command's start to the first compile: imports, store, runs, git state
    compile: float  # every program, ahead of time (from the persistent cache when it served them)
    first_chunk: float  # the first chunk (one-off allocations and transfers)
    steady: float  # the later chunks, whose env steps/s is `sps`
    evaluation: float  # of the chunks' time, waiting for the evaluations after them
    checkpoint: float  # of the chunks' time, copying and saving checkpoints; and the last save's wait
    metric_writing: float  # after training, until every per-iteration metric was in MLflow
    total: float  # from the command's start to the record (the rest: building, logging the runs)
    # After training: the algorithm's assessment of the trained policy, compile included (what an
    # AlphaZero spec's strength: asks: perfect play, an Elo ladder); 0 for the others.
    assessment: float = 0.0

    def line(self, cache: str | None = None) -> str:
        """One line for the end of `harness run`."""
        cached = f" (cache: {cache})" if cache else ""
        return (
            f"time: start-up {self.startup:.1f} s, compile {self.compile:.1f} s{cached}, training"
            f" {self.first_chunk + self.steady:.1f} s (first chunk {self.first_chunk:.1f} s, evaluation"
            f" {self.evaluation:.1f} s, checkpoints {self.checkpoint:.1f} s), "
            + (f"assessment {self.assessment:.1f} s, " if self.assessment else "")
            + f"metric writing"
            f" {self.metric_writing:.1f} s; total {self.total:.1f} s"
        )


class Speed(_Model):
    sps: float  # steady-state env steps/s over all seeds
    compile_seconds: float
    sps_per_seed: float | None = None
    sps_per_device: float | None = None
    wall_seconds: float | None = None
    metrics_flush_seconds: float | None = None  # waiting for per-iteration metrics to reach MLflow
    chunk_seconds_median: float | None = None
    # Whether JAX's persistent compilation cache served the compiles: off,
    # miss, hit or partial (harness.run.compile_cache).
    compile_cache: str | None = None
    wall_time: WallTime | None = None
    # The peak memory when the run ended (harness.run.memory): the device
    # allocator's on an accelerator ("device"), the process's resident
    # memory on a CPU ("host"); both since the process started.
    peak_memory_bytes: int | None = None
    peak_memory: str | None = None


class ClaimOutcome(_Model):
    """A claim of the spec judged on this run (harness.judge.claims)."""

    claim: dict[str, Any]  # the claim as the spec states it (harness.experiment_spec.claims.Claim)
    value: float  # the claim's statistic on this run
    low: float  # its 95% bootstrap interval over seeds
    high: float
    seeds: int
    # A statement: the value is within the claim's bound. A test: its verdict is PASS.
    holds: bool
    consistent: bool | None = None  # the outside figure lies in [low, high]; None: the claim has none
    # A test's outcome (harness.stats.sequential): pass, fail or inconclusive; None for a statement,
    # or a test with no level to hold the run to (`reference` with no reference seeds).
    verdict: str | None = None
    level: float | None = None  # the level a faithful run reaches, in the claim's units
    fails_at: float | None = None  # the faithful level less delta: a run this far below is a regression
    faithful_seeds: int | None = None  # the reference seeds the level was learned from (0: a stated number)
    against_faithful: float | None = None  # log-evidence against a faithful run (FAIL at log(1/alpha))
    against_regressed: float | None = None  # log-evidence against a regressed one (PASS at log(1/beta))
    seeds_used: int | None = None  # the seeds the test had looked at when it stopped
    note: str | None = None  # why a test has no verdict
    alpha: float | None = None  # the test's alpha: the claim's, over the spec's test claims
    # The version of the test rules that judged it (harness.stats.verdict.RULES); None: before versions.
    rules: str | None = None


class Results(_Model):
    """results.json (see the README's "What MLflow holds")."""

    format: int = FORMAT
    spec_name: str = ""
    spec_hash: str
    spec: dict[str, Any]  # the canonical spec
    env: dict[str, Any] = {}
    seeds: list[int]
    iterations: int = 0
    env_steps_per_seed: int = 0
    final_fraction: float = 0.1
    final: dict[str, float] = {}  # the mean over seeds of per_seed_final
    per_seed_final: dict[str, dict[str, float]]  # seed -> metric -> mean of the final window
    curves: Curves
    evaluation_curves: Curves | None = None  # evaluations, after whole chunks
    speed: Speed
    fingerprint: dict[str, str]
    versions: dict[str, str]
    git: dict[str, str] = {}
    mlflow_run_id: str | None = None  # a published reference's run
    baselines: dict[str, Any] | None = None
    claims: dict[str, ClaimOutcome] | None = None  # by claim name; absent in records made before claims
    claims_hash: str | None = None  # sha256 of the claims judged (harness.experiment_spec.claims_hash)

    def finals(self, metric: str) -> np.ndarray | None:
        """The per-seed final values of `metric`, in seed order; None when
        a seed lacks it."""
        rows = [self.per_seed_final[str(seed)] for seed in self.seeds]
        if any(metric not in row for row in rows):
            return None
        return np.array([row[metric] for row in rows], dtype=np.float64)

    def curves_of(self, metric: str) -> Curves:
        """The curves holding `metric`: per-iteration, or evaluation curves."""
        if metric in self.curves.metrics:
            return self.curves
        return self.evaluation_curves or EMPTY_CURVES

    def metric_names(self) -> list[str]:
        """The final metrics, in the order of the first seed's."""
        return list(self.per_seed_final[str(self.seeds[0])])

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2, allow_nan=False) + "\n"


def parse(text: str, source: str) -> Results:
    """A results.json given as text; ValueError naming what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source} is not a harness results record")
    try:
        return Results.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {'missing' if e['type'] == 'missing' else e['msg']}"
            for e in error.errors()[:5]
        )
        raise ValueError(f"{source} is not a harness results record ({problems})") from None

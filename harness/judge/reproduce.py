"""Judge a reproduction against its reference: bit for bit where that can be
expected, statistically where it cannot, and speed only as a report.

The rules, in the order they are applied:

- **exact** when the reproduction ran on the same kind of machine with the
  same numerics: every key of `EXACT_FINGERPRINT` and every package of
  `NUMERICS_PACKAGES` equal to the reference's, and the same list of seeds
  (seeds are one vmapped batch, and a batch of another size is another XLA
  program: seed 0 alone does not give the bits seed 0 gives beside seed 1).
  Then every curve point and every per-seed final value of every metric must
  be the same float; any difference fails, named by metric, seed and env step.
- **statistical** otherwise. Where the spec states test claims (claims
  with `delta`, harness.judge.claims), their sequential tests gate: PASS
  when every one passes, FAIL when one fails (a faithful run fails at most
  alpha of the time), INCONCLUSIVE when one is undecided. Every metric's
  interquartile mean over seeds of the per-seed final values, with a
  stratified-bootstrap 95% confidence interval (`harness.stats.intervals`), is
  reported beside the reference's. A spec without a test claim is gated by
  its learning metrics (`LEARNING_METRICS`) passing when the two intervals
  overlap, a rule without a stated error rate; with fewer than
  `intervals.MIN_SEEDS` seeds on a side there is no spread to compare (a
  one-seed interval is a point): the verdict is "not judged".
- **speed**: steady-state env steps per second against the reference's,
  labelled with both devices; reported, never judged.

The verdict passes when every gating metric passes (all metrics when exact)
or, statistical, when every test claim passes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from harness import jax_build
from harness.judge import differences
from harness.judge.machines import device_label, same_machine
from harness.judge.xla_flags import exact_problem, numerics_flags, without_host_device_count
from harness.record.schema import Results
from harness.stats import intervals, verdict

# Fingerprint keys that change the bits a run produces. The host name does
# not; the CPU model and its instruction set do, because XLA compiles CPU
# code for the host's.
EXACT_FINGERPRINT = (
    "platform",
    "device_kind",
    "device_count",
    "local_device_count",
    "process_count",
    "xla_flags",
    "prng_impl",
    "jax_threefry_partitionable",
    "cpu",
    "cpu_model",
    "cpu_isa",
    "mesh",
    "shards",
    "batch",
)
# What a record without a key ran with: a reference made before the key was
# recorded; `batch` is recorded only by a sweep's vmapped points.
FINGERPRINT_DEFAULTS = {"mesh": "none", "shards": "none", "batch": "none"}
# On exact layouts (the same `shards`), keys that do not change the bits:
# how many devices there are and how the data axis splits (the seed axis
# still does), and the flag that simulates host devices.
LAYOUT_KEYS = ("device_count", "local_device_count", "process_count", "mesh", "xla_flags")
# Packages whose code runs in the training program (MLflow and orbax do not).
NUMERICS_PACKAGES = ("jax", "jaxlib", "flax", "optax", "pgx", "jumanji", "gymnax", "mctx", "xminigrid")
# Packages that became dependencies after references were published: a
# reference that does not record one was made before it existed here, so
# its spec cannot have run its code.
ADDED_LATER = frozenset({"xminigrid"})
# Metrics that say whether an agent learned; the rest are diagnostics.
# AlphaZero's two-player games have no episode return: their learning
# metric is the win rate against a random player; single-player tasks report
# the evaluation return too.
LEARNING_METRICS = ("episode_return", "eval_return", "eval_random_win")

# Each verdict mode's rule, in words (the report's "rule" line; verdict.RULES versions the tests).
MODE_RULES = {
    "exact": "same fingerprint, numerics versions and seeds as the reference: every curve point and per-seed "
    "final value of every metric must be bit-identical",
    "statistical": "each claim's sequential test (alpha, power and delta stated in the spec) gates; every "
    "metric's IQM over seeds with its stratified-bootstrap 95% CI "
    f"({intervals.REPS} resamples, RandomState({intervals.RANDOM_STATE})) is reported beside the reference's. A spec "
    "without a test claim is gated by its learning metrics' intervals overlapping, a rule without a stated "
    "error rate",
}


# -------------------------------------------------------------------- verdict


class MetricVerdict(NamedTuple):
    name: str
    gates: bool  # whether it decides the overall verdict
    passed: bool
    detail: str
    reference: intervals.Estimate
    reproduction: intervals.Estimate | None  # None when the reproduction lacks the metric
    first_difference: dict[str, Any] | None  # exact mode: where the curves first differ


class Speed(NamedTuple):
    reference_sps: float
    reproduction_sps: float
    reference_seeds: int
    reproduction_seeds: int
    reference_compile_seconds: float
    reproduction_compile_seconds: float
    reference_device: str
    reproduction_device: str
    hardware: str  # "same machine", or "another machine: " and what differs (machines.same_machine)

    @property
    def ratio(self) -> float:
        return self.reproduction_sps / self.reference_sps if self.reference_sps else float("nan")

    def describe(self) -> str:
        text = (
            f"{self.reproduction_sps:,.0f} env steps/s ({self.reproduction_seeds} seeds, {self.reproduction_device})"
            f" vs the reference's {self.reference_sps:,.0f} ({self.reference_seeds} seeds, {self.reference_device}):"
            f" {self.ratio:.2f}x, {self.hardware}; compile {self.reproduction_compile_seconds:.1f} s vs"
            f" {self.reference_compile_seconds:.1f} s. Reported, not judged"
        )
        if self.reproduction_seeds != self.reference_seeds:
            text += " (steps/s count all seeds, so different seed counts do not compare)"
        return text


class Verdict(NamedTuple):
    spec_name: str
    spec_hash: str
    mode: str  # "exact" or "statistical"
    not_exact_because: list[str]  # empty in exact mode
    metrics: list[MetricVerdict]
    speed: Speed
    reference_source: str  # a path or "run <id>"
    reference_run_id: str | None
    reference_seeds: list[int]
    reproduction_seeds: list[int]
    not_judged: str = ""  # why a statistical verdict cannot be given (too few seeds); "" when it is
    # Each test claim's word on the reproduction (pass, fail, inconclusive, untested): in statistical
    # mode they gate the verdict, and the metrics' intervals are only reported.
    claims: dict[str, str] = {}

    @property
    def claims_gate(self) -> bool:
        return self.mode == "statistical" and bool(self.claims)

    @property
    def passed(self) -> bool:
        return self.outcome == verdict.PASS

    @property
    def outcome(self) -> str:
        """`pass`, `fail`, `inconclusive` (a claim's test undecided) or `not
        judged` (an untested claim, or too few seeds): harness.stats.verdict."""
        metrics = verdict.NOT_JUDGED if self.not_judged else word(all(m.passed for m in self.metrics if m.gates))
        bits = all(m.passed for m in self.metrics)
        return verdict.of_reproduction(self.mode == "exact", bits, verdict.of_words(self.claims.values()), metrics)


def not_exact_because(reference: Results, record: Results) -> list[str]:
    """Why bit-identical curves cannot be expected; empty when they can."""
    reasons = []
    shards = reference.fingerprint.get("shards", "none")
    exact_layouts = shards != "none" and shards == record.fingerprint.get("shards")
    for key in EXACT_FINGERPRINT:
        ref = reference.fingerprint.get(key, FINGERPRINT_DEFAULTS.get(key))
        new = record.fingerprint.get(key, FINGERPRINT_DEFAULTS.get(key))
        if key == "xla_flags":
            ref = None if ref is None else numerics_flags(ref, reference.fingerprint.get("platform", ""))
            new = None if new is None else numerics_flags(new, record.fingerprint.get("platform", ""))
        if exact_layouts and key in LAYOUT_KEYS:
            ref, new = _layout_free(key, ref), _layout_free(key, new)
        if ref is None:
            reasons.append(f"device.{key} is not recorded in the reference")
        elif ref != new:
            reasons.append(f"device.{key}: {ref!r} in the reference, {new!r} here")
    if problem := exact_problem(record.fingerprint):
        reasons.append(problem)
    for package in NUMERICS_PACKAGES:
        ref, new = reference.versions.get(package), record.versions.get(package)
        if ref is None and package in ADDED_LATER:
            continue
        if ref != new:
            hint = jax_build.line_hint(ref, new) if package == "jax" else ""
            reasons.append(f"{package} {ref} in the reference, {new} here{hint}")
    if reference.seeds != record.seeds:
        reasons.append(f"seeds {_seeds(reference.seeds)} in the reference, {_seeds(record.seeds)} here")
    return reasons


def _layout_free(key: str, value: str | None) -> str | None:
    """What of a fingerprint value still matters on exact layouts: the
    seed axis of a mesh (`none`, the plain program, has one), XLA's flags
    but the simulated device count, nothing of the device counts."""
    if value is None:
        return None
    if key == "mesh":
        return "seed=1" if value == "none" else value.split(",")[0]
    if key == "xla_flags":
        return without_host_device_count(value)
    return "any"


def _seeds(seeds: list[int]) -> str:
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}"
    return ",".join(map(str, seeds))


def judge(reference: Results, record: Results, source: str, every: tuple[dict, dict] | None = None) -> Verdict:
    """The verdict on `record` (a reproduction's results.json) against
    `reference` (a published or logged results.json of the same spec); with
    `every`, the two runs' iterations files (reference's, reproduction's), an
    exact verdict compares every iteration too (harness.judge.differences)."""
    reasons = not_exact_because(reference, record)
    mode = "statistical" if reasons else "exact"
    tests = {name: w for name, o in (record.claims or {}).items() if (w := verdict.claim_word(o)) is not None}
    claims_gate = mode == "statistical" and bool(tests)
    few = intervals.too_few_seeds(len(reference.seeds), len(record.seeds))
    not_judged = few if mode == "statistical" and not claims_gate else ""
    names = reference.metric_names()
    learning = [n for n in names if n in LEARNING_METRICS] or names
    verdicts = []
    for name in names:
        ref_estimate = intervals.stratified_bootstrap_iqm(reference.finals(name))
        finals = record.finals(name)
        new_estimate = None if finals is None else intervals.stratified_bootstrap_iqm(finals)
        overlap = new_estimate is not None and ref_estimate.overlaps(new_estimate)
        if new_estimate is None:
            consistency = "the reproduction does not report this metric"
        elif overlap:
            consistency = "intervals overlap"
        else:
            side = "above" if new_estimate.low > ref_estimate.high else "below"
            consistency = f"intervals do not overlap (reproduction {side} the reference)"
        difference = None
        if mode == "exact":
            difference = differences.at_curve_points(reference, record, name)
            if difference is None and every is not None:
                difference = differences.at_every_iteration(*every, name)
            passed = difference is None
            if passed:
                detail = "bit-identical" + (" at every iteration" if every is not None and name in every[0] else "")
            else:
                count = difference["count"]
                counted = f" ({count} values differ)" if count else ""
                detail = f"not bit-identical: {difference['what']}{counted}; statistically, {consistency}"
        elif not_judged or (claims_gate and few):
            passed, detail = False, "not judged (too few seeds)"
        else:
            passed, detail = overlap, consistency
        gates = mode == "exact" or (name in learning and not claims_gate)
        verdicts.append(MetricVerdict(name, gates, passed, detail, ref_estimate, new_estimate, difference))
    return Verdict(
        spec_name=reference.spec.get("name", ""),
        spec_hash=reference.spec_hash,
        mode=mode,
        not_exact_because=reasons,
        metrics=verdicts,
        speed=_speed(reference, record),
        reference_source=source,
        reference_run_id=reference.mlflow_run_id,
        reference_seeds=list(reference.seeds),
        reproduction_seeds=list(record.seeds),
        not_judged=not_judged,
        claims=tests,
    )


def _speed(reference: Results, record: Results) -> Speed:
    ref_fp, new_fp = reference.fingerprint, record.fingerprint
    return Speed(
        reference_sps=reference.speed.sps,
        reproduction_sps=record.speed.sps,
        reference_seeds=len(reference.seeds),
        reproduction_seeds=len(record.seeds),
        reference_compile_seconds=reference.speed.compile_seconds,
        reproduction_compile_seconds=record.speed.compile_seconds,
        reference_device=device_label(ref_fp),
        reproduction_device=device_label(new_fp),
        hardware=same_machine(ref_fp, new_fp),
    )


def word(passed: bool) -> str:
    return "pass" if passed else "fail"

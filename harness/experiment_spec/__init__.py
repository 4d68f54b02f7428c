"""Experiment specs: YAML in, frozen pydantic models out, and a canonical
hash; the spec goes down from here once.

- `sections`, `claims`: the models of a spec's sections and claims;
- `model`: the spec model of each registered algorithm (`spec_models`);
- `errors`: `SpecError`, naming the file, the key and the line;
- `loading`: `load`, `parse_text`, `parse`;
- `canonical`: the canonical form and `spec_hash`, `to_yaml`;
- `overrides`: values set by dotted key (`--set`, sweeps, reproductions).

The names below are this package's interface (`from harness import experiment_spec as spec`,
then `spec.load`, `spec.spec_hash`, `spec.SpecError`, ...).
"""

from harness.experiment_spec.canonical import (
    CLAIMS_SECTION,
    RUNTIME_SECTIONS,
    STRENGTH_SECTION,
    canonical,
    canonical_json,
    flatten,
    spec_differences,
    spec_hash,
    to_yaml,
)
from harness.experiment_spec.claims import Claim, ClaimName
from harness.experiment_spec.errors import SpecError, key_lines
from harness.experiment_spec.loading import load, parse, parse_text
from harness.experiment_spec.model import Spec, check_seeds, spec_models
from harness.experiment_spec.overrides import assign, parse_sets, with_overrides
from harness.experiment_spec.sections import (
    BudgetSpec,
    CheckpointSpec,
    DevicesSpec,
    EnvSpec,
    LoggingSpec,
    MaskObservation,
    NetworkSpec,
    ObserveLegalActions,
    ObservePreviousActionReward,
    OptimizerSpec,
    ReproductionSpec,
    SeedRange,
    SweepRange,
    SweepValues,
    TrackingSpec,
    Wrapper,
    check_name,
)

__all__ = [
    "CLAIMS_SECTION",
    "STRENGTH_SECTION",
    "RUNTIME_SECTIONS",
    "BudgetSpec",
    "CheckpointSpec",
    "Claim",
    "ClaimName",
    "DevicesSpec",
    "EnvSpec",
    "LoggingSpec",
    "MaskObservation",
    "NetworkSpec",
    "ObserveLegalActions",
    "ObservePreviousActionReward",
    "OptimizerSpec",
    "ReproductionSpec",
    "SeedRange",
    "Spec",
    "SpecError",
    "SweepRange",
    "SweepValues",
    "TrackingSpec",
    "Wrapper",
    "assign",
    "canonical",
    "canonical_json",
    "check_name",
    "check_seeds",
    "flatten",
    "key_lines",
    "load",
    "parse",
    "parse_sets",
    "parse_text",
    "spec_differences",
    "spec_hash",
    "spec_models",
    "to_yaml",
    "with_overrides",
]

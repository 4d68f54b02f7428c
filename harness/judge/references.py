"""A spec's references in `results/`: one per device class.

`results/<spec>.json` is the spec's first reference, whatever device made
it (the CPU references published so far). A reference made on another
device class (platform and device kind: `cpu`, `gpu NVIDIA H100 80GB
HBM3`, `tpu TPU v4`) sits beside it as `results/<spec>@<class slug>.json`
(`results/ppo_cartpole@gpu-nvidia-h100-80gb-hbm3.json`). `harness publish`
writes the file of the run's class and never another class's; `harness
reproduce` judges against the reference of the class it runs on, else the
closest one (same platform, else the first), and says which.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from harness.experiment_spec import canonical as canonical_spec
from harness.experiment_spec import spec_differences
from harness.judge import claims
from harness.record import schema
from harness.record.schema import ClaimOutcome, Results

PUBLISHED = "experiments"  # the folder of the published specs; their references are in results/ beside it


class ReproduceError(Exception):
    """A reference that cannot be used; reported without a traceback."""


def published_specs(root: Path = Path()) -> list[Path]:
    """Every published spec under `root` (the repository), by name."""
    return sorted((root / PUBLISHED).glob("*.yaml"))


def results_folder(spec_path: str | Path) -> Path:
    """The `results/` folder of a spec: beside `experiments/` for a published
    spec, in the working directory for a spec kept anywhere else."""
    folder = Path(spec_path).resolve().parent
    return (folder.parent if folder.name == PUBLISHED else Path.cwd()) / "results"


def reference_path(spec_path: str | Path) -> Path:
    """Where a spec's reference lives: `experiments/x.yaml` -> `results/x.json`
    beside `experiments/`, or `results/x.json` in the working directory for a
    spec kept anywhere else."""
    path = results_folder(spec_path) / f"{Path(spec_path).stem}.json"
    try:
        return Path(os.path.relpath(path))
    except ValueError:  # another drive
        return path


def check_reference(reference: Results, spec_hash: str, canonical: dict[str, Any], source: str) -> None:
    """Raise ReproduceError unless `reference` is a results record of this spec."""
    if reference.spec_hash != spec_hash:
        differences = spec_differences([reference.spec, canonical])
        listed = "; ".join(f"{key}: {ref} in the reference, {new} now" for key, (ref, new) in differences.items())
        raise ReproduceError(
            f"{source} was made from another spec (spec_hash {reference.spec_hash[:12]}, the spec's is "
            f"{spec_hash[:12]}): {listed or 'the hashes differ'}. Publish a new reference from a run of this spec."
        )


def load_reference(path: Path, spec_source: str, spec_hash: str, canonical: dict[str, Any]) -> Results:
    """Read the reference at `path` and check it belongs to the spec."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ReproduceError(
            f"{spec_source} has no reference: {path} does not exist. Make one with "
            f"`harness run {spec_source} && harness publish {spec_source}`, or name one with --reference."
        ) from None
    except OSError as error:
        raise ReproduceError(f"cannot read the reference {path}: {error}") from None
    return parse_reference(text, str(path), spec_hash, canonical)


def parse_reference(text: str, source: str, spec_hash: str, canonical: dict[str, Any]) -> Results:
    """A results.json given as text, checked to belong to the spec."""
    try:
        reference = schema.parse(text, source)
    except ValueError as error:
        raise ReproduceError(str(error)) from None
    check_reference(reference, spec_hash, canonical, source)
    return reference


# ---------------------------------------------------------- device classes


def device_class(fingerprint: dict[str, str]) -> str:
    """`cpu`, `gpu NVIDIA H100 80GB HBM3`, `tpu TPU v4`: the platform and,
    off the CPU, the device kind (a CPU's kind is `cpu`)."""
    platform = fingerprint.get("platform", "?")
    kind = fingerprint.get("device_kind", "")
    return platform if platform == "cpu" or not kind or kind == platform else f"{platform} {kind}"


def class_slug(device_class_name: str) -> str:
    """A device class as a file-name part: `gpu-nvidia-h100-80gb-hbm3`."""
    return re.sub(r"[^a-z0-9]+", "-", device_class_name.lower()).strip("-")


def class_path(first: Path, device_class_name: str) -> Path:
    """The reference file of a device class beside the spec's first one."""
    return first.with_name(f"{first.stem}@{class_slug(device_class_name)}{first.suffix}")


def references(first: Path) -> list[tuple[Path, str]]:
    """The spec's references with their device classes, the first one first."""
    paths = ([first] if first.exists() else []) + sorted(first.parent.glob(f"{first.stem}@*{first.suffix}"))
    found = []
    for path in paths:
        try:
            fingerprint = schema.parse(path.read_text(), str(path)).fingerprint
        except (OSError, ValueError) as error:
            raise ReproduceError(f"cannot read the reference {path}: {error}") from None
        found.append((path, device_class(fingerprint)))
    return found


def publish_path(first: Path, fingerprint: dict[str, str]) -> Path:
    """Where `harness publish` writes a record of this fingerprint: the
    first reference when there is none yet or it is of the same class,
    else the class's own file (never another class's)."""
    here = device_class(fingerprint)
    if not first.exists():
        return first
    try:
        first_class = device_class(schema.parse(first.read_text(), str(first)).fingerprint)
    except (OSError, ValueError):
        first_class = None  # an unreadable file is not overwritten by another class's record
    return first if first_class == here else class_path(first, here)


class Choice(NamedTuple):
    path: Path
    device_class: str  # the reference's
    why: str  # a sentence for the user


def choose(first: Path, fingerprint: dict[str, str]) -> Choice | None:
    """The reference to judge a run on this device against: its class's,
    else the closest (same platform, else the first); None when the spec
    has none."""
    found = references(first)
    if not found:
        return None
    here = device_class(fingerprint)
    for path, cls in found:
        if cls == here:
            others = len(found) - 1
            beside = f" ({others} more for other device classes)" if others else ""
            return Choice(path, cls, f"the reference of this device class, {here}{beside}")
    platform = fingerprint.get("platform")
    path, cls = next(((p, c) for p, c in found if c.split(" ")[0] == platform), found[0])
    classes = ", ".join(c for _, c in found)
    return Choice(
        path,
        cls,
        f"no reference of this device class ({here}); the closest is {cls} (references exist for: {classes}),"
        " so the verdict can only be statistical",
    )


# ------------------------------------------------------------ faithful seeds

UNSEEN_FOLDER = "unseen"  # results/unseen/<spec>.json: runs on seeds the reference did not use


def _without_seeds(spec: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in spec.items() if key != "seeds"}


def unseen_paths(first: Path) -> list[Path]:
    """The spec's unseen-seed runs beside its first reference:
    `results/unseen/<spec>.json` and `<spec>@seeds-A-B.json` (nox -s unseen)."""
    unseen = first.parent / UNSEEN_FOLDER
    return sorted(unseen.glob(f"{first.stem}.json")) + sorted(unseen.glob(f"{first.stem}@*.json"))


def faithful_records(first: Path, canonical: dict[str, Any]) -> list[tuple[str, Results]]:
    """The records of faithful runs of a spec (`canonical`, whatever its
    seeds): its references of every device class, the first one first,
    then its unseen-seed runs (`results/unseen/<spec>*.json`). A record of
    another spec, or one that cannot be read, is left out: these records
    only teach a claim's level, they are not judged here."""
    try:
        paths = [path for path, _ in references(first)]
    except ReproduceError:
        paths = []
    paths += unseen_paths(first)
    found = []
    for path in paths:
        try:
            record = schema.parse(path.read_text(), str(path))
        except (OSError, ValueError):
            continue
        if _without_seeds(record.spec) == _without_seeds(canonical):
            found.append((str(path), record))
    return found


def faithful_of(spec_path: str | Path, spec: Any) -> list[tuple[str, Results]]:
    """`faithful_records` of the spec `spec` loaded from `spec_path`."""
    return faithful_records(reference_path(spec_path), canonical_spec(spec))


def unseen_outcomes(spec_path: str | Path, spec: Any, batch: int) -> tuple[list[Results], dict[str, ClaimOutcome]]:
    """A spec's unseen-seed runs, and its claims judged on all their seeds
    as one reproduction in batches of `batch` (claims.judge_pooled; the
    spec's reproduction batch), each test's level from the faithful seeds
    outside them: how the results index and the suite judge them."""
    records = [schema.parse(path.read_text(), str(path)) for path in unseen_paths(reference_path(spec_path))]
    if not records:
        return [], {}
    seeds = sorted({seed for record in records for seed in record.seeds})
    faithful = claims.faithful(faithful_of(spec_path, spec), spec.claims, exclude=seeds)
    return records, claims.judge_pooled(records, spec.claims, faithful, batch)

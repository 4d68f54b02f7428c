"""docs/results/: the published references (results/*.json) in a table, a
page per published spec (its claims and their verdicts, curves, final
values, speed and machine, the spec itself), and the curves as SVG."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from docs_pages import ROOT
from docs_pages.common import drawing, header, seconds, short, svg, table, thinned
from docs_pages.strength import strength_section
from harness import experiment_spec as S
from harness.experiment_spec.claims import REFERENCE
from harness.judge import claims as claims_judge
from harness.judge import claims_table, ladder, machines, references
from harness.record import schema
from harness.sessions import errors_report
from harness.stats import verdict as verdict_words


class Reference(typing.NamedTuple):
    path: Path
    stem: str  # the spec's
    device_class: str
    record: schema.Results
    raw: dict[str, Any]

    @property
    def image(self) -> str:
        return f"{self.path.stem}.svg"


def published_spec(stem: str):
    """experiments/<stem>.yaml: where a published spec lives (harness.judge.references.PUBLISHED)."""
    return ROOT / references.PUBLISHED / f"{stem}.yaml"


def published() -> dict[str, list[Reference]]:
    out: dict[str, list[Reference]] = {}
    firsts = sorted({p.name.split("@")[0].removesuffix(".json") for p in (ROOT / "results").glob("*.json")})
    for stem in firsts:
        for path, device_class in references.references(ROOT / "results" / f"{stem}.json"):
            text = path.read_text()
            record = schema.parse(text, str(path))
            # The claims the spec states now, judged on the reference (as harness
            # publish judges them; claims are not part of the spec hash).
            spec_path = published_spec(stem)
            loaded = S.load(spec_path) if spec_path.exists() else None
            stated = loaded.claims if loaded else {}
            found = references.faithful_of(spec_path, loaded) if loaded else []
            faithful = claims_judge.faithful(found, stated, exclude=record.seeds)
            record = claims_judge.with_claims(record.model_copy(update={"claims": None}), stated, faithful)
            out.setdefault(stem, []).append(Reference(path, stem, device_class, record, json.loads(text)))
    return out


def stated_claims(stem: str) -> dict[str, S.Claim]:
    path = published_spec(stem)
    return S.load(path).claims if path.exists() else {}


def claims_of(reference: Reference) -> dict[str, S.Claim]:
    """The claims a reference is judged on: those its spec states today
    (judged on loading)."""
    return claims_judge.stated(reference.record) if reference.record.claims else stated_claims(reference.stem)


def claim_statement(claim: S.Claim) -> str:
    bound, limit = claim.bound
    level = "the reference's level" if limit == REFERENCE else claims_table.number(limit)
    test = f"; a test: Δ {claim.delta:g}, α {claim.alpha:g}, power {claim.power:g}" if claim.is_test else ""
    return f"`{claim.metric}`: {claims_table.describe(claim)} {claims_judge.SIGNS[bound]} {level}{test}"


def verdict(reference: Reference, name: str) -> str:
    outcome = (reference.record.claims or {}).get(name)
    if outcome is None:
        return "not recorded"
    if outcome.claim.get("delta") is not None:
        word = verdict_words.shown(verdict_words.claim_word(outcome), "markdown")
        if outcome.seeds_used:
            word += f" ({outcome.seeds_used} seeds; level from {outcome.faithful_seeds or 'no'} other seeds)"
    else:
        word = "holds" if outcome.holds else "**fails**"
    if outcome.consistent is not None:
        word += (
            ", consistent with the outside figure"
            if outcome.consistent
            else ", **not** consistent with the outside figure"
        )
    return word


def device_label(reference: Reference) -> str:
    fingerprint = reference.record.fingerprint
    if fingerprint.get("platform") == "cpu" and fingerprint.get("cpu_model"):
        return f"{reference.device_class} ({machines.cpu_name(fingerprint)})"
    return reference.device_class


RETURN_METRICS = ("episode_return", "eval_return")


def plotted_metrics(reference: Reference) -> list[str]:
    """The spec's claimed metrics that have curves; else its return. A
    return panel is added for the random baseline where no panel has one."""
    record = reference.record
    available = set(record.curves.metrics) | set((record.evaluation_curves or schema.EMPTY_CURVES).metrics)
    metrics = [c.metric for c in claims_of(reference).values() if c.metric in available]
    metrics = list(dict.fromkeys(metrics))
    fallback = [m for m in (*RETURN_METRICS, "eval_random_win", "elo") if m in available]
    if not metrics and fallback:
        metrics = fallback[:1]
    if record.baselines and not any(m in RETURN_METRICS for m in metrics):
        returns = [m for m in RETURN_METRICS if m in available]
        metrics += returns[:1]
    return metrics


def curves_plot(reference: Reference) -> bytes:
    record = reference.record
    metrics = plotted_metrics(reference)
    stated = claims_of(reference)
    baseline = ((record.baselines or {}).get("random_policy") or {}).get("mean_return")
    with drawing(7.0, 0.6 + 2.6 * len(metrics)) as figure:
        axes = figure.subplots(len(metrics), 1, squeeze=False)[:, 0]
        for axis, metric in zip(axes, metrics, strict=True):
            curves = record.curves_of(metric)
            steps = [float(s) for s in curves.env_steps]
            per_seed = curves.metrics[metric]
            seeds = [str(s) for s in record.seeds if str(s) in per_seed]
            for i, seed in enumerate(seeds):
                xs, ys = thinned(steps, per_seed[seed])
                axis.plot(xs, ys, color="tab:blue", alpha=0.3, linewidth=0.8, label="each seed" if i == 0 else None)
            mean = [sum(per_seed[s][j] for s in seeds) / len(seeds) for j in range(len(steps))]
            xs, ys = thinned(steps, mean)
            axis.plot(xs, ys, color="tab:blue", linewidth=2.0, label=f"mean of {len(seeds)} seeds")
            if baseline is not None and metric in RETURN_METRICS:
                axis.axhline(baseline, color="0.4", linestyle="--", linewidth=1.0, label="random policy")
            for name, claim in stated.items():
                if claim.metric != metric:
                    continue
                bound, limit = claim.bound
                if claim.over_seeds.name.startswith("fraction"):
                    sign = "≥" if claim.over_seeds.name == "fraction_at_least" else ">"
                    value = claim.over_seeds.value
                    label = f"{name}: seeds {sign} {claims_table.number(value or 0)}"
                else:
                    value = None if limit == REFERENCE else limit
                    label = f"{name}: {claims_judge.SIGNS[bound]} {claims_table.number(value or 0)}"
                if value is not None:
                    axis.axhline(value, color="tab:red", linestyle=":", linewidth=1.0, label=label)
            axis.set_ylabel(metric)
            axis.set_xlabel("env steps per seed")
            axis.grid(alpha=0.3)
            axis.legend(loc="best", fontsize="small", frameon=False)
        figure.suptitle(f"{reference.stem}: {device_label(reference)}", fontsize="medium")
        return svg(figure)


def unseen_seeds(stem: str) -> str:
    """The claims on seeds the reference did not use (`nox -s unseen`):
    every unseen seed, in seed order, judged as one reproduction in the
    batches the spec states (its `reproduction` section), each test's level
    from the faithful seeds outside them."""
    path = published_spec(stem)
    loaded = S.load(path) if path.exists() else None
    if loaded is None or not loaded.claims:
        return "-"
    records, outcomes = references.unseen_outcomes(path, loaded, errors_report.seeding(loaded)[0])
    if not records:
        return "not checked"
    seeds = {seed for record in records for seed in record.seeds}
    judged = verdict_words.of_claims(outcomes)
    said = {name: verdict_words.claim_word(outcome) for name, outcome in outcomes.items()}
    named = ", ".join(f"{name} {word}" for name, word in said.items() if word not in (None, verdict_words.PASS))
    word = verdict_words.shown(judged, "markdown") if judged else "no test"
    return f"{len(seeds)} seeds in {len(records)} run{'s' if len(records) > 1 else ''}: {word}" + (
        f" ({named})" if named else ""
    )


def results_index(specs: dict[str, list[Reference]]) -> str:
    out = [header("results/*.json and experiments/*.yaml"), "# Published results\n\n"]
    count = sum(len(refs) for refs in specs.values())
    out.append(
        f"{len(specs)} published specs, {count} references: each the record of a run of the spec in "
        "`experiments/`, published with `harness publish` into `results/<spec>.json` (or "
        "`results/<spec>@<device class>.json` for another device class). `harness reproduce` runs a spec "
        "again and judges it against the reference of its device class. The claims are the spec's, judged "
        "here on the reference's curves as `harness run` and `harness publish` judge them. Unseen seeds: the claims judged on runs of the spec on seeds none of "
        "its references used (`nox -s unseen`, `results/unseen/`), all of them as one reproduction in the "
        "batches the spec states, each test's level from the references' seeds.\n\n"
    )
    rows = []
    for stem, refs in specs.items():
        unseen = unseen_seeds(stem)
        for i, ref in enumerate(refs):
            record = ref.record
            stated = claims_of(ref)
            claim_cell = "; ".join(f"{name}: {verdict(ref, name)}" for name in stated) or "none stated"
            rows.append(
                [
                    f"[{stem}]({stem}.md)",
                    record.spec.get("algorithm", ""),
                    f"{record.env.get('suite', '')} {record.env.get('id', '')}",
                    device_label(ref),
                    len(record.seeds),
                    claim_cell,
                    unseen if i == 0 else "",
                    f"{record.speed.sps:,.0f}",
                    f"`{short(record.git.get('commit'))}`",
                ]
            )
    out.append(
        table(
            ["Spec", "Algorithm", "Env", "Device", "Seeds", "Claims", "Unseen seeds", "Env steps/s", "Commit"],
            rows,
            ["l", "l", "l", "l", "r", "l", "l", "r", "l"],
        )
    )
    out.append("\nEnv steps/s: steady state, all seeds together.\n")
    return "".join(out)


def spec_page(stem: str, refs: list[Reference]) -> str:
    first = refs[0].record
    spec = first.spec
    out = [header(f"results/{stem}*.json and experiments/{stem}.yaml"), f"# {stem}\n\n"]
    network = spec.get("network", {})
    out.append(
        f"`algorithm: {spec.get('algorithm')}` on {first.env.get('suite')} `{first.env.get('id')}` "
        f"({first.env.get('suite')} {first.env.get('library_version')}), network `{network.get('kind')}`; "
        f"{len(first.seeds)} seeds, {first.env_steps_per_seed:,} env steps per seed in {first.iterations:,} "
        f"iterations. Spec hash `{first.spec_hash[:16]}`. "
        f"{len(refs)} reference{'s' if len(refs) > 1 else ''}: "
        + ", ".join(f"`{r.path.relative_to(ROOT)}` ({device_label(r)})" for r in refs)
        + ".\n\n"
    )

    out.append("## Claims\n\n")
    stated = {name: claim for ref in refs for name, claim in claims_of(ref).items()}
    if not stated:
        out.append("The spec states no claims.\n\n")
    else:
        rows = []
        for name, claim in stated.items():
            for ref in refs:
                outcome = (ref.record.claims or {}).get(name)
                value = (
                    f"{claims_table.number(outcome.value)} [{claims_table.number(outcome.low)}, "
                    f"{claims_table.number(outcome.high)}]"
                    if outcome
                    else "-"
                )
                rows.append([f"`{name}`", claim_statement(claim), device_label(ref), value, verdict(ref, name)])
        out.append(table(["Claim", "Statement", "Reference", "Value [95% CI]", "Verdict"], rows))
        out.append(
            "\nValue: the claim's statistic on the reference, with its 95% bootstrap interval over seeds "
            "(`harness.judge.claims`).\n\n"
        )

    out.append("## Curves\n\n")
    for ref in refs:
        metrics = plotted_metrics(ref)
        if len(refs) > 1:
            out.append(f"### {device_label(ref)}\n\n")
        out.append(f"![{stem} on {device_label(ref)}: {', '.join(metrics)}](img/{ref.image})\n\n")
    out.append(
        "Each seed (thin) and their mean (thick) at the recorded points; the random policy's mean return "
        "(dashed) where the reference records it; a claim's bound (dotted) where it is in the metric's units.\n\n"
    )

    out.append("## Final values\n\n")
    metrics = sorted(set().union(*(r.record.final for r in refs)))
    rows = [[f"`{m}`", *(f"{r.record.final[m]:.4g}" if m in r.record.final else "-" for r in refs)] for m in metrics]
    out.append(
        f"Mean over seeds of each seed's mean over the last {first.final_fraction:.0%} of iterations.\n\n"
        + table(["Metric", *(device_label(r) for r in refs)], rows, ["l"] + ["r"] * len(refs))
        + "\n"
    )

    env = first.env
    out.append(strength_section(stem, refs[0].path, ladder.ladder_path(published_spec(stem), env["suite"], env["id"])))

    out.append("## Speed and machine\n\n")
    out.append(machine_table(refs))
    path = published_spec(stem)
    if path.exists():
        body = "\n".join(f"    {line}".rstrip() for line in path.read_text().rstrip("\n").splitlines())
        out.append(f'\n## Spec\n\n??? note "experiments/{stem}.yaml"\n\n    ```yaml\n{body}\n    ```\n')
    return "".join(out)


def machine_table(refs: list[Reference]) -> str:
    def speed(ref: Reference, key: str) -> Any:
        return getattr(ref.record.speed, key, None)

    rows: list[list[Any]] = [
        ["env steps/s (all seeds)", *(f"{r.record.speed.sps:,.0f}" for r in refs)],
        ["env steps/s per seed", *(f"{v:,.0f}" if (v := speed(r, "sps_per_seed")) else "-" for r in refs)],
        ["compile", *(seconds(r.record.speed.compile_seconds) for r in refs)],
        ["compile cache", *(speed(r, "compile_cache") or "-" for r in refs)],
        ["whole run", *(seconds(w.total if (w := speed(r, "wall_time")) else None) for r in refs)],
        ["training", *(seconds(speed(r, "wall_seconds")) for r in refs)],
        ["chunk (median)", *(seconds(speed(r, "chunk_seconds_median")) for r in refs)],
    ]
    fingerprint_keys = ("platform", "device_kind", "device_count", "devices_used", "cpu_model", "cpu", "xla_flags")
    for key in fingerprint_keys:
        values = [r.record.fingerprint.get(key) for r in refs]
        if any(values):
            rows.append([key, *(f"`{v}`" if v else "-" for v in values)])
    versions = sorted(set().union(*(r.record.versions for r in refs)))
    for key in versions:
        rows.append([key, *(r.record.versions.get(key, "-") for r in refs)])
    rows.append(["git commit", *(f"`{short(r.record.git.get('commit'))}`" for r in refs)])
    rows.append(["MLflow run", *(f"`{r.record.mlflow_run_id}`" if r.record.mlflow_run_id else "-" for r in refs)])
    return table(["", *(device_label(r) for r in refs)], rows, ["l"] + ["r"] * len(refs)) + (
        "\n*whole run*: `harness run` from its start to the results record (the README's time); *training*: from"
        " opening the MLflow runs to the end of the last chunk, compile included; *compile*: every program, ahead"
        " of time; *chunk*: the median chunk of `logging.interval` iterations. A reference made before the"
        " harness recorded where its time went has no *whole run*.\n"
    )

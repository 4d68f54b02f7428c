"""`harness run | validate | publish`.

User errors (a bad spec, an unusable tracking store) print one message and
exit non-zero without a traceback; nothing is logged to MLflow for a spec that
does not validate.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

EXIT_USER_ERROR = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


def _load_plan(path: str):
    from harness import build, spec

    loaded = spec.load(path)
    return build.build(loaded, str(path), spec.key_lines(Path(path).read_text()))


def _user_error(message: str) -> int:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return EXIT_USER_ERROR


# ------------------------------------------------------------------ validate


def cmd_validate(args: argparse.Namespace) -> int:
    from harness import spec

    plan = _load_plan(args.spec)
    sys.stdout.write(spec.to_yaml(plan.spec))
    sys.stdout.write(f"# spec_hash: {plan.spec_hash}\n")
    sys.stdout.write(
        f"# {plan.num_iterations} iterations x {plan.env_steps_per_iteration} env steps"
        f" = {plan.env_steps} env steps per seed, {len(plan.spec.seeds)} seeds\n"
    )
    return 0


# ----------------------------------------------------------------------- run


def _tags(plan, fingerprint: dict[str, str], versions: dict[str, str], git: dict[str, str]) -> dict[str, str]:
    import harness

    return {
        "spec_hash": plan.spec_hash,
        "spec_name": plan.spec.name,
        "algorithm": plan.spec.algorithm,
        "harness.version": harness.__version__,
        "git.commit": git["commit"],
        "git.dirty": git["dirty"],
        "mlflow.source.git.commit": git["commit"],
        **plan.env_info.as_tags(),
        **{f"version.{k}": v for k, v in versions.items()},
        **{f"device.{k}": v for k, v in fingerprint.items()},
    }


def cmd_run(args: argparse.Namespace) -> int:
    import jax

    from harness import provenance, results, runner, spec, tracking
    from harness.progress import ProgressBar

    plan = _load_plan(args.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    # On a CPU backend the store's work competes with training for the same
    # cores, so per-iteration metrics are written when training ends.
    live = args.live_metrics or jax.default_backend() != "cpu"
    tracker = tracking.Tracking(uri, plan.spec.experiment_name, live_metrics=live)
    fingerprint, versions, git = provenance.fingerprint(), provenance.versions(), provenance.git_state()
    seeds = plan.spec.seeds
    bar = ProgressBar(
        plan.spec.name,
        plan.num_iterations,
        plan.env_steps_per_iteration,
        len(seeds),
        console=err_console,
        enabled=not args.no_progress,
    )

    def sink(chunk: runner.ChunkMetrics) -> None:
        tracker.log_chunk(chunk, plan.env_steps_per_iteration)
        bar.update(chunk)

    def compiled(seconds: float) -> None:
        bar.compiled(seconds)
        if args.no_progress:
            err_console.print(
                f"{plan.spec.name}: compiled in {seconds:.1f} s, training {plan.num_iterations} iterations"
                f" x {len(seeds)} seeds"
            )

    started = time.perf_counter()
    with tracker:
        tracker.start(
            run_name=f"{plan.spec.name}@{plan.spec_hash[:8]}",
            params=spec.flatten(spec.canonical(plan.spec)),
            tags=_tags(plan, fingerprint, versions, git),
            seeds=seeds,
        )
        # The resolved spec goes in first, so even a failed run shows what ran.
        tracker.log_artifacts({"spec.yaml": spec.to_yaml(plan.spec)})
        # A NaN/Inf raises out of here: the chunks before it stay logged and
        # the runs end FAILED with the message.
        with bar:
            result = runner.run(
                plan.algorithm,
                seeds,
                plan.num_iterations,
                plan.spec.logging.interval,
                sink=sink,
                on_compiled=compiled,
            )
        wall = time.perf_counter() - started
        flush_started = time.perf_counter()
        tracker.flush()
        record = results.make_results(plan, result, wall, time.perf_counter() - flush_started)
        finals = {int(seed): values for seed, values in record["per_seed_final"].items()}
        speed = {"sps": result.sps, "compile_seconds": result.compile_seconds, "wall_seconds": wall}
        tracker.log_summary(
            {
                None: {**{f"final_{k}": v for k, v in record["final"].items()}, **speed},
                **{seed: {f"final_{k}": v for k, v in values.items()} for seed, values in finals.items()},
            }
        )
        tracker.log_artifacts({"results.json": results.to_json(record)})
        parent_id = tracker.parent_id

    _print_summary(plan, record, uri, parent_id)
    if args.results_out:
        Path(args.results_out).write_text(results.to_json(record))
        out_console.print(f"results written to {args.results_out}")
    return 0


def _print_summary(plan, record, uri: str, parent_id: str) -> None:
    from rich.table import Table

    table = Table(title=f"{plan.spec.name} ({plan.spec_hash[:12]})", show_header=True)
    table.add_column("seed", justify="right")
    shown = (
        "episode_return",
        "episode_length",
        "loss",
        "entropy",
        "draw_rate",
        "eval_return",
        "eval_greedy_return",
        "eval_random_win",
        "eval_random_loss",
        "eval_greedy_loss",
        "elo",
    )
    names = [n for n in shown if n in record["final"]]
    for name in names:
        table.add_column(f"final {name}", justify="right")
    for seed, values in record["per_seed_final"].items():
        table.add_row(seed, *[f"{values[n]:.3f}" for n in names])
    table.add_row("mean", *[f"{record['final'][n]:.3f}" for n in names], style="bold")
    out_console.print(table)
    speed = record["speed"]
    out_console.print(
        f"{speed['sps']:,.0f} env steps/s steady state ({len(plan.spec.seeds)} seeds), "
        f"compile {speed['compile_seconds']:.1f} s, wall {speed['wall_seconds']:.1f} s, "
        f"metrics written to MLflow in {speed['metrics_flush_seconds']:.1f} s after training"
    )
    out_console.print(f"MLflow: {uri}  parent run {parent_id}")


# ------------------------------------------------------------------- publish


def cmd_publish(args: argparse.Namespace) -> int:
    """Copy results.json of a finished run of SPEC into results/."""
    import json
    import tempfile

    from harness import tracking

    plan = _load_plan(args.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    tracker = tracking.Tracking(uri, plan.spec.experiment_name)
    client = tracker.client
    if args.run_id:
        try:
            run = client.get_run(args.run_id)
        except Exception:  # noqa: BLE001
            return _user_error(f"no run {args.run_id!r} in {uri}")
    else:
        runs = client.search_runs(
            [tracker.experiment_id],
            filter_string=f"tags.spec_hash = '{plan.spec_hash}' and attributes.status = 'FINISHED'",
            order_by=["attributes.start_time DESC"],
        )
        runs = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        if not runs:
            return _user_error(f"no finished run of {args.spec} (spec_hash {plan.spec_hash[:12]}) in {uri}")
        run = runs[0]
    if run.data.tags.get("spec_hash") != plan.spec_hash:
        return _user_error(f"run {run.info.run_id} was made from another spec (spec_hash differs)")
    with tempfile.TemporaryDirectory() as tmp:
        local = client.download_artifacts(run.info.run_id, "results.json", tmp)
        record = json.loads(Path(local).read_text())
    record["mlflow_run_id"] = run.info.run_id
    if args.random_baseline:
        from harness.baselines import random_policy_summary

        record["baselines"] = {"random_policy": random_policy_summary(plan.env, plan.spec.seeds)}
        out_console.print(f"random policy: mean return {record['baselines']['random_policy']['mean_return']:.2f}")
    out = Path(args.out) if args.out else Path("results") / f"{Path(args.spec).stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    out_console.print(f"published run {run.info.run_id} to {out}")
    return 0


# ---------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="check a spec and print it resolved, with its hash")
    v.add_argument("spec")
    v.set_defaults(func=cmd_validate)

    r = sub.add_parser("run", help="train a spec over all its seeds and log it to MLflow")
    r.add_argument("spec")
    r.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, or sqlite:///mlflow.db)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--results-out", help="also write results.json to this path")
    r.add_argument(
        "--live-metrics",
        action="store_true",
        help="stream per-iteration metrics to MLflow during training even on a CPU backend "
        "(default there: written when training ends, so the store does not slow training)",
    )
    r.set_defaults(func=cmd_run)

    pub = sub.add_parser("publish", help="write results/<spec>.json from a finished MLflow run of the spec")
    pub.add_argument("spec")
    pub.add_argument("--run-id", help="the parent run to publish (default: the latest finished run of the spec)")
    pub.add_argument("--tracking-uri")
    pub.add_argument("--out", help="where to write (default: results/<spec file stem>.json)")
    pub.add_argument(
        "--random-baseline",
        action="store_true",
        help="also record the return of a uniformly random policy on the spec's env and seeds",
    )
    pub.set_defaults(func=cmd_publish)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from harness.runner import NonFiniteMetricError
    from harness.spec import SpecError
    from harness.tracking import TrackingError

    try:
        return args.func(args)
    except SpecError as error:
        return _user_error(str(error))
    except TrackingError as error:
        return _user_error(str(error))
    except NonFiniteMetricError as error:
        err_console.print(f"[bold red]error:[/] {args.spec}: {error}", soft_wrap=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        err_console.print("[bold yellow]interrupted[/]: MLflow runs marked KILLED")
        return EXIT_INTERRUPTED
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

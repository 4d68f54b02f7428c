"""The commands that judge runs: `reproduce` (plain and `--adaptive`),
`compare` and `drift` (harness.cli.table lists them); their exit codes come
from the verdict (harness.stats.verdict)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import envs, exit_codes, spec
from harness.cli.exits import EXIT_INCOMPLETE, user_error
from harness.cli.options import OptionError, load_plan, plan_of, plot_path, run_options, seed_batches
from harness.console import err_console, fitting_table, out_console, print_table
from harness.judge import claims_table, compare, compare_report, ladder, references
from harness.record import tracking
from harness.run import cluster
from harness.sessions import drift as drift_session
from harness.sessions import ladder as ladder_session
from harness.sessions import reproduce


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run a spec again and judge it against its reference (see harness.sessions.reproduce)."""
    if (args.spec is None) == (args.run_id is None):
        return user_error("give either a SPEC file or --run-id RUN_ID")
    if args.adaptive or args.set:
        return _reproduce_adaptive(args)
    if args.run_id:
        if args.reference:
            return user_error("--reference goes with a SPEC; with --run-id the run itself is the reference")
        uri = tracking.resolve_uri(args.tracking_uri, None)
        reference = reproduce.of_logged_run(
            uri, args.run_id, lambda loaded, source, lines: plan_of(loaded, source, lines, args)
        )
    else:
        plan = load_plan(args.spec, args)
        uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
        reference = reproduce.of_spec(plan, args.spec, args.reference, uri)
    faithful = (
        references.faithful_of(args.spec, reference.plan.spec) if args.spec else [(reference.label, reference.record)]
    )
    reproduced = reproduce.run_and_judge(reference, run_options(args, faithful=faithful), args.seeds)
    if reproduced is None:  # not process 0 of a multi-process job: it judges
        return 0
    code = exit_codes.of_verdict(reproduced.verdict.outcome)
    return code or (EXIT_INCOMPLETE if reproduced.logged.offline else 0)


def _reproduce_adaptive(args: argparse.Namespace) -> int:
    """`harness reproduce SPEC --adaptive [--set KEY=VALUE ...]`."""
    if not args.adaptive:
        return user_error("--set judges a changed spec by its claims' tests on fresh seeds: add --adaptive")
    if args.run_id or args.seeds:
        return user_error("--adaptive runs fresh seeds of a SPEC file: leave out --run-id and --seeds")
    if cluster.joined:
        return user_error("--adaptive decides between batches in one process: run it without a multi-process job")
    if args.results_out and args.set:
        return user_error("--results-out keeps faithful runs of the spec; a run changed by --set is not one")
    if args.results_out and Path(args.results_out).exists() and not Path(args.results_out).is_dir():
        return user_error(
            f"--results-out {args.results_out}: is a file; an adaptive reproduction writes a results.json a batch"
            " into a folder (<spec>@seeds-<first>-<last>.json)"
        )
    plan = load_plan(args.spec, args)
    batch, cap = seed_batches(args, plan.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    reference = reproduce.of_spec(plan, args.spec, args.reference, uri)
    options = run_options(args, faithful=references.faithful_of(args.spec, plan.spec))
    out = Path(args.results_out) if args.results_out else None
    return exit_codes.of_verdict(reproduce.run_adaptive(reference, options, batch, cap, args.set or [], out).verdict)


def cmd_compare(args: argparse.Namespace) -> int:
    """A table and a plot across finished runs (see harness.judge.compare)."""
    if bool(args.experiment) == bool(args.run_ids):
        return user_error("give either --experiment NAME or run ids")
    out = plot_path(args.out)
    uri = tracking.resolve_uri(args.tracking_uri, None)
    client = tracking.open_client(uri)
    runs, notes = compare.fetch(client, uri, experiment=args.experiment, run_ids=args.run_ids)
    for note in notes:
        err_console.print(note)
    comparison = compare.compare(runs, allow_different_specs=args.allow_different_specs)
    if comparison.different_specs > 1:
        out_console.print(
            f"comparing runs of {comparison.different_specs} different specs; the keys that differ:\n"
            + compare.listed(comparison.spec_differences)
        )
    print_table(compare_report.table(comparison.summaries, f"compare: {comparison.title}"))
    if claim_rows := claims_table.rows_by_run(comparison.claims):
        print_table(claims_table.table(claim_rows, f"claims: {comparison.title}"))
    for key, values in comparison.provenance_differences.items():
        out_console.print(f"  differs: {key}: {' / '.join(values)}", soft_wrap=True)
    run_id = compare_report.record(client, runs, comparison, out)
    out_console.print(f"plot written to {out}; comparison logged to MLflow run {run_id} ({uri})")
    return 0


def cmd_drift(args: argparse.Namespace) -> int:
    """Two environments' runs of the specs side by side (harness.sessions.drift)."""
    if args.rounds < 1 or (args.iterations is not None and args.iterations < 4):
        raise OptionError("--rounds must be at least 1 and --iterations at least 4 (a warm-up chunk and timed ones)")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise OptionError(f"--max-seconds must be positive, not {args.max_seconds}")
    if not 0 < args.slower_by < 10:
        raise OptionError(f"--slower-by must be a share above 0 (0.1 is 10%), not {args.slower_by}")
    specs = [Path(p) for p in args.specs] or references.published_specs()
    if args.bench:
        specs += sorted(Path("benchmarks", "specs").glob("*.yaml"))
    if not specs:
        raise OptionError(f"no specs given, and no {references.PUBLISHED}/ folder here to take them from")
    for path in specs:
        spec.load(path)  # every spec checked before anything runs
    options = drift_session.DriftOptions(
        older=args.older,
        newer=args.newer,
        specs=specs,
        rounds=args.rounds,
        iterations=args.iterations,
        uri=tracking.resolve_uri(args.tracking_uri, None),
        out=Path(args.out),
        max_seconds=args.max_seconds,
        slower_by=args.slower_by,
    )
    return drift_session.drift_command(options)


def cmd_ladder(args: argparse.Namespace) -> int:
    """Play the spec's anchors against each other and write their ratings (harness.judge.ladder)."""
    loaded = spec.load(args.spec)
    names = getattr(getattr(loaded, "strength", None), "anchors", ())
    if not names:
        raise spec.SpecError(args.spec, [("strength.anchors", "name the anchors of the ladder to play")])
    if args.games < 2 or args.games % 2:
        raise OptionError(f"--games {args.games}: an even number of games, at least 2 (half with each colour)")
    env = envs.make(loaded.env.suite, loaded.env.id, loaded.env.kwargs, loaded.env.wrappers)[0]
    where = f"{loaded.env.suite}/{loaded.env.id}"
    problem = ladder.two_player_problem(env.num_players, where)
    if problem is not None:
        raise spec.SpecError(args.spec, [("strength.anchors", problem)])
    out = Path(args.out) if args.out else ladder.ladder_path(args.spec, loaded.env.suite, loaded.env.id)
    pairs = len(names) * (len(names) - 1) // 2
    err_console.print(f"{where}: {pairs} pairs of anchors x {args.games} games, in one program")
    record = ladder_session.play_tournament(tuple(names), env, where, args.games, args.seed)
    ratings = [[f"{rated.rating:.0f}", f"{rated.standard_error:.0f}"] for rated in record.anchors.values()]
    print_table(fitting_table(f"{where}: Elo, random at 0", "anchor", list(names), ["rating", "std. error"], ratings))
    games = [[str(p.wins), str(p.draws), str(p.losses)] for p in record.pairs]
    pair_names = [f"{p.first} v {p.second}" for p in record.pairs]
    print_table(fitting_table("the first's results", "pair", pair_names, ["wins", "draws", "losses"], games))
    ladder.write(record, out)
    out_console.print(f"wrote {out} ({record.seconds:.0f} s, compile included)")
    return 0

"""`harness ladder`: play a spec's anchors against each other and write their
ratings. Its arguments (`arguments`, added to the parser the command table
makes for it) and its handler (`handle`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import envs
from harness import experiment_spec as spec
from harness.cli.options import OptionError
from harness.console import err_console, fitting_table, out_console, print_table
from harness.judge import ladder
from harness.sessions import ladder as ladder_session


def arguments(p: argparse.ArgumentParser) -> None:
    """`harness ladder`."""
    p.add_argument("spec", help="a spec whose strength.anchors names the anchors")
    p.add_argument(
        "--games", type=int, default=256, help="games each pair of anchors plays, half with each colour (default 256)"
    )
    p.add_argument("--seed", type=int, default=0, help="the tournament's key (default 0)")
    p.add_argument("--out", help="where to write (default: results/ladders/<suite>-<id>.json beside the references)")


def handle(args: argparse.Namespace) -> int:
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

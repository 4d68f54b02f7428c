"""A results page's strength section (docs/results/<spec>.md): what the
spec's `strength:` measured of each seed's final parameters, in the
reference and in every unseen-seed record that has it. Perfect play where
the game is solved; on an Elo ladder, the committed anchors, each seed's
anchored rating with its interval beside its pool-relative `elo`."""

from __future__ import annotations

from pathlib import Path

from docs_pages import ROOT
from docs_pages.common import table
from harness.judge import ladder, references
from harness.record import schema

PERFECT = ("perfect_first_loss", "perfect_second_loss", "perfect_games_kept", "perfect_positions_kept")


def _records(stem: str, reference: Path) -> list[tuple[str, schema.Results]]:
    """The reference and the unseen-seed records, labelled by their files."""
    found = [(reference.name, schema.parse(reference.read_text(), str(reference)))]
    for path in references.unseen_paths(reference):
        found.append((f"unseen/{path.name}", schema.parse(path.read_text(), str(path))))
    return found


def _rows(records, metrics: tuple[str, ...], cells) -> list[list[str]]:
    return [
        [f"`{label}`", seed, *cells(final)]
        for label, record in records
        for seed, final in record.per_seed_final.items()
        if all(metric in final for metric in metrics)
    ]


def strength_section(stem: str, reference: Path, anchors_file: Path | None) -> str:
    """Markdown, or "" where no record has a strength figure."""
    records = _records(stem, reference)
    out = []
    perfect = _rows(records, PERFECT, lambda f: [f"{f[m]:.3f}" for m in PERFECT])
    if perfect:
        out.append(
            "Against a perfect player (the game is solved here), after training, per seed: losses moving first "
            "and second, and the share of moves that keep the game's value, in its games and over every "
            "reachable position.\n\n"
            + table(["record", "seed", "lost, first", "lost, second", "kept, games", "kept, positions"], perfect)
        )
    if anchors_file is not None and anchors_file.exists():
        committed = ladder.load(anchors_file)
        names = list(committed.anchors)
        scores = tuple(f"ladder_score_{name}" for name in names)
        rated = _rows(
            records,
            ("ladder_elo", "elo", *scores),
            lambda f: [
                f"{f['elo']:.0f}",
                f"**{f['ladder_elo']:.0f}** [{f['ladder_elo_low']:.0f}, {f['ladder_elo_high']:.0f}]",
                *(f"{f[s]:.2f}" for s in scores),
            ],
        )
        anchor_rows = [[f"`{n}`", f"{a.rating:.0f}", f"{a.standard_error:.0f}"] for n, a in committed.anchors.items()]
        out.append(
            f"The Elo ladder's anchors, rated once by a tournament among themselves (`{anchors_file.relative_to(ROOT)}`:"
            f" {committed.games_per_pair} games a pair, both colours, at commit `{committed.git['commit'][:8]}`, "
            f"{committed.seconds:.0f} s on {committed.fingerprint.get('cpu_model') or committed.fingerprint['device_kind']}"
            "; random at 0):\n\n"
            + table(["anchor", "Elo", "standard error"], anchor_rows)
            + "\nEach seed's final parameters on that scale (`ladder_elo`, its 95% likelihood-ratio interval from "
            "the agent's games, the anchors' ratings held fixed) beside the `elo` the run logs as it trains, whose "
            "zero is the run's own first parameters and whose opponents are its own earlier ones: two runs' `elo` "
            "are on two scales, two runs' `ladder_elo` on one. Then the agent's score (wins and half the draws, "
            "per game) against each anchor.\n\n"
            + table(["record", "seed", "elo (own pool)", "ladder_elo [95%]", *names], rated)
        )
    if not out:
        return ""
    wall = records[0][1].speed.wall_time
    if wall is not None and wall.assessment:
        training = wall.first_chunk + wall.steady
        out.append(
            f"Its cost in the reference's run: {wall.assessment:.0f} s for all seeds, compile included, beside "
            f"{training:.0f} s of training ({wall.assessment / training:.0%}).\n"
        )
    return "## Strength\n\n" + "\n".join(out) + "\n"

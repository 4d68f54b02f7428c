"""The commands of `harness`, in one explicit table: each one's name, the
function that runs it, the arguments it takes, its help, and the exit codes
it returns besides 0, 2 (a user error), 130 and 143 (Ctrl-C, SIGTERM). The
parser, the command-line reference and the exit-codes page read it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple

from harness.cli.arguments import DESCRIPTION
from harness.cli.commands import compare, drift, ladder, publish, reproduce, run, scale, sweep, sync, validate
from harness.run import scaling


class Command(NamedTuple):
    name: str
    handler: Callable[[argparse.Namespace], int]  # returns the exit code
    arguments: Callable[[argparse.ArgumentParser], None]  # adds the command's arguments
    help: str  # a line in `harness -h`
    description: str | None = None  # `harness NAME -h`'s text, where the help line is not enough
    exits: dict[int, str] = {}  # the other exit codes it returns, and what each means for it
    # Whether it trains: a NaN or Inf in a metric then stops it with exit 1 (dispatch.main catches
    # NonFiniteMetricError for every command); the suite holds `exits` to that and the handler's returns.
    trains: bool = False


TABLE = (
    Command(
        "validate",
        validate.handle,
        validate.arguments,
        help="check a spec and print it resolved, with its hash (and a sweep's points)",
        exits={},
    ),
    Command(
        "run",
        run.handle,
        run.arguments,
        help="train a spec over all its seeds and log it to MLflow",
        exits={
            1: "a metric became NaN or infinite, or a claim's test FAILED",
            3: "trained; the MLflow record waits for `harness sync`",
            4: "a claim's test is INCONCLUSIVE or untested",
        },
        trains=True,
    ),
    Command(
        "sweep",
        sweep.handle,
        sweep.arguments,
        help="train a grid or random draws of hyperparameters, numeric ones in one program, and rank them",
        description="Train every point of the spec's sweep: section (and --set): a grid of its lists, or "
        "--samples N random draws from its lists and ranges. Points that differ only in numbers (learning rate, "
        "discount, loss coefficients, ...) train in one program, vmapped with the seeds; the others one program "
        "per structure, in turn. MLflow gets a sweep run, a run per point (its own spec and hash) and a run per "
        "seed under each; the sweep run gets the summary (summary.md, summary.json, sweep.png).",
        exits={1: "a metric became NaN or infinite", 3: "trained; the MLflow record waits for `harness sync`"},
        trains=True,
    ),
    Command(
        "sync",
        sync.handle,
        sync.arguments,
        help="upload the metrics and end-of-run records that an unreachable MLflow store did not get",
        description="Upload, from run directories, the journaled metrics past what reached the store and the "
        "end-of-run calls (summary metrics, artifacts, tags, statuses) it refused. Without RUN_IDs: every run "
        "directory under the checkpoint root that has something to upload. --tracking-uri uploads to another "
        "store than the one each run was logged to.",
        exits={},
    ),
    Command(
        "publish",
        publish.handle,
        publish.arguments,
        help="write results/<spec>.json from a finished MLflow run of the spec",
        exits={},
    ),
    Command(
        "reproduce",
        reproduce.handle,
        reproduce.arguments,
        help="run a published spec (or a logged run's spec) again and judge it against its reference",
        description="Run SPEC again and judge it against its reference results/<spec>.json, or re-run the spec "
        "logged with --run-id and judge it against that run. Exact (bit-identical curves) when device "
        "fingerprint, numerics versions and seeds match the reference: an identical run passes, whatever its "
        "claims' tests could decide. Statistical otherwise: the spec's claims' tests (at the alpha, power and "
        "delta the spec states, alpha shared by its tests) gate it, each metric's IQM interval shown beside the "
        "reference's. With --adaptive, fresh seeds a batch at a time until the tests decide. Speed is reported, "
        "never judged.",
        exits={
            1: "a claim's test or a gating metric FAILED, or a metric became NaN or infinite",
            3: "judged; the MLflow record waits for `harness sync`",
            4: "undecided: a claim's test INCONCLUSIVE or untested (never when bit-identical to its reference), or"
            " a statistical verdict with one seed on a side",
        },
        trains=True,
    ),
    Command(
        "compare",
        compare.handle,
        compare.arguments,
        help="a table and a curve plot across finished runs, logged to MLflow",
        description="Compare finished runs (all of an experiment's, or the given run ids): a table of device, "
        "versions, env steps/s, compile seconds, peak memory and final metrics (IQM, 95% CI) and a PNG of the loss and "
        "return curves (mean over seeds, shaded 95% CI). The comparison is logged as a run named 'compare' in "
        "the experiment of the first run (tag harness.kind=compare); the compared runs are not changed.",
        exits={},
    ),
    Command(
        "scale",
        scale.handle,
        scale.arguments,
        help="throughput against batch size: where a device saturates for a spec",
        description="Train the spec at a ladder of sizes (powers of two) of one number, each seed's envs or the "
        "seeds side by side, and measure at each: steady-state env steps/s, the share of the device's matmul "
        "ceiling, compile seconds and the memory the compiled program needs. Stops at the first size the spec "
        "refuses or that does not compile or run, once the throughput has stopped growing (by default), or before "
        "a size that would pass --max-seconds. Prints the saturation point ("
        f"{scaling.SATURATION}) and draws throughput and % of the ceiling against size. Logged to MLflow: a "
        "parent run (tag harness.kind=scale) with the plot, and a child run per size.",
        exits={1: "no size of the ladder ran (each was refused or failed)"},
    ),
    Command(
        "ladder",
        ladder.handle,
        ladder.arguments,
        help="play an Elo ladder's anchors against each other and commit their ratings",
        description="Play every pair of the anchors the spec's strength.anchors names (random, greedy, "
        "playouts_N: search with N random playouts and no network) against each other, --games games a pair, "
        "half with each colour, in one jitted program; fit their Elo ratings by maximum likelihood (Bradley-Terry, "
        "a draw half a win, random at 0) with standard errors, and write them to results/ladders/<suite>-<id>.json "
        "(--out), where every run of a spec with those anchors reads them: its final parameters are rated on that "
        "fixed scale (ladder_elo, with its 95% interval).",
        exits={},
    ),
    Command(
        "drift",
        drift.handle,
        drift.arguments,
        help="what another set of package versions (a JAX upgrade) changes: bits, verdict, speed, compile, memory",
        description="Train each spec in two Python environments on this machine (e.g. two JAX versions, each "
        "installed with its constraints file), one process per run, in rounds that alternate the order, and "
        "report for each spec: bits identical or not, the newer side's statistical verdict against the older's "
        "run, and steady-state env steps/s, compile seconds and peak memory, each judged by the speed test on "
        "the rounds' pairs (SLOWER or LARGER, not by --slower-by, or undecided; rounds go on until the tests "
        "decide, at most --rounds). Runs use --deterministic and no compilation cache. Written to --out (JSON, "
        "and Markdown beside it) and logged to MLflow (experiment 'drift').",
        exits={
            1: "the newer side fails a verdict or a claim, is SLOWER (LARGER) by the speed test, or a run did not finish",
            4: "no agreement shown: a verdict not judged, or a claim's test undecided",
        },
    ),
)
# The commands by name, in the table's order.
COMMANDS: dict[str, Command] = {command.name: command for command in TABLE}


def exits_line(command: Command) -> str:
    """`harness NAME -h`'s last line: the exit codes the command returns."""
    codes = sorted({**command.exits, 0: "success", 2: "a user error", 130: "interrupted (143: by SIGTERM)"}.items())
    return "Exit codes: " + " ".join(f"{code}: {meaning}." for code, meaning in codes)


def parser() -> argparse.ArgumentParser:
    """The `harness` parser: a subcommand a row of the table."""
    p = argparse.ArgumentParser(prog="harness", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True)
    for command in TABLE:
        command.arguments(
            sub.add_parser(command.name, help=command.help, description=command.description, epilog=exits_line(command))
        )
    return p

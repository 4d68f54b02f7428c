"""The `harness ...` and `nox ...` command lines that README.md and docs/
show (tests/test_documented_commands.py checks them against the real CLI):
read from code blocks (whole lines) and from inline code in the prose
(mentions, whose options are checked but which need not be whole).

`python tests/documented_commands.py FOLDER` runs the cheap ones there
(`runnable`: the whole lines that NOT_RUN does not name), the published
specs they name replaced by tiny variants and the options that size the
work made small (`shrunk`), and prints a JSON line for each.
The test starts it in a process of its own, beside the rest of the suite."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
# Generated from the parser itself (scripts/docs_pages, checked by `nox -s docs`).
GENERATED = {"docs/reference/cli.md"}
PROGRAMS = ("harness", "nox")


class Command(NamedTuple):
    where: str  # file:line
    page: str  # the file, relative to the repository
    words: list[str]  # the command line split as a shell would (comments and [optional] parts left out)
    whole: bool  # a line of a code block (else a mention in the prose)

    @property
    def text(self) -> str:
        return " ".join(self.words)


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if str(p.relative_to(ROOT)) not in GENERATED]


def _split(text: str) -> list[list[str]]:
    """The commands of a shell line: comments and `[...]` (a synopsis's
    optional parts) left out, `&&` separating commands, `srun` dropped."""
    text = re.sub(r"\s*\[[^\]]*\]", "", text)
    commands, current = [], []
    for word in shlex.split(text, comments=True):
        if word == "&&":
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    out = []
    for words in commands:
        if words[:1] == ["srun"]:
            words = words[1:]
        if words[:1] and words[0] in PROGRAMS:
            out.append(words)
    return out


def documented() -> list[Command]:
    commands = []
    for path in pages():
        page = str(path.relative_to(ROOT))
        in_block = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            where = f"{page}:{number}"
            if in_block:
                if re.match(r"\s*(srun\s+)?(harness|nox)\b", line):
                    commands += [Command(where, page, words, True) for words in _split(line)]
                continue
            for span in re.findall(r"`((?:harness|nox) [^`]*)`", line):
                commands += [Command(where, page, words, False) for words in _split(span)]
    return commands


def yaml_block(page: str, containing: str) -> str:
    """The first ```yaml block of `page` that contains `containing`."""
    text = (ROOT / page).read_text()
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        if containing in block:
            return block
    raise LookupError(f"{page} has no yaml block with {containing!r}")


# What is parsed and checked but not run, and why: a test that can run it
# names it, and nothing else is left out.
NOT_RUN = {
    "publish": "writes the reference into results/ (tests/test_reproduce_e2e.py publishes a tiny spec)",
    "reproduce": "judges against the spec's reference in results/, which a tiny variant has not"
    " (tests/test_reproduce_e2e.py reproduces a tiny spec against its own)",
    "--resume": "continues an interrupted run (tests/test_checkpoint.py, tests/test_sweep.py)",
    "--coordinator": "a job of several hosts (test_two_processes.py runs a two-process job)",
    "--cluster": "a Slurm job of several hosts",
    "--seed-axis": "as documented, a mesh of 8 devices (tests/test_published_layouts.py runs seed axes)",
    "--axis seeds": "AlphaZero at seven sizes of seeds, a compile each (README.md's envs ladder runs)",
    "--sizes 4,16,64,256,1024": "a second envs ladder of the spec README.md's scale runs, five compiles more",
    "--max-seconds 300": "README.md's ladder of the same spec runs; this one only bounds it",
    "ladder": "plays the published ladder's tournament, 15 minutes here, and writes results/ladders/"
    " (tests/test_ladder.py runs the command on a tiny spec's anchors)",
    "run ids": "names runs of a store that is not here",
    "drift": "needs a second environment with another JAX line (tests/test_drift.py runs the command,"
    " this Python on both sides)",
}
RUN_ID = "0123456789abcdef0123456789abcdef"
MINIMAL = yaml_block("docs/guides/specs.md", "name: my_cartpole")
SWEEP = yaml_block("docs/guides/sweeps.md", "sweep:")


def tiny(data: dict) -> dict:
    """A PPO or REINFORCE spec's data at two iterations of 4 envs x 8 steps,
    2 seeds, without its claims: two iterations cannot hold them (a test
    claim would FAIL against the faithful seeds, or be untested and exit 4
    where none are beside it)."""
    assert data["algorithm"] in ("ppo", "reinforce"), data["algorithm"]
    data = dict(data)
    hyperparameters = dict(data.get("hyperparameters", {}), num_envs=4, num_steps=8)
    if data["algorithm"] == "ppo":
        hyperparameters.update(num_minibatches=2, update_epochs=1)
    data.update(hyperparameters=hyperparameters, budget={"env_steps": 2 * 4 * 8}, logging={"interval": 1}, seeds=[0, 1])
    data.pop("claims", None)
    return data


class Files:
    """The tiny variants and placeholders of one test's folder."""

    def __init__(self, folder: Path):
        self.folder = folder

    def spec(self, name: str, data: dict) -> str:
        path = self.folder / name
        if not path.exists():
            path.write_text(yaml.safe_dump(tiny(data), sort_keys=False))
        return str(path)

    def word(self, word: str, page: str, tiny_specs: bool) -> str:
        if word == "SPEC":
            base = yaml.safe_load((ROOT / "experiments" / "reinforce_cartpole.yaml").read_text())
            if page == "docs/guides/sweeps.md":
                ppo = yaml.safe_load((ROOT / "experiments" / "ppo_cartpole.yaml").read_text())
                return self.spec("sweep_spec.yaml", {**ppo, **yaml.safe_load(SWEEP), "name": "sweep_spec"})
            return self.spec("spec.yaml", base)
        if word in ("my_cartpole.yaml", "my_spec.yaml"):
            return self.spec(word, yaml.safe_load(MINIMAL))
        if word.startswith("experiments/") and word.endswith(".yaml"):
            if not tiny_specs or not (ROOT / word).exists():
                return str(ROOT / word)
            return self.spec(Path(word).name, yaml.safe_load((ROOT / word).read_text()))
        if word == "RUN_ID" or word.endswith("..."):
            return RUN_ID
        if word == "DIR":
            return str(self.folder / "dir")
        return word.replace("NAME", "name").replace("results/scale/", str(self.folder) + "/")


def argv_of(command: Command, files: Files, tiny_specs: bool = False) -> list[str]:
    return [files.word(w, command.page, tiny_specs) for w in command.words[1:] if w != "..."]


def why_not_run(argv: list[str]) -> str | None:
    """The NOT_RUN reason of a command line: its command, an option (with
    its value where the key has one), or a run id placeholder."""
    text = f" {' '.join(argv)} "
    for key, reason in NOT_RUN.items():
        if key == argv[0] or (key.startswith("-") and f" {key} " in text):
            return reason
    if any(word == "RUN_ID" or word.endswith("...") for word in argv):
        return NOT_RUN["run ids"]
    return None


def runnable() -> list[Command]:
    """The whole documented `harness` lines to run, one of each (by their
    words and page's placeholders), page by page."""
    seen, out = set(), []
    for command in documented():
        if command.words[0] != "harness":
            continue
        key = (command.page == "docs/guides/sweeps.md", tuple(command.words))
        if command.whole and key not in seen and why_not_run(command.words[1:]) is None:
            seen.add(key)
            out.append(command)
    return out


def shrunk(argv: list[str]) -> list[str]:
    """The options that size a command's work made small, as the specs are:
    `harness scale` measures two sizes (`--stop 32`; its ladder's stopping
    rule is tests/test_scale.py's), `--samples` draws 2 points."""
    argv = list(argv)
    if argv[0] == "scale" and "--stop" not in argv and "--sizes" not in argv:
        argv += ["--stop", "32"]
    if "--samples" in argv:
        argv[argv.index("--samples") + 1] = "2"
    return argv


def run_all(folder: Path) -> None:
    """Run every `runnable()` command in `folder` (the current directory),
    each page's with the page's own store (MLFLOW_TRACKING_URI, as a reader
    sets it), printing a JSON line for each: where, command, exit code,
    the end of its stderr, seconds."""
    import subprocess

    from harness import cli
    from harness.record.store import open_client
    from harness.run import compile_cache

    files = Files(folder)
    # One empty store made (MLflow's migrations run) once, copied per page.
    template = folder / "template.db"
    open_client(f"sqlite:///{template}")
    for command in runnable():
        store = folder / (command.page.replace("/", "_") + ".db")
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{store}"
        if not store.exists():
            shutil.copyfile(template, store)
        argv = shrunk(argv_of(command, files, tiny_specs=True))
        started = time.perf_counter()
        if "--host-devices" in argv:  # set before JAX starts: a process of its own
            done = subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True, text=True)
            code, err = done.returncode, done.stderr
        else:
            out, errors = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errors):
                code = cli.main(argv)
            err = errors.getvalue()
            # --compile-cache and --no-compile-cache set JAX's cache for the
            # process: back to the default for the next command.
            compile_cache.configure(compile_cache.resolve(None, False))
        line = {"where": command.where, "command": command.text, "code": code, "stderr": err[-800:]}
        print(json.dumps({**line, "seconds": round(time.perf_counter() - started, 1)}), flush=True)


if __name__ == "__main__":
    os.chdir(sys.argv[1])
    run_all(Path(sys.argv[1]))

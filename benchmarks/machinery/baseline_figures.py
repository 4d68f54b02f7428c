"""Compile seconds and peak memory against a baseline (`--baseline REV`),
judged by the speed test with the run's entries as its rounds.

An entry's rounds against the baseline time its calls; its compile and its
peak memory happen once a side, so one entry gives one pair of each. The
bench's question about them is the run's: does this commit compile slower,
or take more memory, across what the bench compiles? Each entry compared is
a round (`harness.stats.speed`), in the order the entries ran, the side that
compiled first alternating by entry (`speed.first`, the lockstep's
`Leader.attach` made early for the baseline's turns), so that a commit that
changed nothing is as likely to read higher as lower in each. The test stops
at the first entry where it decides; UNDECIDED when the entries run out.

Memory is the entry's peak host memory (the process's resident set, as the
table's "peak RSS MB") and, on an accelerator, its peak device memory; the
words are LARGER and not larger. The baseline's figures come from its bench's
JSON once it has ended.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

# The figures judged this way: (the Result's field, what a table calls it, the word for more).
FIGURES = (
    ("compile_seconds", "compile seconds", "SLOWER"),
    ("peak_host_bytes", "peak host memory", "LARGER"),
    ("peak_device_bytes", "peak device memory", "LARGER"),
)
# The tests a run against a baseline makes besides its entries': its alpha is split over them too.
TESTS = len(FIGURES)


class FigureVerdict(NamedTuple):
    figure: str  # the Result's field
    what: str  # as the report names it
    more: str  # the word for the candidate's higher figure
    entries: list[str]  # the entries paired, in the order they ran
    verdict: Any  # harness.stats.speed.SpeedVerdict

    @property
    def regressed(self) -> bool:
        """SLOWER (LARGER): what `--fail-on-regression` exits 1 on."""
        from benchmarks.machinery.compat import speed

        return self.verdict.outcome == speed.SLOWER

    @property
    def ratio(self) -> tuple[float, float, float]:
        """This commit's figure over the baseline's (above 1: more), the
        median entry's, and its 95% interval (the verdict's speed ratio inverted)."""
        v = self.verdict
        return 1 / v.ratio, 1 / v.high, 1 / v.low

    def line(self) -> str:
        """`compile seconds, 9 of 33 entries as rounds: 1.02x the baseline's [0.94-1.09], not slower by 10%`."""
        from benchmarks.machinery.compat import speed

        v = self.verdict
        words = {speed.SLOWER: self.more, speed.NOT_SLOWER: f"not {self.more.lower()} by {v.test.slower_by:.0%}"}
        said = words.get(v.outcome, f"undecided after {v.rounds} entries")
        ratio, low, high = self.ratio
        return (
            f"{self.what}, {v.rounds} of {len(self.entries)} entries as rounds: {ratio:.2f}x the baseline's"
            f" [{low:.2f}-{high:.2f}], {said}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The verdict's fields, its ratio and interval this commit's figure over the baseline's."""
        ratio, low, high = self.ratio
        return {
            "figure": self.figure,
            "entries": self.entries,
            **self.verdict.as_dict(),
            "ratio": ratio,
            "interval": [low, high],
        }


def baseline_entries(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The baseline bench's entries by name, from its pytest-benchmark JSON."""
    out = {}
    for bench in document.get("benchmarks", []):
        harness = (bench.get("extra_info") or {}).get("harness")
        if harness and "name" in harness:
            out[harness["name"]] = harness
    return out


def read_baseline(path: Path) -> dict[str, dict[str, Any]] | None:
    """`baseline_entries` of the JSON at `path`; None when it holds none."""
    try:
        return baseline_entries(json.loads(Path(path).read_text())) or None
    except (OSError, ValueError):
        return None


def _value(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) and x > 0 else None


def judge(candidate: list[Any], baseline: dict[str, dict[str, Any]], test: Any) -> list[FigureVerdict]:
    """Each figure's verdict over the entries both sides measured it in:
    `candidate`, this bench's Results in the order they ran (those with a
    speed verdict, i.e. rounds against the baseline); `test`, the speed
    test (its x and its share of the run's alpha), its cap the entries."""
    from benchmarks.machinery.compat import speed

    out = []
    for figure, what, more in FIGURES:
        names, theirs, ours = [], [], []
        for result in candidate:
            if "speed" not in result.extra or result.name not in baseline:
                continue
            theirs_entry = baseline[result.name]
            a, b = _value(theirs_entry.get(figure)), _value(getattr(result, figure, None))
            # A peak since the process started is not an entry's own: only like with like.
            like = (
                figure != "peak_host_bytes" or theirs_entry.get("peak_host_since_start") == result.peak_host_since_start
            )
            if a is not None and b is not None and like:
                names.append(result.name)
                theirs.append(a)
                ours.append(b)
        if names:
            d = speed.log_ratios(theirs, ours)
            out.append(FigureVerdict(figure, what, more, names, speed.decide(d, test._replace(cap=len(d)))))
    return out

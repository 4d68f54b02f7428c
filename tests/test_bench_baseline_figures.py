"""Compile seconds and peak memory against a baseline, the entries as the
speed test's rounds (benchmarks/machinery/baseline_figures.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.machinery import baseline_figures, measure
from harness.stats import speed


def _result(name: str, compile_seconds: float, peak: int, *, compared: bool = True, since_start: bool = False):
    return measure.Result(
        name=name,
        kind="micro",
        config={},
        unit="calls/s",
        rate=(1.0, 1.0, 1.0),
        repeats=3,
        compile_seconds=compile_seconds,
        peak_host_bytes=peak,
        peak_host_since_start=since_start,
        extra={"speed": {"outcome": speed.NOT_SLOWER}} if compared else {},
    )


def _theirs(results, compile_factor: float = 1.0, peak_factor: float = 1.0) -> dict:
    return {
        r.name: {
            "name": r.name,
            "compile_seconds": r.compile_seconds * compile_factor,
            "peak_host_bytes": r.peak_host_bytes * peak_factor,
            "peak_host_since_start": False,
        }
        for r in results
    }


TEST = speed.SpeedTest(alpha=speed.alpha_each(35))  # a default bench's share


def test_a_commit_that_compiles_a_third_slower_reads_slower_and_its_memory_not_larger():
    rng = np.random.default_rng(0)
    ours = [_result(f"e{i}", 2.0 * rng.uniform(0.9, 1.1), int(1e9)) for i in range(30)]
    (compile_, memory) = baseline_figures.judge(ours, _theirs(ours, compile_factor=0.75), TEST)
    assert compile_.figure == "compile_seconds" and compile_.regressed
    assert compile_.verdict.ratio == pytest.approx(0.75) and compile_.verdict.rounds < 30
    assert compile_.as_dict()["ratio"] == pytest.approx(1 / 0.75)  # this commit's seconds over the baseline's
    assert "1.33x the baseline's" in compile_.line()
    assert "SLOWER" in compile_.line() and "entries as rounds" in compile_.line()
    assert memory.figure == "peak_host_bytes" and memory.verdict.outcome == speed.NOT_SLOWER
    assert "not larger by 10%" in memory.line()


def test_noise_alone_reads_not_slower_and_an_unpaired_entry_is_no_round():
    rng = np.random.default_rng(1)
    ours = [_result(f"e{i}", 2.0, 10**9) for i in range(12)]
    theirs = _theirs(ours)
    for name in theirs:
        theirs[name]["compile_seconds"] = 2.0 * rng.uniform(0.95, 1.05)
    ours.append(_result("alone", 9.0, 10**9, compared=False))  # no rounds against the baseline
    ours.append(_result("peak since start", 2.0, 10**9, since_start=True))  # not the entry's own peak
    theirs["peak since start"] = {"compile_seconds": 2.0, "peak_host_bytes": 10**9, "peak_host_since_start": False}
    compile_, memory = baseline_figures.judge(ours, theirs, TEST)
    assert compile_.verdict.outcome == speed.NOT_SLOWER and "alone" not in compile_.entries
    assert "peak since start" in compile_.entries and "peak since start" not in memory.entries


def test_the_baselines_figures_come_from_its_bench_json(tmp_path):
    path = tmp_path / "benchmark.json"
    assert baseline_figures.read_baseline(path) is None  # its bench wrote none
    path.write_text(
        json.dumps(
            {"benchmarks": [{"name": "test_a", "extra_info": {"harness": {"name": "a", "compile_seconds": 1.5}}}]}
        )
    )
    assert baseline_figures.read_baseline(path) == {"a": {"name": "a", "compile_seconds": 1.5}}

"""scripts/compile-study: the committed GPU record renders as the docs quote
it, and a setting it does not know is refused before anything runs."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "compile-study"
RECORD = ROOT / "results" / "compile" / "gpu-nvidia-h200.json"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_the_record_renders_with_every_setting_and_the_gpu_bits_caveat():
    rows = json.loads(RECORD.read_text())
    out = _run("--show", str(RECORD))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1 + len(rows) + 1
    assert {line.split()[0] for line in lines[1:-1]} == {r["setting"] for r in rows}
    assert (ROOT / "results" / "compile" / "gpu-nvidia-h200.txt").read_text() == out.stdout
    assert "only `same` says something" in lines[-1]


def test_an_unknown_setting_is_one_line_and_exit_2():
    out = _run("benchmarks/specs/ppo_cartpole.yaml", "--settings", "default,fast")
    assert out.returncode == 2
    assert "unknown setting fast" in out.stderr and "Traceback" not in out.stderr

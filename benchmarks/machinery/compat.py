"""The harness's modules as this checkout's benchmarks/ find them in any
harness they run over: against a baseline (`--baseline REV`) that is
REV's, which may predate a move. `speed`, the speed test, lives in
`harness.stats` now and lived in `harness.judge` before the statistics had
a room of their own. Imported where it is used (lazily, as the harness)."""

try:
    from harness.stats import speed
except ImportError:  # a baseline's harness from before harness.stats
    from harness.judge import speed  # type: ignore[no-redef]

__all__ = ["speed"]

"""The entries of `nox -s bench` run under the bench's pytest plugin
(benchmarks/machinery/plugin.py: options, fixtures, the report). pytest
imports this file as `benchmarks.conftest`, with the repository's root on
`sys.path` (pyproject's `pythonpath`), so the machinery is found there."""

from benchmarks.machinery.plugin import *  # noqa: F403  (pytest finds hooks and fixtures by name here)

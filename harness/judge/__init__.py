"""Judging records, never training, with the tests of `harness.stats`:
claims and their levels, reproduction verdicts, comparisons across runs,
drift between package versions, ladders, references and baselines."""

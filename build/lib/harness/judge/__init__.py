"""Judging records, never training: reproduction verdicts, comparisons
across runs, interval estimates and baselines."""

"""The tests themselves, on numbers alone: the sequential e-processes
(`sequential`, by pairs, and `ranks`), the bootstrap intervals
(`intervals`), the speed test (`speed`) and the verdict's words
(`verdict`). Nothing here imports the rest of the harness, so the claims,
the bench, drift and the errors simulation share one set of tests; the
judging of records with them is `harness.judge`'s.
"""

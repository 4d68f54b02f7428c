"""The sessions: what `harness run`, `harness sweep` and `harness reproduce`
do, tying the layers below together (build and sweep make the plans, run
trains them, record keeps them, judge gives the verdicts).

One training session (harness.sessions.training) trains every program, a
plain run's as a sweep's: progress, compile cache, checkpoints, the runner,
the wall-time breakdown and the results records with their summary metrics.
A plain run (harness.sessions.run) and a sweep (harness.sessions.sweep)
differ only in how they open their MLflow runs and how a program's result
is split into records; a reproduction (harness.sessions.reproduce) is a
plain run judged against its reference.
"""

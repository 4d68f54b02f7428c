"""Every iteration of every seed of a run in one compressed columnar file,
`iterations.parquet`, logged as an artifact of the run: MLflow's curves keep
at most a few hundred points each (harness.record.windows), this keeps them
all, in the dtypes they were computed in.

One row per iteration and seed: `iteration` (from 1), `env_steps` (each
seed's, after the iteration), `seed`, then a column per metric, and a column
per evaluation metric, set on the rows of the iterations an evaluation
followed and null elsewhere. Read it with `read` or any Parquet reader
(`pandas.read_parquet`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

FILE = "iterations.parquet"


def write(
    path: Path,
    metrics: dict[str, np.ndarray],
    seeds: Sequence[int],
    env_steps_per_iteration: int,
    evaluation: dict[str, np.ndarray] | None = None,
    evaluation_iterations: Sequence[int] = (),
) -> Path:
    """`metrics` (`[iterations, seeds]` each) and `evaluation` (`[evaluations,
    seeds]`, after `evaluation_iterations`) as Parquet at `path`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    iterations = len(next(iter(metrics.values())))
    count = len(seeds)
    iteration = np.repeat(np.arange(1, iterations + 1, dtype=np.int64), count)
    columns = {
        "iteration": iteration,
        "env_steps": iteration * env_steps_per_iteration,
        "seed": np.tile(np.asarray(seeds, dtype=np.int64), iterations),
    }
    columns.update({name: np.asarray(values).reshape(-1) for name, values in metrics.items()})
    rows = (np.asarray(evaluation_iterations, dtype=np.int64)[:, None] - 1) * count + np.arange(count)
    for name, values in (evaluation or {}).items():
        column = np.zeros(iterations * count, dtype=np.asarray(values).dtype)
        present = np.zeros(iterations * count, dtype=bool)
        column[rows.reshape(-1)] = np.asarray(values).reshape(-1)
        present[rows.reshape(-1)] = True
        columns[name] = pa.array(column, mask=~present)
    pq.write_table(pa.table(columns), path, compression="zstd")
    return path


def read(path: Path) -> dict[str, np.ndarray]:
    """The columns of an iterations file, evaluation columns' nulls as NaN."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}

"""What a built spec is: the `Plan` that `harness.build` makes from a
validated spec and the sessions train, publish and judge."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from harness.types import EnvInfo, Layout

if TYPE_CHECKING:
    from jax.sharding import Mesh

    import algorithms
    from harness.experiment_spec import Spec


class Plan(NamedTuple):
    spec: Spec
    spec_hash: str
    env: algorithms.Environment
    env_info: EnvInfo
    algorithm: algorithms.Algorithm
    num_iterations: int  # per seed
    env_steps_per_iteration: int  # per seed
    layout: Layout | None = None  # the device mesh's shape; None: one device, plain jit
    mesh: Mesh | None = None
    # What the spec's `strength:` asks, and the ladder its ratings came from
    # (MLflow tags `strength.*`): not in the spec hash, so said beside it.
    strength_tags: dict[str, str] = {}

    @property
    def env_steps(self) -> int:
        """Env steps each seed actually takes (the budget rounded down to whole iterations)."""
        return self.num_iterations * self.env_steps_per_iteration

"""Run tiny specs of every algorithm on several device layouts and print
their curves as JSON: `python tests/device_runs.py [exact]` (with `exact`,
the exact layouts' specs, whose layouts must give the same bits; without,
the others, compared within a tolerance). A layout is `plain`
(plain jit, no mesh) or `SEEDxDATA`. Started by tests/test_devices.py in a
subprocess with 4 simulated CPU devices (XLA_FLAGS must be set before JAX
starts). Compiles dominate the time, so each spec runs few layouts: PPO
the most, the others 1 and 4 devices (the GRU on the exact layouts).
AlphaZero with mctx's search, the slowest to trace, runs 1 device (and
2x2 on tic-tac-toe: seeds and data split; no evaluation games there); the
exact layouts, with the batched search, check self-play, training and
evaluation against the plain program on 4 devices bit for bit."""

from __future__ import annotations

import json
import sys

ALPHAZERO = {
    "num_envs": 8,
    "collection_steps": 6,
    "num_simulations": 4,
    "capacity": 12,
    "train_steps": 2,
    "train_batch_size": 8,
}
SPECS = {
    "ppo": {
        "algorithm": "ppo",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "budget": {"env_steps": 4 * 8 * 16},
        "hyperparameters": {"num_envs": 8, "num_steps": 16, "num_minibatches": 2, "update_epochs": 2},
    },
    "reinforce": {
        "algorithm": "reinforce",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "budget": {"env_steps": 4 * 8 * 16},
        "hyperparameters": {
            "num_envs": 8,
            "num_steps": 16,
            "normalize_advantages": True,
            # Sampled actions: each device draws its episodes' actions.
            "evaluation": {"episodes": 8, "policy": "sample", "max_steps": 64},
        },
    },
    # Continuous actions (Gaussian noise drawn at the global shape) and
    # normalisation statistics of the global batch.
    "ppo_pendulum": {
        "algorithm": "ppo",
        "env": {"suite": "gymnax", "id": "Pendulum-v1"},
        "budget": {"env_steps": 4 * 8 * 16},
        "hyperparameters": {
            "num_envs": 8,
            "num_steps": 16,
            "num_minibatches": 2,
            "update_epochs": 2,
            "normalize_observations": True,
            "normalize_rewards": True,
            "evaluation": {"episodes": 8, "policy": "sample", "max_steps": 32},
        },
    },
    # Exact layouts (devices.shards): whole runs, long enough that layouts
    # that add per device drift apart (64 iterations). PPO with the GRU
    # policy (its carries split with the envs), several epochs of
    # minibatches, gradient clipping and an annealed learning rate: the
    # feed-forward policy is this program less the recurrence.
    "ppo_gru_exact": {
        "algorithm": "ppo",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "budget": {"env_steps": 64 * 32 * 8},
        "network": {"kind": "gru", "gru_size": 16, "hidden_sizes": [16]},
        "hyperparameters": {"num_envs": 32, "num_steps": 8, "num_minibatches": 2, "update_epochs": 2},
        "optimizer": {"max_grad_norm": 0.5, "anneal_lr": True},
        "devices": {"shards": 8},
        "logging": {"interval": 16},
    },
    # REINFORCE with a baseline, two passes of importance-weighted updates.
    "reinforce_exact": {
        "algorithm": "reinforce",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "budget": {"env_steps": 64 * 32 * 8},
        "hyperparameters": {"num_envs": 32, "num_steps": 8, "num_minibatches": 2, "update_epochs": 2, "c_rho": 2.0},
        "optimizer": {"max_grad_norm": 0.5, "anneal_lr": True},
        "devices": {"shards": 8},
        "logging": {"interval": 16},
    },
    # Without a baseline: returns normalised over each whole minibatch.
    "reinforce_exact_normalized": {
        "algorithm": "reinforce",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "budget": {"env_steps": 64 * 32 * 8},
        "hyperparameters": {"num_envs": 32, "num_steps": 8, "baseline": False, "normalize_advantages": True},
        "devices": {"shards": 8},
        "logging": {"interval": 16},
    },
    "alphazero": {
        "algorithm": "alphazero",
        "env": {"suite": "pgx", "id": "tic_tac_toe"},
        "budget": {"env_steps": 4 * 8 * 6},
        "network": {"kind": "mlp", "hidden_sizes": [16]},
        "hyperparameters": ALPHAZERO,
    },
    # 4 evaluation games (of the default 32): what its test asks of the
    # evaluation (finite figures, no packing above the optimum) holds of any number.
    "alphazero_knapsack": {
        "algorithm": "alphazero",
        "env": {"suite": "jumanji", "id": "Knapsack-v1"},
        "budget": {"env_steps": 4 * 8 * 6},
        "network": {"kind": "item_set", "hidden_sizes": [16], "pooling_layers": 1},
        "hyperparameters": {**ALPHAZERO, "ranked_reward": {"memory": 4}, "evaluation": {"games": 4}},
    },
    # Exact layouts of AlphaZero: self-play, training and evaluation over
    # 32 iterations; Knapsack's returns are real numbers (ranked rewards).
    # The batched search, the published specs' (mctx's is on the layouts
    # above): it traces in a third of the time.
    "alphazero_exact": {
        "algorithm": "alphazero",
        "env": {"suite": "pgx", "id": "tic_tac_toe"},
        "budget": {"env_steps": 32 * 16 * 6},
        "network": {"kind": "mlp", "hidden_sizes": [16]},
        "hyperparameters": {
            **ALPHAZERO,
            "tree_search": "batched",
            "num_envs": 16,
            "train_batch_size": 16,
            "evaluation": {"games": 4, "pool_size": 2},
        },
        "devices": {"shards": 8},
        "logging": {"interval": 8},
    },
    "alphazero_knapsack_exact": {
        "algorithm": "alphazero",
        "env": {"suite": "jumanji", "id": "Knapsack-v1"},
        "budget": {"env_steps": 32 * 16 * 6},
        "network": {"kind": "item_set", "hidden_sizes": [16], "pooling_layers": 1},
        "hyperparameters": {
            **ALPHAZERO,
            "tree_search": "batched",
            "num_envs": 16,
            "train_batch_size": 16,
            "ranked_reward": {"memory": 4},
            "evaluation": {"games": 4},
        },
        "devices": {"shards": 8},
        "logging": {"interval": 8},
    },
}
# A sweep: two learning rates x two seeds in one program, points and seeds
# sharing the seed axis of the mesh.
SPECS["sweep"] = {**SPECS["ppo"], "sweep": {"optimizer.learning_rate": [1e-3, 3e-3]}}


LAYOUTS = {
    # 2 data devices: 2x2 (seeds split too).
    "ppo": ["plain", "1x1", "1x4", "2x2"],
    "ppo_pendulum": ["1x1", "1x4"],
    "ppo_gru_exact": ["plain", "1x4"],
    "reinforce": ["1x1", "1x4"],
    "reinforce_exact": ["plain", "1x4"],
    "reinforce_exact_normalized": ["plain", "1x4"],
    "alphazero": ["1x1", "2x2"],
    "alphazero_knapsack": ["1x1"],
    "alphazero_exact": ["plain", "1x4"],
    "alphazero_knapsack_exact": ["plain", "1x4"],
    "sweep": ["1x1", "2x2"],
}


def is_exact(name: str) -> bool:
    return "_exact" in name


def main() -> None:
    from harness import build
    from harness import experiment_spec as S
    from harness import sweep as sweeps
    from harness.run import runner

    exact = sys.argv[1:] == ["exact"]
    out: dict[str, dict[str, dict[str, list]]] = {}
    for name, data in SPECS.items():
        if is_exact(name) != exact:
            continue
        out[name] = {}
        for layout in LAYOUTS[name]:
            spec_data = {"name": name, "seeds": [0, 1], "logging": {"interval": 2}, **data}
            if "sweep" in spec_data:
                seed_axis, data_axis = (int(n) for n in layout.split("x"))
                spec_data["devices"] = {"count": seed_axis * data_axis, "seed_axis": seed_axis}
                (group,) = sweeps.make_sweep(S.parse(spec_data), name).groups
                plan, seeds, numbers = group.plan, group.run_seeds, group.numbers
            else:
                plan = build.build_on(S.parse(spec_data), layout)
                seeds, numbers = plan.spec.seeds, None
            interval = plan.spec.logging.interval
            result = runner.run(plan.algorithm, seeds, plan.num_iterations, interval, mesh=plan.mesh, numbers=numbers)
            curves = {k: v.tolist() for k, v in result.metrics.items()}
            curves.update({f"eval/{k}": v.tolist() for k, v in result.evaluation.items()})
            out[name][layout] = curves
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

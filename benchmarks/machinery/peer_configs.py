"""The configurations the side-by-side entries (`benchmarks/test_bench_against.py`)
run the peers at, in each peer's own keys; each comment says where it comes
from. `benchmarks.machinery.peers` loads the peers' code."""

# PureJaxRL's CartPole PPO configuration (the `__main__` of its ppo.py), in
# its own keys; TOTAL_TIMESTEPS is set by the caller.
PUREJAXRL_PPO_CARTPOLE = {
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,
}

# Its MinAtar configuration (the same ppo.py: the grid flattened, a relu MLP).
PUREJAXRL_PPO_MINATAR = {
    **PUREJAXRL_PPO_CARTPOLE,
    "LR": 5e-3,
    "NUM_ENVS": 64,
    "NUM_STEPS": 128,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 8,
    "ACTIVATION": "relu",
    "ENV_NAME": "Breakout-MinAtar",
}

# Its continuous-action PPO (ppo_continuous_action.py) on Brax
# inverted_pendulum, backend positional (its BraxGymnaxWrapper's; episodes
# of 1000 steps), at 256 envs: the published ppo_brax_inverted_pendulum.
PUREJAXRL_PPO_BRAX_INVERTED_PENDULUM = {
    "LR": 3e-4,
    "NUM_ENVS": 256,
    "NUM_STEPS": 10,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 32,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.0,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "inverted_pendulum",
    "ANNEAL_LR": True,
    "NORMALIZE_ENV": True,
    "DEBUG": False,
}

# xland-minigrid's single-task script (`TrainConfig` fields) at the
# configuration its timing was quoted at on a 2-core CPU: MiniGrid-Empty-6x6,
# 512 envs x 16 steps, GRU 256, heads 256, one epoch of 16 minibatches. Its
# training function evaluates after every update (80 episodes by default); at
# 1 episode that costs a few milliseconds of an update's seconds, so the
# comparison is of training. total_timesteps is set by the caller.
XMINIGRID_SINGLE_TASK = {
    "env_id": "MiniGrid-Empty-6x6",
    "num_envs": 512,
    "num_steps": 16,
    "rnn_hidden_dim": 256,
    "head_hidden_dim": 256,
    "update_epochs": 1,
    "num_minibatches": 16,
    "eval_episodes": 1,
}

# pgx's AlphaZero example (`Config` fields of examples/alphazero/train.py)
# at the configuration of issue 16's comparison: connect_four, 256 games x 64
# moves per iteration, 32 Gumbel simulations, ResNet 2 blocks x 32 channels,
# updates of 4,096 positions (4 per iteration).
PGX_ALPHAZERO_CONNECT_FOUR = {
    "env_id": "connect_four",
    "seed": 30,
    "num_channels": 32,
    "num_layers": 2,
    "selfplay_batch_size": 256,
    "num_simulations": 32,
    "max_num_steps": 64,
    "training_batch_size": 4096,
}

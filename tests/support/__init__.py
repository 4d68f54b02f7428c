"""What the tests share besides fixtures (tests/conftest.py holds those and
the session's hooks): the tiny specs and stores (`specs`), training them
once (`training`), processes of the harness (`processes`), a real MLflow
server (`server`) and the work done in the background (`background`)."""

from support.background import Background, at_session_end, background_result
from support.processes import (
    EXACT_COMPILER_OPTIONS,
    EXACT_XLA_FLAGS,
    TEST_XLA_FLAGS,
    USER_XLA_FLAGS,
    device_env,
    fresh_process,
    run_cli,
    start_harness,
    wait_for_training,
)
from support.server import MlflowServer, free_port
from support.specs import TINY_AZ, TINY_PENDULUM, TINY_PPO, TINY_SPEC, new_store, write_spec
from support.training import programs_of, record_of, train, train_plan

__all__ = [
    "EXACT_COMPILER_OPTIONS",
    "EXACT_XLA_FLAGS",
    "TEST_XLA_FLAGS",
    "TINY_AZ",
    "TINY_PENDULUM",
    "TINY_PPO",
    "TINY_SPEC",
    "USER_XLA_FLAGS",
    "Background",
    "MlflowServer",
    "at_session_end",
    "background_result",
    "device_env",
    "free_port",
    "fresh_process",
    "new_store",
    "programs_of",
    "record_of",
    "run_cli",
    "start_harness",
    "train",
    "train_plan",
    "wait_for_training",
    "write_spec",
]

"""The errors an env adapter raises for a spec's `env` section, which
`harness.build` turns into spec errors that name the key at fault."""

from __future__ import annotations


class EnvKwargsError(ValueError):
    """A bad `env.kwargs` entry; `key` is its spec key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class UnknownEnvError(ValueError):
    """The suite has no env of that id; the message lists what it has."""


def no_such_env(suite: str, env_id: str, available: list[str]) -> UnknownEnvError:
    """The error for an `env_id` that `suite` does not register: it names the
    closest id, if one is close, and lists every id the suite has (sorted)."""
    import difflib

    hint = difflib.get_close_matches(env_id, available, n=1)
    suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
    return UnknownEnvError(f"{suite} has no env {env_id!r}{suffix}; available: {', '.join(sorted(available))}")

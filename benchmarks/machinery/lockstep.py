"""Two benches in lockstep: `nox -s bench -- --baseline REV`.

The bench of this checkout (the candidate, the *leader*) starts a second
pytest session of the bench (the *follower*) in a worktree of REV, with
REV's packages in an environment of its own and this checkout's
`benchmarks/` copied in: the same instrument measures both commits. The two
processes take turns, never computing at once:

- the follower announces each entry (`at`) and waits; the leader answers
  `skip` for an entry it makes no comparison of, or `run` once its own side
  of the entry is compiled and warm, or, in every other entry, before it
  compiles its own (`Leader.turn`: the side that compiles first alternates,
  as its compile seconds are compared too, benchmarks.machinery.baseline_figures);
- the follower then sets its side up (compiles, warms) and says `ready`;
- the leader asks for rounds one at a time, the side that goes first
  alternating (harness.stats.speed.first): in each round both sides make
  the same timed calls (as many as last ROUND_SECONDS, the same number on
  both sides), one side after the other, and the speed test on the rounds'
  time ratios (harness.stats.speed) says when to stop (`done`), at most
  about ENTRY_SECONDS a side.

An entry the follower fails at (REV lacks something it needs) comes back
as an `at` of the next entry instead of `ready`: that entry is reported as
having no baseline. Messages are JSON lines on two pipes.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the follower, a baseline's bench, runs over a harness that may predate the test
    from benchmarks.machinery.compat import speed


class Channel:
    """JSON lines over a pair of pipe ends."""

    def __init__(self, read_fd: int, write_fd: int):
        self.reader = os.fdopen(read_fd, "r", buffering=1)
        self.writer = os.fdopen(write_fd, "w", buffering=1)

    def send(self, **message: Any) -> None:
        try:
            self.writer.write(json.dumps(message) + "\n")
            self.writer.flush()
        except (BrokenPipeError, ValueError):  # the other side ended
            pass

    def receive(self) -> dict[str, Any] | None:
        """The next message; None once the other side has ended."""
        try:
            line = self.reader.readline()
        except (OSError, ValueError):
            return None
        return json.loads(line) if line else None

    def close(self) -> None:
        for end in (self.writer, self.reader):
            try:
                end.close()
            except OSError:
                pass


# A round's calls on each side last at least this long (short calls are
# repeated, the same number on both sides): a millisecond's call alone would
# measure the scheduler more than the program.
ROUND_SECONDS = 0.2
# The rounds of one entry last at most about this long on each side: the test's
# cap for entries with long calls, fixed from the candidate's call before any round.
ENTRY_SECONDS = 45.0
MIN_CAP = 15  # a cap never below this many rounds: enough to decide on rounds that agree


# An instrument for measuring the test's power on real rounds, never set by the bench:
# the candidate's timed calls made slower by this share (a spin after its calls, so
# that its counted work stays the same).
INJECT = "HARNESS_BENCH_INJECT_SLOWDOWN"


def timed(call: Callable[[], Any], calls: int = 1, slower: float = 0.0) -> float:
    """Seconds per call of `calls` calls (each waits for the device itself);
    `slower`: that share more, spun after them."""
    start = time.perf_counter()
    for _ in range(calls):
        call()
    took = time.perf_counter() - start
    while slower and time.perf_counter() - start < took * (1 + slower):
        pass
    return (time.perf_counter() - start) / calls


def sizing(seconds: float, test: speed.SpeedTest) -> tuple[int, speed.SpeedTest]:
    """Calls per round for a call of `seconds`, and the test with its cap
    for such rounds (ROUND_SECONDS, ENTRY_SECONDS, MIN_CAP)."""
    calls = max(1, math.ceil(ROUND_SECONDS / max(seconds, 1e-6)))
    fits = int(ENTRY_SECONDS / max(calls * seconds, 1e-6))
    return calls, test._replace(cap=max(MIN_CAP, min(test.cap, fits)))


class Compared(NamedTuple):
    """One entry's lockstep rounds, seen from the leader."""

    own: list[float]  # the candidate's seconds per call, a figure per round
    baseline: list[float]  # the baseline's, paired with them ([] when it has none)
    verdict: speed.SpeedVerdict | None  # None: no baseline for this entry
    why: str = ""  # why there is no baseline


class Leader:
    """The candidate's side: drives the follower, entry by entry."""

    def __init__(self, channel: Channel, order: Sequence[str]):
        self.channel = channel
        self.order = list(order)  # the entries' names in the order both sides run them
        self.pending: dict[str, Any] | None = None  # a message read ahead
        self.ended = False
        self.attached: tuple[str, str] | None = None  # (entry, why not) attached before its rounds

    def turn(self, name: str) -> None:
        """At entry `name`'s start, before this side compiles it: in the
        entries where the baseline goes first (`speed.first` of the entry's
        place), bring the follower to it now, so that it compiles and warms
        up first; in the others it does so once this side has."""
        from benchmarks.machinery.compat import speed

        if name in self.order and speed.first(self.order.index(name)) == "baseline":
            self.attached = (name, self.attach(name))

    def release(self, name: str) -> None:
        """At entry `name`'s end: a follower attached early whose rounds
        never came (this side's entry failed first) is told it is done."""
        if self.attached is not None and self.attached[0] == name:
            if not self.attached[1] and not self.ended:
                self.channel.send(done=name)
            self.attached = None

    def _next(self) -> dict[str, Any] | None:
        if self.pending is not None:
            message, self.pending = self.pending, None
            return message
        message = None if self.ended else self.channel.receive()
        self.ended = message is None
        return message

    def _later(self, name: str, other: str) -> bool:
        return other in self.order and name in self.order and self.order.index(other) > self.order.index(name)

    def attach(self, name: str) -> str:
        """Bring the follower to entry `name`, set up; "" when it is ready
        for rounds, else why not."""
        while True:
            message = self._next()
            if message is None:
                return "the baseline's bench ended before this entry"
            if "at" not in message:  # an entry's failure told after its rounds: nothing to answer
                continue
            at = message["at"]
            if at == name:
                break
            if self._later(name, at):
                self.pending = message
                return "the baseline's bench has no such entry"
            self.channel.send(skip=at)  # an entry the leader compares no rounds of
        self.channel.send(run=name)
        reply = self._next()
        if reply is not None and reply.get("ready") == name:
            return ""
        if reply is None:
            return "the baseline's bench ended in this entry"
        if "at" in reply:  # it went on to its next entry without a word
            self.pending = reply
        return f"the entry failed at the baseline ({reply.get('failed', 'see its report')})"

    def rounds(self, name: str, call: Callable[[], Any], test: speed.SpeedTest, alone: int) -> Compared:
        """Entry `name`'s rounds against the follower's until the speed test
        decides; `call` makes one timed call (and waits for the device).
        Without a baseline for it, `alone` rounds of its own."""
        from benchmarks.machinery.compat import speed

        calls, test = sizing(timed(call), test)
        early, self.attached = self.attached, None
        why = early[1] if early is not None and early[0] == name else self.attach(name)
        if why:
            return Compared([timed(call) for _ in range(alone)], [], None, why)
        own: list[float] = []
        theirs: list[float] = []

        def one_round(index: int) -> tuple[float, float]:
            for side in ("baseline", "candidate") if speed.first(index) == "baseline" else ("candidate", "baseline"):
                if side == "candidate":
                    own.append(timed(call, calls, float(os.environ.get(INJECT, 0))))
                    continue
                self.channel.send(round=index, calls=calls)
                reply = self._next()
                if reply is None or "seconds" not in reply:
                    raise BaselineLost(reply)
                theirs.append(float(reply["seconds"]))
            return theirs[-1], own[-1]

        in_rounds = True  # the follower waits for its next round until told `done`
        try:
            verdict, _ = speed.run_rounds(one_round, test)
        except BaselineLost as lost:
            in_rounds = False
            if lost.reply is not None and "at" in lost.reply:
                self.pending = lost.reply
            why = f"the baseline failed in round {len(theirs) + 1} ({(lost.reply or {}).get('failed', 'it ended')})"
            while len(own) > len(theirs):
                own.pop()
            return Compared(own or [timed(call) for _ in range(alone)], [], None, why)
        finally:  # also when this side's call failed
            if in_rounds and not self.ended:
                self.channel.send(done=name)
        return Compared(own, theirs, verdict)

    def close(self) -> None:
        """Tell the follower that nothing more is compared."""
        self.channel.send(end=True)
        self.channel.close()


class BaselineLost(Exception):
    def __init__(self, reply: dict[str, Any] | None):
        super().__init__(str(reply))
        self.reply = reply


class Follower:
    """The baseline's side: an entry runs when the leader says so, its
    timed calls one at a time as the leader asks."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.ended = False

    def arrive(self, name: str) -> bool:
        """At entry `name`'s start: wait for the leader; False to skip it."""
        if self.ended:
            return False
        self.channel.send(at=name)
        message = self.channel.receive()
        if message is None or "run" not in message:
            self.ended = message is None or bool(message.get("end"))
            return False
        return True

    def failed(self, name: str, error: str) -> None:
        """Entry `name` failed (in its setup or a round): the leader, waiting
        for its `ready` or a round's seconds, hears why."""
        self.channel.send(failed=f"{name}: {error}"[-300:])

    def rounds(self, name: str, call: Callable[[], Any]) -> list[float]:
        """The rounds the leader asks for, each one timed call."""
        self.channel.send(ready=name)
        seconds: list[float] = []
        while True:
            message = self.channel.receive()
            if message is None or "round" not in message:
                self.ended = message is None or bool(message.get("end"))
                return seconds
            seconds.append(timed(call, int(message.get("calls", 1))))  # a failure: the report hook tells it
            self.channel.send(seconds=seconds[-1])

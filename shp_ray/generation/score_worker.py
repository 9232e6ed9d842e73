"""A python scorer (``score=python``) bounded: the user's function runs in a worker process of its own, so a call
that never returns costs one round's score, not the run.

Per target and timeout, each process keeps one worker: a child interpreter (``score_child.py``) that imports the
user's module once and answers calls one at a time over two pipes (pickled frames), so a call costs a round trip
(~0.1 ms), not a process start. A call gets ``score.timeout_s``: past it the worker's process group is killed,
the call raises :class:`~shp_ray.policy.scorers.ScorerError` naming the timeout, and the next call starts a new
worker. A worker that dies during a call (``os._exit``, a crash) is that call's error too. The child ends when its
parent does (its pipe closes, or a watchdog sees the parent gone while the function hangs).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from contextlib import suppress
from pathlib import Path

from shp_ray.policy.scorers import ScorerError, Task

CHILD = Path(__file__).with_name("score_child.py")
FRAME = struct.Struct("!Q")  # a frame: its length, then its pickle
# A worker's start (an interpreter, the user's module imported) is bounded apart from a call, and more loosely: a
# loaded machine may take seconds for it, and a call's timeout is the user's budget for the function alone.
START_S = 60.0
_workers: dict[tuple[str, float], _Worker] = {}
_workers_lock = threading.Lock()


class _Deadline(Exception):
    pass


class _Worker:
    """One child interpreter serving ``target``'s calls, started on first use and again after a kill."""

    def __init__(self, target: str, timeout_s: float) -> None:
        self.target, self.timeout_s = target, timeout_s
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.at_exit: weakref.finalize | None = None
        self.to_child = self.from_child = -1

    def call(self, task: Task, draft: str) -> object:
        with self.lock:
            doing = "start (import its module)"
            try:
                if self.proc is None:
                    self._start(time.monotonic() + max(self.timeout_s, START_S))
                doing = "return"
                deadline = time.monotonic() + self.timeout_s
                self._send(pickle.dumps((task, draft)), deadline)
                kind, value = pickle.loads(self._receive(deadline))
            except _Deadline:
                self.stop()
                limit = f"{self.timeout_s:g} s (score.timeout_s)" if doing == "return" else f"{START_S:g} s"
                raise ScorerError(
                    f"TimeoutError: the scorer python:{self.target} did not {doing} within {limit}; "
                    "its process was killed"
                ) from None
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                code = self.stop()
                raise ScorerError(f"the scorer's process ended during the call (exit code {code}): {exc}") from None
            if kind == "error":
                raise ScorerError(str(value))
            return value

    def _start(self, deadline: float) -> None:
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        path = [os.getcwd() if p == "" else p for p in sys.path]  # the user's module imports as it did here
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-B", str(CHILD), self.target, str(to_child_r), str(from_child_w), str(os.getpid())],
                stdin=subprocess.DEVNULL, pass_fds=(to_child_r, from_child_w), env=env, start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.at_exit = weakref.finalize(self, _kill, self.proc.pid)  # no worker outlives its process
        kind, value = pickle.loads(self._receive(deadline))
        if kind == "error":  # its module did not import there
            self.stop()
            raise ScorerError(str(value))

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(FRAME.pack(len(data)) + data)
        while view:
            _wait(self.to_child, deadline, write=True)
            view = view[os.write(self.to_child, view[: 1 << 16]) :]

    def _receive(self, deadline: float) -> bytes:
        head = self._read(FRAME.size, deadline)
        return self._read(FRAME.unpack(head)[0], deadline)

    def _read(self, size: int, deadline: float) -> bytes:
        out = bytearray()
        while len(out) < size:
            _wait(self.from_child, deadline, write=False)
            chunk = os.read(self.from_child, min(size - len(out), 1 << 16))
            if not chunk:
                raise EOFError("its pipe closed")
            out += chunk
        return bytes(out)

    def stop(self) -> int | None:
        """Kill the worker (its whole group) and close its pipes; its exit code."""
        proc, self.proc = self.proc, None
        for fd in (self.to_child, self.from_child):
            with suppress(OSError):
                os.close(fd)
        self.to_child = self.from_child = -1
        if proc is None:
            return None
        if self.at_exit is not None:
            self.at_exit.detach()  # (its pid, once reaped, may be another process's)
        _kill(proc.pid)
        return proc.wait()


def _wait(fd: int, deadline: float, write: bool) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Deadline
    ready = select.select([], [fd], [], left) if write else select.select([fd], [], [], left)
    if not any(ready):
        raise _Deadline


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class BoundedScorer:
    """The function of a python scorer: ``(task, draft) -> result`` computed by this process's worker for
    ``target``. Pickled as its target and timeout (a worker is never shared between processes)."""

    def __init__(self, target: str, timeout_s: float) -> None:
        self.target, self.timeout_s = target, timeout_s

    def __call__(self, task: Task, draft: str) -> object:
        key = (self.target, self.timeout_s)
        with _workers_lock:
            worker = _workers.get(key)
            if worker is None:
                worker = _workers[key] = _Worker(self.target, self.timeout_s)
        return worker.call(task, draft)

    def __reduce__(self):
        return (BoundedScorer, (self.target, self.timeout_s))

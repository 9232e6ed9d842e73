"""Ctrl-C, heard wherever the driver's main thread happens to be when it comes.

Python turns SIGINT into a ``KeyboardInterrupt`` raised at whatever line the main thread runs next,
and a library on that line may lose it: ``asyncio.run`` turns it into a task's cancellation, which a
coroutine that catches it loses (the job then runs to its end and exits 0); a ``__del__`` or callback
prints and drops it. So while :func:`listening`, every SIGINT is also recorded here: the generation
loops ask :func:`check` each time they wake, the app asks :func:`requested` once the job returned,
and both treat a recorded Ctrl-C as one, swallowed or not. A process started with SIGINT ignored (a
background job of a script, ``nohup``) keeps ignoring it, as every Unix program does.

SIGTERM (``kill PID``, a scheduler ending a job, a machine shutting down) is heard the same way: it is how a
long background run is stopped, and it keeps the same whole trajectories; the exit status names the signal
(130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_received = threading.Event()
HEARD = (signal.SIGINT, signal.SIGTERM)
_heard: list[int] = [signal.SIGINT]  # the last signal recorded
_installed: set[int] = set()  # the signals listening() handles now


def requested() -> bool:
    """True once a Ctrl-C came while :func:`listening` (until the next ``listening`` starts)."""
    return _received.is_set()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C was recorded, even one a library swallowed."""
    if _received.is_set():
        raise KeyboardInterrupt


def exit_status() -> int:
    """128 + the signal that stopped the run (130: Ctrl-C, 143: SIGTERM), as a shell reports a killed command."""
    return 128 + int(_heard[0])


def _on_signal(signum: int, frame: object) -> None:
    _heard[0] = signum
    _received.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def listening() -> Iterator[None]:
    """Record every SIGINT and SIGTERM in the block (and raise KeyboardInterrupt, as Python does for SIGINT);
    the previous handlers after.

    A no-op off the main thread (a job of a threaded launcher: Python lets only the main thread
    handle signals); a signal the process was started ignoring (SIGINT of a background job) stays ignored.
    """
    _received.clear()
    _heard[0] = signal.SIGINT
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in HEARD}
    _installed.update(sig for sig, handler in previous.items() if handler is not signal.SIG_IGN)
    reclaim()
    try:
        yield
    finally:
        _installed.clear()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def reclaim() -> None:
    """Handle the listened-to signals here again: ``ray.init`` installs a SIGTERM handler of its own in the
    driver (it prints a stack and exits 1, and the trajectories the writer holds are lost)."""
    if threading.current_thread() is threading.main_thread():
        for sig in _installed:
            signal.signal(sig, _on_signal)

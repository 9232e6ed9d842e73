"""Ctrl-C, heard wherever the driver's main thread happens to be when it comes.

Python turns SIGINT into a ``KeyboardInterrupt`` raised at whatever line the main thread runs next,
and a library on that line may lose it: ``asyncio.run`` turns it into a task's cancellation, which a
coroutine that catches it loses (the job then runs to its end and exits 0); a ``__del__`` or callback
prints and drops it. So while :func:`listening`, every SIGINT is also recorded here: the generation
loops ask :func:`check` each time they wake, the app asks :func:`requested` once the job returned,
and both treat a recorded Ctrl-C as one, swallowed or not. A process started with SIGINT ignored (a
background job of a script, ``nohup``) keeps ignoring it, as every Unix program does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_received = threading.Event()


def requested() -> bool:
    """True once a Ctrl-C came while :func:`listening` (until the next ``listening`` starts)."""
    return _received.is_set()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C was recorded, even one a library swallowed."""
    if _received.is_set():
        raise KeyboardInterrupt


def _on_sigint(signum: int, frame: object) -> None:
    _received.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def listening() -> Iterator[None]:
    """Record every SIGINT in the block (and raise it as Python does); the previous handler after.

    A no-op off the main thread (a job of a threaded launcher: Python lets only the main thread
    handle signals) and when SIGINT is ignored (a process started in the background keeps ignoring it).
    """
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)

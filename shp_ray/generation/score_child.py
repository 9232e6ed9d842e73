"""The worker process of a python scorer (``score_worker``; never imported): import the user's function, then
answer calls until the parent closes the pipe or is gone. Each reply is ``("ok", result)`` or ``("error", text)``.

    python -B score_child.py package.module:function READ_FD WRITE_FD PARENT_PID
"""

import os
import pickle
import struct
import sys
import threading
import time

FRAME = struct.Struct("!Q")


def _watch(parent: int) -> None:
    """End this process once its parent is gone, even while the user's function hangs."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _read(fd: int, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            os._exit(0)  # the parent closed the pipe: done
        out += chunk
    return bytes(out)


def _reply(fd: int, kind: str, value: object) -> None:
    try:
        data = pickle.dumps((kind, value))
    except Exception as exc:  # a result that cannot be sent back
        data = pickle.dumps(("error", f"the scorer returned what cannot be sent back: {type(exc).__name__}: {exc}"))
    view = memoryview(FRAME.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _load(target: str):
    # The parent's own loader (a module path or a .py file), so both read a target alike.
    from shp_ray.generation.score_config import load_target

    return load_target(target)


def main() -> None:
    # Python put this script's folder first on the path: the project's generation modules would shadow a user's
    # modules of the same name (``datasets``, ``config``). The parent's path is what the user's target expects.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    target, read_fd, write_fd, parent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    try:
        fn = _load(target)
    except BaseException as exc:
        _reply(write_fd, "error", f"{type(exc).__name__}: cannot import {target!r}: {exc}"[:500])
        return
    _reply(write_fd, "ok", None)
    while True:
        task, draft = pickle.loads(_read(read_fd, FRAME.unpack(_read(read_fd, FRAME.size))[0]))
        try:
            _reply(write_fd, "ok", fn(task, draft))
        except BaseException as exc:  # the user's code: its error is that round's, the next call goes on
            _reply(write_fd, "error", f"{type(exc).__name__}: {exc}"[:500])


if __name__ == "__main__":
    main()

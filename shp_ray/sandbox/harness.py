"""Run a candidate function against tests in the sandbox and say, per test, what happened.

Two kinds of tests:

- **examples** (the visible tests a loop may show its Writer): each ``call`` is evaluated and compared with
  ``expected`` (evaluated too), under a per-example alarm, so one slow example fails alone.
- **check** (hidden tests): a program defining ``check(candidate)`` (HumanEval's form) called on the function.

The trusted harness reads a one-time nonce from stdin before any candidate code runs and prints its verdict
as the last stdout line behind that nonce. A candidate that exits early (``sys.exit(0)``, ``os._exit(0)``),
crashes the interpreter or prints a fake verdict has no nonce line: never a pass. The candidate is executed in
a namespace of its own, the test code in another, and the builtins are restored between them, so a candidate
that redefines ``check``, ``candidate`` or a builtin changes nothing the tests use.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from shp_ray.sandbox.process import Limits, run_program

EXAMPLE_ALARM_S = 3.0  # one visible example's own time limit

ERROR_CLASSES = (
    "pass",  # every test passed
    "wrong_answer",  # a test's assertion failed / an example gave another value
    "exception",  # the function raised while tested
    "syntax",  # the code does not compile
    "load_error",  # the code raised (or exited) while it was defined
    "missing_function",  # no callable of the entry point's name
    "timeout",  # the run (or an example) passed its time limit
    "memory",  # MemoryError, or killed at the address-space limit
    "exited",  # the process ended before the harness gave its verdict
    "killed",  # ended by a signal
)

_HARNESS = r'''
import builtins, json, signal, sys, os
def _main():
    nonce = sys.stdin.readline().strip()
    spec = json.loads(sys.stdin.read())
    real_stdout = os.fdopen(os.dup(1), "w")
    saved = dict(builtins.__dict__)
    def restore():
        builtins.__dict__.clear(); builtins.__dict__.update(saved)
    def verdict(error_class, detail="", examples=()):
        restore()
        real_stdout.write("\n" + nonce + " " + json.dumps({"error_class": error_class, "detail": detail[:800],
                          "examples": list(examples)}) + "\n")
        real_stdout.flush()
        os._exit(0)
    def klass(exc):
        if isinstance(exc, MemoryError): return "memory"
        if isinstance(exc, (TimeoutError, _Alarm)): return "timeout"
        if isinstance(exc, AssertionError): return "wrong_answer"
        return "exception"
    class _Alarm(BaseException): pass
    def on_alarm(signum, frame): raise _Alarm("example time limit")
    ns = {"__name__": "candidate", "__builtins__": builtins}
    try:
        code = compile(spec["code"], "candidate.py", "exec")
    except (SyntaxError, ValueError) as exc:
        verdict("syntax", f"{type(exc).__name__}: {exc}")
    try:
        exec(code, ns)
    except MemoryError as exc:
        verdict("memory", "MemoryError while defining the code")
    except BaseException as exc:
        verdict("load_error", f"{type(exc).__name__}: {exc}")
    restore()
    fn = ns.get(spec["entry_point"])
    if not callable(fn):
        verdict("missing_function", f"no function named {spec['entry_point']!r}")
    if spec["mode"] == "check":
        test_ns = {"__name__": "tests"}
        try:
            exec(compile(spec["test"], "tests.py", "exec"), test_ns)
            test_ns["check"](fn)
        except BaseException as exc:
            verdict(klass(exc), f"{type(exc).__name__}: {exc}")
        verdict("pass")
    results, first_bad = [], None
    signal.signal(signal.SIGALRM, on_alarm)
    for ex in spec["examples"]:
        env = dict(ns); env[spec["entry_point"]] = fn
        try:
            signal.setitimer(signal.ITIMER_REAL, spec["alarm_s"])
            try:
                got = eval(ex["call"], env)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            restore()
            want = eval(ex["expected"], {"__builtins__": builtins})
            ok = bool(got == want)
            results.append({"ok": ok, "got": repr(got)[:300]})
            if not ok and first_bad is None: first_bad = "wrong_answer"
        except BaseException as exc:
            restore()
            results.append({"ok": False, "got": f"{type(exc).__name__}: {exc}"[:300]})
            if first_bad is None: first_bad = klass(exc)
    verdict(first_bad or "pass", "", results)
_main()
'''


@dataclass(frozen=True)
class Example:
    """One visible test: ``call`` (an expression) should equal ``expected`` (an expression)."""

    call: str
    expected: str


@dataclass(frozen=True)
class ExampleResult:
    example: Example
    ok: bool
    got: str  # repr of the value, or the exception


@dataclass(frozen=True)
class TestReport:
    """How a candidate did: ``passed`` of ``total`` tests, and the run's error class (``pass`` when all did)."""

    passed: int
    total: int
    error_class: str
    detail: str = ""
    examples: tuple[ExampleResult, ...] = ()
    wall_s: float = 0.0

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total and self.error_class == "pass"

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def _run(spec: dict, limits: Limits) -> tuple[dict | None, str, float]:
    nonce = secrets.token_hex(16)
    res = run_program(_HARNESS, f"{nonce}\n{json.dumps(spec)}".encode(), limits)
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(nonce + " "):
            return json.loads(line[len(nonce) + 1 :]), "", res.wall_s
    if res.timed_out:
        return None, "timeout", res.wall_s
    if res.returncode < 0:
        return None, "killed", res.wall_s
    if "MemoryError" in res.stderr:
        return None, "memory", res.wall_s
    return None, "exited", res.wall_s


def run_examples(code: str, entry_point: str, examples: Sequence[Example], limits: Limits = Limits()) -> TestReport:
    """The visible tests: one result per example."""
    spec = {"mode": "examples", "code": code, "entry_point": entry_point, "alarm_s": EXAMPLE_ALARM_S,
            "examples": [{"call": e.call, "expected": e.expected} for e in examples]}  # fmt: skip
    got, ended, wall = _run(spec, limits)
    if got is None:
        return TestReport(0, len(examples), ended, f"the run ended without a verdict ({ended})", (), wall)
    rows = got["examples"]
    results = tuple(ExampleResult(e, r["ok"], r["got"]) for e, r in zip(examples, rows, strict=False))
    passed = sum(r.ok for r in results)
    return TestReport(passed, len(examples), got["error_class"], got["detail"], results, wall)


def run_check(code: str, entry_point: str, test_code: str, limits: Limits = Limits()) -> TestReport:
    """The hidden tests: ``test_code`` defines ``check(candidate)``; one test, passed or not."""
    spec = {"mode": "check", "code": code, "entry_point": entry_point, "test": test_code}
    got, ended, wall = _run(spec, limits)
    if got is None:
        return TestReport(0, 1, ended, f"the run ended without a verdict ({ended})", (), wall)
    cls = got["error_class"]
    return TestReport(int(cls == "pass"), 1, cls, got["detail"], (), wall)

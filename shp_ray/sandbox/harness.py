"""Run a candidate function against tests in the sandbox and say, per test, what happened.

Two kinds of tests:

- **examples** (the visible tests a loop may show its Writer): each ``call`` is evaluated and compared with
  ``expected`` (evaluated too), under a per-example alarm (``Limits.example_s``), so one slow example fails
  alone.
- **check** (hidden tests): a program defining ``check(candidate)`` (HumanEval's form) called on the function.

The trusted test program (``verifier.py``, with its codec ``wire.py``) runs the candidate in a process of its
own, forked before the tests and the one-time nonce are read from stdin, and the tests in its own process,
calling the candidate through a proxy that sends plain data both ways (never an object of the candidate's). It
prints its verdict as one stdout line behind the nonce, which the candidate's process never holds and whose
stdout is not the verifier's: a run with no such line or more than one is never a pass. docs/sandbox.md has the
threat model and what is out of its scope.
"""

from __future__ import annotations

import ast
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shp_ray.sandbox.process import Limits, ProcessResult, run_program

DEFAULT_LIMITS = Limits()
# The verifier's program: the wire (its codec) first, then the verifier, which uses it (one file in the sandbox)
VERIFIER = "\n\n".join(Path(__file__).with_name(n).read_text(encoding="utf-8") for n in ("wire.py", "verifier.py"))

ERROR_CLASSES = (
    "pass",  # every test passed
    "wrong_answer",  # a test's assertion failed / an example gave another value / a value that is not plain data
    "exception",  # the function raised while tested
    "syntax",  # the code does not compile
    "load_error",  # the code raised (or exited) while it was defined
    "missing_function",  # no callable of the entry point's name
    "timeout",  # the run passed its wall or CPU time limit, or an example its alarm
    "memory",  # MemoryError at the address-space limit
    "exited",  # the candidate's process ended during the tests (os._exit), or no single verdict line (a crash)
    "killed",  # ended by a signal other than the CPU limit's
    "sandbox",  # the sandbox could not be set up (namespaces required but refused, no process left): code never ran
)


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
    protections: tuple[str, ...] = ()  # what held for the run (process.ProcessResult.protections)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total and self.error_class == "pass"

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def _run(head: dict, tests: dict, limits: Limits) -> tuple[dict | None, str, str, ProcessResult]:
    """(verdict, "", "", result) or, when the run gave no single verdict line, (None, error class, why, result).

    stdin holds the candidate's part, the tests and the nonce, in this order, each read to its length: the
    verifier forks the candidate's process between the first and the second (verifier.py)."""
    nonce = secrets.token_hex(16)
    head = {**head, "cpu_s": limits.cpu_s}
    parts = [repr(part).encode() for part in (head, tests)]
    stdin = b"".join(b"%d\n%s" % (len(p), p) for p in parts) + b"\n" + nonce.encode() + b"\n"
    res = run_program(VERIFIER, stdin, limits)
    lines = [line for line in res.stdout.splitlines() if line.startswith(nonce + " ")]
    if res.setup_error:
        return None, "sandbox", res.setup_error, res
    if len(lines) == 1:
        try:
            return ast.literal_eval(lines[0][len(nonce) + 1 :]), "", "", res
        except (ValueError, SyntaxError):
            return None, "exited", "a verdict line that does not parse", res
    if len(lines) > 1:
        return None, "exited", "more than one verdict line", res
    if res.timed_out:
        return None, "timeout", f"the wall time limit ({limits.wall_s} s)", res
    if res.cpu_exceeded:
        return None, "timeout", f"the CPU time limit ({limits.cpu_s} s)", res
    if res.returncode < 0:
        return None, "killed", f"signal {-res.returncode}", res
    if "MemoryError" in res.stderr:
        return None, "memory", f"MemoryError at the address-space limit ({limits.memory_mb} MB)", res
    return None, "exited", f"exit code {res.returncode}", res


def run_examples(
    code: str, entry_point: str, examples: Sequence[Example], limits: Limits = DEFAULT_LIMITS
) -> TestReport:
    """The visible tests: one result per example."""
    head = {"mode": "examples", "code": code, "entry_point": entry_point}
    tests = {"alarm_s": limits.example_s, "examples": [{"call": e.call, "expected": e.expected} for e in examples]}
    got, ended, why, res = _run(head, tests, limits)
    if got is None:
        return TestReport(0, len(examples), ended, f"no verdict: {why}", (), res.wall_s, res.protections)
    rows = got["examples"]
    results = tuple(ExampleResult(e, r["ok"], r["got"]) for e, r in zip(examples, rows, strict=False))
    passed = sum(r.ok for r in results)
    return TestReport(passed, len(examples), got["error_class"], got["detail"], results, res.wall_s, res.protections)


def run_check(code: str, entry_point: str, test_code: str, limits: Limits = DEFAULT_LIMITS) -> TestReport:
    """The hidden tests: ``test_code`` defines ``check(candidate)``; one test, passed or not."""
    head = {"mode": "check", "code": code, "entry_point": entry_point}
    got, ended, why, res = _run(head, {"test": test_code}, limits)
    if got is None:
        return TestReport(0, 1, ended, f"no verdict: {why}", (), res.wall_s, res.protections)
    cls = got["error_class"]
    return TestReport(int(cls == "pass"), 1, cls, got["detail"], (), res.wall_s, res.protections)

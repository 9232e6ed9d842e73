"""``shp-bench sandbox``: what one sandbox run costs, and what its confinement adds.

shp-bench sandbox [--runs 20]

Times, each ``--runs`` times one after another (median and 90th percentile of the wall seconds):

- ``bare_python_s``: ``python -I -S -c pass`` as a plain subprocess (the floor: one interpreter start);
- ``program_off_s`` / ``program_s``: ``run_program("pass")`` without namespaces and with them (``auto``);
- ``check_s``: ``run_check`` of a correct two-line function against a two-assert ``check`` (what a code
  round pays per hidden test run), and ``examples_s``: ``run_examples`` with three examples.

Prints ONE JSON line last, with the protections the runs had on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from shp_ray.sandbox import Example, Limits, run_check, run_examples, run_program
from shp_ray.sandbox.process import PYTHON_FLAGS

CODE = "def add(a, b):\n    return a + b\n"
CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
EXAMPLES = [Example("add(1, 2)", "3"), Example("add(2, 2)", "4"), Example("add(-1, 1)", "0")]


def _timed(fn: Callable[[], object], runs: int) -> dict[str, float]:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    walls.sort()
    return {"median": round(statistics.median(walls), 4), "p90": round(walls[int(0.9 * (len(walls) - 1))], 4)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="shp-bench sandbox", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    off, auto = Limits(namespaces="off"), Limits()
    bare = [sys.executable, *PYTHON_FLAGS, "-c", "pass"]
    out = {
        "bench": "sandbox",
        "runs": args.runs,
        "bare_python_s": _timed(lambda: subprocess.run(bare, check=True, env={}), args.runs),
        "program_off_s": _timed(lambda: run_program("pass", limits=off), args.runs),
        "program_s": _timed(lambda: run_program("pass", limits=auto), args.runs),
        "check_s": _timed(lambda: run_check(CODE, "add", CHECK, auto), args.runs),
        "examples_s": _timed(lambda: run_examples(CODE, "add", EXAMPLES, auto), args.runs),
        "protections": list(run_program("pass", limits=auto).protections),
        "protections_off": list(run_program("pass", limits=off).protections),
    }
    report = run_check(CODE, "add", CHECK, auto)
    if not report.all_passed:
        print(f"shp-bench sandbox: the correct function did not pass ({report.error_class}: {report.detail})")
        return 1
    print(json.dumps(out))
    return 0

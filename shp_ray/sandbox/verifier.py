"""The trusted test program that runs inside the sandbox (never imported: ``harness`` sends its text to
``run_program``). It reads a one-time nonce and the spec from stdin before any candidate code runs, runs the
candidate and its tests, and writes one verdict line ``<nonce> <repr of a dict>`` to its own copy of stdout.

Everything it needs after the candidate ran is bound before (the builtins, ``os.write``, ``os._exit``, the
timer, the formatting), so a candidate that rebinds a builtin or patches a module of the standard library
cannot change how the verdict is made or written. A value the candidate returns counts only if it is plain
data: no class in its type's MRO may be defined in Python, except a few standard ones (checked unchanged), so
an object whose ``__eq__`` says yes to anything is a wrong answer, not a pass.
"""

import _signal as signal  # the C module: `signal` imports enum (~10 ms a run)
import builtins
import os
import sys

HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type()), not a builtin type


def main() -> None:
    """Read the nonce and the spec, run the candidate and its tests, write the verdict line.

    Long because everything the verdict needs after the candidate ran is bound in this function's locals
    before it runs: a helper would be a module global, which the candidate can reach and rebind.
    """
    nonce = sys.stdin.readline().strip()
    spec = eval(sys.stdin.read(), {"__builtins__": {}})  # a dict literal from the harness
    out_fd, write, exit_now = os.dup(1), os.write, os._exit
    set_timer, real_timer, set_handler = signal.setitimer, signal.ITIMER_REAL, signal.signal
    settrace, setprofile = sys.settrace, sys.setprofile
    saved = dict(builtins.__dict__)
    b = dict(saved)  # the harness's own builtins, never the candidate's
    flags, mro_of = type.__dict__["__flags__"].__get__, type.__dict__["__mro__"].__get__
    trusted = {}  # standard classes a value may have, as they were before the candidate ran
    if "Counter" in spec["code"]:  # (collections costs ~15 ms to import; code that never names it gets none)
        from collections import Counter

        trusted[Counter] = dict(vars(Counter))

    def restore() -> None:
        builtins.__dict__.clear()
        builtins.__dict__.update(saved)
        settrace(None)
        setprofile(None)

    def verdict(error_class: str, detail: str = "", examples: list | tuple = ()) -> None:
        restore()
        line = "\n" + nonce + " " + b["repr"]({"error_class": error_class, "detail": detail[:800],
                                                "examples": b["list"](examples)}) + "\n"  # fmt: skip
        write(out_fd, line.encode())
        exit_now(0)

    def describe(exc: BaseException) -> str:
        try:
            return b["type"](exc).__name__ + ": " + b["str"](exc)
        except BaseException:
            return b["type"](exc).__name__

    class Alarm(BaseException):
        pass

    class NotPlain(Exception):
        pass

    def on_alarm(signum, frame):
        raise Alarm("example time limit")

    def klass(exc: BaseException) -> str:
        if b["isinstance"](exc, MemoryError):
            return "memory"
        if b["isinstance"](exc, (TimeoutError, Alarm)):
            return "timeout"
        if b["isinstance"](exc, (AssertionError, NotPlain)):
            return "wrong_answer"
        return "exception"

    sequences = (list, tuple, set, frozenset)  # bound now: plain() runs before the builtins are restored
    items_of, vars_of, a_dict = dict.items, vars, dict

    def plain(value, depth: int = 0) -> bool:
        kind = b["type"](value)
        for k in (kind, *mro_of(kind)):
            if flags(k) & HEAPTYPE and not (k in trusted and b["dict"](vars_of(k)) == trusted[k]):
                return False
        if depth > 50:
            return False
        for base in sequences:
            if b["isinstance"](value, base):
                return b["all"](plain(x, depth + 1) for x in base.__iter__(value))
        if b["isinstance"](value, a_dict):
            return b["all"](plain(k, depth + 1) and plain(v, depth + 1) for k, v in items_of(value))
        return True

    def checked(fn):
        def candidate(*args, **kwargs):
            got = fn(*args, **kwargs)
            if not plain(got):
                raise NotPlain(f"returned a {b['type'](got).__name__}: only plain data counts")
            return got

        return candidate

    ns = {"__name__": "candidate", "__builtins__": builtins}
    try:
        code = compile(spec["code"], "candidate.py", "exec")
    except (SyntaxError, ValueError) as exc:
        verdict("syntax", describe(exc))
    try:
        exec(code, ns)
    except MemoryError:
        restore()
        verdict("memory", "MemoryError while defining the code")
    except BaseException as exc:
        restore()
        verdict("load_error", describe(exc))
    restore()
    fn = ns.get(spec["entry_point"])
    if not b["callable"](fn):
        verdict("missing_function", f"no function named {spec['entry_point']!r}")
    if spec["mode"] == "check":
        # The tests run in a namespace of their own: the real builtins, the names the test program defines
        # (it carries the prompt's helpers and imports itself) and the candidate's entry point, nothing else of
        # the candidate's, so no name of its module shadows anything the tests call (`abs = lambda *a: 0`).
        guarded = checked(fn)
        test_ns = {"__name__": "tests", "__builtins__": b, spec["entry_point"]: guarded}
        try:
            exec(compile(spec["test"], "tests.py", "exec"), test_ns)
            test_ns["check"](guarded)
        except BaseException as exc:
            restore()
            verdict(klass(exc), describe(exc))
        verdict("pass")
    results, first_bad = [], None
    set_handler(signal.SIGALRM, on_alarm)
    # A visible example may call a helper the program defines, so it sees the candidate's names, but none that
    # would shadow a builtin (the real ones come first) and the entry point only through the plain-data check.
    names = {k: v for k, v in items_of(ns) if k not in b}
    for ex in spec["examples"]:
        env = b["dict"](names)
        env.update({"__builtins__": b, spec["entry_point"]: checked(fn)})
        try:
            set_timer(real_timer, spec["alarm_s"])
            try:
                got = eval(ex["call"], env)
            finally:
                set_timer(real_timer, 0)
            restore()
            want = b["eval"](ex["expected"], {"__builtins__": b})
            ok = b["bool"](got == want)
            results.append({"ok": ok, "got": b["repr"](got)[:300]})
            if not ok and first_bad is None:
                first_bad = "wrong_answer"
        except BaseException as exc:
            restore()
            results.append({"ok": False, "got": describe(exc)[:300]})
            if first_bad is None:
                first_bad = klass(exc)
    verdict(first_bad or "pass", "", results)


main()

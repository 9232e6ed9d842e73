"""Which extractor reads each stored draft's answer (``answer.kind``), and the ``draft_answers`` rows it gives.

    kind=auto                                  the task's own: a code task's (meta.entry_point) code AST hash, else
                                               the QA reading
    kind=qa                                    the lenient QA answer, normalised (shp_ray.policy.answer.qa_answer)
    kind=code                                  sha256 of ``ast.dump`` (names kept) of the program the code verifier
                                               runs (shp_ray.generation.code_tests.program); unparsable: no answer
    kind=python target=package.module:function   the user's ``(task, draft) -> str | None``, in a worker process of
    kind=python target=path/to/file.py:function  its own with each call bounded by ``timeout_s``, as a python
                  [timeout_s=30]                 scorer's (shp_ray.generation.score_worker)

The answers are measurements of stored drafts, like the scores: never part of a generation's id, written by the
generation writer and again, with no model call, by ``shp-import --rescore``. The answer-based stopping families
read them (shp_ray.policy.families.agreement).
"""

from __future__ import annotations

import ast
import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from shp_ray.generation.code_tests import CodeTaskError, entry_point, program
from shp_ray.generation.score_config import ScoreConfigError, absolute, load_target
from shp_ray.generation.score_config import ScoreSpec as _Bounded
from shp_ray.generation.score_worker import BoundedScorer
from shp_ray.policy.answer import QA_EXTRACTOR, qa_answer
from shp_ray.policy.scorers import ScorerError, Task
from shp_ray.redaction import redact_text

CODE_EXTRACTOR = "code-ast-v1"
ANSWER_KINDS = ("auto", "qa", "code", "python")


class AnswerConfigError(ValueError):
    """An extractor that cannot be built: one line that starts with the config key (``answer.target: ...``)."""


@dataclass(frozen=True)
class AnswerSpec:
    kind: str = "auto"  # auto | qa | code | python (ANSWER_KINDS)
    target: str = ""  # python: ``package.module:function`` or ``path/to/file.py:function``
    timeout_s: float = 30.0  # python: one call's limit (then its worker is killed and the round has no answer)


def code_answer(task: Task, draft: str) -> str | None:
    """The sha256 of ``ast.dump`` of the program a code draft runs (names kept, comments and layout dropped);
    None when it does not parse."""
    try:
        tree = ast.parse(program(task.question, entry_point(task.meta), draft or ""))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def is_code_task(task: Task) -> bool:
    try:
        entry_point(task.meta)
    except CodeTaskError:
        return False
    return True


Extract = Callable[[Task, str], tuple[str, str | None]]  # (task, draft) -> (extractor's name, answer)


@dataclass(frozen=True)
class Extractor:
    """Reads a draft's answer: ``extract(task, draft) -> (the extractor's stored name, answer or None)``; ``names``:
    the stored names it can write (what is already stored under them is not extracted again)."""

    extract: Extract
    names: tuple[str, ...]


def _builtin(kind: str) -> Extractor:
    def qa(task: Task, draft: str) -> tuple[str, str | None]:
        return QA_EXTRACTOR, qa_answer(draft)

    def code(task: Task, draft: str) -> tuple[str, str | None]:
        return CODE_EXTRACTOR, code_answer(task, draft)

    def auto(task: Task, draft: str) -> tuple[str, str | None]:
        return code(task, draft) if is_code_task(task) else qa(task, draft)

    fn = {"qa": qa, "code": code, "auto": auto}[kind]
    names = {"qa": (QA_EXTRACTOR,), "code": (CODE_EXTRACTOR,), "auto": (QA_EXTRACTOR, CODE_EXTRACTOR)}[kind]
    return Extractor(fn, names)


def _python(spec: AnswerSpec) -> Extractor:
    if not spec.target:
        raise AnswerConfigError(
            "answer.target: answer=python needs answer.target=package.module:function or path/to/file.py:function"
        )
    t = spec.timeout_s
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t)):
        raise AnswerConfigError(f"answer.timeout_s: must be a number of seconds above 0, got {t!r}")
    target = absolute(_Bounded("python", target=spec.target)).target  # a file: where the workers find it
    try:
        load_target(target)  # imported here too, so a typo fails before any work
    except ScoreConfigError as exc:
        raise AnswerConfigError(str(exc).replace("score.target", "answer.target", 1)) from None
    bounded, name = BoundedScorer(target, float(t)), f"python:{target}"

    def user(task: Task, draft: str) -> tuple[str, str | None]:
        got = bounded(task, draft)
        if got is not None and not isinstance(got, str):
            raise TypeError(f"an answer extractor returns a str or None, got {type(got).__name__}")
        return name, got

    return Extractor(user, (name,))


def build(spec: AnswerSpec) -> Extractor:
    if spec.kind not in ANSWER_KINDS:
        raise AnswerConfigError(f"answer.kind: must be one of {list(ANSWER_KINDS)}, got {spec.kind!r}")
    return _python(spec) if spec.kind == "python" else _builtin(spec.kind)


def parse(text: str) -> AnswerSpec:
    """A spec from its command-line form: ``auto``, ``qa``, ``code``, ``python:<target>``."""
    kind, _, target = text.partition(":")
    return AnswerSpec(kind, target=target)


def pick_extractor(names: Iterable[str]) -> str:
    """The extractor whose answers a replay reads when a generation has several: a user's (``python:...``, the
    first by name) before the task's own (code, then QA). analysis/sql/replay/families/family_answers.sql picks
    alike."""
    return min(names, key=lambda n: (not n.startswith("python:"), n != CODE_EXTRACTOR, n))


def answer_rows(extractor: Extractor, gen_id: str, items: Iterable[tuple[Task, int, str]]) -> list[dict[str, object]]:
    """The ``draft_answers`` rows of each (task, round, draft). An extractor that raises does not stop anything:
    that round's row has no answer and the error (redacted), under the first name the extractor writes."""
    rows = []
    for task, rnd, draft in items:
        base = {"gen_id": gen_id, "scenario_id": task.scenario_id, "round": rnd}
        try:
            name, answer = extractor.extract(task, draft or "")
            rows.append({**base, "extractor": name, "answer": answer, "error": None})
        except Exception as exc:  # the user's code: any error is that round's, the run goes on
            text = redact_text((str(exc) if isinstance(exc, ScorerError) else f"{type(exc).__name__}: {exc}")[:500])
            rows.append({**base, "extractor": extractor.names[0], "answer": None, "error": text})
    return rows

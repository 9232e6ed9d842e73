"""Which scorers a run computes: a :class:`ScoreSpec` per scorer, built into :class:`shp_ray.policy.scorers.Scorer`.

    kind=hotpot                                   em, f1 (HotpotQA's metrics)
    kind=exact | contains [name=...]              one score named ``name`` (default: the kind)
    kind=regex pattern='Answer: (?P<answer>.+)'   the named group ``answer`` against the gold answers
    kind=python target=package.module:function    the user's ``(task, draft) -> dict[str, float]``, in a worker
    kind=python target=path/to/file.py:function    process of its own, each call bounded (score_worker);
                  [timeout_s=30]                  the same, loaded from the file (no PYTHONPATH needed)
    kind=tests                                    hidden_pass, visible_pass: a code draft run against its task's
                                                  hidden and visible tests in the sandbox (code_tests)

A new kind is one factory in :data:`KINDS`. Every scorer built here stores its error texts redacted. Scores are
measurements of stored drafts: they never enter a generation's id, and ``shp-import --rescore`` computes them
again for a stored generation with no model call.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from shp_ray.generation.code_tests import tests_scorer
from shp_ray.generation.score_worker import BoundedScorer
from shp_ray.policy import scorers
from shp_ray.policy.scorers import Scorer
from shp_ray.redaction import redact_text


class ScoreConfigError(ValueError):
    """A score spec that cannot be built (unknown kind, a bad pattern, a target that does not load): one line
    that starts with the config key (``score.target: ...``)."""


@dataclass(frozen=True)
class ScoreSpec:
    kind: str = "hotpot"
    name: str = ""  # the stored name of an exact / contains / regex score (default: the kind)
    pattern: str = ""  # regex: a pattern with the named group ``answer``
    target: str = ""  # python: ``package.module:function`` or ``path/to/file.py:function``
    timeout_s: float = 30.0  # python: one call's limit (then its worker is killed and the round is an error)


def _split(target: str) -> tuple[str, str]:
    """(module or file, attribute): split at the last colon, so a Windows drive letter stays in the path."""
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ScoreConfigError(f"score.target: {target!r} is not package.module:function or path/to/file.py:function")
    return module_name, attr


def is_file_target(target: str) -> bool:
    """A target naming a ``.py`` file (loaded from the file) rather than an importable module."""
    where = target.rpartition(":")[0]
    return where.endswith(".py") or "/" in where or "\\" in where


def absolute(spec: ScoreSpec) -> ScoreSpec:
    """The spec with a file target made absolute: Ray workers start in another folder and load it there."""
    if spec.kind != "python" or not spec.target or not is_file_target(spec.target):
        return spec
    where, attr = _split(spec.target)
    return replace(spec, target=f"{Path(where).expanduser().resolve()}:{attr}")


def _from_file(where: str, target: str) -> object:
    """The module a ``.py`` file holds, loaded once per process under a name of its own (never a name on
    ``sys.path`` that a user's folder could shadow, nor one that shadows a module of theirs)."""
    path = Path(where).expanduser().resolve()
    if not path.is_file():
        raise ScoreConfigError(f"score.target: {target!r}: no file {str(path)!r}")
    name = f"_shp_ray_scorer_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ScoreConfigError(f"score.target: {target!r}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # before exec: a dataclass or pickle in the file looks itself up by name
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # the file's own error on import
        del sys.modules[name]
        raise ScoreConfigError(
            f"score.target: {target!r}: cannot load {str(path)!r} ({type(exc).__name__}: {exc})"
        ) from None
    return module


def load_target(target: str) -> Callable[..., object]:
    """The function ``package.module:function`` or ``path/to/file.py:function`` names (loaded now, so a typo
    fails before any work)."""
    module_name, attr = _split(target)
    if is_file_target(target):
        module = _from_file(module_name, target)
    else:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # ImportError, or the module's own error on import
            raise ScoreConfigError(f"score.target: {target!r}: cannot import {module_name!r} ({exc})") from None
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ScoreConfigError(f"score.target: {target!r}: {module_name!r} has no {attr!r}")
    if not callable(fn):
        raise ScoreConfigError(f"score.target: {target!r} is not callable")
    return fn  # type: ignore[return-value]


def _python(spec: ScoreSpec) -> Scorer:
    if not spec.target:
        raise ScoreConfigError(
            "score.target: score=python needs score.target=package.module:function or path/to/file.py:function"
        )
    timeout = spec.timeout_s
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not (timeout > 0 and math.isfinite(timeout))
    ):
        raise ScoreConfigError(f"score.timeout_s: must be a number of seconds above 0, got {timeout!r}")
    load_target(spec.target)  # imported here too, so a typo fails before any work
    return Scorer("python", BoundedScorer(spec.target, float(timeout)), f"python:{spec.target}")


def _regex(spec: ScoreSpec) -> Scorer:
    if not spec.pattern:
        raise ScoreConfigError("score.pattern: score=regex needs a pattern with a named group (?P<answer>...)")
    try:
        return scorers.regex_scorer(spec.pattern, spec.name or "regex")
    except Exception as exc:  # re.error or the missing group
        raise ScoreConfigError(f"score.pattern: {spec.pattern!r}: {exc}") from None


# Every score kind, by its score.kind name: config validation (conf.inputs.SCORES) and the config group
# (conf.schema) read this one registry.
KINDS: dict[str, Callable[[ScoreSpec], Scorer]] = {
    "hotpot": lambda spec: scorers.hotpot_scorer(),
    "exact": lambda spec: scorers.match_scorer("exact", spec.name),
    "contains": lambda spec: scorers.match_scorer("contains", spec.name),
    "regex": _regex,
    "python": _python,
    "tests": lambda spec: tests_scorer(),
}


def build(spec: ScoreSpec) -> Scorer:
    factory = KINDS.get(spec.kind)
    if factory is None:
        raise ScoreConfigError(f"score.kind: unknown kind {spec.kind!r}; known: {', '.join(KINDS)}")
    return replace(factory(spec), redact=redact_text)


def parse(text: str) -> ScoreSpec:
    """A spec from its command-line form: ``hotpot``, ``exact[:NAME]``, ``contains[:NAME]``, ``regex:PATTERN``,
    ``python:package.module:function``, ``python:path/to/file.py:function``."""
    kind, _, arg = text.partition(":")
    if kind == "regex":
        return ScoreSpec(kind, pattern=arg)
    if kind == "python":
        return absolute(ScoreSpec(kind, target=arg))
    return ScoreSpec(kind, name=arg)

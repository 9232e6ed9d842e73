"""The user's inputs in the config: a tasks file (``dataset=file``), a prompt preset (``prompts``), a scorer
(``score``), an answer extractor (``answer``) and whether the Writer asks for log-probabilities (``logprobs``).

Cheap checks only, like the rest of :mod:`conf.resolve`: the tasks file is read (and checked line by
line) by the job, before any call; here its settings and the preset's templates are checked.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from conf import schema
from conf.errors import ConfigError
from shp_ray.generation.answer_config import AnswerConfigError, AnswerSpec
from shp_ray.generation.answer_config import build as build_extractor
from shp_ray.generation.config import LogprobSpec
from shp_ray.generation.datasets import SPLITS
from shp_ray.generation.prompts import PromptError, PromptSet, check_fields, from_mapping
from shp_ray.generation.score_config import KINDS, ScoreConfigError, ScoreSpec, absolute, build
from shp_ray.generation.tasks_file import FILE_DATASET, FieldMap, TasksFile

SCORES = ("none", *KINDS)  # score=none: no scorer (EM/F1 in the signals, as before)


def resolve_scores(section: DictConfig) -> tuple[ScoreSpec, ...]:
    """The scorer of every stored draft, built now (a bad pattern, or a target that does not import, fails here,
    before any call); () for score=none. Scores are measurements: they never enter gen_id."""
    spec = absolute(ScoreSpec(**{k: section[k] for k in schema.SCORE_KEYS}))  # a file: where the workers find it
    if spec.kind == "none":
        return ()
    try:
        build(spec)
    except ScoreConfigError as exc:
        raise ConfigError(str(exc)) from None
    return (spec,)


def resolve_answer(section: DictConfig) -> AnswerSpec:
    """What reads each stored draft's answer, built now (an unknown kind, or a target that does not import, fails
    here, before any call); a file target made absolute, as a scorer's. A measurement: never in gen_id."""
    spec = AnswerSpec(**{k: section[k] for k in schema.ANSWER_KEYS})
    if spec.kind == "python" and spec.target:
        spec = AnswerSpec(spec.kind, absolute(ScoreSpec("python", target=spec.target)).target, spec.timeout_s)
    try:
        build_extractor(spec)
    except AnswerConfigError as exc:
        raise ConfigError(str(exc)) from None
    return spec


def resolve_logprobs(section: DictConfig) -> LogprobSpec:
    """Whether the Writer asks for token log-probabilities, and the tail their last_k summary averages (Hydra has
    checked the types; the spec checks last_k >= 1). A measurement: never in gen_id."""
    try:
        return LogprobSpec(**{k: section[k] for k in schema.LOGPROB_KEYS})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def resolve_tasks(section: DictConfig) -> TasksFile | None:
    """dataset=file: the tasks file and its column names (read, and checked line by line, by the job)."""
    if section.name != FILE_DATASET:
        return None
    if OmegaConf.is_missing(section, "path"):
        raise ConfigError("dataset.path: required for dataset=file (a JSONL, CSV or Parquet file, local or s3://)")
    fields = FieldMap(**_fields(section.fields))
    return TasksFile(path=str(section.path), fields=fields, split_map=_split_map(section.split_map, fields))


def _split_map(section: object, fields: FieldMap) -> tuple[tuple[str, str], ...]:
    """dataset.split_map: the file's split names, each to dev or test (checked here, the values by the job)."""
    items = OmegaConf.to_container(section) if isinstance(section, DictConfig) else section
    if items is None:
        return ()
    if not isinstance(items, dict):
        raise ConfigError(f"dataset.split_map: should be a mapping such as '{{train: dev, eval: test}}', got {items!r}")
    if items and fields.split is None:
        raise ConfigError("dataset.split_map: needs dataset.fields.split, the column whose names it maps")
    for name, split in items.items():
        if split not in SPLITS:
            raise ConfigError(f"dataset.split_map: {name!r} maps to {split!r}; each name maps to one of {list(SPLITS)}")
    return tuple(sorted((str(k), str(v)) for k, v in items.items()))


def resolve_prompts(section: DictConfig, tasks: TasksFile | None) -> PromptSet:
    """The prompt preset; a template that cannot be rendered, or a placeholder naming no field, is refused.

    A tasks file's metadata columns are known once it is read: the job checks those placeholders
    against the file, before any call; the shipped datasets offer the core fields only.
    """
    data = _preset_file(section.file) if section.file else OmegaConf.to_container(section)
    missing = sorted(OmegaConf.missing_keys(section))
    if missing and not section.file:
        raise ConfigError(f"prompts.{missing[0]}: missing from the prompt preset")
    assert isinstance(data, dict)
    try:
        ps = from_mapping(data)
        if tasks is None:
            check_fields(ps, (), "a shipped dataset has the core fields only; metadata columns need dataset=file")
    except PromptError as exc:
        raise ConfigError(str(exc)) from None
    return ps


def _preset_file(path: str) -> dict:
    """A preset file named by its path: read now, so a missing or malformed file fails before anything runs."""
    try:
        data = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"prompts.file: cannot read {path!r} ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise ConfigError(f"prompts.file: {where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"prompts.file: {path}: should be a mapping (name, writer, critic, approval)")
    return data


def _fields(section: DictConfig) -> dict[str, str | None]:
    items = OmegaConf.to_container(section)
    assert isinstance(items, dict)
    return {attr: items[key] for key, attr in schema.every(FieldMap).items()}

"""The user's inputs in the config: a tasks file (``dataset=file``), a prompt preset (``prompts``) and a scorer
(``score``).

Cheap checks only, like the rest of :mod:`conf.resolve`: the tasks file is read (and checked line by
line) by the job, before any call; here its settings and the preset's templates are checked.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from conf import schema
from conf.errors import ConfigError
from shp_ray.generation.prompts import PromptError, PromptSet, check_fields, from_mapping
from shp_ray.generation.score_config import KINDS, ScoreConfigError, ScoreSpec, build
from shp_ray.generation.tasks_file import FILE_DATASET, FieldMap, TasksFile

SCORES = ("none", *KINDS)  # score=none: no scorer (EM/F1 in the signals, as before)


def resolve_scores(section: DictConfig) -> tuple[ScoreSpec, ...]:
    """The scorer of every stored draft, built now (a bad pattern, or a target that does not import, fails here,
    before any call); () for score=none. Scores are measurements: they never enter gen_id."""
    spec = ScoreSpec(**{k: section[k] for k in schema.SCORE_KEYS})
    if spec.kind == "none":
        return ()
    try:
        build(spec)
    except ScoreConfigError as exc:
        raise ConfigError(str(exc)) from None
    return (spec,)


def resolve_tasks(section: DictConfig) -> TasksFile | None:
    """dataset=file: the tasks file and its column names (read, and checked line by line, by the job)."""
    if section.name != FILE_DATASET:
        return None
    if OmegaConf.is_missing(section, "path"):
        raise ConfigError("dataset.path: required for dataset=file (a JSONL, CSV or Parquet file, local or s3://)")
    return TasksFile(path=str(section.path), fields=FieldMap(**_fields(section.fields)))


def resolve_prompts(section: DictConfig, tasks: TasksFile | None) -> PromptSet:
    """The prompt preset; a template that cannot be rendered, or a placeholder naming no field, is refused.

    A tasks file's metadata columns are known once it is read: the job checks those placeholders
    against the file, before any call; the shipped datasets offer the core fields only.
    """
    missing = sorted(OmegaConf.missing_keys(section))
    if missing:
        raise ConfigError(f"prompts.{missing[0]}: missing from the prompt preset")
    data = OmegaConf.to_container(section)
    assert isinstance(data, dict)
    try:
        ps = from_mapping(data)
        if tasks is None:
            check_fields(ps, (), "a shipped dataset has the core fields only; metadata columns need dataset=file")
    except PromptError as exc:
        raise ConfigError(str(exc)) from None
    return ps


def _fields(section: DictConfig) -> dict[str, str | None]:
    items = OmegaConf.to_container(section)
    assert isinstance(items, dict)
    return {attr: items[key] for key, attr in schema.every(FieldMap).items()}

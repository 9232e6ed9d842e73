"""The rules of single config keys: one table (:data:`RULES`), checked before anything is built or started.

A rule applies when its key is in the tree (provider.n_ctx only for provider=llama); rules that relate keys are
:func:`conf.resolve.to_job`'s. A key added to :mod:`conf.schema` gets its rule here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from omegaconf import DictConfig, ListConfig, OmegaConf

from conf import code_loop, plan
from conf.errors import ConfigError
from conf.inputs import SCORES
from shp_ray.generation.datasets import DATASETS, SPLITS
from shp_ray.generation.tasks_file import FILE_DATASET
from shp_ray.policy.checks import is_int
from shp_ray.providers.registry import config_kinds

JUDGES = ("lexical", "llm")
WEIGHT_STRATEGIES = ("uniform", "entropy", "ahp")  # constrained_ls needs labels a sweep does not have
MAX_RETRIES = 30  # backoff (full jitter) is capped at 20 s: 30 retries can hold one call up to ~10 min
MIN_N_CTX = 256  # a floor for the embedded model's context; n_ctx must also exceed generation.max_tokens


@dataclass(frozen=True)
class Rule:
    key: str
    ok: Callable[[Any], bool]
    must: str  # completes "<key>: must be ..."
    secret: bool = False  # never echo the value (a key pasted where its variable's NAME belongs)


Check = tuple[Callable[[Any], bool], str]  # (is the value fine, what it must be)
BOOLEAN: Check = (lambda v: isinstance(v, bool)), "true or false"  # 1 and 0 are no booleans here


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bounds(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> Check:
    def ok(v: Any) -> bool:
        return (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or (v < hi if hi_open else v <= hi))

    if lo is not None and hi is not None:
        text = f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    elif lo is not None:
        text = f"{'>' if lo_open else '>='} {lo:g}"
    else:
        text = f"{'<' if hi_open else '<='} {hi:g}"
    return ok, text


def _nullable(ok: Callable[[Any], bool], must: str, null: str | None) -> Check:
    if null is None:
        return ok, must
    return (lambda v: v is None or ok(v)), f"{must}, or null ({null})"


def number(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    null: str | None = None,
) -> Check:
    """A finite number within the bounds (NaN and inf are refused)."""
    within, text = _bounds(lo, hi, lo_open, hi_open)
    return _nullable(lambda v: _is_num(v) and within(v), f"a finite number {text}", null)


def integer(lo: int | None = None, hi: int | None = None, *, null: str | None = None) -> Check:
    within, text = _bounds(lo, hi, False, False)
    return _nullable(lambda v: is_int(v) and within(v), f"an integer {text}", null)


def one_of(choices: Any, *, null: str | None = None) -> Check:
    names = list(choices)
    return _nullable(lambda v: v in names, f"one of {names}", null)


def matches(pattern: str, what: str) -> Check:
    rx = re.compile(pattern)
    return (lambda v: isinstance(v, str) and rx.fullmatch(v) is not None), what


def _text(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _http_url(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    if v == "":
        return True
    parts = urlsplit(v)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _ray_address(v: Any) -> bool:
    """null, auto, local, host:port (a GCS address) or a client URI such as ray://head:10001."""
    if v is None or v in ("auto", "local"):
        return True
    if not isinstance(v, str):
        return False
    if "://" in v:
        return bool(urlsplit(v).netloc)
    host, sep, port = v.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)


RULES: tuple[Rule, ...] = (
    Rule("provider.kind", *one_of(tuple(config_kinds()))),  # the registry's kinds a config may choose
    Rule("provider.base_url", _http_url, 'an http(s):// URL, or "" (llama / sim: start the local server)'),
    Rule(
        "provider.api_key_env",
        *matches(
            r"[A-Za-z_][A-Za-z0-9_]*|",
            'the NAME of an environment variable holding the key (letters, digits, _), not the key itself; "" = no key',
        ),
        secret=True,
    ),
    Rule("provider.rpm", *number(*plan.RPM, null="unknown: adaptive concurrency")),
    Rule("provider.tpm", *number(*plan.TPM, null="unknown")),
    Rule("provider.rate_window_s", *number(0, plan.TIMEOUT_S[1], lo_open=True, null="unknown: smooth pacing")),
    Rule("provider.max_concurrency", *integer(1, plan.MAX_PARALLEL)),
    Rule("provider.max_retries", *integer(0, MAX_RETRIES)),
    Rule("provider.timeout_s", *number(*plan.TIMEOUT_S)),
    *(Rule(f"provider.{k}", *BOOLEAN) for k in ("batch", "hedge", "prompt_cache")),
    Rule("provider.batch_poll_s", *number(0, plan.POLL_S, lo_open=True)),
    Rule("provider.batch_max_tries", *integer(1, plan.MAX_TRIES)),
    Rule("provider.n_threads", *integer(1, plan.MAX_PARALLEL)),  # llama
    Rule("provider.n_ctx", *integer(MIN_N_CTX, plan.MAX_TOKENS)),  # llama
    Rule("provider.parallel", *integer(1, plan.MAX_PARALLEL)),  # llama: slots decoded together
    Rule("provider.sim_rpm", *number(*plan.RPM, null="no limit")),  # sim
    Rule("provider.sim_fault_rate", *number(0, 1)),  # sim
    Rule("provider.sim_latency_s", *number(0, plan.LATENCY_S)),  # sim
    Rule("dataset.name", *one_of((*DATASETS, *code_loop.CODE_DATASETS, FILE_DATASET))),
    Rule("dataset.path", lambda v: isinstance(v, str) and v.strip() != "", "a tasks file: a local path or s3://..."),
    Rule("dataset.fields.id", *matches(r".+", "the name of the file's id column")),
    Rule("dataset.fields.question", *matches(r".+", "the name of the file's question column")),
    Rule("dataset.fields.contexts", *_nullable(_text, "a column name", "the tasks have no contexts")),
    Rule("dataset.fields.answers", *_nullable(_text, "a column name", "the tasks have no answers")),
    Rule("dataset.fields.split", *_nullable(_text, "a column name", "dev/test by hashing the id")),
    Rule("dataset.split", *one_of(SPLITS, null="both")),
    Rule("dataset.limit", *integer(1, plan.MAX_LIMIT, null="all")),
    # magnitudes of the generation (its other checks are GenerationConfig's own)
    Rule("generation.max_rounds", *integer(1, plan.MAX_ROUNDS)),
    Rule("generation.max_tokens", *integer(1, plan.MAX_TOKENS)),
    Rule("generation.workers", *integer(1, plan.MAX_PARALLEL)),
    Rule("generation.concurrency", *integer(1, plan.MAX_PARALLEL)),
    Rule("judge.kind", *one_of(JUDGES)),
    Rule("judge.batch", *BOOLEAN),
    Rule("score.kind", *one_of(SCORES)),  # its name, pattern, target: checked by building it (resolve_scores)
    Rule("weights.strategy", *one_of(WEIGHT_STRATEGIES)),
    Rule(
        "replay.policies",
        lambda v: isinstance(v, list) and len(v) > 0,
        "a non-empty list of policy names ([standard] = every policy)",
    ),
    Rule(
        "replay.random_seeds",
        lambda v: isinstance(v, list) and all(is_int(s) and s >= 0 for s in v),
        "a list of integers >= 0",
    ),
    Rule("report.delta", *number(0, 1, lo_open=True, hi_open=True)),  # a margin on IS, which is in [0, 1]
    Rule("report.out", *_nullable(lambda v: _text(v) and "://" not in v, "a local folder", "<job output dir>/report")),
    Rule("report.primary", *_nullable(_text, "a score's name, or is", "the task's correctness score, else IS")),
    Rule("store.path", lambda v: isinstance(v, str) and v.strip() != "", "a local path or a pyarrow filesystem URI"),
    Rule("store.cache_dir", *_nullable(lambda v: _text(v) and "://" not in v, "a local folder", "<store>/_cache")),
    Rule("ray.address", _ray_address, "null (start Ray here), auto, local, host:port or ray://host:port"),
    Rule("ray.num_cpus", *integer(1)),
    Rule(
        "prices.source",
        lambda v: isinstance(v, str) and v.strip() != "",
        "a non-empty text: where the prices come from",
    ),
    Rule("prices.as_of", *matches(r"\d{4}-\d{2}-\d{2}", "a date YYYY-MM-DD: when the prices were read")),
    # each entry's numbers are checked when the table is built (resolve_prices), naming the entry's key
    Rule("prices.models", lambda v: isinstance(v, dict), "a mapping provider kind -> model -> price"),
)

_ABSENT = object()


def check_rules(cfg: DictConfig, rules: tuple[Rule, ...] = RULES) -> None:
    """Raise ConfigError naming the first key whose value breaks its rule."""
    for rule in rules:
        value = OmegaConf.select(cfg, rule.key, default=_ABSENT)
        if value is _ABSENT:
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value)
        if not rule.ok(value):
            got = "" if rule.secret else f", got {value!r}"
            raise ConfigError(f"{rule.key}: must be {rule.must}{got}")

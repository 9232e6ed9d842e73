"""Turn the validated config tree into the typed job the core takes.

Core code never sees the whole tree: the job gets a :class:`~conf.spec.JobSpec` of ProviderSpec, the local
server's options, GenerationConfig, HaltConfig, weights, policies and report settings, each built from the
fields :mod:`conf.schema` exposes. Domain errors (eps out of range, an unknown policy, ...) are raised here,
before any server starts or any paid call is made, naming the config key at fault. The rules of single keys are
one table (:data:`RULES`); rules that relate keys follow in :func:`to_job`. The folders the job writes are
checked on disk by the sweep (``sweeps.job.check_folders``): conf reads none.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from omegaconf import DictConfig, ListConfig, OmegaConf

from conf import code_loop, plan, schema
from conf.errors import ConfigError
from conf.inputs import SCORES, resolve_answer, resolve_prompts, resolve_scores, resolve_tasks
from conf.spec import JobSpec, ReportSpec, WeightsSpec, store_at
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import DATASETS, SPLITS
from shp_ray.generation.tasks_file import FILE_DATASET
from shp_ray.policy import weights as ahp_weights
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.checks import is_int
from shp_ray.policy.table import Policy, family_policies, policy_by_name, standard_policies
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.llama import LlamaOptions
from shp_ray.providers.prices import PriceTable, price_table

PROVIDER_KINDS = ("llama", "sim", "openai")
JUDGES = ("lexical", "llm")
WEIGHT_STRATEGIES = ("uniform", "entropy", "ahp")  # constrained_ls needs labels a sweep does not have
MAX_RETRIES = 30  # backoff (full jitter) is capped at 20 s: 30 retries can hold one call up to ~10 min
BATCH_KINDS = ("openai", "sim")  # provider kinds whose endpoints serve /v1/batches
MIN_N_CTX = 256  # a floor for the embedded model's context; n_ctx must also exceed generation.max_tokens


# --- The rules of single keys: one table, checked before anything is built or started. -----------
# A rule applies when its key is in the tree (provider.n_ctx only for provider=llama); two keys' rules: to_job.


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
    Rule("provider.kind", *one_of(PROVIDER_KINDS)),
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


# "GenerationConfig.temperature must be ..." -> "generation.temperature: must be ..."
_CORE_FIELD = re.compile(r"(?:GenerationConfig|HaltConfig)\.(\w+) (.*)", re.DOTALL)


def _guard(key: str, build: Any) -> Any:
    """Build a core object; its own validation error becomes a ConfigError naming the config key."""
    try:
        return build()
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        m = _CORE_FIELD.fullmatch(str(exc))
        if m is not None:
            raise ConfigError(f"{key}.{m.group(1)}: {m.group(2)}") from None
        raise ConfigError(f"{key}: {exc}") from None


def resolve_policies(names: list[str], halt: HaltConfig, seeds: list[int]) -> tuple[Policy, ...]:
    out: list[Policy] = []
    for name in names:
        if name == "standard":
            out.extend(standard_policies(halt, tuple(seeds)))
        elif name == "families":  # the other stopping systems (shp_ray.policy.families) at their defaults
            out.extend(family_policies(halt))
        else:
            out.append(_guard("replay.policies", lambda n=name: policy_by_name(n, halt)))
    unique = {p.name: p for p in out}  # a name listed twice is one row
    return tuple(unique.values())


def check_known_keys(cfg: DictConfig, path: str = "") -> None:
    """Refuse keys the schema does not define, even when appended with ``+key=value``.

    Hydra rejects a typo'd override by itself; an appended key would otherwise be
    silently ignored (``+halting.epsilon=0.1`` would run with the default eps).
    """
    kind = OmegaConf.get_type(cfg)
    if not dataclasses.is_dataclass(kind):
        return
    known = {f.name for f in dataclasses.fields(kind)}
    for key in cfg:
        where = f"{path}{key!s}"
        if key not in known:
            raise ConfigError(f"{where}: unknown key (known in {path.rstrip('.') or 'the root'}: {sorted(known)})")
        value = cfg._get_node(key)
        if isinstance(value, DictConfig) and not value._is_missing() and not value._is_none():
            check_known_keys(value, f"{where}.")


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def values(section: DictConfig, keys: Mapping[str, str]) -> dict[str, Any]:
    """A spec's keyword arguments from a config section: {spec field: value} for the keys it has.

    Lists become tuples: the specs are frozen all the way down.
    """
    items = OmegaConf.to_container(section)
    assert isinstance(items, dict)
    return {attr: _frozen(items[key]) for key, attr in keys.items() if key in items}


def resolve_prices(section: DictConfig) -> PriceTable:
    """The price table of the ``prices`` section; a bad value is a ConfigError naming its key
    (``prices.models.openai.gpt-4o.batch_discount: ...``)."""
    data = OmegaConf.to_container(section)
    assert isinstance(data, dict)
    try:
        return price_table(cast("dict[str, Any]", data))  # a config section's keys are names
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def to_job(cfg: DictConfig) -> JobSpec:
    """Validate every setting and build the job's typed configuration.

    Cheap checks only (unknown keys, the rules table, the core objects' own checks, rules that
    relate keys): nothing is started, written or even looked up on disk here.

    Long because it is the one place where the typed specs are built from the config, in the order their
    checks must run (a spec needs the ones before it): each step is a line or two, read top to bottom.
    """
    check_known_keys(cfg)
    check_rules(cfg)
    code_loop.check(cfg)  # the code loop's dataset, critic and scorer (its own module)
    p = cfg.provider
    if p.kind == "openai" and not p.base_url:
        raise ConfigError("provider.base_url: required for provider=openai (any OpenAI-compatible /v1 URL)")
    spec = _guard("provider", lambda: ProviderSpec(**values(p, schema.PROVIDER_KEYS)))
    if not spec.model:
        raise ConfigError("provider.model: required")
    if spec.api_key_env and "@" in urlsplit(spec.base_url).netloc:  # aiohttp refuses both at once, mid-run
        raise ConfigError(
            "provider.base_url: its credentials (user:password@) are the endpoint's basic auth, and "
            f"provider.api_key_env={spec.api_key_env} adds an API key: keep one (provider.api_key_env= for basic auth)"
        )
    if spec.batch and p.kind not in BATCH_KINDS:
        raise ConfigError(
            f"provider.batch: provider={p.kind} has no Batch API (the embedded llama.cpp server serves live calls "
            f"only); batch mode needs one of {list(BATCH_KINDS)}"
        )
    options = None
    if p.kind in schema.SERVER_OPTIONS:  # a local server this job may start (llama.cpp, shp-serve)
        kind, keys = schema.SERVER_OPTIONS[p.kind]
        options = _guard("provider", lambda: kind(**values(p, keys)))
    tasks = resolve_tasks(cfg.dataset)
    prompts = resolve_prompts(cfg.prompts, tasks)
    generation = _guard(
        "generation",
        lambda: GenerationConfig(
            **values(cfg.generation, schema.GENERATION_KEYS),
            **values(cfg.judge, schema.JUDGE_KEYS),
            prompts=prompts,
            scores=resolve_scores(cfg.score),
            answer=resolve_answer(cfg.answer),
            tests=cfg.dataset.tests,
        ),
    )
    if generation.judge_batch and (generation.judge != "llm" or p.kind not in BATCH_KINDS):
        raise ConfigError(
            f"judge.batch: batch judging is for judge=llm on an endpoint with a Batch API ({list(BATCH_KINDS)}); "
            f"this job has judge={generation.judge}, provider={p.kind}"
        )
    if (large := plan.oversized(generation.max_rounds, cfg.dataset.limit, generation.judge == "llm")) and not (
        cfg.allow_large
    ):
        raise ConfigError(large)
    if isinstance(options, LlamaOptions) and options.n_ctx <= generation.max_tokens:
        raise ConfigError(
            f"provider.n_ctx: {options.n_ctx} leaves no room for the prompt with generation.max_tokens="
            f"{generation.max_tokens} (n_ctx counts prompt + reply)"
        )
    halting = values(cfg.halting, schema.HALTING_KEYS)
    if halting["max_rounds"] is None:
        halting["max_rounds"] = generation.max_rounds
    halt = _guard("halting", lambda: HaltConfig(**halting))
    if halt.max_rounds > generation.max_rounds:
        # Replay cannot see rounds that were never generated; say so instead of silently capping.
        raise ConfigError(
            f"halting.max_rounds: {halt.max_rounds} exceeds generation.max_rounds={generation.max_rounds}"
        )
    weights = WeightsSpec(**values(cfg.weights, schema.WEIGHTS_KEYS))
    if weights.strategy == "ahp":
        if weights.pairwise is None:
            raise ConfigError("weights.pairwise: the ahp strategy needs a 4x4 pairwise matrix")
        try:  # the same check the job makes after generation, made now
            ahp_weights.ahp(weights.pairwise, force=weights.force)
        except ahp_weights.InconsistentJudgements as exc:
            raise ConfigError(f"weights.pairwise: {exc} (weights.force=true accepts it)") from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"weights.pairwise: {exc}") from None
    policies = resolve_policies(list(cfg.replay.policies), halt, list(cfg.replay.random_seeds))
    d = cfg.dataset
    return JobSpec(
        provider=spec,
        provider_options=options,
        dataset=d.name,
        split=d.split,
        limit=d.limit,
        tasks=tasks,
        generation=generation,
        halt=halt,
        weights=weights,
        policies=policies,
        store=store_at(str(cfg.store.path)),
        ray_address=cfg.ray.address,
        num_cpus=cfg.ray.num_cpus,
        report=ReportSpec(**values(cfg.report, schema.REPORT_KEYS)),
        progress=cfg.progress,
        allow_partial=cfg.allow_partial,
        allow_large=cfg.allow_large,
        dry_run=cfg.dry_run,
        prices=resolve_prices(cfg.prices),
        cache_dir=cfg.store.cache_dir,
    )

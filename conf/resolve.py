"""Turn the validated config tree into the typed job the core takes.

Core code never sees the whole tree: the job gets a :class:`~conf.spec.JobSpec` of ProviderSpec, the local
server's options, GenerationConfig, HaltConfig, weights, policies and report settings, each built from the
fields :mod:`conf.schema` exposes. Domain errors (eps out of range, an unknown policy, ...) are raised here,
before any server starts or any paid call is made, naming the config key at fault. The rules of single keys are
one table (:data:`conf.rules.RULES`); rules that relate keys follow in :func:`to_job`. The folders the job writes are
checked on disk by the sweep (``sweeps.job.check_folders``): conf reads none.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from omegaconf import DictConfig, OmegaConf

from conf import code_loop, plan, schema
from conf.errors import ConfigError
from conf.inputs import resolve_answer, resolve_logprobs, resolve_prompts, resolve_scores, resolve_tasks
from conf.rules import check_rules
from conf.spec import JobSpec, ReportSpec, WeightsSpec, store_at
from shp_ray.generation.config import GenerationConfig
from shp_ray.policy import weights as ahp_weights
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.table import Policy, family_policies, policy_by_name, standard_policies
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.llama import LlamaOptions
from shp_ray.providers.prices import PriceTable, price_table
from shp_ray.providers.registry import batch_kinds

BATCH_KINDS = tuple(batch_kinds())  # provider kinds whose endpoints serve /v1/batches


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
        where = f"{path}{key}"
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
        return price_table(data)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def to_job(cfg: DictConfig) -> JobSpec:
    """Validate every setting and build the job's typed configuration, each spec after the ones its checks need.

    Cheap checks only (unknown keys, the rules table, the core objects' own checks, rules that
    relate keys): nothing is started, written or even looked up on disk here.
    """
    check_known_keys(cfg)
    check_rules(cfg)
    code_loop.check(cfg)  # the code loop's dataset, critic and scorer (its own module)
    spec, options = _provider(cfg.provider)
    tasks = resolve_tasks(cfg.dataset)
    generation = _generation(cfg, tasks, options)
    halt = _halting(cfg.halting, generation)
    weights = _weights(cfg.weights)
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


def _provider(p: DictConfig) -> tuple[ProviderSpec, Any]:
    """The provider's spec, and the options of the local server this job may start (llama.cpp, shp-serve)."""
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
    if p.kind not in schema.SERVER_OPTIONS:
        return spec, None
    kind, keys = schema.SERVER_OPTIONS[p.kind]
    return spec, _guard("provider", lambda: kind(**values(p, keys)))


def _generation(cfg: DictConfig, tasks: Any, options: Any) -> GenerationConfig:
    """The loop's configuration (its prompts, scorers and answer reading), checked against the provider's."""
    p = cfg.provider
    generation = _guard(
        "generation",
        lambda: GenerationConfig(
            **values(cfg.generation, schema.GENERATION_KEYS),
            **values(cfg.judge, schema.JUDGE_KEYS),
            prompts=resolve_prompts(cfg.prompts, tasks),
            scores=resolve_scores(cfg.score),
            answer=resolve_answer(cfg.answer),
            logprobs=resolve_logprobs(cfg.logprobs),
            tests=cfg.dataset.tests,
        ),
    )
    if generation.judge_batch and (generation.judge != "llm" or p.kind not in BATCH_KINDS):
        raise ConfigError(
            f"judge.batch: batch judging is for judge=llm on an endpoint with a Batch API ({list(BATCH_KINDS)}); "
            f"this job has judge={generation.judge}, provider={p.kind}"
        )
    large = plan.oversized(generation.max_rounds, cfg.dataset.limit, generation.judge == "llm")
    if large and not cfg.allow_large:
        raise ConfigError(large)
    if isinstance(options, LlamaOptions) and options.n_ctx <= generation.max_tokens:
        raise ConfigError(
            f"provider.n_ctx: {options.n_ctx} leaves no room for the prompt with generation.max_tokens="
            f"{generation.max_tokens} (n_ctx counts prompt + reply)"
        )
    return generation


def _halting(section: DictConfig, generation: GenerationConfig) -> HaltConfig:
    halting = values(section, schema.HALTING_KEYS)
    if halting["max_rounds"] is None:
        halting["max_rounds"] = generation.max_rounds
    halt = _guard("halting", lambda: HaltConfig(**halting))
    if halt.max_rounds > generation.max_rounds:  # replay cannot see rounds never generated: said, not capped
        raise ConfigError(
            f"halting.max_rounds: {halt.max_rounds} exceeds generation.max_rounds={generation.max_rounds}"
        )
    return halt


def _weights(section: DictConfig) -> WeightsSpec:
    weights = WeightsSpec(**values(section, schema.WEIGHTS_KEYS))
    if weights.strategy == "ahp":
        if weights.pairwise is None:
            raise ConfigError("weights.pairwise: the ahp strategy needs a 4x4 pairwise matrix")
        try:  # the same check the job makes after generation, made now
            ahp_weights.ahp(weights.pairwise, force=weights.force)
        except ahp_weights.InconsistentJudgements as exc:
            raise ConfigError(f"weights.pairwise: {exc} (weights.force=true accepts it)") from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"weights.pairwise: {exc}") from None
    return weights

"""Turn the validated config tree into the typed objects the core takes.

Core code never sees the whole tree: the job gets a :class:`JobSpec` of
ProviderSpec, GenerationConfig, HaltConfig, weights and policies. Domain
errors (eps out of range, an unknown policy, ...) are raised here, before any
server starts or any paid call is made, naming the config key at fault.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from shp_ray.datasets import DATASETS, SPLITS
from shp_ray.genconfig import GenerationConfig
from shp_ray.halting import HaltConfig
from shp_ray.policies import Policy, family_policies, policy_by_name, standard_policies
from shp_ray.providers.base import ProviderSpec
from shp_ray.weights import STRATEGIES
from storage.manifest import redact

PROVIDER_KINDS = ("llama", "sim", "openai")


class ConfigError(ValueError):
    """An invalid value in the config; the message starts with the key at fault."""


@dataclass(frozen=True)
class JobSpec:
    provider: ProviderSpec
    provider_options: dict[str, Any]  # llama: n_threads, n_ctx; sim: the simulated server's options
    dataset: str
    split: str | None
    limit: int | None
    generation: GenerationConfig
    halt: HaltConfig
    weights: dict[str, Any]  # {"strategy": ..., "pairwise": ..., "force": ...}
    policies: tuple[Policy, ...]
    store: str
    ray_address: str | None
    num_cpus: int
    report: dict[str, Any] = field(default_factory=dict)
    progress: bool | None = None


def _guard(key: str, build: Any) -> Any:
    try:
        return build()
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{key}: {exc}") from None


def resolve_policies(names: list[str], halt: HaltConfig, seeds: list[int]) -> tuple[Policy, ...]:
    out: list[Policy] = []
    for name in names:
        if name == "standard":
            out.extend(standard_policies(halt, tuple(seeds)))
        elif name == "families":  # the other stopping systems (shp_ray.stoppers) at their defaults
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


def to_job(cfg: DictConfig) -> JobSpec:
    """Validate the domain rules and build the job's typed configuration."""
    check_known_keys(cfg)
    p = cfg.provider
    if p.kind not in PROVIDER_KINDS:
        raise ConfigError(f"provider.kind: {p.kind!r} is not one of {list(PROVIDER_KINDS)}")
    if p.kind == "openai" and not p.base_url:
        raise ConfigError("provider.base_url: required for provider=openai (any OpenAI-compatible /v1 URL)")
    # ProviderConf's own keys are ProviderSpec's fields; the rest are the kind's server options.
    fields = ProviderSpec.__dataclass_fields__
    conf_items = OmegaConf.to_container(p)
    spec = _guard("provider", lambda: ProviderSpec(**{k: v for k, v in conf_items.items() if k in fields}))
    if not spec.model:
        raise ConfigError("provider.model: required")
    if spec.max_concurrency < 1:
        raise ConfigError(f"provider.max_concurrency: must be >= 1, got {spec.max_concurrency}")
    options = {k: v for k, v in conf_items.items() if k not in fields}

    d = cfg.dataset
    if d.name not in DATASETS:
        raise ConfigError(f"dataset.name: {d.name!r} is not one of {list(DATASETS)}")
    if d.split is not None and d.split not in SPLITS:
        raise ConfigError(f"dataset.split: {d.split!r} is not one of {list(SPLITS)} (or null for both)")
    if d.limit is not None and d.limit < 1:
        raise ConfigError(f"dataset.limit: must be >= 1 (or null for all), got {d.limit}")

    g = cfg.generation
    generation = _guard(
        "generation",
        lambda: GenerationConfig(**OmegaConf.to_container(g), judge=cfg.judge.kind, judge_model=cfg.judge.model),
    )
    h = cfg.halting
    halt = _guard(
        "halting",
        lambda: HaltConfig(
            eps=float(h.eps),
            k=h.k,
            warmup=h.warmup,
            max_rounds=h.max_rounds if h.max_rounds is not None else generation.max_rounds,
            critic=h.critic,
            entropy=h.entropy,
            gain=h.gain,
            min_gain=float(h.min_gain),
        ),
    )
    if halt.max_rounds > generation.max_rounds:
        # Replay cannot see rounds that were never generated; say so instead of silently capping.
        raise ConfigError(
            f"halting.max_rounds: {halt.max_rounds} exceeds generation.max_rounds={generation.max_rounds}"
        )
    w = cfg.weights
    if w.strategy not in STRATEGIES or w.strategy == "constrained_ls":
        raise ConfigError(f"weights.strategy: {w.strategy!r} is not one of ['uniform', 'entropy', 'ahp']")
    if w.strategy == "ahp" and w.pairwise is None:
        raise ConfigError("weights.pairwise: the ahp strategy needs a 4x4 pairwise matrix")
    r = cfg.replay
    if not r.policies:
        raise ConfigError("replay.policies: empty; use [standard] for every policy")
    policies = resolve_policies(list(r.policies), halt, list(r.random_seeds))
    if cfg.report.delta <= 0:
        raise ConfigError(f"report.delta: the TOST margin must be > 0, got {cfg.report.delta}")
    if cfg.ray.num_cpus < 1:
        raise ConfigError(f"ray.num_cpus: must be >= 1, got {cfg.ray.num_cpus}")
    return JobSpec(
        provider=spec,
        provider_options=options,
        dataset=d.name,
        split=d.split,
        limit=d.limit,
        generation=generation,
        halt=halt,
        weights=dict(OmegaConf.to_container(w)),
        policies=policies,
        store=str(cfg.store.path),
        ray_address=cfg.ray.address,
        num_cpus=cfg.ray.num_cpus,
        report=dict(OmegaConf.to_container(cfg.report)),
        progress=cfg.progress,
    )


def snapshot(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as a plain dict, secrets redacted: what the manifest records."""
    return redact(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[return-value]

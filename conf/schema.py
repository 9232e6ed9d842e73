"""The config tree of ``shp-sweep``: dataclasses registered in Hydra's ConfigStore.

Config enters here and only here. A setting is declared once: the settings the core acts on are
fields of the frozen specs it takes (ProviderSpec, LlamaOptions, SimOptions, GenerationConfig,
HaltConfig, and conf.spec's WeightsSpec, ReportSpec), and the sections below are DERIVED from
them (:func:`derive`): the ``*_KEYS`` tables say which fields the sweep exposes, under which key;
type and default are the spec's. The settings only a sweep has (dataset, replay, store, ray,
progress, allow_partial, allow_large, dry_run) are declared here.

Hydra validates types and rejects unknown keys (a typo'd key fails before any paid call, with
Hydra's own error); the domain checks (eps in [0, 2], rpm > 0, ...) run when :mod:`conf.resolve`
turns the tree into the typed job: a key added here gets its rule in ``conf.rules.RULES``.
YAML files only select groups and override values.

Groups: provider (llama | sim | openai), dataset (hotpotqa | shp_paper | asqa | humaneval: the code loop, whose
option ``sweeps/dataset/humaneval.yaml`` also picks its prompts, critic and scorer | file: the user's
tasks file, ``dataset.path`` + ``dataset.fields``), prompts (shp-wc-v3 | shp-wc-v2 | shp-wc-v1: data
registered here as the group's options, ``shp_ray/data/prompts``; a preset of your own is a YAML in
``<dir>/prompts/``), judge (lexical | llm), prices (default: the price table ``shp_ray/data/prices.yaml``, data
registered here as the group's option; a table of your own is a YAML in ``<dir>/prices/``), plus
the plain sections generation, halting, weights, replay, report, store, ray. Sweep presets live
in ``sweeps/sweep/``. score (none | hotpot | exact | contains | regex | python | tests): the scorer of every
stored draft (``shp_ray.generation.score_config``). The plain section answer: what reads each stored draft's
answer (``shp_ray.generation.answer_config``); logprobs: whether the Writer asks for token log-probabilities.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from conf.spec import ReportSpec, WeightsSpec
from shp_ray.generation.answer_config import AnswerSpec
from shp_ray.generation.config import DEFAULT_RAY_CPUS, GenerationConfig, LogprobSpec
from shp_ray.generation.datasets import DATASETS
from shp_ray.generation.prompts import PRESETS, PromptSet, preset
from shp_ray.generation.score_config import KINDS as SCORE_KINDS
from shp_ray.generation.score_config import ScoreSpec
from shp_ray.generation.tasks_file import FILE_DATASET, FieldMap
from shp_ray.policy.cascade import APPROVAL, HaltConfig
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.llama import LlamaOptions
from shp_ray.providers.prices import ModelPrice, PriceTable, default_prices
from shp_ray.providers.registry import config_kinds, describe_provider
from shp_ray.providers.sim.options import SimOptions


def same(*names: str) -> dict[str, str]:
    """Fields exposed under their own names."""
    return {n: n for n in names}


def every(spec: type) -> dict[str, str]:
    """Every field of the spec, under its own name."""
    return same(*(f.name for f in dataclasses.fields(spec)))


# Which fields of each spec the sweep exposes: {config key: spec field}.
PROVIDER_KEYS = every(ProviderSpec)
LLAMA_KEYS = every(LlamaOptions)  # provider=llama
SIM_KEYS = {"sim_rpm": "rpm", "sim_fault_rate": "fault_rate", "sim_latency_s": "latency_s", "sim_seed": "seed"}
# The rest of GenerationConfig is tuning the sweep leaves at its defaults; judge comes from the judge group.
# The prompts come from the prompts group.
GENERATION_KEYS = same(
    "max_rounds",
    "temperature",
    "seed",
    "max_tokens",
    "embedder",
    "workers",
    "concurrency",
    "critic",
    "epochs",
    "seeding",
)  # critic: llm | tests | llm_tests | none (the code loop and the resampling control: conf.code_loop)
JUDGE_KEYS = {"kind": "judge", "model": "judge_model", "batch": "judge_batch"}
# critic / entropy / gain are not settings of a sweep: each named cascade (shp, the seven ablation
# cells, fixed_k) fixes its own, so a base value would change nothing. Choose the cells instead
# (replay.policies=[abl_no_gain, ...]).
HALTING_KEYS = {k: v for k, v in every(HaltConfig).items() if k not in ("critic", "entropy", "gain")}
WEIGHTS_KEYS = every(WeightsSpec)
REPORT_KEYS = every(ReportSpec)
SCORE_KEYS = every(ScoreSpec)  # score=<kind>: what scores each draft as it is stored (none: nothing)
ANSWER_KEYS = every(AnswerSpec)  # answer.kind: what reads each draft's answer as it is stored (draft_answers)
LOGPROB_KEYS = every(LogprobSpec)  # logprobs.request: the Writer asks for token log-probabilities (draft_logprobs)
PRICE_KEYS = every(ModelPrice)  # one entry of prices.models.<provider kind>.<model>

# The server options of a provider kind, and where they are in the provider section.
SERVER_OPTIONS: dict[str, tuple[type, dict[str, str]]] = {
    "llama": (LlamaOptions, LLAMA_KEYS),
    "sim": (SimOptions, SIM_KEYS),
}

# Each provider option's defaults, as the spec it resolves to when nothing is overridden: the registry's kinds
# (shp_ray.providers.registry), so a new kind is its file and its registration.
PROVIDER_PRESETS = config_kinds()


def _hydra_type(kind: Any) -> Any:
    """A spec field's type as OmegaConf takes it: tuples (what frozen specs hold) become lists."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is tuple:
        return list[_hydra_type(args[0])]
    if origin in (types.UnionType, typing.Union):
        return functools.reduce(operator.or_, map(_hydra_type, args))
    return kind


def exposed(
    spec: type, keys: Mapping[str, str], *, preset: object | None = None, changed: Mapping[str, tuple] | None = None
) -> list[tuple[str, Any, Any]]:
    """Config fields for ``keys`` of the frozen ``spec``: the spec's types and defaults.

    ``preset``: an instance of ``spec`` whose values are the defaults instead (a provider option's own).
    ``changed``: {config key: (type, default)} where the config says what the spec cannot
    (MISSING: a group option chooses it; None: it follows another key).
    """
    hints = typing.get_type_hints(spec)
    defaults = {f.name: f.default for f in dataclasses.fields(spec)}
    out = []
    for key, attr in keys.items():
        kind, default = hints[attr], getattr(preset, attr) if preset is not None else defaults[attr]
        kind, default = (changed or {}).get(key, (kind, default))
        out.append((key, _hydra_type(kind), field(default=default)))
    return out


def derive(name: str, fields: list[tuple[str, Any, Any]], *, doc: str = "", bases: tuple[type, ...] = ()) -> type:
    """A (non-frozen) dataclass of ``fields`` for Hydra's ConfigStore."""
    cls = dataclasses.make_dataclass(name, fields, bases=bases, namespace={"__doc__": doc or None})
    cls.__module__ = __name__  # pickled by name: a multirun on Ray ships the config to its workers
    return cls


ProviderConf = derive(
    "ProviderConf",
    exposed(ProviderSpec, PROVIDER_KEYS, changed={"kind": (str, MISSING)}),  # kind: llama | sim | openai
    doc="An OpenAI-compatible endpoint. The key is read from the env var NAMED here, never stored.",
)


def _provider_conf(kind: str, preset: ProviderSpec) -> type:
    """The config option ``provider=<kind>``: the spec's keys with the kind's defaults, and its server's options."""
    fields = exposed(ProviderSpec, PROVIDER_KEYS, preset=preset)
    if kind in SERVER_OPTIONS:
        fields += exposed(*SERVER_OPTIONS[kind])
    name = f"{kind.title()}ProviderConf"
    cls = derive(name, fields, doc=f"provider={kind}: {describe_provider(kind)}.", bases=(ProviderConf,))
    globals()[name] = cls  # pickled by name (derive): a module attribute, as if written out
    return cls


PROVIDER_CONFS = {kind: _provider_conf(kind, preset) for kind, preset in PROVIDER_PRESETS.items()}
GenerationConf = derive("GenerationConf", exposed(GenerationConfig, GENERATION_KEYS))
JudgeConf = derive(  # kind: lexical | llm
    "JudgeConf", exposed(GenerationConfig, JUDGE_KEYS, changed={"kind": (str, MISSING)})
)
HaltingConf = derive(
    "HaltingConf",
    exposed(HaltConfig, HALTING_KEYS, changed={"max_rounds": (int | None, None)}),
    doc="The base cascade parameters of every replayed policy (max_rounds null = generation.max_rounds).",
)
WeightsConf = derive("WeightsConf", exposed(WeightsSpec, WEIGHTS_KEYS))
ScoreConf = derive(  # kind: none | hotpot | exact | contains | regex | python | tests
    "ScoreConf",
    exposed(ScoreSpec, SCORE_KEYS, changed={"kind": (str, MISSING)}),
    doc="A scorer run on every stored draft (the scores table): a measurement, never part of gen_id.",
)
AnswerConf = derive(  # kind: auto | qa | code | python
    "AnswerConf",
    exposed(AnswerSpec, ANSWER_KEYS),
    doc="What reads each stored draft's answer (the draft_answers table, for the answer-based stopping families): "
    "a measurement, never part of gen_id.",
)
LogprobsConf = derive(
    "LogprobsConf",
    exposed(LogprobSpec, LOGPROB_KEYS),
    doc="Whether the Writer asks for token log-probabilities (the draft_logprobs table, for the token-confidence "
    "family) and the tail their last_k summary averages: a measurement, never part of gen_id.",
)
ReportConf = derive("ReportConf", exposed(ReportSpec, REPORT_KEYS))
ModelPriceConf = derive(
    "ModelPriceConf",
    exposed(
        ModelPrice,
        PRICE_KEYS,
        changed={"input_per_mtok": (float, MISSING), "output_per_mtok": (float, MISSING)},  # no default price
    ),
    doc="One model's prices in US dollars per million tokens; batch = list x (1 - batch_discount).",
)


@dataclass
class PricesConf:
    """The price table (shp_ray.providers.prices.PriceTable): what the cost columns are priced with."""

    source: str = MISSING  # where the figures come from
    as_of: str = MISSING  # YYYY-MM-DD: when they were read (prices are in US dollars)
    # provider kind -> model (as the endpoint names it) -> price; "*" = every model of the kind
    models: dict[str, dict[str, ModelPriceConf]] = field(default_factory=dict)  # type: ignore[valid-type]


def prices_node(table: PriceTable) -> PricesConf:
    """A price table as the config node of the ``prices`` group (the shipped table is its default option)."""
    models = {
        kind: {model: ModelPriceConf(**{f: getattr(p, f) for f in PRICE_KEYS.values()}) for model, p in entries.items()}
        for kind, entries in table.models.items()
    }
    return PricesConf(source=table.source, as_of=table.as_of, models=models)


@dataclass
class DatasetConf:
    name: str = MISSING  # hotpotqa | shp_paper | asqa | humaneval | file
    split: str | None = "test"  # dev | test | null (both)
    limit: int | None = None
    # A code dataset's visible tests: docstring (its docstring's examples; the whole check scores) | split (+ a
    # public half of check; its private half scores: shp_ray.generation.check_split). The generation's tests field.
    tests: str = "docstring"


FieldsConf = derive("FieldsConf", exposed(FieldMap, every(FieldMap)), doc="The tasks file's own column names.")


@dataclass
class FileDatasetConf(DatasetConf):
    """dataset=file: the user's tasks (JSONL, CSV or Parquet; a local path or s3://)."""

    path: str = MISSING
    fields: FieldsConf = field(default_factory=FieldsConf)  # type: ignore[valid-type]
    # The split column's own names -> dev | test: dataset.split_map='{train: dev, eval: test}'
    split_map: Any = None  # a mapping (Any: Hydra merges a new key into a typed dict only with +)


@dataclass
class WriterPromptsConf:
    system: str = MISSING
    user: str = MISSING  # round 1
    revise: str = MISSING  # rounds >= 2


@dataclass
class CriticPromptsConf:
    system: str = MISSING
    user: str = MISSING


@dataclass
class PromptsConf:
    """A prompt preset (shp_ray.generation.prompts): templates over {question} {contexts} {round} {draft}
    {feedback} and a tasks file's metadata columns, and the critique's approval marker."""

    name: str | None = None  # recorded with the generation; null = custom-<hash>
    # A preset file of your own (YAML, the shape of shp_ray/data/prompts/*.yaml), loaded from its path: its
    # templates replace the chosen preset's (no --config-dir needed).
    file: str | None = None
    writer: WriterPromptsConf = field(default_factory=WriterPromptsConf)
    critic: CriticPromptsConf = field(default_factory=CriticPromptsConf)
    approval: str = APPROVAL


def prompts_node(ps: PromptSet) -> PromptsConf:
    """A shipped preset as the config node of the ``prompts`` group."""
    return PromptsConf(
        name=ps.name,
        writer=WriterPromptsConf(system=ps.writer_system, user=ps.writer_user, revise=ps.revise),
        critic=CriticPromptsConf(system=ps.critic_system, user=ps.critic_user),
        approval=ps.approval,
    )


@dataclass
class ReplayConf:
    # Policy names of docs/design.md ("standard" = all of them), e.g. [abl_full] for one cell.
    policies: list[str] = field(default_factory=lambda: ["standard"])
    random_seeds: list[int] = field(default_factory=lambda: [0])


@dataclass
class StoreConf:
    path: str = "runs/store"  # a local path or any pyarrow filesystem URI
    # The response and judge caches (SQLite: a local folder). null = <store>/_cache (an object store: a
    # folder of this machine). Elsewhere, a store on a full disk still keeps every reply already paid for.
    cache_dir: str | None = None


@dataclass
class RayConf:
    address: str | None = None  # null = start Ray on this machine; "auto" = join a cluster
    num_cpus: int = DEFAULT_RAY_CPUS


@dataclass
class Config:
    provider: ProviderConf = MISSING
    dataset: DatasetConf = MISSING
    prompts: PromptsConf = MISSING
    judge: JudgeConf = MISSING
    prices: PricesConf = MISSING
    score: ScoreConf = MISSING
    answer: AnswerConf = field(default_factory=AnswerConf)  # type: ignore[valid-type]
    logprobs: LogprobsConf = field(default_factory=LogprobsConf)  # type: ignore[valid-type]
    generation: GenerationConf = field(default_factory=GenerationConf)
    halting: HaltingConf = field(default_factory=HaltingConf)
    weights: WeightsConf = field(default_factory=WeightsConf)
    replay: ReplayConf = field(default_factory=ReplayConf)
    report: ReportConf = field(default_factory=ReportConf)
    store: StoreConf = field(default_factory=StoreConf)
    ray: RayConf = field(default_factory=RayConf)
    progress: bool | None = None  # None = only on an interactive terminal
    # Replay a job whose failed scenarios are missing (default: such a job fails, exit 1, nothing replayed).
    allow_partial: bool = False
    # Run a plan beyond the soft bounds of conf.plan (more than 20 rounds, more than 100,000 paid calls).
    allow_large: bool = False
    # Print each job's plan (scenarios to generate, calls, tokens, dollars, wall time) and stop: no call at all.
    dry_run: bool = False


def register() -> None:
    """Put the schema and its group options in the ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="schema", node=Config)
    for kind, node in PROVIDER_CONFS.items():
        cs.store(group="provider", name=kind, node=node)
    for name in DATASETS:
        cs.store(group="dataset", name=name, node=DatasetConf(name=name))
    cs.store(group="dataset", name=FILE_DATASET, node=FileDatasetConf(name=FILE_DATASET))
    # The shipped prompt presets are data (shp_ray/data/prompts/*.yaml); a user's is <config-dir>/prompts/*.yaml.
    for name in PRESETS:
        cs.store(group="prompts", name=name, node=prompts_node(preset(name)))
    cs.store(group="judge", name="lexical", node=JudgeConf(kind="lexical"))
    cs.store(group="judge", name="llm", node=JudgeConf(kind="llm"))
    for name in ("none", *SCORE_KINDS):
        cs.store(group="score", name=name, node=ScoreConf(kind=name))
    # The price table is data (shp_ray/data/prices.yaml), read here into the group's default option.
    cs.store(group="prices", name="default", node=prices_node(default_prices()))


register()

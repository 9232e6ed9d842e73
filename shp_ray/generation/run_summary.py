"""The bookkeeping of one generation run: its :class:`GenerationSummary` (what it submitted,
stored, paid for; counted as trajectories finish and shown on the progress line), the run's row of
the ``generations`` table, and the ``failures`` row that records why a run stopped early.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import pyarrow as pa

from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.progress import Progress, RunCounts
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.local_models import pinned_sha256
from storage.parts import Store
from storage.schemas import FAILURES


@dataclass
class GenerationSummary(RunCounts):
    """What one ``generate`` call did (returned to the caller, printed by the sweep): the run's counts
    (:class:`RunCounts`: generated, failed, skipped, tokens, retries, http_429) and the rest below."""

    run_id: str
    gen_id: str
    store: str
    embedder: str
    judge: str
    submitted: int = 0
    paid_tokens: int = 0
    calls: int = 0
    cached_calls: int = 0
    paid_calls: int = 0  # calls that reached the provider and succeeded
    embedded_texts: int = 0
    ray_cpus: int = 0  # CPUs of the Ray cluster the run used (0: it needed no Ray)
    nodes: dict[str, int] = field(default_factory=dict)  # trajectories finished per node (id prefix)
    lost_workers: int = 0  # trajectory workers that died (their node lost); replaced on the others
    resubmitted: int = 0  # trajectories run again because their worker died mid-flight
    cache_actor: dict[str, int] = field(default_factory=dict)  # a cluster: what the cache actor served
    rows: dict[str, int] = field(default_factory=dict)
    batch: dict[str, object] = field(default_factory=dict)  # batch mode: the lockstep's counters
    elapsed_s: float = 0.0  # the whole call: Ray start, model load, generation, final flush
    generation_s: float = 0.0  # first scenario submitted -> last trajectory stored

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def generation_row(gen_id: str, cfg: GenerationConfig, spec: ProviderSpec, embedder: str, dim: int) -> dict:
    """The run's row of the ``generations`` table: what produced its drafts and embeddings.

    ``config_json.model_sha256``: the sha256 of the GGUF an embedded (``llama``) model's alias pins, the
    file LlamaServer verifies before serving it; None for other providers. Not in gen_id: an alias
    names one file forever, so stores made before this field keep their gen_id.
    """
    return {
        "gen_id": gen_id,
        "model": spec.model,
        "prompt_version": cfg.prompt_version,
        "max_rounds": cfg.max_rounds,
        "temperature": float(cfg.temperature),
        "seed": cfg.seed,
        "embedder": embedder,
        "embedding_dim": dim,
        "config_json": json.dumps(
            {
                "gen_id_parts": cfg.gen_id_parts(spec.kind, spec.model),
                "generation": cfg.to_dict(),
                "model_sha256": pinned_sha256(spec.kind, spec.model),
            },
            sort_keys=True,
        ),
        "created_at": datetime.now(UTC),
    }


def count_progress(summary: GenerationSummary, prog: Progress, stats: dict[str, int], http_429: int) -> None:
    """Copy the call counters into the summary and show them on the progress line."""
    summary.calls, summary.cached_calls, summary.paid_calls = stats["calls"], stats["cached"], stats["paid"]
    summary.retries, summary.tokens, summary.paid_tokens = stats["retries"], stats["tokens"], stats["paid_tokens"]
    summary.http_429 = http_429
    prog.update(**summary.counts(), paid_calls=summary.paid_calls, paid_tokens=summary.paid_tokens)


def record_abort(store: Store, gen_id: str, reason: str) -> None:
    """One ``failures`` row for the run (stage ``endpoint``: it names no scenario, resume ignores it)."""
    row = {"gen_id": gen_id, "scenario_id": "", "round": 0, "stage": "endpoint", "error_type": "GenerationAborted"}
    row |= {"message": reason[:4000], "created_at": datetime.now(UTC)}
    store.write("failures", pa.Table.from_pylist([row], schema=FAILURES))

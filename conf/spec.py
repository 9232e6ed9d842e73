"""The typed job that :func:`conf.resolve.to_job` builds from the config tree, and the job's own settings.

Every setting the core acts on is declared once, as a field (with its default) of the frozen
spec that carries it: ProviderSpec, LlamaOptions, SimOptions, GenerationConfig, HaltConfig,
ModelPrice / PriceTable (the price table), and here the two no core object owns,
:class:`WeightsSpec` and :class:`ReportSpec`.
:mod:`conf.schema` derives the Hydra config classes from these fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conf.errors import ConfigError
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.tasks_file import TasksFile
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.scoring import DEFAULT_DELTA
from shp_ray.policy.table import Policy
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.llama import LlamaOptions
from shp_ray.providers.prices import PriceTable
from shp_ray.providers.sim.options import SimOptions
from shp_ray.redaction import redact_text
from storage.parts import Store, StoreUnusable


@dataclass(frozen=True)
class WeightsSpec:
    """How the IS metrics are weighed (shp_ray.policy.weights)."""

    strategy: str = "uniform"  # uniform | entropy | ahp
    pairwise: tuple[tuple[float, ...], ...] | None = None  # ahp: 4x4 matrix in METRICS order
    force: bool = False  # ahp: accept a consistency ratio above 0.10


@dataclass(frozen=True)
class ReportSpec:
    enabled: bool = True
    delta: float = DEFAULT_DELTA  # TOST non-inferiority margin on IS (the default: shp_ray.policy.scoring)
    out: str | None = None  # None = <job output dir>/report
    primary: str | None = None  # the outcome reports lead with: a score's name or "is" (None: the task's correctness
    # score where there is one, else IS)


@dataclass(frozen=True)
class JobSpec:
    provider: ProviderSpec
    # How to start the local server of provider=llama / sim (None: the endpoint is not started here).
    provider_options: LlamaOptions | SimOptions | None
    dataset: str
    split: str | None
    limit: int | None
    tasks: TasksFile | None  # dataset=file: the user's tasks file (read and checked by the job)
    generation: GenerationConfig
    halt: HaltConfig
    weights: WeightsSpec
    policies: tuple[Policy, ...]
    store: Store  # made once, from store.path, by store_at: every room below takes this object
    ray_address: str | None
    num_cpus: int
    report: ReportSpec
    progress: bool | None
    allow_partial: bool  # replay the stored scenarios when some failed for good
    prices: PriceTable  # what the replay's cost columns are priced with
    allow_large: bool = False  # a plan beyond conf.plan's soft bounds was asked for by name
    dry_run: bool = False  # print the plan, make no call
    cache_dir: str | None = None  # the response and judge caches; None: <store>/_cache

    @property
    def caches(self) -> Path:
        """Where the response and judge caches are: ``cache_dir`` if set, else the store's own (``Store.cache_dir``)."""
        return Path(self.cache_dir) if self.cache_dir else self.store.cache_dir


def store_at(path: str) -> Store:
    """``store.path`` as the job's :class:`Store`, the one conversion of the config's text (nothing is read or made
    here: ``sweeps.job.check_folders`` checks it on disk); a URI that could never name a store is a ConfigError."""
    try:
        return Store(path)
    except StoreUnusable as exc:
        raise ConfigError(f"store.path: {exc}") from None
    except (OSError, ValueError) as exc:  # a filesystem URI pyarrow does not know, or cannot make
        raise ConfigError(f"store.path: {redact_text(path)}: {redact_text(str(exc)).splitlines()[0]}") from None

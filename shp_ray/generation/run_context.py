"""How a generation runs, and the run as both backends see it: two values instead of thirteen arguments.

:class:`RunOptions` is what the caller of :func:`shp_ray.generation.generate` chooses besides the config (the
backend, the provider factory, the caches, where Ray runs, the progress line ...): none of it is part of the
gen_id. :class:`Run` is what :func:`generate` has opened for one run and hands to its backend (``_run_local`` or
:func:`shp_ray.generation.ray_run.run_ray`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shp_ray.generation.config import DEFAULT_RAY_CPUS, GenerationConfig
from shp_ray.generation.guard import Breaker, Watchdog
from shp_ray.generation.progress import Progress
from shp_ray.generation.run_summary import GenerationSummary
from shp_ray.generation.services import DEFAULT_FACTORY
from shp_ray.providers.base import ProviderSpec
from storage.parts import Store


@dataclass(frozen=True)
class RunOptions:
    """How :func:`generate` runs (none of it changes what is generated).

    ``backend``: ``"ray"`` or ``"local"`` (the same loop in-process: unit tests, tiny runs). ``provider_factory``:
    ``"module:function"`` building the provider from its spec. ``cache_dir``: the response and judgment caches
    (default: the store's user cache folder). ``ray_address`` joins a Ray (one node or a cluster); ``num_cpus``
    sizes a Ray started here (ignored when joining one or reusing a running Ray). ``watchdog`` raises once the
    endpoint's own server has died (the embedded llama.cpp server); ``ephemeral_endpoint`` says the endpoint goes
    away after the call (a server started for it), so its shared rate-limiter actor is removed too. ``total`` (the
    scenarios' number, when the iterable has no length) and ``progress`` (None: when stderr is a terminal) shape
    the progress line; ``run_id`` and ``command`` are what the manifest records.
    """

    backend: str = "ray"
    provider_factory: str = DEFAULT_FACTORY
    cache_dir: str | Path | None = None
    ray_address: str | None = None
    num_cpus: int = DEFAULT_RAY_CPUS
    watchdog: Watchdog | None = None
    ephemeral_endpoint: bool = False
    total: int | None = None
    progress: bool | None = None
    run_id: str | None = None
    command: str = ""

    def __post_init__(self) -> None:
        if self.backend not in ("ray", "local"):
            raise ValueError(f"backend must be 'ray' or 'local', got {self.backend!r}")


@dataclass(frozen=True)
class Run:
    """One run as :func:`generate` opened it: the config, the store, the endpoint's spec, the cache folder, the
    summary it fills, its progress line and its breaker, and the options it was started with."""

    cfg: GenerationConfig
    store: Store
    spec: ProviderSpec
    cache: Path
    summary: GenerationSummary
    prog: Progress
    breaker: Breaker
    options: RunOptions

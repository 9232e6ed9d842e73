"""``make_provider(spec)``: build a provider by kind inside any process (a Ray actor included).

Each kind names its factory as a "module:callable" string, imported only when that kind is built:
asking for the scripted double never imports aiohttp, and this module imports nothing of the
simulator (``shp_ray.providers.sim``). The ``scripted`` line of ``_FACTORIES`` is the one place a
module of the real providers names the simulator: its registration point (tests/test_architecture.py
allows no other).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from shp_ray.providers.base import Provider, ProviderSpec

# kind -> "module:factory"; every HTTP kind (the simulated server's too) speaks the OpenAI protocol
# to spec.base_url through the real client.
_FACTORIES: dict[str, str | Callable[..., Provider]] = {
    "openai": "shp_ray.providers.client:OpenAICompatProvider",
    "sim": "shp_ray.providers.client:OpenAICompatProvider",
    "llama": "shp_ray.providers.client:OpenAICompatProvider",
    "scripted": "shp_ray.providers.sim.scripted:from_spec",  # the simulator's registration point
}


# Said in every output (console, report), so a pipeline check is never mistaken for a model evaluation.
PROVIDER_NOTES: dict[str, str] = {
    "llama": "the embedded llama.cpp server (a small local model)",
    "sim": "the simulated OpenAI-compatible server (a test double: no model at all)",
    "scripted": "a scripted fake provider (a test double: no model at all)",
    "openai": "an OpenAI-compatible endpoint",
}


def describe_provider(kind: str, model: str = "") -> str:
    """What produced the drafts, honestly named (for the embedded server: which model, and how small)."""
    # Imported here: the package imports this module, and `python -m shp_ray.providers.local_models`
    # would otherwise find its module already loaded (runpy warns).
    from shp_ray.providers import local_models

    if kind == "llama" and model in local_models.MODELS:
        m = local_models.MODELS[model]
        return f"the embedded llama.cpp server with {m.name} ({m.honesty})"
    return PROVIDER_NOTES.get(kind, f"provider kind {kind!r}")


def register_provider(kind: str, factory: str | Callable[..., Provider]) -> None:
    """Add a kind: a "module:callable" path (imported lazily) or a callable(spec, **kw)."""
    _FACTORIES[kind] = factory


def provider_kinds() -> list[str]:
    return sorted(_FACTORIES)


def make_provider(spec: ProviderSpec, **kwargs: Any) -> Provider:
    """The provider for ``spec``. Extra keyword arguments go to the factory."""
    factory: Any = _FACTORIES.get(spec.kind)
    if factory is None:
        raise ValueError(f"ProviderSpec.kind={spec.kind!r} is unknown; choose from {provider_kinds()}")
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(spec, **kwargs)

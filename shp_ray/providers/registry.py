"""``make_provider(spec)``: build a provider by kind inside any process (a Ray actor included).

Each kind names its factory as a "module:callable" string, imported only when that kind is built:
asking for the scripted double never imports aiohttp, and this module imports nothing of the
simulator (``shp_ray.providers.sim``). The ``scripted`` line of ``_KINDS`` is the one place a
module of the real providers names the simulator: its registration point (tests/test_architecture.py
allows no other). Config validation, ``shp-sweep --help``, the config groups and dispatch all read ``_KINDS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shp_ray.providers.base import Provider, ProviderSpec
from shp_ray.providers.llama import LLAMA_SPEC


@dataclass(frozen=True)
class ProviderKind:
    """One kind of provider, declared once: how it is built, what every output says of it, and its place in the
    config. ``factory``: a "module:callable" path (imported when the kind is built) or a callable(spec, **kw).
    ``preset``: the spec its config option resolves to when nothing is overridden (None: no config option, a
    test double). ``batch``: its endpoints serve /v1/batches."""

    kind: str
    factory: str | Callable[..., Provider]
    note: str
    preset: ProviderSpec | None = None
    batch: bool = False


# Every HTTP kind (the simulated server's too) speaks the OpenAI protocol to spec.base_url through the real client.
# The notes are said in every output (console, report), so a pipeline check is never mistaken for a model evaluation.
_CLIENT = "shp_ray.providers.client:OpenAICompatProvider"
_KINDS: dict[str, ProviderKind] = {
    k.kind: k
    for k in (
        # the embedded llama.cpp server (it is started unless base_url is set)
        ProviderKind("llama", _CLIENT, "the embedded llama.cpp server (a small local model)", LLAMA_SPEC),
        ProviderKind(
            "sim",
            _CLIENT,
            "the simulated OpenAI-compatible server (a test double: no model at all)",
            ProviderSpec(kind="sim", model="sim-model"),
            batch=True,
        ),
        ProviderKind(
            "openai",
            _CLIENT,
            "an OpenAI-compatible endpoint",
            ProviderSpec(
                kind="openai", base_url="https://api.openai.com/v1", model="gpt-4o-mini", api_key_env="OPENAI_API_KEY"
            ),
            batch=True,
        ),
        # the simulator's registration point
        ProviderKind(
            "scripted",
            "shp_ray.providers.sim.scripted:from_spec",
            "a scripted fake provider (a test double: no model at all)",
        ),
    )
}


def describe_provider(kind: str, model: str = "") -> str:
    """What produced the drafts, honestly named (for the embedded server: which model, and how small)."""
    # Imported here: the package imports this module, and `python -m shp_ray.providers.local_models`
    # would otherwise find its module already loaded (runpy warns).
    from shp_ray.providers import local_models

    if kind == "llama" and model in local_models.MODELS:
        m = local_models.MODELS[model]
        return f"the embedded llama.cpp server with {m.name} ({m.honesty})"
    known = _KINDS.get(kind)
    return known.note if known is not None else f"provider kind {kind!r}"


def register_provider(
    kind: str, factory: str | Callable[..., Provider], note: str = "", *, preset: ProviderSpec | None = None
) -> None:
    """Add a kind: a "module:callable" path (imported lazily) or a callable(spec, **kw); ``preset``: its config
    option's defaults (a kind registered before the config is composed becomes a ``provider=`` option)."""
    _KINDS[kind] = ProviderKind(kind, factory, note or f"provider kind {kind!r}", preset)


def provider_kinds() -> list[str]:
    return sorted(_KINDS)


def config_kinds() -> dict[str, ProviderSpec]:
    """The kinds a config may choose (``provider=<kind>``), with the spec each resolves to by default."""
    return {k.kind: k.preset for k in _KINDS.values() if k.preset is not None}


def batch_kinds() -> list[str]:
    """The kinds whose endpoints serve /v1/batches (batch mode, batch judging)."""
    return [k.kind for k in _KINDS.values() if k.batch]


def make_provider(spec: ProviderSpec, **kwargs: Any) -> Provider:
    """The provider for ``spec``. Extra keyword arguments go to the factory."""
    known = _KINDS.get(spec.kind)
    if known is None:
        raise ValueError(f"ProviderSpec.kind={spec.kind!r} is unknown; choose from {provider_kinds()}")
    factory: Any = known.factory
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(spec, **kwargs)

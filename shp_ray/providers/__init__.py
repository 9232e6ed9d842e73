"""Providers: one async ``complete(request)`` interface; limits and retries wrap it.

Heavy parts (aiohttp client, Ray limiter actor, simulated server, llama.cpp server) are imported
from their own modules when used: ``make_provider`` in ``registry`` imports lazily.
"""

from shp_ray.providers.base import ChatRequest, Completion, Provider, ProviderError, ProviderSpec, Usage
from shp_ray.providers.registry import make_provider, provider_kinds, register_provider

__all__ = [
    "ChatRequest",
    "Completion",
    "Provider",
    "ProviderError",
    "ProviderSpec",
    "Usage",
    "make_provider",
    "provider_kinds",
    "register_provider",
]

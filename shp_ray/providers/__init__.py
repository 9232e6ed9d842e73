"""Providers: one async ``complete(request)`` interface; limits and retries wrap it."""

from .base import ChatRequest, Completion, Provider, ProviderError, Usage

__all__ = ["ChatRequest", "Completion", "Provider", "ProviderError", "Usage"]

"""The one error of a config that cannot run."""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid value in the config; the message starts with the key at fault."""

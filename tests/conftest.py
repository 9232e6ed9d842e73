"""Shared fixtures. Integration tests use the real parts: Ray on this machine, quietly."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def ray_session():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()

"""Shared fixtures. Integration tests use the real parts: Ray on this machine, quietly."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# What reading a store records (verified parts, kept derived files: storage.user_cache) goes to the user's cache
# directory; the suite's goes to a folder of its own, removed at exit (set before any Ray worker or subprocess
# starts, so they inherit it). Not named shp-*: no_shp_temp_leftovers watches those.
os.environ["SHP_RAY_CACHE"] = tempfile.mkdtemp(prefix="shp_ray_cache-")
atexit.register(shutil.rmtree, os.environ["SHP_RAY_CACHE"], True)


def _shp_temp_entries(tmp: str) -> set[str]:
    try:
        return {name for name in os.listdir(tmp) if name.startswith("shp-")}
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def no_shp_temp_leftovers():
    """Fail a test that leaves new ``shp-*`` entries in the temp folder (spill folders, logs, ...)."""
    tmp = tempfile.gettempdir()  # read now: a test may point tempfile elsewhere for its own duration
    before = _shp_temp_entries(tmp)
    yield
    added = sorted(_shp_temp_entries(tmp) - before)
    if added:
        pytest.fail(f"the test left {len(added)} entr{'y' if len(added) == 1 else 'ies'} in {tmp}: {', '.join(added)}")


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


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def small_store(tmp_path_factory):
    """A small synthetic store (12 trajectories x 3 rounds, real schemas) for the whole suite: read it, never write."""
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    root = tmp_path_factory.mktemp("small-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=12, rounds=3, seed=5))
    return root

"""One generation at a time per gen_id on a whole Ray cluster: a lease that dies with its holder.

Under the OS file lock of this host (:func:`storage.lock.generation_lock`, which covers two drivers
of one machine, whatever Ray they use), a driver of a multi-node cluster also takes a **lease**: a
named actor ``shp-lock:<store>:<gen_id>`` in namespace ``shp-ray``. Ray refuses a second actor of
the same name, atomically, in the GCS, so only one driver of the cluster holds it; another waits and
retries. The lease is an ordinary (not detached) actor owned by the driver that created it, so Ray
ends it when that driver ends -- released, exit or crash (``kill -9`` included), or its node lost
-- and a dead job can never wedge the others.

It does not span clusters: two Ray clusters have two GCSs. See the README ("Running on a
cluster") for what protects a store then.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from shp_ray.generation.cluster import driver_node, on_node, start_ray
from shp_ray.providers.shared_limiter import ray_running
from storage.lock import generation_lock
from storage.parts import Store

NAMESPACE = "shp-ray"


def lease_name(uri: str, gen_id: str) -> str:
    """The lease of one generation of the store at ``uri`` (as a hash: names stay short; every driver names it so)."""
    return f"shp-lock:{hashlib.sha256(uri.encode()).hexdigest()[:16]}:{gen_id[:16]}"


@contextmanager
def cluster_lease(name: str, *, timeout_s: float | None = None, poll_s: float = 0.5) -> Iterator[float]:
    """Hold the lease ``name`` on the running Ray cluster; yields how long it waited (seconds).

    Nothing to take (0.0) when Ray is not running or has a single node: the host's file lock is the lock.
    """
    if not ray_running():  # (never import Ray just to ask: seconds on the single-machine path)
        yield 0.0
        return
    import ray

    if sum(1 for n in ray.nodes() if n["Alive"]) < 2:
        yield 0.0
        return
    start, here = time.monotonic(), on_node(driver_node())
    while True:
        try:
            lease = _lease_class().options(name=name, namespace=NAMESPACE, **here).remote()
            break
        except ValueError:  # the name is taken: another driver of this cluster holds it
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                raise TimeoutError(f"{name} is held by another driver of this cluster for > {timeout_s} s") from None
            time.sleep(poll_s)
    try:
        yield time.monotonic() - start
    finally:
        with contextlib.suppress(Exception):
            ray.kill(lease)


@contextmanager
def generation_lease(store: Store, gen_id: str, *, ray_address: str | None = None) -> Iterator[float]:
    """The host's file lock (in the store's cache folder), then (joining ``ray_address``, or on a running Ray) the
    cluster's lease.

    Ray started here for the lease is shut down after it; ``generate`` inside reuses it.
    """
    with generation_lock(store.cache_dir, gen_id) as waited:
        started = start_ray(ray_address) if ray_address else False
        try:
            with cluster_lease(lease_name(store.uri, gen_id)) as more:
                yield waited + more
        finally:
            if started:
                import ray

                ray.shutdown()


@functools.cache
def _lease_class() -> Any:
    import ray

    @ray.remote(num_cpus=0)
    class Lease:
        """Holds a name; nothing else (its life is the lease)."""

        def held(self) -> bool:
            return True

    return Lease

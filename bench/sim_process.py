"""Benchmark helpers: scenarios streamed without end, and a test server (the simulator, the header-less double) in a
process of its own.

The server gets its own process so that its CPU and memory are not counted as the pipeline's.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when streaming starts, not with this module
    from shp_ray.generation.datasets import Scenario


def stream(n: int) -> Iterator[Scenario]:
    """n distinct scenarios, streamed (never a list): HotpotQA questions, reused with a variant tag."""
    from dataclasses import replace

    from shp_ray.generation.datasets import load_scenarios

    base = load_scenarios("hotpotqa")
    for i in range(n):
        s = base[i % len(base)]
        k = i // len(base)
        yield s if k == 0 else replace(s, scenario_id=f"{s.scenario_id}#v{k}", question=f"{s.question} (variant {k})")


SIM = "shp_ray.providers.sim.server:SimServer"  # the simulated server, for ServerProcess


def _serve(conn, server: str, opts: dict[str, Any]) -> None:  # noqa: ANN001 - runs in a child process
    module, _, name = server.partition(":")
    with getattr(importlib.import_module(module), name)(**opts) as srv:
        conn.send(srv.base_url)
        conn.recv()  # until the parent asks for the counts
        conn.send(srv.stats)


class ServerProcess:
    """A test server (``module:Class``, a context manager with ``base_url`` and ``stats``) in a process of its own:
    its CPU neither slows the client measured nor times its arrivals, and its memory is not the pipeline's."""

    def __init__(self, server: str, opts: dict[str, Any]) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, server, opts), daemon=True)

    def __enter__(self) -> ServerProcess:
        self.proc.start()
        self.base_url = self._conn.recv()
        return self

    def finish(self) -> dict[str, Any]:
        self._conn.send("stats")
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()

"""Benchmark helpers: scenarios streamed without end, and the simulated server in its own process.

The server gets its own process so that its CPU and memory are not counted as the pipeline's.
"""

from __future__ import annotations

from collections.abc import Iterator


def stream(n: int) -> Iterator[object]:
    """n distinct scenarios, streamed (never a list): HotpotQA questions, reused with a variant tag."""
    from dataclasses import replace

    from shp_ray.generation.datasets import load_scenarios

    base = load_scenarios("hotpotqa")
    for i in range(n):
        s = base[i % len(base)]
        k = i // len(base)
        yield s if k == 0 else replace(s, scenario_id=f"{s.scenario_id}#v{k}", question=f"{s.question} (variant {k})")


def _serve(conn, opts: dict[str, object]) -> None:  # noqa: ANN001 - runs in a child process
    from shp_ray.providers.sim.server import SimServer

    with SimServer(**opts) as sim:
        conn.send(sim.base_url)
        conn.recv()  # until the parent asks for the stats
        conn.send(sim.stats)


class SimProcess:
    """The simulated server in its own process, so its memory is not counted as the pipeline's."""

    def __init__(self, opts: dict[str, object]) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, opts), daemon=True)

    def __enter__(self) -> SimProcess:
        self.proc.start()
        self.base_url = self._conn.recv()
        return self

    def finish(self) -> dict[str, object]:
        self._conn.send("stats")
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()

"""The trajectory workers of a run on Ray, spread over the nodes, and what happens when one dies.

Workers are placed round-robin over the nodes that take work (the driver's first), at least one
per node, so generation spreads with the cluster. Each scenario goes to the live worker with the
fewest trajectories in flight, never past its ``max_concurrency`` (batch mode counts on every lane
running at once).

When a worker dies -- its node was lost, its process was killed -- every ``run`` it had in flight
fails with a ``RayActorError``. Those scenarios are queued again and run on the surviving workers:
the calls they had completed are in the cluster's response cache (free); only the calls that were in
flight on the dead worker are paid again. A trajectory's rows come with its worker's answer (the
driver writes them), so a worker that died before answering wrote nothing: a scenario is written once.
A replacement worker is started on a node that is still alive, at most ``max_replacements`` times in
a run (a worker that dies every time ends the run instead of looping).
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.guard import GenerationAborted
from storage.write_fault import WriteFailed, write_failure

log = logging.getLogger("shp_ray.generation")

STAT_KEYS = ("calls", "cached", "paid", "retries", "tokens", "paid_tokens", "http_429", "encoded")


@dataclass
class _Worker:
    handle: Any
    node_id: str
    busy: dict[Any, Scenario] = field(default_factory=dict)  # run ref -> its scenario
    stats: dict[str, int] = field(default_factory=dict)  # the last counters it reported
    dead: bool = False


class WorkerPool:
    """``make(node_id)`` starts a worker on that node; ``nodes()`` lists the nodes that may take one now."""

    def __init__(
        self,
        make: Callable[[str], Any],
        nodes: Callable[[], list[str]],
        size: int,
        per_worker: int,
        max_replacements: int | None = None,
    ) -> None:
        self._make, self._nodes, self.per_worker = make, nodes, per_worker
        self.workers: list[_Worker] = []
        self._owner: dict[Any, _Worker] = {}
        self.retry: deque[Scenario] = deque()
        self.retired = dict.fromkeys(STAT_KEYS, 0)  # counters of workers that died (their last report)
        self.resubmitted = 0  # scenarios run again because their worker died
        self.lost = 0  # workers that died
        self.replacements_left = 2 * size if max_replacements is None else max_replacements
        self.fault: WriteFailed | None = None  # the first write fault a run reported
        ids = nodes()
        for i in range(max(size, len(ids))):
            self._spawn(ids[i % len(ids)])

    def _spawn(self, node_id: str) -> None:
        self.workers.append(_Worker(self._make(node_id), node_id))

    @property
    def live(self) -> list[_Worker]:
        return [w for w in self.workers if not w.dead]

    @property
    def in_flight(self) -> int:
        return len(self._owner)

    def fill(self, more: Callable[[], Scenario | None]) -> None:
        """Submit while a live worker has room: scenarios to run again first, then ``more()`` (None: no more)."""
        while True:
            room = [w for w in self.live if len(w.busy) < self.per_worker]
            if not room:
                return
            scn = self.retry.popleft() if self.retry else more()
            if scn is None:
                return
            worker = min(room, key=lambda w: len(w.busy))
            ref = worker.handle.run.remote(scn)
            worker.busy[ref] = scn
            self._owner[ref] = worker

    def wait(self, timeout: float) -> list[dict[str, Any]]:
        """The outputs of the runs that finished within ``timeout`` (a dead worker's runs are queued again)."""
        import ray

        refs = list(self._owner)
        if not refs:
            return []
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        outs = []
        for ref in ready:
            worker = self._owner.pop(ref)
            scn = worker.busy.pop(ref)
            try:
                outs.append(ray.get(ref))
            except ray.exceptions.RayActorError as exc:
                self._lose(worker, exc)
                self.retry.append(scn)
                self.resubmitted += 1
            except ray.exceptions.RayTaskError as exc:
                # The store or a cache could not be written: the run takes no new scenario; those in
                # flight finish (every reply they pay for is cached), then the run raises ``fault``.
                if (fault := write_failure(exc)) is None:
                    raise
                self.fault = self.fault or fault
        return outs

    def _lose(self, worker: _Worker, exc: BaseException) -> None:
        import ray

        if worker.dead:
            return
        worker.dead = True
        self.lost += 1
        with contextlib.suppress(Exception):  # make sure it makes no more calls (a worker only unreachable)
            ray.kill(worker.handle)
        for k in STAT_KEYS:
            self.retired[k] += int(worker.stats.get(k, 0))
        nodes = self._nodes()
        log.warning(
            "a trajectory worker on node %s died (%s); its %d trajectories in flight run again on the others",
            worker.node_id[:12], type(exc).__name__, len(worker.busy) + 1,
        )  # fmt: skip
        if nodes and self.replacements_left > 0:
            self.replacements_left -= 1
            counts = {n: sum(1 for w in self.live if w.node_id == n) for n in nodes}
            self._spawn(min(nodes, key=lambda n: (counts[n], nodes.index(n))))
        if not self.live:
            raise GenerationAborted(
                f"every trajectory worker died (the last: {type(exc).__name__}: {exc}); the completed "
                "trajectories are stored. Rerun the same command to resume."
            )

    def stats(self, timeout: float = 10.0) -> dict[str, int]:
        """The call counters summed over the workers: the live ones asked now, the dead ones' last report."""
        import ray

        asked = {w.handle.stats.remote(): w for w in self.live}
        if asked:
            ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=timeout)
            for ref in ready:
                with contextlib.suppress(ray.exceptions.RayActorError):  # a dead worker: its runs will say
                    asked[ref].stats = ray.get(ref)
        total = dict(self.retired)
        for w in self.live:
            for k in STAT_KEYS:
                total[k] += int(w.stats.get(k, 0))
        return total

    def kill_all(self, wait_s: float = 30.0) -> None:
        """Kill every worker and wait (up to ``wait_s``) until Ray has them dead: a worker still dying when the run
        returns could start one more sandbox run, and leave its folder, after the run said it had ended."""
        import ray

        probes = []
        for w in self.workers:
            with contextlib.suppress(Exception):
                ray.kill(w.handle)
                probes.append(w.handle.__ray_ready__.remote())  # resolves (with the actor's death) once it is gone
        if probes:
            ray.wait(probes, num_returns=len(probes), timeout=wait_s)

"""Live progress of a long generation: trajectories done/total, paid calls, tokens/s, retries, 429s, ETA.

Drawn by ``rich`` (a live line) on an interactive terminal; elsewhere (stderr not a TTY, or ``CI=true``)
the same line is logged (logger ``shp_ray.progress``) when the run starts, every ``log_every_s`` seconds and
when it ends, so a job's log and a CI log show a long run moving. ``progress=false``: neither. The numbers
are always kept, so the run summary reports them either way.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a live line is shown, not before
    from rich.console import Console
    from rich.live import Live

log = logging.getLogger("shp_ray.progress")
LOG_EVERY_S = 10.0  # not a terminal: a progress line this often in the log


def interactive() -> bool:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return False
    return sys.stderr.isatty()


@dataclass(kw_only=True)
class RunCounts:
    """What a generation run counts as it goes: the one record of these fields. The progress line shows
    them, the run's ``GenerationSummary`` and a sweep job's ``JobResult`` carry them."""

    generated: int = 0  # trajectories this run stored
    failed: int = 0  # trajectories that failed for good (no rounds stored)
    skipped: int = 0  # trajectories already in the store, not run again
    tokens: int = 0
    retries: int = 0
    http_429: int = 0

    @property
    def done(self) -> int:
        """Trajectories this run finished, stored or failed."""
        return self.generated + self.failed

    def counts(self) -> dict[str, int]:
        """The counts alone (to hand from one record to another)."""
        return {f.name: getattr(self, f.name) for f in fields(RunCounts)}


@dataclass
class ProgressState(RunCounts):
    total: int | None
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)
    paid_calls: int = 0  # calls that reached the provider and succeeded (cached replies not counted)
    paid_tokens: int = 0  # their tokens (prompt and completion)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.started

    @property
    def tokens_per_s(self) -> float:
        """Paid tokens per second of this run (what the endpoint served; cached replies cost no time)."""
        return self.paid_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rate(self) -> float:
        """Trajectories per second (this run's, skipped ones excluded)."""
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        if self.total is None or self.rate <= 0:
            return None
        return max(0.0, (self.total - self.skipped - self.done) / self.rate)

    def line(self) -> str:
        total = "?" if self.total is None else str(self.total - self.skipped)
        eta = "?" if self.eta_s is None else f"{self.eta_s:,.0f}s"
        return (
            f"{self.done}/{total} trajectories ({self.failed} failed, {self.skipped} already stored), "
            f"{self.paid_calls:,} paid calls, {self.tokens:,} tokens ({self.tokens_per_s:,.0f} tok/s paid), "
            f"{self.retries} retries, "
            f"{self.http_429} 429s, ETA {eta}"
        )


class Progress:
    """``with Progress(total) as p: p.update(generated=..., tokens=...)``: a live line on a terminal, log lines
    elsewhere (``enabled`` None: decide by the terminal; False: neither; True: the live line)."""

    def __init__(
        self,
        total: int | None,
        enabled: bool | None = None,
        label: str = "generate",
        console: Console | None = None,
        log_every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = ProgressState(total, clock=clock)
        self.console = console
        self.live = interactive() if enabled is None else enabled
        self.logs = enabled is None and not self.live  # not a terminal: the line goes to the log instead
        self.label = label
        self.log_every_s = log_every_s
        self._live: Live | None = None
        self._logged = -1.0  # when the last log line was written (clock time); < 0: none yet

    def __enter__(self) -> Progress:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            console = self.console or Console(stderr=True)
            self._live = Live(self._shown(), console=console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        elif self.logs:
            self._log()
        return self

    def update(self, **values: int) -> None:
        for key, value in values.items():
            setattr(self.state, key, value)
        if self._live is not None:
            self._live.update(self._shown())
        elif self.logs and self.state.clock() - self._logged >= self.log_every_s:
            self._log()

    def _shown(self) -> str:
        return f"[bold]{self.label}[/bold] {self.state.line()}"

    def _log(self) -> None:
        self._logged = self.state.clock()
        log.info("%s: %s", self.label, self.state.line())

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._shown())
            self._live.__exit__(None, None, None)
            self._live = None
        elif self.logs:
            self._log()

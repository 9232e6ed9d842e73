"""Live progress of a long generation: done/total, rate, tokens, retries, 429s, ETA.

Shown with ``rich`` on an interactive terminal; quiet when stderr is not a TTY
or ``CI=true`` (logs and CI output stay clean). The numbers are always kept,
so the run summary reports them either way.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field, fields


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
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

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
            f"{self.done}/{total} trajectories ({self.failed} failed, {self.skipped} already stored) "
            f"{self.rate:.2f}/s tokens={self.tokens:,} retries={self.retries} 429s={self.http_429} ETA {eta}"
        )


class Progress:
    """``with Progress(total) as p: p.update(generated=..., tokens=...)``; draws only when interactive."""

    def __init__(
        self, total: int | None, enabled: bool | None = None, label: str = "generate", console: object = None
    ) -> None:
        self.state = ProgressState(total)
        self.console = console
        self.enabled = interactive() if enabled is None else enabled
        self.label = label
        self._live = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            console = self.console or Console(stderr=True)
            self._live = Live(self.state.line(), console=console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def update(self, **values: int) -> None:
        for key, value in values.items():
            setattr(self.state, key, value)
        if self._live is not None:
            self._live.update(f"[bold]{self.label}[/bold] {self.state.line()}")

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(f"[bold]{self.label}[/bold] {self.state.line()}")
            self._live.__exit__(None, None, None)
            self._live = None

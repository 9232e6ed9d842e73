"""What the replay benchmarks share: the policies they replay and the measuring process's peak memory."""

from __future__ import annotations

import resource
import sys

import numpy as np


def replay_policies(rounds: int):  # noqa: ANN201
    """Every standard policy and the 10 x 5 eps x k grid at ``rounds``: what shp-bench replay replays."""
    from analysis.replay.policy_table import default_policies, grid_policies

    eps_grid = [round(float(e), 4) for e in np.linspace(0.02, 0.2, 10)]
    return default_policies() + grid_policies(eps_grid, [1, 2, 3, 4, 5], max_rounds=(rounds,))


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: of its own address space, which begins at exec). Not
    ``getrusage``'s ``ru_maxrss``: Linux carries the parent's peak across fork and exec into it, so a measuring
    process started by one that had written a 100k store reported that writer's 1.9 GB."""
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):  # not Linux: the rusage figure (kilobytes on Linux, bytes on macOS)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1024)

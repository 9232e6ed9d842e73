"""The simulated server's injected faults, drawn deterministically.

Kinds: ``500`` and ``503`` (an error reply), ``slow`` (an extra delay), ``drop`` (the connection
closed without a reply) and ``malformed`` (a 200 whose JSON body is cut short). Whether the n-th
arrival of a given request body faults, and how, is a function of (seed, body, n): a run is
repeatable, and a retry of a faulted request can succeed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

FAULT_KINDS = ("500", "503", "slow", "drop", "malformed")


def unit(*parts: object) -> float:
    """A number in [0, 1) determined by ``parts`` (a hash, so independent across parts)."""
    blob = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2**64


def draw_fault(seed: int, kinds: Sequence[str], rate: float, digest: str, nth: int) -> str | None:
    """The fault of the ``nth`` arrival of the body hashing to ``digest``, or None (share ``rate`` fault)."""
    if not kinds or rate <= 0:
        return None
    if unit(seed, "fault?", digest, nth) >= rate:
        return None
    return kinds[int(unit(seed, "fault-kind", digest, nth) * len(kinds))]

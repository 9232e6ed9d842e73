"""The simulated server's injected faults, drawn deterministically.

Kinds: ``500`` and ``503`` (an error reply), ``slow`` (an extra delay), ``drop`` (the connection
closed without a reply) and ``malformed`` (a 200 whose JSON body is cut short) are the default mix;
``empty`` (a 200 with no text: a null content, a blank one or no choices, in turn) and ``stall`` (the
request is read and never answered) are drawn only when named. Whether the n-th
arrival of a given request body faults, and how, is a function of (seed, body, n): a run is
repeatable, and a retry of a faulted request can succeed.

A *slow fault* is drawn apart from those: the request is held for a while (5-8 s by default) and
then fails with a 504, as a stuck upstream behind a gateway does. It is what a client's timeout
alone handles worst: the attempt uses quota and a slot for seconds and yields nothing.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence

FAULT_KINDS = ("500", "503", "slow", "drop", "malformed")  # the default mix
NAMED_FAULT_KINDS = ("empty", "stall")  # only when named: they change what a default fault rate means
ALL_FAULT_KINDS = FAULT_KINDS + NAMED_FAULT_KINDS
EMPTY_SHAPES = ("null", "blank", "no-choices")  # how an ``empty`` fault's 200 carries no text


def empty_reply(reply: dict, seed: int, digest: str, nth: int) -> dict:
    """``reply`` (a ``chat.completion``) with its text taken away, in one of :data:`EMPTY_SHAPES` (drawn)."""
    shape = EMPTY_SHAPES[int(unit(seed, "empty-shape", digest, nth) * len(EMPTY_SHAPES))]
    if shape == "no-choices":
        return {**reply, "choices": []}
    content = None if shape == "null" else " \n"
    return {**reply, "choices": [{**reply["choices"][0], "message": {"role": "assistant", "content": content}}]}


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


def draw_slow_fault(seed: int, rate: float, hold_s: tuple[float, float], digest: str, nth: int) -> float | None:
    """Seconds the ``nth`` arrival of ``digest`` is held before it fails, or None (share ``rate`` do)."""
    if rate <= 0 or unit(seed, "slow-fault?", digest, nth) >= rate:
        return None
    lo, hi = hold_s
    return lo + (hi - lo) * unit(seed, "slow-fault-s", digest, nth)


def parse_share(text: str) -> float:
    """A command-line share: "0.05" or "1/120"."""
    num, _, den = text.partition("/")
    try:
        value = float(num) / float(den) if den else float(num)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a share like 0.01 or 1/120, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a share must be in [0, 1], got {text!r}")
    return value


def parse_range(text: str) -> tuple[float, float]:
    """A command-line range of seconds: "5,8" (one number is a fixed value)."""
    try:
        parts = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or not 0.0 <= parts[0] <= parts[-1]:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH seconds with 0 <= LOW <= HIGH, got {text!r}")
    return (parts[0], parts[-1])

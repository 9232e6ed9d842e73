"""The one integer check of the project: a setting, a parameter or a count read from a file that must be
a whole number of at least some minimum; its twin for a finite number; and the one did-you-mean: the known name
nearest to a refused one.

It lives in the policy package because that is the floor every room that checks integers or names may import
(the config, generation, the importers, analysis, the apps, the policy's own parameters). A bool is refused though
Python counts it as an int: ``True`` given for ``k`` is a mistake in the config, not k = 1.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import TypeGuard


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is no ``bool`` (the type checker then knows ``value`` is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(what: str, value: object, minimum: int, error: type[Exception] = ValueError) -> int:
    """``value`` when it is an integer >= ``minimum``; else ``error`` saying what ``what`` must be."""
    if not is_int(value) or value < minimum:
        raise error(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def check_finite(what: str, value: object) -> float:
    """``value`` as a float when it is a finite number (no bool); else ValueError saying what ``what`` must be."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def nearest(name: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to a refused ``name`` (a typo's likely meaning, the case aside: ``IS`` -> ``is``), or
    None when none is close."""
    folded = {k.casefold(): k for k in sorted(known)}
    found = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[found[0]] if found else None

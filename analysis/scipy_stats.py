"""``scipy.stats``, imported on first use: ``from analysis import scipy_stats as st; st.t.ppf(0.95, 9)``.

Importing scipy.stats takes ~1 s (~5 s on a loaded machine). ``conf`` imports analysis only for its defaults, so
every ``shp-sweep`` paid it before Hydra even read the command line: a config check, ``--cfg job`` or a refused
override now does not. Opening a store needs three of its distributions (the t quantiles, the TOST planner):
:func:`t_ppf`, :func:`norm_ppf` and :func:`nct_sf` compute them as scipy.stats does, with the ``scipy.special``
functions its ``t.ppf``, ``norm.ppf`` and ``nct.sf`` call (the same values: tests/test_stats.py), so an open imports
scipy.special only (0.6 against 1.8 CPU-s measured on a loaded 2-core machine, BENCHMARKS.md issue 30 item 2).
What an open computes with them (the t quantile table, the planner's margins) depends on nothing but scipy and this
code, so it is kept once per machine (:func:`kept`), and an open after the first on a machine -- a new
store's first open too -- imports no scipy at all.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from analysis.sql.code_digest import code_digest
from storage.kept import CONSTANTS_DIRNAME, KeptFileDamaged, seal, unseal
from storage.user_cache import cache_root

CONSTANTS = CONSTANTS_DIRNAME  # the folder under storage.user_cache.cache_root of the kept values


def __getattr__(name: str) -> Any:  # scipy.stats.<name>, untyped until imported
    from scipy import stats

    return getattr(stats, name)


def t_ppf(q: float, df: npt.ArrayLike) -> np.ndarray:
    """``scipy.stats.t.ppf(q, df)`` for 0 < q < 1 and df > 0 (scipy's ``t._ppf``)."""
    from scipy import special

    return special.stdtrit(np.asarray(df, dtype=float), q)


def norm_ppf(q: float) -> float:
    """``scipy.stats.norm.ppf(q)`` for 0 < q < 1 (scipy's ``norm._ppf``)."""
    from scipy import special

    return float(special.ndtri(q))


def nct_sf(x: npt.ArrayLike, df: npt.ArrayLike, nc: npt.ArrayLike) -> np.ndarray:
    """``scipy.stats.nct.sf(x, df, nc)`` for finite x, df > 0 and finite nc (scipy's ``nct._sf``)."""
    from scipy.special import _ufuncs

    with np.errstate(over="ignore"):
        return np.clip(_ufuncs._nct_sf(np.asarray(x, float), np.asarray(df, float), np.asarray(nc, float)), 0, 1)


R = TypeVar("R")


def kept(name: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Keep what the decorated function returns (numbers, tuples of them: JSON, floats round-trip exactly) in this
    machine's cache, per argument list, under a key of scipy's version and the analysis code
    (:func:`analysis.sql.code_digest.code_digest`): computed again when either changes or the file fails its check
    (its keyed hash under this user's key, :func:`storage.kept.unseal`: a file edited with its checksum recomputed is
    not read); best effort, like every kept file."""

    def decorate(compute: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(compute)
        def read_or_compute(*args: object) -> R:
            stem = "-".join([name, *map(str, args)])
            key = f"{stem}\0{importlib.metadata.version('scipy')}\0{code_digest()}"
            key = hashlib.sha256(key.encode()).hexdigest()[:32]
            path = cache_root() / CONSTANTS / f"{stem}-{key}.json"
            with contextlib.suppress(OSError, KeptFileDamaged):
                return cast(R, _tuples(unseal(path.read_text(encoding="utf-8"), key)["values"]))  # compute's, kept
            values = compute(*args)
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
                tmp.write_text(seal(key, {"values": values}), encoding="utf-8")
                tmp.replace(path)
                for old in path.parent.glob(f"{stem}-*.json"):  # another scipy's or code's
                    if old != path:
                        old.unlink(missing_ok=True)
            return values

        return read_or_compute

    return decorate


def _tuples(value: object) -> object:
    """JSON's lists back as the tuples they were."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value

"""``scipy.stats``, imported on first use: ``from analysis import scipy_stats as st; st.t.ppf(0.95, 9)``.

Importing scipy.stats takes ~1 s (~5 s on a loaded machine). Opening a store needs it (the t quantiles, the
TOST planner), but ``conf`` imports analysis only for its defaults, so every ``shp-sweep`` paid it before Hydra
even read the command line: a config check, ``--cfg job`` or a refused override now does not.
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    from scipy import stats

    return getattr(stats, name)

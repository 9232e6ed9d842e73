"""The critic level's approval test, approved(f_t) of :mod:`shp_ray.policy.cascade`, as RE2 regexes.

Each generation's prompt preset names its approval marker (``generation.prompts.approval`` in the
generations row's config_json; APPROVED when absent: an older store, an import). The stored signals hold
``approved`` read with that marker; what recomputes them from the critiques (signals_from_rounds.sql) reads it
per gen_id from approval_markers.sql, which builds the same text as :func:`approval_regex` in SQL.
"""

from __future__ import annotations

import re

from analysis.sql import _PY_SPACE, quote
from analysis.sql.loader import query  # not via analysis.sql: mypy reads that name as its folder query/

# RE2 takes a backslash before ASCII punctuation as that character (and refuses one before a letter).
_RE2_PUNCT = re.compile(r"[!-/:-@\[-`{-~]")


def approval_regex(marker: str) -> str:
    """approved(f, marker): leading whitespace, then the marker in any case (its punctuation literal).

    RE2's case folding equals str.upper()'s for every character except a few signs that fold to a letter
    (the Kelvin sign to k, the Angstrom sign to å, the Ohm sign to ω): a critique starting with one differs."""
    literal = _RE2_PUNCT.sub(lambda m: "\\" + m.group(), marker)
    return rf"^[{_PY_SPACE}]*(?i:{literal})"


APPROVED_REGEX = approval_regex("approved")  # a generation that names no marker of its own


def approval_markers_sql() -> str:
    """Per generation whose preset names a marker other than APPROVED: its approval_regex (reads ``generations``)."""
    return query("approval_markers", space=quote(_PY_SPACE))

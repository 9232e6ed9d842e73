"""The analysis's one error: a store it cannot read as asked."""

from __future__ import annotations

from storage.parts import Store
from storage.verify import DamagedStore
from storage.verify import require_sound as _verify


class AnalysisError(ValueError):
    """A store the analysis cannot read as asked (says what and where)."""


def require_sound(store: Store) -> None:
    """Every part checked before it is believed (each once: storage.verify records sound parts); a damaged
    store is an AnalysisError naming each damaged part."""
    try:
        _verify(store)
    except DamagedStore as exc:
        raise AnalysisError(str(exc)) from None

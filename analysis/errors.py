"""The analysis's one error: a store it cannot read as asked."""

from __future__ import annotations


class AnalysisError(ValueError):
    """A store the analysis cannot read as asked (says what and where)."""

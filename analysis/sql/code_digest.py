"""The version of the code that computes what a reader keeps: a digest of its source."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from storage import schemas


@cache
def code_digest() -> str:
    """sha256 over the analysis package's source (Python and SQL) and the store's schemas: another version of
    either, another key (:mod:`analysis.derived`, :func:`analysis.scipy_stats.kept`)."""
    root = Path(__file__).parent.parent  # analysis/
    files = [*root.rglob("*.py"), *root.rglob("*.sql"), Path(schemas.__file__)]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()

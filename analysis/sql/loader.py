"""The one loader of the project's SQL: ``<name>.sql`` read by name from the owners' folders, its ``$placeholders``
filled (analysis.sql re-exports :func:`query` and :func:`names`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from string import Template

_FILES = resources.files("analysis.sql")  # the package's folder, also inside an installed package (package-data)
# The statements grouped by who reads them: the replay engine (and analysis.sql's builders, which make its views), the
# statistics, the report, the query CLI, and the apps above analysis (shp-sweep, shp-bench). One loader reads them all.
# Inside an owner's folder a statement sits in the folder of the concept it belongs to (replay/signals,
# replay/costs, replay/correctness ...): a view's file beside the views it is built with (analysis.replay.catalog).
OWNERS = ("replay", "stats", "report", "query", "sweeps", "bench")
_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a file name, never a path


class UnknownQuery(LookupError):
    """No ``analysis/sql/<owner>/<name>.sql``: a misspelt name (the message lists the known ones)."""


def _walk(folder: Traversable) -> Iterator[Traversable]:
    """The ``.sql`` files of ``folder`` and of its concept folders (replay/signals, replay/costs ...)."""
    for f in folder.iterdir():
        if f.is_dir():
            yield from _walk(f)
        elif f.name.endswith(".sql"):
            yield f


@functools.cache
def _files() -> dict[str, Traversable]:
    """Every statement's file by name, over the owners' folders (a name is unique across them)."""
    out: dict[str, Traversable] = {}
    for owner in OWNERS:
        for f in _walk(_FILES / owner):
            name = f.name.removesuffix(".sql")
            if out.setdefault(name, f) is not f:
                raise RuntimeError(f"two SQL files named {name!r}: analysis/sql/{owner} and another folder")
    return out


def names() -> list[str]:
    """Every statement's name (the ``.sql`` files of the owners' folders)."""
    return sorted(_files())


def _file(name: str) -> Traversable:
    path = _files().get(name) if _NAME.fullmatch(name) else None
    if path is None:
        raise UnknownQuery(
            f"no SQL named {name!r} (analysis/sql/<owner>/[<concept>/]{name}.sql); known: {', '.join(names())}"
        )
    return path


@functools.cache
def _text(name: str) -> str:
    """The statement of ``<name>.sql``: the file without its leading ``--`` lines (its documentation)."""
    lines = _file(name).read_text(encoding="utf-8").splitlines()
    while lines and (lines[0].startswith("--") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines).strip()


def query(name: str, **params: object) -> str:
    """The statement named ``name``, its ``$placeholders`` filled from ``params`` (every one, no other)."""
    template = Template(_text(name))
    wanted = set(template.get_identifiers())
    if wanted != set(params):
        raise TypeError(f"SQL {name!r} takes {sorted(wanted) or 'no parameters'}, given {sorted(params) or 'none'}")
    return template.safe_substitute(params)  # safe: a '$' that is no placeholder ('$.path') stays as written

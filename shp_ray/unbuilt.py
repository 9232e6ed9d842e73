"""Console scripts whose issue has not landed yet. They say so and fail; none pretends to work."""

from __future__ import annotations

import sys

_PENDING = {
    "shp-sweep": "the Hydra sweep app (issue: Hydra sweeps on Ray)",
    "shp-query": "SQL over the store (issue: DuckDB replay)",
    "shp-serve": "the simulated OpenAI-compatible server (issue: Providers)",
}


def _unbuilt(command: str) -> None:
    print(f"{command}: not built yet -- {_PENDING[command]}.", file=sys.stderr)
    raise SystemExit(2)


def sweep() -> None:
    _unbuilt("shp-sweep")


def query() -> None:
    _unbuilt("shp-query")


def serve() -> None:
    _unbuilt("shp-serve")

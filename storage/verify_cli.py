"""``shp-query --store S --verify`` / ``--quarantine``: the store's check and repair, as printed to a user.

``--verify`` lists every damaged part and every part without a checksum, and exits 1 if a part is
damaged; ``--quarantine`` moves the damaged parts aside (:mod:`storage.quarantine`) and exits 0
once the store is sound again.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from storage.part_check import NO_CHECKSUM, PartCheck
from storage.parts import StoreUnusable, open_store
from storage.quarantine import QUARANTINE_DIR, quarantine
from storage.verify import display, shown, verify_store


def _status(c: PartCheck) -> str:
    return "ok" if c.ok else "DAMAGED"


def cli(root: str, *, do_quarantine: bool = False, recheck: bool = False, out: TextIO | None = None) -> int:
    """``shp-query --store S --verify`` (exit 1 if a part is damaged) / ``--quarantine`` (exit 0 once repaired)."""
    out = out or sys.stdout
    try:
        store = open_store(root)  # an object store: credentials, endpoint and bucket checked first
    except StoreUnusable as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    if store.local and not Path(store.path).is_dir():
        print(f"shp-query: no store at {store.path} (expected <root>/<table>/part-*.parquet)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    checks = verify_store(store, use_record=not recheck)
    took = time.perf_counter() - t0
    damaged = [c for c in checks if not c.ok]
    if not do_quarantine or not damaged:
        for c in checks:
            if not c.ok or c.checksum == NO_CHECKSUM:
                said = "; ".join(c.problems) if c.problems else "schema and values ok"
                print(
                    f"{_status(c):7} {display(store, c.path)} [{c.rows if c.rows is not None else '?'} rows, "
                    f"checksum: {c.checksum or '-'}]: {said}",
                    file=out,
                )
        unhashed = sum(c.checksum == NO_CHECKSUM for c in checks)
        print(
            f"{len(checks)} parts checked in {took:.2f} s ({sum(c.cached for c in checks)} unchanged since verified, "
            f"not read again); {len(damaged)} damaged; {unhashed} without a checksum "
            "(written before checksums: schema and value checks only)",
            file=out,
        )
    if do_quarantine:
        if not damaged:
            print("nothing to quarantine: every part is sound", file=out)
            return 0
        for q in quarantine(store, checks):
            print(
                f"moved   {display(store, q.source)}\n     -> {display(store, q.dest)}\n"
                f"     why: {'; '.join(q.problems)}\n     lost: {q.restores}",
                file=out,
            )
        left = [c for c in verify_store(store) if not c.ok]
        if left:
            print(f"{len(left)} parts are still damaged (moved by another process?): run --verify", file=out)
            return 1
        print(
            f"{len(damaged)} part{'s' if len(damaged) != 1 else ''} moved to {shown(store)}/{QUARANTINE_DIR}/; "
            "the store is readable again. Rerun the same sweep to regenerate what was lost.",
            file=out,
        )
        return 0
    if damaged:
        print(f"repair: shp-query --store {shown(store)} --quarantine", file=out)
        return 1
    return 0

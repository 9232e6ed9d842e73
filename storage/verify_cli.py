"""``shp-query --store S --verify`` / ``--quarantine``: the store's check and repair, as printed to a user.

``--verify`` lists every damaged part and every part without a checksum, and exits 1 if a part is
damaged; ``--quarantine`` moves the damaged parts aside (:mod:`storage.quarantine`) and exits 0
once the store is sound again. Both check the files a reader keeps for the store too (:mod:`storage.kept`, in
this machine's folder for it, :mod:`storage.user_cache`): a damaged one is named (exit 1), and removed by
``--quarantine`` (it is derived: the next open computes it again). The kept folders are the store's (replay inputs,
facts) and this machine's constants (the t quantiles, the planner's normal quantiles).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from storage.kept import CONSTANTS_DIRNAME, DERIVED_DIRNAME, KeptFiles
from storage.part_check import NO_CHECKSUM, PartCheck
from storage.parts import Store, StoreUnusable, open_store
from storage.quarantine import QUARANTINE_DIR, quarantine
from storage.user_cache import cache_root, reader_dir
from storage.verify import display, shown, verify_store


def _status(c: PartCheck) -> str:
    return "ok" if c.ok else "DAMAGED"


def cli(store: Store, *, do_quarantine: bool = False, recheck: bool = False, out: TextIO | None = None) -> int:
    """``shp-query --store S --verify`` (exit 1 if a part is damaged) / ``--quarantine`` (exit 0 once repaired)."""
    out = out or sys.stdout
    try:  # an object store: credentials, endpoint and bucket checked first; a root with no store refused
        store = open_store(store)
    except StoreUnusable as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    kept_damaged = _check_kept(store, recheck=recheck, discard=do_quarantine, out=out)
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
            print(
                f"nothing to quarantine: every part is sound{' (damaged kept files removed)' * bool(kept_damaged)}",
                file=out,
            )
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
    if damaged or kept_damaged:
        print(f"repair: shp-query --store {shown(store)} --quarantine", file=out)
        return 1
    return 0


def _check_kept(store: Store, *, recheck: bool, discard: bool, out: TextIO) -> int:
    """Check the files kept for ``store`` (``recheck``: every one hashed again); name each damaged one (and
    remove it: ``discard``). The number damaged."""
    checks = [
        c
        for folder in (reader_dir(store) / DERIVED_DIRNAME, cache_root() / CONSTANTS_DIRNAME)  # every kept folder
        for c in KeptFiles(folder).check_all(recheck=recheck)
    ]
    damaged = [c for c in checks if c.problem is not None]
    for c in damaged:
        print(f"DAMAGED {c.path} [kept file]: {c.problem}", file=out)
        if discard:
            c.path.unlink(missing_ok=True)
            print(f"removed {c.path} (derived: the next open computes it again)", file=out)
    if checks:
        print(
            f"{len(checks)} kept files checked ({sum(c.cached for c in checks)} unchanged since verified, not read "
            f"again); {len(damaged)} damaged (never read: discarded and computed again at the next open)",
            file=out,
        )
    old = store.cache_dir / DERIVED_DIRNAME
    if not store.remote and old.is_dir() and any(old.iterdir()):
        print(f"note: {old} holds files kept by an older version, never read now: remove the folder", file=out)
    return len(damaged)

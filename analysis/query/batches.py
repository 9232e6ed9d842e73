"""``shp-query --store S --batches [list|cancel]``: the provider batches a store's runs submitted, from the ledger
in this machine's cache folder for the store; cancelled at their endpoints by :mod:`shp_ray.providers.batches`."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path

from shp_ray.providers.batches import cancel
from storage.batch_ledger import BATCHES_FILE, BatchLedger
from storage.parts import Store


def _ledger(store: Store) -> BatchLedger | None:
    path = store.cache_dir / BATCHES_FILE
    return BatchLedger(path) if path.exists() else None


def run(store: Store, action: str) -> int:
    """Print the ledger (``list``) or cancel the unfinished batches (``cancel``); the exit status."""
    ledger = _ledger(store)
    if ledger is None:
        print(json.dumps({"batches": 0, "store": str(Path(store.root))}))
        return 0
    try:
        records = ledger.all() if action == "list" else [r for r in ledger.unfinished() if r.batch_id]
        if action == "list":
            for rec in records:
                print(json.dumps(asdict(rec)))
            return 0
        return asyncio.run(cancel(records, ledger.seen))
    finally:
        ledger.close()

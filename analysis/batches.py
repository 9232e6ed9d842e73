"""``shp-query --store S --batches [list|cancel]``: the provider batches a store's runs submitted.

A run in batch mode writes each batch to the ledger before its first poll
(:mod:`storage.batch_ledger`). A run stopped while batches were at the provider leaves them running
there, paid for: rerunning the same command resumes polling them; ``cancel`` stops every batch not
yet taken in, at the endpoint it was sent to, with the key from the environment variable it used.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path

from shp_ray.providers.base import ProviderError, ProviderSpec
from shp_ray.providers.batch_api import BatchAPI
from storage.batch_ledger import BATCHES_FILE, BatchLedger, BatchRecord
from storage.cache import default_cache_dir


def _ledger(store: str) -> BatchLedger | None:
    path = default_cache_dir(store) / BATCHES_FILE
    return BatchLedger(path) if path.exists() else None


def run(store: str, action: str) -> int:
    """Print the ledger (``list``) or cancel the unfinished batches (``cancel``); the exit status."""
    ledger = _ledger(store)
    if ledger is None:
        print(json.dumps({"batches": 0, "store": str(Path(store))}))
        return 0
    try:
        records = ledger.all() if action == "list" else [r for r in ledger.unfinished() if r.batch_id]
        if action == "list":
            for rec in records:
                print(json.dumps(asdict(rec)))
            return 0
        return asyncio.run(_cancel(ledger, records))
    finally:
        ledger.close()


async def _cancel(ledger: BatchLedger, records: list[BatchRecord]) -> int:
    failed = 0
    for rec in records:
        spec = ProviderSpec(kind="openai", base_url=rec.endpoint, api_key_env=rec.key_env)
        try:
            async with BatchAPI(spec) as api:
                state = await api.cancel(rec.batch_id or "")
        except (ProviderError, ValueError) as exc:
            failed += 1
            print(json.dumps({"batch_id": rec.batch_id, "cancelled": False, "error": str(exc)}))
            continue
        ledger.seen(rec.submission, state.status)
        print(json.dumps({"batch_id": rec.batch_id, "cancelled": True, "status": state.status}))
    return 1 if failed else 0

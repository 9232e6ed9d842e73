"""Cancel provider batches at the endpoints they were sent to (``shp-query --store S --batches cancel``).

A run in batch mode writes each batch to the ledger before its first poll
(:mod:`storage.batch_ledger`). A run stopped while batches were at the provider leaves them running
there, paid for: rerunning the same command resumes polling them; ``cancel`` stops every batch not
yet taken in, at the endpoint it was sent to, with the key from the environment variable it used.
The ledger is read by the caller (analysis.query.batches): providers import no storage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Protocol

from shp_ray.providers.base import ProviderError, ProviderSpec
from shp_ray.providers.batch_api import BatchAPI


class OpenBatch(Protocol):
    """What cancelling a batch needs of its ledger record (storage.batch_ledger.BatchRecord, frozen)."""

    @property
    def submission(self) -> str: ...
    @property
    def batch_id(self) -> str | None: ...
    @property
    def endpoint(self) -> str: ...  # the provider's base URL, no user info or query
    @property
    def key_env(self) -> str: ...  # the NAME of the variable holding its key


async def cancel(records: Iterable[OpenBatch], seen: Callable[[str, str], None]) -> int:
    """Cancel each batch, print one JSON line per batch, and tell ``seen`` (submission, status) of each cancelled
    one; the exit status (1 if any failed)."""
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
        seen(rec.submission, state.status)
        print(json.dumps({"batch_id": rec.batch_id, "cancelled": True, "status": state.status}))
    return 1 if failed else 0

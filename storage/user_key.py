"""This user's key: what lets a reader authenticate the records and kept files it wrote itself.

A record of verified parts, a kept ``replay_inputs`` file or a kept JSON of facts or constants lets a reader skip
work (hashing parts, computing the replay inputs) by believing what it says. A checksum such a file carries
itself proves nothing against someone who can write it: they recompute the checksum (docs/store.md, "Threat
model"). So each is authenticated with a keyed hash (HMAC-SHA256) under a key only this user can read: 32 random
bytes in ``<cache root>/user.key`` (:func:`storage.user_cache.cache_root`: the user's cache directory, never a
store), created mode 0600 on first use. What fails to authenticate -- another user's or machine's record line, a
line a co-writer appended, a kept file edited and renamed to its new hash -- is not believed: the part is verified
again, the kept file computed again. Deleting the key costs one re-verification of what was recorded, nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from storage.user_cache import cache_root

KEY_FILE = "user.key"
TAG_HEX = 32  # hex digits of a tag kept (128 bits)


def key_path() -> Path:
    return cache_root() / KEY_FILE


@functools.cache
def _key(path: Path) -> bytes:
    """The key at ``path``, made (0600, by an exclusive create: two processes agree on one) if it is missing."""
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode())
        finally:
            os.close(fd)
    return _read(path)


def _read(path: Path) -> bytes:
    data = path.read_bytes().strip()
    if len(data) < 64:  # being written by another process: a short read is not a key
        raise FileNotFoundError(path)
    return data


def user_key() -> bytes | None:
    """This user's key, or None when the cache directory cannot hold one (then nothing is ever believed: every
    record and kept file is checked again)."""
    try:
        return _key(key_path())
    except OSError:
        return None


def tag(data: bytes) -> str | None:
    """The keyed hash of ``data`` under this user's key (None: no key)."""
    key = user_key()
    if key is None:
        return None
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:TAG_HEX]


def authentic(data: bytes, claimed: object) -> bool:
    """Whether ``claimed`` is this user's tag of ``data``."""
    mine = tag(data)
    return mine is not None and isinstance(claimed, str) and hmac.compare_digest(mine, claimed)

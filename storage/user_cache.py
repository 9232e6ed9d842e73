"""This machine's folder for what it records about a store it reads: the user's cache directory, never the store.

A reader -- ``analysis.connect``, ``shp-query`` (``--verify`` too), a report, a sweep job's replay -- writes
nothing into the store it reads: the store may be a git checkout (``results/paper-local/store``), a read-only
mount, someone else's folder. What reading records (the parts it verified, the files it derived and keeps)
lives in ``<root>/stores/<identity>/``, where ``<root>`` is ``$SHP_RAY_CACHE``, else ``$XDG_CACHE_HOME/shp-ray``,
else ``~/.cache/shp-ray`` (the root ``scripts/build_llama_bin.sh`` keeps its binaries under). Only the generation
writer writes into a store's own ``_cache`` (:func:`storage.cache.default_cache_dir`: its response and judge
caches, the record of the parts it wrote, its locks).

The identity of a local store is this machine's name, its real path and the device and inode of its folder (a
store removed and made again at the same path is another store; a cache directory on a shared home folder keeps
each machine's apart); of a store on object storage, the endpoint and the URI
(:func:`remote_dir`, the folder that also holds such a store's writer caches). Each folder names its store in
``store.json``; a folder whose local store is gone from this machine is removed by :func:`prune_gone` (what it
held was derived).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from storage import objectstore

if TYPE_CHECKING:  # storage.parts imports the verified record, which imports this module: a type-only import back
    from storage.parts import Store

STORES = "stores"
ABOUT = "store.json"
_log = logging.getLogger("shp_ray.store")
_said: set[str] = set()  # remote stores whose folder was logged (once per process)
_pruned: set[str] = set()  # cache roots whose folders of gone stores this process already removed


def cache_root() -> Path:
    """``$SHP_RAY_CACHE``, else ``$XDG_CACHE_HOME/shp-ray``, else ``~/.cache/shp-ray``."""
    own = os.environ.get("SHP_RAY_CACHE")
    if own:
        return Path(own)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shp-ray"


def _identity(path: str) -> tuple[str, int, int] | None:
    """(real path, device, inode) of a local store's folder; None if it is gone."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return real, st.st_dev, st.st_ino


def remote_dir(uri: str) -> Path:
    """The folder on THIS machine for a remote store's side files (SQLite caches, the verified-parts
    record, generation locks, kept derived files), which cannot live in an object store: ``<root>/stores/<hash>``;
    the hash is of the endpoint and the URI, so two servers' ``s3://b/p`` differ."""
    key = hashlib.sha256(f"{objectstore.endpoint_shown()}|{uri.rstrip('/')}".encode()).hexdigest()[:16]
    folder = cache_root() / STORES / key
    if uri not in _said:
        _said.add(uri)
        _log.info(
            "store %s is on object storage: its response and judge caches, verified-parts record and generation "
            "locks are kept on this machine in %s (not shared with other machines)",
            uri, folder,
        )  # fmt: skip
    return folder


def reader_dir(store: Store) -> Path:
    """The folder of this machine where reading ``store`` records what it verified and derived."""
    if store.remote:
        return remote_dir(store.uri)
    ident = _identity(store.path)
    real, dev, ino = ident if ident is not None else (os.path.realpath(store.path), 0, 0)
    host = socket.gethostname()
    key = hashlib.sha256(f"local|{host}|{real}|{dev}:{ino}".encode()).hexdigest()[:16]
    folder = cache_root() / STORES / key
    about = folder / ABOUT
    if not about.exists():
        with contextlib.suppress(OSError):  # best effort: a folder without it is simply never pruned
            folder.mkdir(parents=True, exist_ok=True)
            tmp = about.with_name(f"{ABOUT}.{os.getpid()}.partial")
            tmp.write_text(json.dumps({"host": host, "path": real, "dev": dev, "ino": ino}))
            tmp.replace(about)
    return folder


def prune_gone() -> None:
    """Remove the folders of this machine's local stores that are gone (once per process and cache root):
    derived, never the only copy of anything. Called when something new is kept, so the folder cannot only grow."""
    stores = cache_root() / STORES
    if str(stores) in _pruned:
        return
    _pruned.add(str(stores))
    host = socket.gethostname()
    for about in stores.glob(f"*/{ABOUT}"):
        try:
            known = json.loads(about.read_text())
            was = (known["path"], known["dev"], known["ino"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours: left alone
        if known.get("host") == host and _identity(was[0]) != was:
            shutil.rmtree(about.parent, ignore_errors=True)

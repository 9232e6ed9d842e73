"""Why a store root could not be used, said before anything runs, in one line, within a bounded time.

Local: the root is a folder or can be made one, and an entry can be created in its nearest existing
ancestor. URI: the filesystem answers within the timeout, the bucket exists, the root is not a file
and an object can be written beside it (``s3://``: credentials and endpoint as :mod:`storage.objectstore`
reads them). A probe entry is created and removed: nothing is left behind, the root is not created.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

import pyarrow.fs as pafs

from shp_ray.redaction import redact_text
from storage import objectstore

PROBE_PREFIX = "_shp-probe-"
ROOT_CHECK_TIMEOUT_S = objectstore.CHECK_TIMEOUT_S


class StoreUnusable(ValueError):
    """A store root that cannot be used: the message (one line) says where and why, never a secret."""


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _nearest_existing(fs: pafs.FileSystem, path: str) -> tuple[str, pafs.FileInfo]:
    """The deepest of ``path`` and its ancestors that exists (what ``create_dir`` would write into)."""
    while True:
        info = fs.get_file_info(path)
        parent = path.rstrip("/").rpartition("/")[0]
        if info.type != pafs.FileType.NotFound or not parent or parent == path:
            return path, info
        path = parent


def _check_local(root: Path) -> None:
    # lexists: a dangling symlink would pass exists() and then fail on mkdir.
    here = root
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    if here != root and not here.is_dir():
        raise StoreUnusable(f"{here} is a file, not a folder, so {root} cannot be created under it")
    if here == root and not root.is_dir():
        raise StoreUnusable(f"{root} is a file, not a folder")
    # os.access misses read-only mounts for root and some ACLs; creating an entry does not.
    if not os.access(here, os.W_OK | os.X_OK):
        raise StoreUnusable(f"{here} is not writable by this user")
    probe = here / f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    try:
        probe.mkdir()
    except OSError as exc:
        why = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise StoreUnusable(f"cannot create a folder in {here}: {why}") from None
    probe.rmdir()


def _check_uri(uri: str) -> None:
    _check_fs(*pafs.FileSystem.from_uri(uri))


def _check_fs(fs: pafs.FileSystem, path: str) -> None:
    if isinstance(fs, pafs.LocalFileSystem):
        _check_local(Path(path))
        return
    if fs.type_name in ("s3", "gcs"):
        bucket = path.strip("/").split("/", 1)[0]
        if not bucket:
            raise StoreUnusable("the URI names no bucket")
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise StoreUnusable(f"bucket {bucket!r} does not exist (or these credentials cannot see it)")
    here, info = _nearest_existing(fs, path.rstrip("/"))
    if info.type == pafs.FileType.File:
        where = "it is a file" if here == path.rstrip("/") else f"{here!r} on its path is a file"
        raise StoreUnusable(f"{where}, not a folder")
    # A probe object, written and deleted in the nearest folder that exists. pyarrow re-creates the
    # (empty) marker of that folder on delete: it existed already, so no new folder shows anywhere.
    probe = f"{here}/{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    with fs.open_output_stream(probe) as out:
        out.write(b"")
    fs.delete_file(probe)


def check_root(root: str | Path, *, timeout_s: float = ROOT_CHECK_TIMEOUT_S) -> None:
    """Raise :class:`StoreUnusable` if a store at ``root`` could not be created or written.

    Local: the root is a folder or can be made one (no file on its path), and a folder can be created
    in its nearest existing ancestor. URI: the filesystem answers within ``timeout_s``, the bucket
    exists, the root is not a file and an object can be written beside it. Nothing is left behind
    (a probe entry is created and removed); the root itself is not created.
    """
    text = str(root)
    if "://" not in text:
        _check_local(Path(text).resolve())
        return
    shown = redact_text(text)
    if objectstore.is_object_store(text):
        try:
            fs, path = objectstore.filesystem(text)  # no credentials, secrets in the URI: refused before any call
            objectstore.bounded(lambda: _check_fs(fs, path), shown, timeout_s)
        except objectstore.ObjectStoreError as exc:
            raise StoreUnusable(str(exc)) from None
        return
    answered, failure = objectstore.call_within(lambda: _check_uri(text), timeout_s)
    if not answered:
        raise StoreUnusable(f"{shown}: no answer within {timeout_s:g} s (is the endpoint reachable?)")
    if isinstance(failure, StoreUnusable):
        raise StoreUnusable(f"{shown}: {failure}") from None
    if failure is not None:
        raise StoreUnusable(f"{shown}: {_one_line(str(failure).replace(text, shown))}") from None

"""Kept files: what a reader derived and keeps (``analysis.replay.derived``), each believed only after a check.

A kept file is derived, never the only copy of anything, but a later open believes it instead of the parts:
an edited value in it would change every result computed from it. A checksum it carried itself would not stop
that (whoever edits it recomputes the checksum), so each one carries a keyed hash under this user's key
(:mod:`storage.user_key`, kept outside every store) of its bytes, and of the key it was computed for, which
names every part it derives from by its content hash (:mod:`analysis.replay.derived`); it is checked before it
is read; one that fails is removed -- never read -- with one warning line, and the caller computes it again.

- A large file (a DuckDB database) is named ``<stem>.hmac-<32 hex>.<ext>``: the keyed hash of the sha256 of its
  bytes, taken when it was published. Hashing costs about 1.2 ms per MB (sha256, 0.35 s for 300 MB, the kept
  inputs of 1M trajectories), so it is not redone at every open: a file whose bytes matched is recorded in
  ``<folder>/verified.jsonl`` with its size, mtime and inode, each line with its keyed hash (a line this user's
  key does not authenticate is ignored), and believed while they are unchanged (the record of verified parts
  works so too, :mod:`storage.verified_record`). An edit changes the mtime; bit rot with the mtime restored is
  found by ``shp-query --verify --recheck``.
- A small JSON file carries its key and the keyed hash of its key and content inside (:func:`seal`), checked at
  every read.

Being used marks a file's access time (its mtime, in the record, is left alone): pruning keeps the most recently
used.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.user_key import authentic, tag

DERIVED_DIRNAME = "derived"  # the folder of a store's kept files, in this machine's folder for it (storage.user_cache)
HASH_HEX = 32  # digits of a kept file's keyed hash kept in its name
RECORD = "verified.jsonl"
CONSTANTS_DIRNAME = "constants"  # the folder, under the user's cache root, of values kept once per machine
_NAMED = re.compile(rf"\.hmac-([0-9a-f]{{{HASH_HEX}}})\.[^.]+$")
_log = logging.getLogger(__name__)
_warned: set[str] = set()


class KeptFileDamaged(ValueError):
    """A kept file that is not what was kept: the message says why."""


def digest_file(path: Path) -> str:
    """The keyed hash (this user's key) of the sha256 of the file's bytes ("" when there is no key: never matches)."""
    with open(path, "rb") as fh:
        return tag(hashlib.file_digest(fh, "sha256").digest()) or ""


def _sealed(key: str, payload: dict[str, Any]) -> str:
    return tag(json.dumps([key, payload], sort_keys=True).encode()) or ""


def seal(key: str, payload: dict[str, Any]) -> str:
    """``payload`` as the text of a kept JSON file: with the key it was computed for and the keyed hash of both."""
    return json.dumps({"key": key, "hmac": _sealed(key, payload), "payload": payload})


def unseal(text: str, key: str) -> dict[str, Any]:
    """The payload of a kept JSON file kept under ``key``, or :class:`KeptFileDamaged` saying why not."""
    try:
        kept = json.loads(text)
        payload, claimed, was = kept["payload"], kept["hmac"], kept["key"]
    except (ValueError, KeyError, TypeError):
        raise KeptFileDamaged("not a kept file (no key, keyed hash and payload)") from None
    if was != key:
        raise KeptFileDamaged(f"kept for key {was!r}, not {key!r}")
    if not authentic(json.dumps([key, payload], sort_keys=True).encode(), claimed):
        raise KeptFileDamaged(
            "its keyed hash does not match its content under this user's key (edited, or not kept here)"
        )
    return payload


@dataclass(frozen=True)
class KeptCheck:
    """One kept file as ``--verify`` saw it."""

    path: Path
    problem: str | None  # None: sound
    cached: bool = False  # believed from the record (unchanged since its bytes were hashed)


class KeptFiles:
    """The kept files of one folder: publish, find (checked), discard, prune."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.record = folder / RECORD

    # --- checksums -------------------------------------------------------------------------------

    def publish(self, tmp: Path, stem: str, ext: str) -> Path:
        """Hash the whole file ``tmp``, rename it to ``<stem>.hmac-<keyed hash>.<ext>`` and record it verified."""
        final = self.folder / f"{stem}.hmac-{digest_file(tmp)}.{ext}"
        os.replace(tmp, final)
        self._remember([final])
        return final

    def find(self, stem: str, ext: str) -> Path | None:
        """The newest sound file kept as ``stem`` (marked used), or None; one that fails is discarded."""
        found = []
        for path in self.folder.glob(f"{stem}.hmac-*.{ext}"):
            with contextlib.suppress(OSError):
                found.append((path.stat().st_mtime_ns, path))
        for _, path in sorted(found, reverse=True):
            check = self.check(path)
            if check.problem is None:
                self.mark_used(path)
                return path
            self.discard(path, check.problem)
        return None

    def check(self, path: Path, *, recheck: bool = False) -> KeptCheck:
        """Whether ``path`` holds the bytes its name records: hashed unless recorded unchanged (``recheck``: hashed)."""
        m = _NAMED.search(path.name)
        if m is None:
            return KeptCheck(path, "no keyed hash in its name (kept by an older version)")
        try:
            st = path.stat()
            if not recheck and self._load().get(path.name) == _stat(st):
                return KeptCheck(path, None, cached=True)
            actual = digest_file(path)
        except OSError as exc:
            return KeptCheck(path, f"unreadable: {exc}")
        if not hmac.compare_digest(actual, m.group(1)):
            return KeptCheck(
                path,
                f"keyed hash {actual or '(no key)'}, but its name records {m.group(1)} (changed since it was kept)",
            )
        self._remember([path])
        return KeptCheck(path, None)

    def discard(self, path: Path, why: str) -> None:
        """Remove a kept file that failed its check (it is computed again), saying so once."""
        if str(path) not in _warned:
            _warned.add(str(path))
            _log.warning("kept file %s failed its check (%s): discarded, not read; computing it again", path, why)
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)

    def check_all(self, *, recheck: bool = False) -> list[KeptCheck]:
        """Every kept file of the folder (``shp-query --verify``): the hash-named ones and the sealed JSON ones."""
        out = []
        for path in sorted(self.folder.glob("*")):
            temp = path.name.startswith((RECORD, "_tmp-")) or path.name.endswith(".partial")
            if temp or not path.is_file():  # the record (and its rewrite), temps
                continue
            if path.suffix == ".json":
                try:
                    unseal(path.read_text(encoding="utf-8"), path.stem.rsplit("-", 1)[-1])
                    out.append(KeptCheck(path, None))
                except (OSError, KeptFileDamaged) as exc:
                    out.append(KeptCheck(path, str(exc)))
            else:
                out.append(self.check(path, recheck=recheck))
        return out

    # --- use and pruning -------------------------------------------------------------------------

    @staticmethod
    def mark_used(path: Path) -> None:
        """Most recently used now (its access time; its mtime stays what the record holds)."""
        with contextlib.suppress(OSError):
            os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns))

    def prune(self, pattern: str, keep_files: int, keep_bytes: int) -> None:
        """Remove all but the most recently used files matching ``pattern`` (by count and by bytes)."""
        files = []
        for path in self.folder.glob(pattern):
            try:
                st = path.stat()
            except OSError:
                continue  # another process pruned it
            files.append((max(st.st_atime_ns, st.st_mtime_ns), st.st_size, path))
        files.sort(reverse=True)
        total = 0
        for i, (_, size, path) in enumerate(files):
            total += size
            if i > 0 and (i >= keep_files or total > keep_bytes):
                with contextlib.suppress(OSError):  # a file this process may not remove stays: pruning is best effort
                    path.unlink(missing_ok=True)

    # --- the record ------------------------------------------------------------------------------

    def _load(self) -> dict[str, tuple[int, int, int]]:
        out = {}
        try:
            lines = self.record.read_text().splitlines()
        except OSError:
            return {}
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError):  # a torn line: that file is hashed again
                e = json.loads(line)
                if authentic_entry(e):  # else written by no one holding this user's key: hashed again
                    out[e["name"]] = (e["size"], e["mtime_ns"], e["ino"])
        if len(lines) > 4 * len(out) + 64:  # lines of files long gone: keep those still here
            live = {n: s for n, s in out.items() if (self.folder / n).exists()}
            append_lines(self.record, (_line(n, s) for n, s in live.items()), replace=True)
        return out

    def _remember(self, paths: Iterable[Path]) -> None:
        lines = []
        for path in paths:
            with contextlib.suppress(OSError):
                lines.append(_line(path.name, _stat(path.stat())))
        append_lines(self.record, lines)


def _stat(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


def _line(name: str, stat: tuple[int, int, int]) -> dict[str, Any]:
    return signed({"name": name, "size": stat[0], "mtime_ns": stat[1], "ino": stat[2]})


def signed(entry: dict[str, Any]) -> dict[str, Any]:
    """A record line with its keyed hash (``hmac``) under this user's key."""
    body = {k: v for k, v in entry.items() if k != "hmac"}
    return {**body, "hmac": tag(json.dumps(body, sort_keys=True).encode())}


def authentic_entry(entry: object) -> bool:
    """Whether a record line carries this user's keyed hash of the rest of it."""
    if not isinstance(entry, dict):
        return False
    body = {k: v for k, v in entry.items() if k != "hmac"}
    return authentic(json.dumps(body, sort_keys=True).encode(), entry.get("hmac"))


def append_lines(path: Path, entries: Iterable[dict[str, Any]], *, replace: bool = False) -> None:
    """JSON lines appended in one ``write`` (O_APPEND: concurrent writers do not interleave), or the file replaced
    by them (``replace``: renamed over it whole); best effort, like every record it keeps."""
    data = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries).encode()
    if not data and not replace:
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if replace:
            tmp.write_bytes(data)
            tmp.replace(path)
            return
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:  # not remembered: checked again next time
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)

"""What opening a store computes once per set of parts: ``replay_inputs`` as a DuckDB database file, and the
facts connect() reads first (the trajectory check, the judge, where the signals come from, the deepest round ...).

Building ``replay_inputs`` (the stored signals joined with the judgments, one row per trajectory) was most of
what opening a store cost -- 0.8 s of 1.4 s at 100k trajectories -- and every ``shp-query`` process, sweep
job and report opened the same parts and built the same table again. Both are functions of the code that
computes them, of what the connection asks (judge, weights, scope) and of the parts they read. Part names
carry the sha256 of their bytes (:mod:`storage.parts`), so a key over

    the DuckDB version, :data:`FORMAT`, the source of the ``analysis`` package (its Python and its SQL) and
    of ``storage.schemas``,
    the statements or request, and the name and size of every part of every table

cannot go stale: a new, removed or rewritten part, another judge, weights, scope (``gen_id``, scenarios,
slice), another version of the code gives another key, and so a fresh computation. A hit attaches the file
read-only and reads its table in place (a view named ``replay_inputs``): nothing is copied or decoded, where
reading a Parquet copy back into a temp table took 0.3 s at 100k trajectories.

The files live with the store's other caches (``<root>/_cache/derived``; for a store on object storage, this
machine's folder for it): derived, never the only copy of anything; deleting them costs one computation.
The most recently used are kept (:data:`KEEP_FILES`, :data:`KEEP_BYTES`, :data:`KEEP_FACTS`). A store whose
folder cannot be written (a read-only mount) opens as before, with one warning: a hit is never required.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import duckdb

from analysis import sql
from storage import schemas
from storage.cache import default_cache_dir
from storage.parts import TEMP_GRACE_S, Store
from storage.schemas import TABLES

FORMAT = 2  # bump when what a file holds changes in a way the key cannot see
KEEP_FILES = 16  # replay_inputs files kept, most recently used first (one per judge x scope x part set)
KEEP_BYTES = 4 << 30  # ... and at most this much of them (the newest is always kept)
KEEP_FACTS = 64  # facts files kept (a few hundred bytes each)
DIRNAME = "derived"
_INPUTS, _FACTS = "replay_inputs-{}.duckdb", "facts-{}.json"
_log = logging.getLogger(__name__)
_warned: set[str] = set()


@cache
def _code_digest() -> str:
    """sha256 over the analysis package's source (Python and SQL) and the store's schemas: another version of
    either, another key."""
    root = Path(sql.__file__).parent.parent
    files = [*root.rglob("*.py"), *root.rglob("*.sql"), Path(schemas.__file__)]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def listing(store: Store) -> tuple[str, ...]:
    """Every part of every table, as path and size (a part's name carries its content's hash)."""
    return tuple(f"{info.path}:{info.size}" for table in sorted(TABLES) for info in store.part_infos(table))


class DerivedCache:
    """The derived files of one store, as one connection sees its parts: ask by key, get it or compute it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dir = default_cache_dir(store.uri) / DIRNAME
        self.parts = listing(store)

    def key(self, texts: Iterable[str]) -> str:
        """The key of what ``texts`` (statements, a request) compute over this connection's parts."""
        h = hashlib.sha256(f"{FORMAT}\0{duckdb.__version__}\0{_code_digest()}\0".encode())
        for text in (*texts, *self.parts):
            h.update(text.encode() + b"\0")
        return h.hexdigest()[:32]

    def _unchanged(self) -> bool:
        """No part arrived or left since the connection listed them: what it computed is what the key names."""
        return listing(self.store) == self.parts

    # --- replay_inputs ---------------------------------------------------------------------------

    def inputs(self, key: str) -> Path | None:
        """The stored replay_inputs under ``key`` (marked as used now), or None."""
        path = self.dir / _INPUTS.format(key)
        try:
            os.utime(path)  # most recently used: what pruning keeps
        except OSError:
            return None
        return path

    def attach_inputs(self, con: duckdb.DuckDBPyConnection, path: Path) -> bool:
        """Read replay_inputs from the kept file at ``path`` (attached read-only, a view over its table); False if
        the file is gone (another process pruned it since): the caller builds it after all."""
        try:
            con.execute(sql.query("kept_inputs", path=sql.quote(str(path))))
        except duckdb.IOException:
            return False
        return True

    def build_inputs(self, con: duckdb.DuckDBPyConnection, key: str, select: str) -> bool:
        """Compute replay_inputs (``select``) straight into a file kept under ``key``, and read it there (a view).

        Straight into the file: at 100k trajectories 1.0-1.2 s, where a temp table took 0.65 s and a copy of it
        0.5 s more.
        Published by rename, whole or not at all, and only if no part arrived or left meanwhile (else the file
        is this connection's alone: attached, then unlinked). False when the folder cannot take it (the caller
        builds a temp table instead): said once per folder for a file system refusal, silently for an error of
        the computation itself, which the caller's own build raises again.
        """
        name = _INPUTS.format(key)
        tmp = self.dir / f"_tmp-{uuid.uuid4().hex}-{name}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            con.execute(sql.query("keep_inputs", path=sql.quote(str(tmp)), select=select))
        except (OSError, duckdb.Error) as exc:
            con.execute(sql.query("keep_inputs_abandon"))
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError | duckdb.IOException | duckdb.PermissionException):
                self._cannot_keep(exc)
            return False
        final = self.dir / name
        if self._unchanged():
            try:
                os.replace(tmp, final)
            except OSError as exc:
                final = tmp
                self._cannot_keep(exc)
            self._prune(_INPUTS.format("*"), KEEP_FILES)
        else:
            final = tmp
        if not self.attach_inputs(con, final):
            return False
        if final == tmp:
            tmp.unlink(missing_ok=True)  # attached: readable until the connection closes, kept for no one else
        return True

    # --- facts -----------------------------------------------------------------------------------

    def remember(self, key: str, compute: Callable[[], dict]) -> dict:
        """The facts under ``key``: read back, or computed now (``compute``, which may raise) and kept."""
        path = self.dir / _FACTS.format(key)
        try:
            facts = json.loads(path.read_text(encoding="utf-8"))
            os.utime(path)
            return facts
        except (OSError, ValueError):
            pass  # none yet (or unreadable): compute
        facts = compute()
        if self._unchanged():
            text = json.dumps(facts, sort_keys=True)
            self._publish(path.name, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
            self._prune(_FACTS.format("*"), KEEP_FACTS)
        return facts

    # --- files -----------------------------------------------------------------------------------

    def _publish(self, name: str, write: Callable[[str], object]) -> None:
        """``write(tmp)`` then rename to ``name``: a reader sees the whole file or none."""
        tmp = self.dir / f"_tmp-{uuid.uuid4().hex}-{name}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            write(str(tmp))
            os.replace(tmp, self.dir / name)
        except (OSError, duckdb.Error) as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            self._cannot_keep(exc)

    def _cannot_keep(self, exc: BaseException) -> None:
        """Warn once per folder that it cannot be written: nothing is kept, everything still works."""
        if str(self.dir) not in _warned:
            _warned.add(str(self.dir))
            _log.warning(
                "cannot keep what opening %s computed in %s (%s): every connection computes it again",
                self.store.uri, self.dir, exc,
            )  # fmt: skip

    def _prune(self, pattern: str, keep_files: int) -> None:
        """Remove all but the most recently used files matching ``pattern`` (by count and by bytes)."""
        files = []
        for path in self.dir.glob(pattern):
            try:
                st = path.stat()
            except OSError:
                continue  # another process pruned it
            files.append((st.st_mtime, st.st_size, path))
        files.sort(reverse=True)
        for tmp in self.dir.glob("_tmp-*"):  # a killed writer's (a live one's is younger than this)
            with contextlib.suppress(OSError):
                if time.time() - tmp.stat().st_mtime > TEMP_GRACE_S:
                    tmp.unlink()
        total = 0
        for i, (_, size, path) in enumerate(files):
            total += size
            if i > 0 and (i >= keep_files or total > KEEP_BYTES):
                with contextlib.suppress(OSError):  # a file this process may not remove stays: pruning is best effort
                    path.unlink(missing_ok=True)

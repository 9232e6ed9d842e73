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

The files live in this machine's folder for the store (:func:`storage.user_cache.reader_dir`: the user's cache
directory, never the store, which a reader does not write): derived, never the only copy of anything; deleting
them costs one computation. The most recently used are kept (:data:`KEEP_FILES`, :data:`KEEP_BYTES`,
:data:`KEEP_FACTS`). A folder that cannot be written opens as before, with one warning: a hit is never required.

A kept file is believed only after a check (:mod:`storage.kept`): replay_inputs is named with the sha256 of its
bytes and holds the key it was computed for (its ``kept_key`` table), the facts carry their key and checksum.
One that fails is discarded -- never read -- with one warning line, and computed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import duckdb

from analysis import sql
from analysis.sql.code_digest import code_digest
from storage.kept import DERIVED_DIRNAME, KeptFileDamaged, KeptFiles, seal, unseal
from storage.parts import TEMP_GRACE_S, Store
from storage.schemas import TABLES
from storage.user_cache import prune_gone, reader_dir

FORMAT = 3  # bump when what a file holds changes in a way the key cannot see
KEEP_FILES = 16  # replay_inputs files kept, most recently used first (one per judge x scope x part set)
KEEP_BYTES = 4 << 30  # ... and at most this much of them (the newest is always kept)
KEEP_FACTS = 64  # facts files kept (a few hundred bytes each)
DIRNAME = DERIVED_DIRNAME
_INPUTS, _INPUTS_EXT, _FACTS = "replay_inputs-{}", "duckdb", "facts-{}.json"
_log = logging.getLogger(__name__)
_warned: set[str] = set()


def listing(store: Store) -> tuple[str, ...]:
    """Every part of every table, as path and size (a part's name carries its content's hash)."""
    return tuple(f"{info.path}:{info.size}" for table in sorted(TABLES) for info in store.part_infos(table))


class DerivedCache:
    """The derived files of one store, as one connection sees its parts: ask by key, get it or compute it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dir = reader_dir(store) / DIRNAME
        self.kept = KeptFiles(self.dir)
        self.parts = listing(store)

    def key(self, texts: Iterable[str]) -> str:
        """The key of what ``texts`` (statements, a request) compute over this connection's parts."""
        h = hashlib.sha256(f"{FORMAT}\0{duckdb.__version__}\0{code_digest()}\0".encode())
        for text in (*texts, *self.parts):
            h.update(text.encode() + b"\0")
        return h.hexdigest()[:32]

    def _unchanged(self) -> bool:
        """No part arrived or left since the connection listed them: what it computed is what the key names."""
        return listing(self.store) == self.parts

    # --- replay_inputs ---------------------------------------------------------------------------

    def inputs(self, key: str) -> Path | None:
        """The kept replay_inputs under ``key`` whose bytes are those kept (marked as used now), or None."""
        return self.kept.find(_INPUTS.format(key), _INPUTS_EXT)

    def attach_inputs(self, con: duckdb.DuckDBPyConnection, path: Path, key: str) -> bool:
        """Read replay_inputs from the kept file at ``path`` (attached read-only, a view over its table), if it
        holds the key it was asked by; False if not (discarded) or if the file is gone (another process pruned
        it since): the caller builds it after all."""
        try:
            con.execute(sql.query("kept_inputs", path=sql.quote(str(path))))
            kept = con.execute(sql.query("kept_inputs_key")).fetchall()
        except duckdb.Error as exc:
            con.execute(sql.query("kept_inputs_abandon"))
            if path.exists():
                self.kept.discard(path, f"cannot be read as kept inputs: {str(exc).splitlines()[0]}")
            return False
        if kept != [(key,)]:
            con.execute(sql.query("kept_inputs_abandon"))
            self.kept.discard(path, f"holds the inputs of key {kept[0][0] if kept else None!r}, not {key!r}")
            return False
        return True

    def build_inputs(self, con: duckdb.DuckDBPyConnection, key: str, select: str) -> bool:
        """Compute replay_inputs (``select``) straight into a file kept under ``key``, and read it there (a view).

        Straight into the file: at 100k trajectories 1.0-1.2 s, where a temp table took 0.65 s and a copy of it
        0.5 s more.
        Published by rename (named with the sha256 of its bytes, :mod:`storage.kept`), whole or not at all, and
        only if no part arrived or left meanwhile (else the file is this connection's alone: attached, then
        unlinked). False when the folder cannot take it (the caller builds a temp table instead): said once per
        folder for a file system refusal, silently for an error of the computation itself, which the caller's
        own build raises again.
        """
        stem = _INPUTS.format(key)
        tmp = self.dir / f"_tmp-{uuid.uuid4().hex}-{stem}.{_INPUTS_EXT}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            con.execute(sql.query("keep_inputs", path=sql.quote(str(tmp)), select=select, key=sql.quote(key)))
        except (OSError, duckdb.Error) as exc:
            con.execute(sql.query("keep_inputs_abandon"))
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError | duckdb.IOException | duckdb.PermissionException):
                self._cannot_keep(exc)
            return False
        final = tmp
        if self._unchanged():
            try:
                final = self.kept.publish(tmp, stem, _INPUTS_EXT)
            except OSError as exc:
                self._cannot_keep(exc)
            self._prune(f"{_INPUTS.format('*')}.{_INPUTS_EXT}", KEEP_FILES)
        attached = self.attach_inputs(con, final, key)
        if final == tmp:
            tmp.unlink(missing_ok=True)  # attached: readable until the connection closes, kept for no one else
        return attached

    # --- facts -----------------------------------------------------------------------------------

    def remember(self, key: str, compute: Callable[[], dict]) -> dict:
        """The facts under ``key``: read back (if they are what was kept under it), or computed now (``compute``,
        which may raise) and kept."""
        path = self.dir / _FACTS.format(key)
        try:
            facts = unseal(path.read_text(encoding="utf-8"), key)
            self.kept.mark_used(path)
            return facts
        except FileNotFoundError:
            pass  # none yet: compute
        except (OSError, KeptFileDamaged) as exc:
            self.kept.discard(path, str(exc))
        facts = compute()
        if self._unchanged():
            text = seal(key, facts)
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
        """Remove all but the most recently used files matching ``pattern``, a killed writer's temp files, and
        the folders of stores that are gone (:func:`storage.user_cache.prune_gone`)."""
        self.kept.prune(pattern, keep_files, KEEP_BYTES)
        for tmp in self.dir.glob("_tmp-*"):  # a killed writer's (a live one's is younger than this)
            with contextlib.suppress(OSError):
                if time.time() - tmp.stat().st_mtime > TEMP_GRACE_S:
                    tmp.unlink()
        prune_gone()

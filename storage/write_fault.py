"""A file of the store or a cache that could not be written (a full disk, a quota, a read-only remount).

Such a fault is the machine's, not a scenario's: the run stops with one line naming the path and the
error (:class:`WriteFailed`), and what it wrote before stays whole. Every writer of the store and of
the SQLite caches turns its OSError (SQLite says ``database or disk is full``) into this one error, so
the layers above need to recognise one type, however far it travelled (a Ray actor's error arrives
wrapped: :func:`write_failure` finds it in the chain).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL = "database or disk is full"
_SQLITE_IO = ("disk i/o error", "unable to open database file", "readonly database")


class WriteFailed(RuntimeError):
    """``path`` could not be written; ``reason`` is the error in words ("no space left on device").

    Built from two strings (its pickle is its args), so it crosses a Ray actor boundary intact.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path, self.reason = path, reason

    @property
    def no_space(self) -> bool:
        return self.reason == os.strerror(errno.ENOSPC).lower() or self.reason == os.strerror(errno.EDQUOT).lower()

    @property
    def advice(self) -> str:
        return "free space and rerun" if self.no_space else "fix it and rerun"

    def __str__(self) -> str:
        return f"{self.reason} writing {self.path}"


def reason_of(exc: BaseException) -> str:
    """An OSError's (or SQLite's) error in lower-case words, without the path it may repeat."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code:
        return os.strerror(code).lower()
    text = str(exc)
    if _SQLITE_FULL in text.lower():
        return os.strerror(errno.ENOSPC).lower()
    if "[errno 28]" in text.lower():  # pyarrow's own IOError: the errno only in its text
        return os.strerror(errno.ENOSPC).lower()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def is_write_fault(exc: BaseException) -> bool:
    """An OSError, or a SQLite error that is the disk's (full, I/O, read-only), not the statement's."""
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return _SQLITE_FULL in text or any(s in text for s in _SQLITE_IO)
    return False


@contextmanager
def writing(path: object) -> Iterator[None]:
    """Turn a write fault inside the block into :class:`WriteFailed` naming ``path``."""
    try:
        yield
    except WriteFailed:
        raise
    except (OSError, sqlite3.OperationalError) as exc:
        if not is_write_fault(exc):
            raise
        reason = reason_of(exc)
        if isinstance(exc, sqlite3.OperationalError) and disk_full(path):
            reason = os.strerror(errno.ENOSPC).lower()  # SQLite's shared memory on a full tmpfs: "disk I/O error"
        # Drop the failed writer's frames now (pyarrow's wrapper of a Python file among them): left to the
        # garbage collector, its C++ destructor ran inside a later ast.parse and broke it (CPython 3.11.7).
        exc.__traceback__ = None
        raise WriteFailed(str(path), reason) from None


def disk_full(path: object) -> bool:
    """No free block left on the filesystem of ``path`` (its nearest existing folder)."""
    folder = Path(str(path))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def write_failure(exc: BaseException | None) -> WriteFailed | None:
    """The :class:`WriteFailed` that ``exc`` is or wraps (a Ray task error's ``cause``, ``__cause__``), or None."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, WriteFailed):
            return WriteFailed(exc.path, exc.reason)  # a plain one: a Ray error class prints its traceback
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE and exc.filename:  # a writer not ours (a report)
            return WriteFailed(str(exc.filename), reason_of(exc))
        exc = getattr(exc, "cause", None) or exc.__cause__ or exc.__context__
        seen += 1
    return None

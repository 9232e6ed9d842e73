"""The wire between the verifier and the candidate's process (docs/sandbox.md): plain data to bytes and back,
and messages on pipes. :func:`decode` builds nothing but ``None``, bools, ints, floats (``nan``, ``inf`` and
``-0.0`` exactly: ``float.hex``), complex numbers, strings (lone surrogates too), bytes, and lists, tuples,
sets, frozensets and dicts of them: whatever bytes the candidate's process sends, the tests get plain data or
a ValueError, never an object of the candidate's. Ints are sent in hex (linear both ways, however long).

Runs inside the sandbox: the harness sends this file's text ahead of ``verifier.py``'s, so it imports only
what a bare interpreter has loaded (no json: it imports ``re``, which costs every run milliseconds).
"""

import os
import select
import time

SMALL_INT = 1 << 62  # ints within this are sent in decimal, the rest in hex
MAX_MESSAGE = 16 << 20  # a message larger than this is refused, not read
MAX_DEPTH = 100  # nesting of one value
FLOAT_HEX, COMPLEX = float.hex, complex
SEQUENCES: dict[type, bytes] = {list: b"l", tuple: b"t", set: b"S", frozenset: b"R"}
BUILD = {b"l": list, b"t": tuple, b"S": set, b"R": frozenset}


class NotPlain(Exception):
    """A value that is not plain data (and so is no answer)."""


class Alarm(BaseException):
    """A deadline passed while waiting for a message."""


def encode(value) -> bytes:
    out: list[bytes] = []
    _put(value, out, 0)
    return b"".join(out)


def _put(value, out: list, depth: int) -> None:
    kind = type(value)
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deeply")
    if value is None or value is True or value is False:
        out.append(b"N" if value is None else b"T" if value else b"F")
    elif kind is int:
        out.append(b"i%d;" % value if -SMALL_INT < value < SMALL_INT else b"x" + format(value, "x").encode() + b";")
    elif kind is float:
        out.append(b"f" + FLOAT_HEX(value).encode() + b";")
    elif kind is complex:
        out.append(b"c" + FLOAT_HEX(value.real).encode() + b";" + FLOAT_HEX(value.imag).encode() + b";")
    elif kind is str or kind is bytes:
        data = value.encode("utf-8", "surrogatepass") if kind is str else value
        out.append(b"%s%d:" % (b"s" if kind is str else b"b", len(data)) + data)
    elif kind in SEQUENCES:
        out.append(b"%s%d;" % (SEQUENCES[kind], len(value)))
        for item in value:
            _put(item, out, depth + 1)
    elif isinstance(value, dict) and (kind is dict or _standard(kind)):
        out.append(b"d%d;" % len(value))
        for k, v in dict.items(value):
            _put(k, out, depth + 1)
            _put(v, out, depth + 1)
    else:
        raise NotPlain(f"returned a {kind.__name__}: only plain data counts")


def _standard(kind: type) -> bool:
    """A dict subclass of the standard library (``Counter``, ``OrderedDict``, ``defaultdict``): sent as a dict."""
    return kind.__module__ == "collections" and kind.__name__ in ("Counter", "OrderedDict", "defaultdict")


def decode(data: bytes):
    """The value ``data`` encodes; ValueError for anything else (a truncated, padded or unknown message)."""
    try:
        value, end = _take(data, 0, 0)
    except (IndexError, TypeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"not plain data ({type(exc).__name__})") from None
    except ValueError as exc:  # a bad number or text (int, float.fromhex, utf-8), or one of _take's own
        raise ValueError(str(exc) if str(exc).startswith("not plain") else f"not plain data ({exc})"[:200]) from None
    if end != len(data):
        raise ValueError("not plain data (trailing bytes)")
    return value


def _take(data: bytes, at: int, depth: int):
    if depth > MAX_DEPTH:
        raise ValueError("not plain data (nested too deeply)")
    tag = data[at : at + 1]
    if tag in (b"N", b"T", b"F"):
        return (None if tag == b"N" else tag == b"T"), at + 1
    if tag in (b"i", b"x", b"f"):
        end = data.index(b";", at)
        if tag == b"i" and end - at > 21:  # decimal only within SMALL_INT (int() of long digits is quadratic)
            raise ValueError("not plain data (a long decimal int)")
        text = data[at + 1 : end].decode("ascii")
        return (int(text) if tag == b"i" else int(text, 16) if tag == b"x" else float.fromhex(text)), end + 1
    if tag == b"c":
        mid = data.index(b";", at)
        end = data.index(b";", mid + 1)
        real, imag = data[at + 1 : mid].decode("ascii"), data[mid + 1 : end].decode("ascii")
        return COMPLEX(float.fromhex(real), float.fromhex(imag)), end + 1
    if tag in (b"s", b"b"):
        colon = data.index(b":", at)
        size = int(data[at + 1 : colon].decode("ascii"))
        chunk = data[colon + 1 : colon + 1 + size]
        if size < 0 or len(chunk) != size:
            raise ValueError("not plain data (a truncated string)")
        return (chunk.decode("utf-8", "surrogatepass") if tag == b"s" else bytes(chunk)), colon + 1 + size
    if tag in BUILD or tag == b"d":
        end = data.index(b";", at)
        count, at, items = int(data[at + 1 : end].decode("ascii")), end + 1, []
        if count < 0 or count > len(data):
            raise ValueError("not plain data (a bad length)")
        for _ in range(count * 2 if tag == b"d" else count):
            item, at = _take(data, at, depth + 1)
            items.append(item)
        if tag == b"d":
            return dict(zip(items[::2], items[1::2], strict=True)), at
        return BUILD[tag](items), at
    raise ValueError(f"not plain data (tag {tag!r})")


# ---- pipes: one message is its length, a newline, its bytes


def send(fd: int, payload: bytes) -> None:
    send_all(fd, b"%d\n" % len(payload) + payload)


def send_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def receive(fd: int, deadline: float | None = None) -> bytes | None:
    """One message, or None at the end of the pipe; Alarm past ``deadline``."""
    head = b""
    while not head.endswith(b"\n"):
        chunk = _read(fd, 1, deadline)
        if not chunk or len(head) > 12:
            return None
        head += chunk
    size = int(head)
    if not 0 <= size <= MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes, more than {MAX_MESSAGE}")
    parts, left = [], size
    while left:
        chunk = _read(fd, min(left, 1 << 20), deadline)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _read(fd: int, size: int, deadline: float | None) -> bytes:
    if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        raise Alarm("example time limit")
    return os.read(fd, size)

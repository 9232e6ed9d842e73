"""The wire between the verifier and the candidate's process (shp_ray/sandbox/wire.py): plain data crosses
exactly, and whatever bytes the candidate's process sends decode to plain data or a ValueError, never to an
object of another kind. Pure functions: no sandbox run here (tests/test_sandbox_adversarial.py runs them)."""

from __future__ import annotations

import math
import os

import pytest

from shp_ray.sandbox.wire import MAX_DEPTH, MAX_MESSAGE, NotPlain, decode, encode, receive, send

PLAIN = [
    None, True, False, 0, -5, 1 << 62, -(1 << 200), 7**400, 1.5, -0.0, math.inf, -math.inf, 1e-310, 2 - 3j,
    "", "é\ud800\x00", b"", b"\x00\xff", [], (), set(), frozenset(), [1, (2, "3")], {1, 2.5}, frozenset({"a"}),
    {(1, "x"): [None], "k": {"y": b"z"}}, [[[]]],
]  # fmt: skip


@pytest.mark.parametrize("value", PLAIN, ids=[repr(v)[:24] for v in PLAIN])
def test_plain_data_crosses_with_its_type_and_value(value):
    got = decode(encode(value))
    assert type(got) is type(value) and got == value
    if type(value) is float and value == 0:
        assert math.copysign(1.0, got) == math.copysign(1.0, value)


def test_nan_crosses_as_nan():
    got = decode(encode([math.nan, complex(math.nan, -0.0)]))
    assert math.isnan(got[0]) and math.isnan(got[1].real) and math.copysign(1.0, got[1].imag) == -1.0


def test_standard_dict_subclasses_cross_as_dicts_and_nothing_else_crosses():
    from collections import Counter, OrderedDict, defaultdict

    for value in (Counter("aab"), OrderedDict(a=1), defaultdict(list, a=[1])):
        got = decode(encode(value))
        assert type(got) is dict and got == dict(value)

    class Mine(int):
        pass

    for value in (Mine(3), lambda: 3, object(), iter([]), range(3), [1, {2: len}], ...):
        with pytest.raises(NotPlain, match="only plain data counts"):
            encode(value)
    deep: list = []
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(NotPlain, match="nested too deeply"):
        encode(deep)


@pytest.mark.parametrize(
    "data",
    [b"", b"Q", b"N ", b"l2;i1;", b"i1;x", b"s5:ab", b"l-1;", b"l99999999;", b"S1;l0;", b"d1;l0;i1;",
     b"i" + b"9" * 40 + b";", b"fzz;", b"x1g;", b"s1:\xff", b"l1;" * (MAX_DEPTH + 2) + b"N"],
    ids=["empty", "unknown-tag", "trailing", "truncated-list", "trailing-tag", "short-string", "negative-count",
         "huge-count", "unhashable-set", "unhashable-key", "long-decimal", "bad-float", "bad-hex", "bad-utf8",
         "too-deep"],
)  # fmt: skip
def test_bytes_that_are_not_an_encoding_are_refused(data):
    with pytest.raises(ValueError, match="not plain data"):
        decode(data)


def test_messages_cross_a_pipe_and_an_oversized_one_is_refused_unread():
    r, w = os.pipe()
    try:
        send(w, b"hello")
        assert receive(r) == b"hello"
        os.write(w, b"%d\n" % (MAX_MESSAGE + 1))
        with pytest.raises(ValueError, match="more than"):
            receive(r)
    finally:
        os.close(w)
    try:
        assert receive(r) is None  # the end of the pipe
    finally:
        os.close(r)

"""The write barrier of ``shp-query``: a statement runs only if DuckDB's own parse says it is exactly one query.

    check_read_only(con, "SELECT 1")            # ["SELECT 1"]
    check_read_only(con, "COPY t TO 'x.csv'")   # ReadOnlyError: COPY statements are refused ...

What a query may read is limited by the connection itself (:func:`analysis.replay.sandbox.lock_down`).
"""

from __future__ import annotations

import contextlib

import duckdb

# The statement types shp-query runs: a query (SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW and
# SUMMARIZE all parse as SELECT). EXPLAIN is not in it: it is accepted only around a statement that is
# itself one of these (see check_read_only), since EXPLAIN ANALYZE runs what it explains.
ALLOWED = frozenset({duckdb.StatementType.SELECT})
_EXPLAIN_ANALYZE = ("ANALYZE", "ANALYSE")


class ReadOnlyError(ValueError):
    """A statement that could change something; shp-query runs queries only."""


def _shown(query: str) -> str:
    return repr(" ".join(query.split())[:80])


def _parse(con: duckdb.DuckDBPyConnection, text: str) -> list[tuple[duckdb.StatementType, str]]:
    """(type, text) of each statement of ``text``, as DuckDB's parser splits and types them."""
    out = []
    for stmt in con.extract_statements(text):
        try:
            kind = stmt.type
        except ValueError:  # a type the Python binding cannot name (UPDATE EXTENSIONS): never a query
            raise ReadOnlyError(
                f"shp-query is read-only: a statement of a type it does not know is refused: {_shown(stmt.query)}"
            ) from None
        out.append((kind, stmt.query))
    return out


def _kind(kind: duckdb.StatementType) -> str:
    return str(kind).rsplit(".", 1)[-1]


def _explained(query: str) -> list[str]:
    """What an EXPLAIN statement may explain: the text after ``EXPLAIN [ANALYZE]``, and after a
    following ``( ... )`` group too (the group is options, or the start of the statement).

    DuckDB's own tokenizer finds the keywords (comments and string literals are tokens of their own,
    so a parenthesis inside them is never counted). The statement DuckDB explains is one of these
    texts, so a caller that accepts only when every candidate that parses is a query cannot be fooled.
    """
    every = duckdb.tokenize(query)
    ends = [pos for pos, _ in every[1:]] + [len(query)]
    spans = [(pos, kind, query[pos:end].strip()) for (pos, kind), end in zip(every, ends, strict=True)]
    spans = [s for s in spans if s[1] != duckdb.token_type.comment]
    tokens, words = [(pos, kind) for pos, kind, _ in spans], [word for _, _, word in spans]
    i = 1  # tokens[0] is EXPLAIN
    if i < len(words) and words[i].upper() in _EXPLAIN_ANALYZE:
        i += 1
    candidates = [query[tokens[i][0] :]] if i < len(tokens) else []
    if i < len(tokens) and tokens[i][1] == duckdb.token_type.operator and words[i].startswith("("):
        depth = 0
        for j in range(i, len(tokens)):
            if tokens[j][1] == duckdb.token_type.operator:
                depth += words[j].count("(") - words[j].count(")")
                if depth <= 0:
                    if j + 1 < len(tokens):
                        candidates.append(query[tokens[j + 1][0] :])
                    break
    return candidates


def _check_explain(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Accept ``EXPLAIN [ANALYZE] [(options)] <query>`` only: refuse unless every reading of the
    explained text that DuckDB can parse is exactly one statement of an ALLOWED type."""
    parsed = 0
    for inner in _explained(query):
        try:
            stmts = _parse(con, inner)
        except duckdb.ParserException:
            continue  # not the explained statement (e.g. the options group read as a statement)
        if not stmts:
            continue  # only a ';' after a parenthesised query: not a statement
        if len(stmts) != 1 or stmts[0][0] not in ALLOWED:
            what = "several statements" if len(stmts) != 1 else _kind(stmts[0][0])
            raise ReadOnlyError(
                f"shp-query is read-only: EXPLAIN is accepted only around a query, not {what} "
                f"(EXPLAIN ANALYZE runs what it explains): {_shown(query)}"
            )
        parsed += 1
    if not parsed:
        raise ReadOnlyError(f"shp-query is read-only: cannot tell what this EXPLAIN explains: {_shown(query)}")


def check_read_only(con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
    """``text`` as a list of exactly one statement, or ReadOnlyError saying why it is refused.

    Checked on DuckDB's own parse (``extract_statements``), never by matching strings:

    - exactly one statement (``SELECT 1; SELECT 2`` is refused: one query at a time);
    - of type SELECT (SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE);
    - or EXPLAIN / EXPLAIN ANALYZE whose explained statement is itself such a query: the text after
      ``EXPLAIN [ANALYZE] [(options)]`` is parsed again and must be one SELECT. EXPLAIN ANALYZE of a
      query is allowed (it runs that query, nothing more); EXPLAIN [ANALYZE] COPY ... is refused.

    Everything else (COPY, EXPORT, ATTACH, DETACH, INSERT, CREATE, DROP, SET, RESET, PRAGMA, CALL,
    INSTALL, LOAD, PREPARE, EXECUTE, PIVOT ..., statement types unknown to the binding) is refused before it
    runs. This is the write barrier; what a query may read is limited by the connection itself (see
    ``analysis.replay.sandbox.lock_down``: only the store's table folders, no configuration change).
    """
    stmts = _parse(con, text)
    if not stmts:
        raise ReadOnlyError("shp-query is read-only: no SQL statement given")
    if len(stmts) > 1:
        raise ReadOnlyError(
            f"shp-query is read-only and runs one query at a time: {len(stmts)} statements given "
            f"({', '.join(_shown(q) for _, q in stmts[:3])}{', ...' if len(stmts) > 3 else ''})"
        )
    kind, query = stmts[0]
    if kind == duckdb.StatementType.EXPLAIN:
        _check_explain(con, query)
    elif kind not in ALLOWED:
        raise ReadOnlyError(
            f"shp-query is read-only: {_kind(kind)} statements are refused (the store is never modified): "
            f"{_shown(query)}"
        )
    return [query]


def refuse_early(text: str) -> None:
    """ReadOnlyError if ``text`` is refused, said before the store is opened (opening binds every view, ~1-2 s):
    DuckDB's parser on a scratch connection. SQL it cannot parse is said by the store's connection (exit 1)."""
    with duckdb.connect(":memory:") as scratch, contextlib.suppress(duckdb.Error):
        check_read_only(scratch, text)

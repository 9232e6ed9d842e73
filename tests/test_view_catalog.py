"""The views are declared once (analysis.replay.catalog): each builds alone, with only the views it declares it
needs, on an empty store, and the build order is derived from the declarations."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pytest

from analysis import sql
from analysis.replay import catalog
from analysis.replay.policy_table import default_policies
from analysis.replay.sandbox import new_connection
from analysis.replay.scope import ReplayScope
from analysis.replay.sources import TableSources
from analysis.replay.views import COMPUTED, MIXED, STORED, StoreFacts
from storage.parts import Store
from storage.schemas import EMBEDDING_DIM

# where round_signals reads the per-round signals: every way a store can hold them
FACTS = {
    "computed": StoreFacts(None, None, EMBEDDING_DIM, COMPUTED, -1, 1, fill_calls=False, batch=False),
    "stored": StoreFacts(None, None, EMBEDDING_DIM, STORED, 0, 1, fill_calls=False, batch=True),
    "mixed": StoreFacts(None, None, EMBEDDING_DIM, MIXED, 3, 2, fill_calls=True, batch=False),
}


SCRIPTS = {"tost_plan": "tost_n_table"}  # a script's table (its macros beside it), where not its own name


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store(tmp_path_factory.mktemp("empty-store"))


def _build(store: Store, facts: StoreFacts) -> catalog.Build:
    scope = ReplayScope(store, policies=default_policies()).resolved()
    return catalog.Build.of_store(TableSources(store), scope, facts, catalog.BuildOptions())


def _relation_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.execute(sql.query("relation_names")).fetchall()}


@pytest.mark.parametrize("facts", FACTS, ids=str)
@pytest.mark.parametrize("name", catalog.NAMES)
def test_every_view_builds_alone_on_an_empty_store(empty_store: Store, name: str, facts: str) -> None:
    """Only the view and what it declares it needs, each bound as it is created: a view that reads a relation it
    does not declare fails here (DuckDB binds a view when it is created, and again when it is read)."""
    build = _build(empty_store, FACTS[facts])
    con = new_connection()
    try:
        for stmt in catalog.statements(build, catalog.closure([name])):
            con.execute(stmt)
        view = next(v for v in catalog.VIEWS if v.name == name)
        if view.statements(build):  # signal_status exists only where the signals are mixed
            relation = SCRIPTS.get(name, name)
            assert relation in _relation_names(con)
            assert con.execute(f"SELECT * FROM {relation} LIMIT 0").description  # read: bound again, has columns
    finally:
        con.close()


def test_declarations_are_sound() -> None:
    names = catalog.NAMES
    assert len(set(names)) == len(names), "a view declared twice"
    unknown = {(v.name, n) for v in catalog.VIEWS for n in v.needs if n not in names}
    assert not unknown, f"views that need an undeclared view: {sorted(unknown)}"
    built: set[str] = set()
    for view in catalog.order():
        assert set(view.needs) <= built, f"{view.name} built before {set(view.needs) - built}"
        built.add(view.name)


def test_a_new_view_is_one_declaration_wherever_it_is_written(empty_store: Store) -> None:
    """Declared first, it is still built after what it needs; on a connection it reads like any other view."""
    late = catalog.View("policy_count", ("policy_summary",), make=lambda b: "SELECT count(*) AS n FROM policy_summary")
    views = [late, *catalog.VIEWS]
    ordered = [v.name for v in catalog.order(views)]
    assert ordered.index("policy_count") > ordered.index("policy_summary")
    con = new_connection()
    try:
        for stmt in catalog.statements(
            _build(empty_store, FACTS["computed"]), catalog.closure(["policy_count"], views)
        ):
            con.execute(stmt)
        assert con.execute("SELECT n FROM policy_count").fetchone() == (0,)
    finally:
        con.close()


def test_views_that_need_each_other_are_refused() -> None:
    a = catalog.View("a", ("b",), make=lambda b: "SELECT 1")
    b = catalog.View("b", ("a",), make=lambda b: "SELECT 1")
    with pytest.raises(ValueError, match=r"need each other"):
        catalog.order([a, b])


def test_the_family_views_only_with_families(empty_store: Store) -> None:
    build = _build(empty_store, FACTS["computed"])
    without = replace(build, options=catalog.BuildOptions(with_families=False))
    assert any("family_inputs" in s for s in catalog.statements(build))
    assert not any("family_inputs" in s for s in catalog.statements(without))


def test_the_over_signals_views_read_no_store() -> None:
    """connect_signals builds the store's own declarations over given rows: no view of its reads a store."""
    from analysis.replay import signals

    views = signals._views(("policy_summary",))
    assert "policy_summary" in [v.name for v in views]
    build = signals._build(2, 0.02)
    assert all(v.statements(build) for v in views)  # none asked for sources or scope (they raise)
    with pytest.raises(ValueError, match="given signals"):
        _ = build.sources

"""analysis.sql: every DuckDB statement is a named file in its owner's folder, read through one loader that refuses
mistakes."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from analysis import sql
from analysis.replay import catalog

ROOT = Path(__file__).resolve().parents[1]
CATALOG = Path("analysis/replay/catalog.py")  # the views' declarations (analysis.replay.catalog)
CALLERS = ("analysis", "shp_ray", "sweeps", "bench", "exporter", "storage", "conf", "hydra_plugins")


def test_an_unknown_name_is_refused_and_the_known_ones_are_listed() -> None:
    with pytest.raises(sql.UnknownQuery, match=r"no SQL named 'no_such'.*known: .*report_best_policy"):
        sql.query("no_such")
    for bad in ("../pyproject", "lock_down.sql", "Report_summary", ""):
        with pytest.raises(sql.UnknownQuery):
            sql.query(bad)


def test_a_template_takes_exactly_its_placeholders() -> None:
    assert sql.query("bench_signals", columns="gen_id, round").startswith("SELECT gen_id, round FROM rounds")
    with pytest.raises(TypeError, match=r"takes \['columns'\], given none"):
        sql.query("bench_signals")
    with pytest.raises(TypeError, match="given"):
        sql.query("bench_signals", columns="x", extra="y")
    with pytest.raises(TypeError, match="no parameters"):
        sql.query("report_summary", columns="x")


def test_the_leading_comment_is_documentation_and_a_bare_dollar_stays() -> None:
    text = sql.query("report_best_policy")
    assert text.startswith("SELECT ") and "--" not in text  # printed in the report as is
    assert "'$.gen_id_parts.provider_kind'" in sql.query("report_generations")  # a JSON path, no placeholder


def _query_names(path: Path) -> tuple[list[tuple[str, int]], list[int]]:
    """The names a module passes to ``analysis.sql.query`` (with their lines), and the lines of calls whose
    name is no literal. Read from the syntax tree: ``sql.query(...)`` after ``from analysis import sql`` (any
    alias), ``query(...)`` after ``from analysis.sql import query`` or inside analysis/sql/__init__.py."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules, functions = set(), {"query"} if path == ROOT / "analysis" / "sql" / "__init__.py" else set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "analysis":
            modules |= {a.asname or a.name for a in node.names if a.name == "sql"}
        elif isinstance(node, ast.ImportFrom) and node.module == "analysis.sql":
            functions |= {a.asname or a.name for a in node.names if a.name == "query"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "analysis.sql" and a.asname}
    named, dynamic = [], []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        by_module = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules
        if (isinstance(f, ast.Name) and f.id in functions) or (by_module and f.attr == "query"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                named.append((arg.value, node.lineno))
            else:
                dynamic.append(node.lineno)
    return named, dynamic


def _callers() -> dict[Path, tuple[list[tuple[str, int]], list[int]]]:
    return {path: _query_names(path) for pkg in CALLERS for path in sorted((ROOT / pkg).rglob("*.py"))}


def test_every_named_statement_exists_and_every_file_has_a_caller() -> None:
    """A misspelt ``sql.query("name")`` fails here, not at run time; a file no code reads is dead."""
    known, used, missing, dynamic = set(sql.names()), set(), [], []
    for path, (named, lines) in _callers().items():
        where = path.relative_to(ROOT)
        missing += [f"{where}:{line}: sql.query({name!r})" for name, line in named if name not in known]
        dynamic += [f"{where}:{line}" for line in lines if where != CATALOG or len(lines) > 1]
        used |= {name for name, _ in named}
    # a view declared without a statement of its own reads the file of its name (View.statements: the one call
    # that names no literal); its declaration is the literal
    plain = [v.name for v in catalog.VIEWS if v.make is None and v.script is None]
    missing += [f"{CATALOG}: View({name!r}) has no {name}.sql" for name in plain if name not in known]
    used |= set(plain)
    assert not missing, "names without a file in analysis/sql:\n" + "\n".join(missing)
    assert not dynamic, "name the statement by a literal (this test checks it):\n" + "\n".join(dynamic)
    unused = sorted(known - used)
    assert not unused, f"files in analysis/sql no code reads: {unused}"


# The owner folders of analysis/sql, each with the code that owns it (analysis.sql's builders make the replay's views)
# and its rank: a statement is read by its owner or by code above it, never from below (ARCHITECTURE.md).
OWNER_CODE = {
    "replay": (("analysis/replay", "analysis/sql"), 0),
    "stats": (("analysis/stats",), 1),
    "report": (("analysis/report",), 2),
    "query": (("analysis/query",), 2),
    "sweeps": (("sweeps",), 3),
    "bench": (("bench",), 3),
}


def _owner_of(path: Path) -> str | None:
    where = path.relative_to(ROOT).as_posix()
    return next((o for o, (dirs, _) in OWNER_CODE.items() if any(where.startswith(d + "/") for d in dirs)), None)


def test_every_statement_lives_in_its_owners_folder() -> None:
    """sweep_* beside the sweeps' own, bench_* beside the benchmarks', the rest in the room that reads them: a
    statement's folder is its reader's, or the room below every reader's (one name, one file, across folders)."""
    assert set(sql.OWNERS) == set(OWNER_CODE)
    base = ROOT / "analysis" / "sql"
    folders = {f.stem: f.relative_to(base).parts[0] for f in base.glob("*/**/*.sql")}
    assert sorted(folders) == sql.names(), "a name in two owners' folders, or a .sql file outside them"
    wrong = []
    for path, (named, _) in _callers().items():
        reader = _owner_of(path)
        for name, line in named:
            folder = folders.get(name)
            if folder is None or reader == folder:
                continue
            if reader is None or OWNER_CODE[reader][1] <= OWNER_CODE[folder][1]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: reads {folder}/{name}.sql")
    assert not wrong, "statements read from another owner's folder (move the file to its owner):\n" + "\n".join(wrong)


def test_the_name_check_reads_every_form_of_call(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from analysis import sql as s\nfrom analysis.sql import query as q\n"
        "s.query('a')\nq(\n    'b', x=1)\ns.query(name)\nother.query('c')\n"
    )
    assert _query_names(src) == ([("a", 3), ("b", 4)], [6])


def test_an_installed_package_ships_the_files() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = conf["tool"]["setuptools"]["package-data"]["analysis.sql"]
    base = ROOT / "analysis" / "sql"
    unshipped = set(base.rglob("*.sql")).difference(*(base.glob(g) for g in shipped))  # setuptools globs alike
    assert not unshipped, f"package-data {shipped} leaves out {unshipped}"

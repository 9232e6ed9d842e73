"""analysis.sql: every DuckDB statement is a named file, read through one loader that refuses mistakes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from analysis import sql

ROOT = Path(__file__).resolve().parents[1]
CALLERS = ("analysis", "shp_ray", "sweeps", "storage", "conf")
_CALL = re.compile(r"""sql\.query\(\s*["']([a-z0-9_]+)["']""")  # a caller: sql.query("name", ...)
_BUILDER_CALL = re.compile(r"""\bquery\(\s*["']([a-z0-9_]+)["']""")  # inside analysis/sql/__init__.py


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


def test_every_named_statement_exists_and_every_file_is_used() -> None:
    used = {
        name
        for pkg in CALLERS
        for path in (ROOT / pkg).rglob("*.py")
        for name in _CALL.findall(path.read_text(encoding="utf-8"))
    }
    missing = sorted(used - set(sql.names()))
    assert not missing, f"sql.query() names without a file: {missing}"
    # the rest are read by the builders in analysis/sql/ (__init__.py, replay_text.py)
    builders = {
        name
        for path in (ROOT / "analysis" / "sql").glob("*.py")
        for name in _BUILDER_CALL.findall(path.read_text(encoding="utf-8"))
    }
    unused = sorted(set(sql.names()) - used - builders)
    assert not unused, f"files no code reads: {unused}"


def test_an_installed_package_ships_the_files() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "*.sql" in conf["tool"]["setuptools"]["package-data"]["analysis.sql"]

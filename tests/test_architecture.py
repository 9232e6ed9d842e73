"""The house rules of ARCHITECTURE.md, checked over the import graph of the source tree.

Every import is read from the source (module level and the lazy ones inside functions
alike): the rooms may only import the rooms below them, the policy package imports
nothing that does I/O, nothing imports in a circle, and no module outgrows one concept.
`make check` runs this file.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shp_ray", "storage", "analysis", "conf", "sweeps", "bench", "exporter", "hydra_plugins")

# Room of a module: the first prefix that matches. Apps are the entry points on top.
ROOMS = (
    ("shp_ray.policy", "policy"),
    ("shp_ray.providers", "providers"),
    ("shp_ray.sandbox", "sandbox"),
    ("shp_ray.redaction", "redaction"),
    ("storage", "storage"),
    ("shp_ray.generation", "generation"),
    # analysis: four rooms over one floor; the package itself (analysis/__init__) is their surface (analysis.connect)
    ("analysis.sql", "analysis floor"),
    ("analysis.errors", "analysis floor"),
    ("analysis.scipy_stats", "analysis floor"),
    ("analysis.replay", "replay"),
    ("analysis.stats", "stats"),
    ("analysis.report", "report"),
    ("analysis.query", "query"),
    ("analysis", "analysis"),
    ("conf", "conf"),
    ("shp_ray", "apps"),  # shp_ray itself (the library surface), live, demo, theory_checks, importer
    ("sweeps", "apps"),
    ("bench", "apps"),
    ("exporter", "apps"),
    ("hydra_plugins", "apps"),
)
# Which rooms each room may import (besides itself). Arrows only point down.
MAY_IMPORT = {
    "redaction": set(),
    "policy": set(),
    "providers": {"redaction"},
    "sandbox": set(),
    "storage": {"redaction", "policy"},  # policy: the cascade's knobs, the results table's columns
    "generation": {"policy", "providers", "storage", "sandbox", "redaction"},
    "analysis floor": {"policy", "providers", "storage", "redaction"},
    "replay": {"analysis floor", "policy", "providers", "storage", "redaction"},
    "stats": {"replay", "analysis floor", "policy", "providers", "storage", "redaction"},
    "report": {"stats", "replay", "analysis floor", "policy", "providers", "storage", "redaction"},
    "query": {"replay", "analysis floor", "policy", "providers", "storage", "redaction"},
    "analysis": {"query", "report", "stats", "replay", "analysis floor"},
    "conf": {"policy", "providers", "sandbox", "storage", "generation", "redaction"},
}
MAY_IMPORT["apps"] = set(MAY_IMPORT)  # everything below
# The policy package is pure: the standard library and numpy, nothing that reaches a disk,
# a network, a model or a process pool.
POLICY_THIRD_PARTY = {"numpy", "scipy"}  # numerical only (scipy.optimize for the constrained weights)
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def room(module: str) -> str:
    for prefix, name in ROOMS:
        if module == prefix or module.startswith(prefix + "."):
            return name
    raise AssertionError(f"{module}: in no room of ARCHITECTURE.md")


def _project_target(name: str) -> str | None:
    """The project module an imported name resolves to (the longest known prefix), or None."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in MODULES:
            return cand
    return None


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (annotations only, never executed)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports_of(module: str, runtime_only: bool = False) -> list[tuple[str, int]]:
    """(imported name, line) of every import in the module, lazy ones included; relative resolved.

    ``runtime_only`` leaves out the type-only imports (they order no module loading, so they
    cannot make a cycle; the room rule still applies to them).
    """
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skip = _type_only(tree) if runtime_only else set()
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{a.name}" for a in node.names]
            out += [(n, node.lineno) for n in names]
            if not all(n in MODULES for n in names):  # ``from pkg import sub`` imports sub; ``from pkg import f``, pkg
                out.append((base, node.lineno))
    return out


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for name, _ in imports_of(m, runtime_only=True):
            target = _project_target(name)
            if target is not None and target != m and not m.startswith(target + "."):
                graph[m].add(target)
    return graph


def test_every_module_is_in_a_room() -> None:
    assert MODULES, "no source found"
    for m in MODULES:
        room(m)


def test_analysis_is_its_rooms_and_the_package_only_their_surface() -> None:
    """Every module of analysis is in one of its four rooms or the floor; analysis/__init__ only re-exports them."""
    loose = [m for m in MODULES if room(m) == "analysis" and m != "analysis"]
    assert not loose, f"modules of analysis in none of its rooms (ARCHITECTURE.md): {loose}"


def test_arrows_only_point_down() -> None:
    wrong = []
    for m in MODULES:
        for name, line in imports_of(m):
            target = _project_target(name)
            if target is None:
                continue
            src, dst = room(m), room(target)
            if src != dst and dst not in MAY_IMPORT[src]:
                wrong.append(f"{MODULES[m].relative_to(ROOT)}:{line}: {src} imports {dst} ({target})")
    assert not wrong, "imports against the layering of ARCHITECTURE.md:\n" + "\n".join(sorted(set(wrong)))


SIM = "shp_ray.providers.sim"
# The one module of the real providers that may NAME the simulator (as a lazily imported factory
# string, never an import): the registry's table of kinds, documented in ARCHITECTURE.md.
SIM_REGISTRATION_POINT = "shp_ray.providers.registry"


def _in_sim(module: str) -> bool:
    return module == SIM or module.startswith(SIM + ".")


def test_the_real_providers_import_nothing_of_the_simulator() -> None:
    wrong = []
    for m in (m for m in MODULES if room(m) == "providers" and not _in_sim(m)):
        path = MODULES[m]
        for name, line in imports_of(m):
            target = _project_target(name)
            if target is not None and _in_sim(target):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: imports {target}")
        if m == SIM_REGISTRATION_POINT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SIM + "." in node.value:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: names {node.value!r}")
    assert not wrong, "the simulator stays apart from the real client (ARCHITECTURE.md):\n" + "\n".join(wrong)


def test_the_simulator_options_load_no_server() -> None:
    """conf imports SimOptions: that must not load aiohttp (the server and its routes)."""
    code = "import sys, shp_ray.providers.sim.options; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


# All SQL text lives in analysis/sql, read by name; storage's SQLite stores keep their own statements
# (SQLite, not DuckDB, and storage imports nothing above it). ARCHITECTURE.md, "Rules of the house".
SQL_HOME = "analysis.sql"
SQLITE_OWN = {"storage.cache", "storage.batch_ledger"}
_SQL_START = re.compile(
    r"\s*(SELECT|WITH|CREATE|INSERT|UPDATE|DELETE|PRAGMA|SET|ATTACH|DETACH|COPY|DROP|BEGIN|INSTALL|LOAD|"
    r"DESCRIBE|EXPLAIN|ALTER|VACUUM|CHECKPOINT|SUMMARIZE)\b"
)


def _sql_strings(path: Path) -> list[tuple[int, str]]:
    """(line, start) of every string (an f-string's first literal part) that starts like a SQL statement;
    docstrings are prose and left out."""
    tree = ast.parse(path.read_text(), str(path))
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            node = node.values[0]
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        if is_text and _SQL_START.match(node.value):
            out.append((node.lineno, node.value.strip()[:60]))
    return sorted(set(out))  # an f-string's first part is met twice (as itself, and through the f-string)


def test_all_sql_text_lives_in_analysis_sql() -> None:
    wrong = [
        f"{MODULES[m].relative_to(ROOT)}:{line}: {text!r}"
        for m in MODULES
        if not (m == SQL_HOME or m.startswith(SQL_HOME + ".") or m in SQLITE_OWN)
        for line, text in _sql_strings(MODULES[m])
    ]
    assert not wrong, "SQL outside analysis/sql (make it a <name>.sql file there):\n" + "\n".join(sorted(set(wrong)))


def test_the_sql_check_finds_sql(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('"""SELECT in a docstring."""\nA = "SELECT 1"\nB = f"CREATE VIEW {x} AS y"\nC = "Selected"\n')
    assert _sql_strings(src) == [(2, "SELECT 1"), (3, "CREATE VIEW")]


def _documented_imports() -> dict[str, set[str]]:
    """The "may import" column of ARCHITECTURE.md's table of rooms, in this file's room names."""
    names = {prefix: name for prefix, name in ROOMS}
    out = {}
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`") and cells[0] != "apps":
            continue
        rooms = {"apps"} if cells[0] == "apps" else {names.get(p) for p in re.findall(r"`([^`]+)`", cells[0])}
        if len(rooms) != 1 or None in rooms:  # one room a row (its modules named in the first cell)
            continue
        room_name = rooms.pop()
        may = cells[1]
        if may.startswith("everything below"):
            out[room_name] = set(MAY_IMPORT) - {"apps"}
        else:
            out[room_name] = {w.strip() for w in may.split(";")[0].split(",")} & set(MAY_IMPORT)
    return out


def test_the_doc_states_the_rules_this_test_enforces() -> None:
    assert _documented_imports() == MAY_IMPORT


def test_the_policy_package_does_no_io() -> None:
    stdlib = set(sys.stdlib_module_names)
    io_stdlib = {"os", "subprocess", "socket", "shutil", "tempfile", "urllib", "http", "asyncio", "sqlite3"}
    wrong = []
    for m in (m for m in MODULES if room(m) == "policy"):
        for name, line in imports_of(m):
            top = name.split(".")[0]
            if top in PACKAGES:
                continue  # checked by the room rule
            if top in io_stdlib or (top not in stdlib and top not in POLICY_THIRD_PARTY):
                wrong.append(f"{MODULES[m].relative_to(ROOT)}:{line}: imports {name}")
    assert not wrong, "the policy package must stay pure:\n" + "\n".join(sorted(set(wrong)))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles() -> None:
    # A package's __init__ re-exporting its modules is not a cycle of concepts; its modules
    # importing each other in a circle is.
    graph = {
        m: {t for t in ts if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
        for m, ts in edges().items()
    }
    assert _cycles(graph) == []


def package_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph of the top-level packages (shp_ray, analysis, bench ...).

    The module graph can have no cycle while a package holds modules of rooms both below and above
    another package (an app inside shp_ray importing analysis, which imports shp_ray.providers):
    each arrow points down, yet the two packages import each other, and neither can be read,
    tested or shipped without the other. A room that may import nothing of
    ours (redaction, policy, sandbox) closes no circle wherever it lives, so an import of it is
    no arrow between packages (storage imports shp_ray.redaction, shp_ray.generation imports storage).
    """
    out: dict[str, set[str]] = {m.split(".")[0]: set() for m in graph}
    for m, targets in graph.items():
        for t in targets:
            if m.split(".")[0] != t.split(".")[0] and MAY_IMPORT.get(room(t)):
                out[m.split(".")[0]].add(t.split(".")[0])
    return out


def test_no_two_packages_import_each_other() -> None:
    """An app that needs the packages below it lives in a package of its own (sweeps/, bench/)."""
    assert _cycles(package_edges(edges())) == []


def test_the_package_check_finds_two_packages_importing_each_other() -> None:
    graph = {"shp_ray.bench.replay": {"analysis.replay.db"}, "analysis.replay.db": {"shp_ray.providers.client"}}
    assert _cycles(package_edges(graph)) == [["analysis", "shp_ray"]]
    graph["storage.parts"] = {"shp_ray.redaction"}  # a room that imports nothing of ours closes no circle
    graph["shp_ray.generation.loop"] = {"storage.parts"}
    del graph["shp_ray.bench.replay"]
    assert _cycles(package_edges(graph)) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_outgrows_one_concept(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines (split it by concept)"

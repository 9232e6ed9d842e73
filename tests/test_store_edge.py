"""A store is an object from the edge inward: its text becomes a :class:`storage.parts.Store` once, where a command
reads it, and every room below takes that object (issue 46, item 3).

Read from the source with ``ast``, like tests/test_function_shape.py: below the edges named here, no function or
dataclass field types a store as ``str`` / ``Path`` (alone or beside ``Store`` in a union), and no code constructs a
``Store`` from text. Following the store from ``shp-sweep`` (``conf.spec.store_at``), ``shp-query``, ``shp-import``,
``shp-export``, ``python -m storage.compact`` and the RESULTS.md renderers to the Parquet writer and to DuckDB's
``connect`` therefore meets one conversion, at the edge. ``bench/`` (shp-bench) is left out: each measurement makes
its own store in a fresh folder and is its own edge.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shp_ray", "storage", "analysis", "conf", "sweeps", "exporter", "hydra_plugins")
STORE_NAMES = {"store", "store_root", "store_uri"}  # a parameter or field by these names is a store

# (module, function): where a store's text is converted, once, for everything below it.
EDGES = {
    ("storage.parts", "Store.__init__"): "the conversion itself",
    ("conf.spec", "store_at"): "shp-sweep: store.path, as the JobSpec's Store",
    ("analysis.query", "main"): "shp-query --store",
    ("shp_ray.importer.cli", "main"): "shp-import --store",
    ("exporter", "main"): "shp-export STORE",
    ("storage.compact", "main"): "python -m storage.compact ROOT",
    ("sweeps.code_results", "store_arg"): "python -m sweeps.code_results / revise_results STORE",
    ("sweeps.paper_results", "paper_job"): "python -m sweeps.paper_results STORE: store.path of the paper's job",
    ("sweeps.paper_results", "render"): "python -m sweeps.paper_results STORE: the job is composed from it",
    ("storage.synthetic", "write_synthetic_store"): "a new synthetic store made in a folder (tests, benchmarks)",
    ("storage.rebucket", "_restore"): "a bucket's view rebuilt from its URI on a Ray node (nothing else travels)",
    # The library's surface: a notebook's analysis.connect("results/...") -- ReplayScope converts, once.
    ("analysis.replay.scope", "ReplayScope.__post_init__"): "analysis.connect / ReplayScope(path)",
    ("analysis.replay.scope", "scope_of"): "analysis.connect(store, judge=...)",
    ("analysis.replay.db", "connect"): "analysis.connect",
    ("analysis.replay.db", "write_init_script"): "analysis.write_init_script",
    ("analysis.report", "write_report"): "python -m analysis.report / write_report",
}


# (module, Class.field): a record of what a store was, as printed or serialised (its URI), never opened again.
RECORDS = {
    ("shp_ray.generation.run_summary", "GenerationSummary.store"): "the run's summary (to_dict, the manifest)",
    ("analysis.replay.db", "Setup.store"): "what a connection was opened on, as a report shows it",
    ("sweeps.job", "JobResult.store"): "the job's result, as shp-sweep prints it",
}


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out.append((".".join(parts), ast.parse(path.read_text(), str(path))))
    return out


def _names(annotation: ast.expr | None) -> set[str]:
    """The type names an annotation mentions (``str | Path | Store`` -> {str, Path, Store}; a string annotation
    parsed first)."""
    if annotation is None:
        return set()
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(annotation) if isinstance(n, ast.Attribute)
    }


def _as_text(name: str, annotation: ast.expr | None) -> bool:
    """A store typed as its text: beside Store in a union, or by a store's name as str / Path."""
    names = _names(annotation)
    text = bool(names & {"str", "Path"})
    return text and ("Store" in names or name in STORE_NAMES)


def _walk(tree: ast.Module):
    """(qualified name of the enclosing function or class, node) for every node, methods as ``Class.method``."""

    def visit(node: ast.AST, scope: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
                yield inner, child
                yield from visit(child, inner)
            else:
                yield scope, child
                yield from visit(child, scope)

    yield from visit(tree, "")


def _text_stores() -> list[str]:
    found = []
    for module, tree in _modules():
        for scope, node in _walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                    if _as_text(arg.arg, arg.annotation) and (module, scope) not in EDGES:
                        found.append(f"{module}:{node.lineno} {scope}({arg.arg}: {ast.unparse(arg.annotation)})")
            elif isinstance(node, ast.ClassDef):
                for field in node.body:
                    if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
                        key = (module, f"{scope}.{field.target.id}")
                        if _as_text(field.target.id, field.annotation) and key not in RECORDS:
                            found.append(f"{module}:{field.lineno} {scope}.{field.target.id}: "
                                         f"{ast.unparse(field.annotation)}")  # fmt: skip
    return found


def _constructions() -> list[str]:
    found = []
    for module, tree in _modules():
        for scope, node in _walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "Store" and (module, scope) not in EDGES:
                found.append(f"{module}:{node.lineno} {scope or '<module>'}: {ast.unparse(node)}")
    return found


def test_no_room_below_the_edge_types_a_store_as_its_text() -> None:
    assert _text_stores() == []


def test_a_store_is_made_from_its_text_only_at_the_edge() -> None:
    assert _constructions() == []


def test_the_cache_folder_is_named_in_one_place() -> None:
    """The writer's side folder is ``Store.cache_dir``: no other module derives ``<store>/_cache`` again."""
    said = set()
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in {"CACHE_DIRNAME", "default_cache_dir"}:
                said.add(f"{module}.{node.id}")
            elif isinstance(node, ast.Attribute) and node.attr == "CACHE_DIRNAME":
                said.add(f"{module}.{node.attr}")
    assert said == {"storage.cache.CACHE_DIRNAME", "storage.parts.CACHE_DIRNAME"}


@pytest.mark.parametrize("edge", sorted(EDGES) + sorted(RECORDS))
def test_every_edge_named_here_is_there(edge: tuple[str, str]) -> None:
    """A renamed edge leaves no stale entry behind (an entry that allows nothing would hide a new conversion)."""
    module, qualname = edge
    tree = dict(_modules())[module]
    named = {scope for scope, node in _walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    fields = {f"{scope}.{node.target.id}" for scope, node in _walk(tree)
              if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}  # fmt: skip
    assert qualname in named | fields

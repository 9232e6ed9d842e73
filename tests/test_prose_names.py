"""The prose names only what exists: every repository path a page, a docstring or a comment mentions
(`shp_ray/...py`, `analysis/sql/<owner>/<name>.sql`, ...) is a file of the tree, and every dotted name a page
shows in backticks (`shp_ray.generation.run_context`, `analysis.connect`) imports.

Prose that outlives a move or a rename misleads whoever reads it first; this keeps it from drifting.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("shp_ray", "storage", "analysis", "conf", "sweeps", "bench", "exporter", "hydra_plugins")
TOP += ("tests", "docs", "scripts")
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXTS = [*PAGES, ROOT / "Makefile", ROOT / "pyproject.toml"] + sorted(
    p
    for top in TOP
    if top != "docs"
    for p in (ROOT / top).rglob("*")
    if p.suffix in (".py", ".sql", ".md", ".yaml", ".sh") and p != Path(__file__).resolve()  # its own are probes
)
# A path that starts at one of the tree's folders and ends in a file suffix; not part of a longer path or a URL.
PATH = re.compile(rf"(?<![\w/.<{{-])((?:{'|'.join(TOP)})/[\w./*-]*\.(?:py|sql|md|yaml|sh|json|html|js|css))\b")
DOTTED = re.compile(r"`((?:shp_ray|storage|analysis|conf|sweeps|bench|exporter)(?:\.\w+)+)`")
# Paths the pages tell the reader to write (examples), and dotted names that are not Python's.
TO_WRITE = {
    "shp_ray/policy/families/edit_plateau.py",  # ARCHITECTURE.md's example family
    "conf/prompts/my-loop.yaml",  # docs/your-loop.md's example prompts
}
NOT_PYTHON = {"shp_ray.progress"}  # the progress logger's name (docs/sweeps.md)


def missing_paths(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for m in PATH.finditer(line):
            name = m.group(1).rstrip(".")
            found = any(root.glob(name)) if "*" in name else (root / name).exists()
            if not found and name not in TO_WRITE:
                out.append(f"{path.relative_to(root)}:{n}: {name}")
    return out


def resolves(dotted: str) -> bool:
    """A module, or a module's attribute (a class, a function, a submodule)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_path_the_prose_names_exists() -> None:
    wrong = [w for path in TEXTS for w in missing_paths(path)]
    assert not wrong, "paths named in prose that are not in the tree (fix the prose):\n" + "\n".join(wrong)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_name_a_page_shows_imports(page: Path) -> None:
    text = page.read_text()
    wrong = [
        f"{page.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(1)}"
        for m in DOTTED.finditer(text)
        if m.group(1) not in NOT_PYTHON and not resolves(m.group(1))
    ]
    assert not wrong, "names shown in backticks that do not import (fix the prose):\n" + "\n".join(wrong)


def test_the_checks_find_what_is_not_there(tmp_path: Path) -> None:
    (tmp_path / "analysis/sql/replay").mkdir(parents=True)
    (tmp_path / "analysis/sql/replay/tost_plan.sql").write_text("SELECT 1\n")
    page = tmp_path / "page.md"
    page.write_text(
        "see `analysis/sql/tost_plan.sql`, analysis/sql/replay/tost_plan.sql, analysis/sql/*/tost_plan.sql\n"
    )
    assert missing_paths(page, tmp_path) == ["page.md:1: analysis/sql/tost_plan.sql"]
    assert resolves("shp_ray.generation.run_context.RunOptions")
    assert not resolves("shp_ray.generation.RunOptions")

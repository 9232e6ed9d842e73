"""The docs run: every block marked runnable in README.md and docs/*.md is executed, and what it prints must
match the output shown under it.

The marker is an HTML comment on the line before a fenced ``bash`` or ``python`` block::

    <!-- runnable -->
    ```bash
    shp-query --store results/paper-local/store "SELECT 1 AS one"
    ```

    ```text
    ...
    ```

A ``text`` block right after a runnable block (blank lines between are allowed) is its shown output, compared
with what the block printed on stdout: runs of white space count as one space (so tables may be aligned
either way); a line ``...`` stands for any number of lines, and ``...`` inside a line for any text (a path, a
time, a hash). Without a shown output the block must only succeed. The blocks of one file run in order in one
fresh folder holding a link to one copy of ``results/`` (so they may build on each other and never write into the
repository), with the project's commands on PATH and ``CI=true``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the block's opening fence
    lang: str  # bash | python
    code: str
    shown: str | None  # the text block under it, if any

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _fenced(lines: list[str], i: int) -> tuple[str, str, int] | None:
    """The fenced block opening at line i: (language, body, index after its closing fence)."""
    m = FENCE.match(lines[i]) if i < len(lines) else None
    if m is None:
        return None
    end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
    if end is None:
        raise ValueError(f"line {i + 1}: a fenced block is never closed")
    return m.group(1), "\n".join(lines[i + 1 : end]), end + 1


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        code = _fenced(lines, i + 1)
        assert code is not None and code[0] in ("bash", "python"), f"{page}:{i + 1}: {MARKER} before no code block"
        j = code[2]
        while j < len(lines) and not lines[j].strip():
            j += 1
        shown = _fenced(lines, j)
        found.append(Block(page, i + 2, code[0], code[1], shown[1] if shown and shown[0] == "text" else None))
    return found


def normalise(text: str) -> list[str]:
    lines = [re.sub(r"\s+", " ", ANSI.sub("", line)).strip() for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def shown_pattern(shown: str) -> re.Pattern[str]:
    parts = []
    for line in normalise(shown):
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts), re.DOTALL)


def matches(shown: str, printed: str) -> bool:
    return shown_pattern(shown).fullmatch("".join(f"{line}\n" for line in normalise(printed))) is not None


ALL = [b for page in PAGES for b in blocks(page)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs the blocks of each page in order, once, in one folder per page; block -> CompletedProcess."""
    done: dict[Block, subprocess.CompletedProcess[str]] = {}
    folders: dict[Path, Path] = {}
    shipped: list[Path] = []
    env = {**os.environ, "CI": "true", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def run(block: Block) -> subprocess.CompletedProcess[str]:
        if block in done:
            return done[block]
        for earlier in [b for b in ALL if b.page == block.page and b.line < block.line and b not in done]:
            run(earlier)
        if block.page not in folders:
            if not shipped:  # one copy for every page: shp-sweep writes into a store, a query caches what it derives
                shipped.append(tmp_path_factory.mktemp("shipped") / "results")
                shutil.copytree(ROOT / "results", shipped[0])
            folder = tmp_path_factory.mktemp(block.page.stem)
            (folder / "results").symlink_to(shipped[0])
            folders[block.page] = folder
        script = folders[block.page] / f"block-{block.line}.{'sh' if block.lang == 'bash' else 'py'}"
        script.write_text(block.code + "\n")
        argv = ["bash", "-eo", "pipefail", str(script)] if block.lang == "bash" else [sys.executable, str(script)]
        done[block] = subprocess.run(
            argv, cwd=folders[block.page], env=env, capture_output=True, text=True, timeout=600
        )
        return done[block]

    return run


def test_the_docs_have_runnable_blocks() -> None:
    assert len([b for b in ALL if b.page.name == "README.md"]) >= 4  # one per journey
    assert all(b.shown is not None for b in ALL if b.page.name == "README.md")


@pytest.mark.integration
@pytest.mark.parametrize("block", ALL, ids=[b.where for b in ALL])
def test_block_runs_and_prints_what_is_shown(block: Block, runs) -> None:
    out = runs(block)
    assert out.returncode == 0, f"{block.where} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    if block.shown is not None:
        assert matches(block.shown, out.stdout), (
            f"{block.where}: the output no longer matches what the page shows.\nshown:\n{block.shown}\n"
            f"printed:\n{out.stdout[-4000:]}"
        )


@pytest.mark.parametrize(
    ("shown", "printed", "ok"),
    [
        ("a  b\n...\nz", "a b\nx\ny\nz\n", True),  # white space runs, skipped lines
        ("a\n...\nz", "a\nz\n", True),  # "..." may stand for no line
        ("took ... s", "took 1.23 s", True),  # "..." inside a line
        ("a\nb", "a\nc\n", False),
        ("a", "a\nb\n", False),  # more printed than shown, with no "..." for it
        ("\x1b[1mx\x1b[0m", "x", True),  # colour codes do not count
    ],
)
def test_the_matching_rules(shown: str, printed: str, ok: bool) -> None:
    assert matches(shown, printed) is ok


def test_the_readme_is_short_and_the_spec_is_in_the_repository() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    assert (ROOT / "docs" / "design.md").exists()
    rooms = ("shp_ray", "storage", "analysis", "conf", "sweeps", "bench", "exporter", "hydra_plugins")
    rooms += ("tests", "docs", "scripts")
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "pyproject.toml", ROOT / "Makefile"]
    files += [p for room in rooms for p in (ROOT / room).rglob("*") if p.suffix in (".py", ".md", ".sql", ".yaml")]
    cited = [str(p.relative_to(ROOT)) for p in files if p != Path(__file__) and "DESIGN.md" in p.read_text()]
    assert cited == [], f"cite docs/design.md instead of a DESIGN.md outside the repository: {cited}"

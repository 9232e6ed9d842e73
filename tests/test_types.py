"""The source folders are type-checked: mypy (pinned in pyproject's dev extras, configured in its [tool.mypy])
passes on them, and every `# type: ignore` left names its error code and says why, so none goes stale unseen
(mypy's warn_unused_ignores makes an ignore that no longer silences anything an error). `make check` runs the
same mypy.

One test runs the whole check: ~19 CPU-s without a cache (a fresh clone; the model packages and the openai SDK are
read as Any, not followed: pyproject's [tool.mypy]), ~2 CPU-s with mypy's cache (.mypy_cache, ignored by git).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CHECKED = CONFIG["tool"]["mypy"]["files"]

# an ignore with its code in brackets, two spaces, then its reason as a comment of its own
IGNORE = re.compile(r"#\s*type:\s*ignore")
EXPLAINED = re.compile(r"# type: ignore\[[a-z-]+(, ?[a-z-]+)*\]  # \S")


def test_the_checked_folders_are_the_source_folders():
    """mypy checks what make check lints and compiles (Makefile's SOURCES), no more, no less."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (sources,) = re.findall(r"^SOURCES := (.+)$", makefile, re.M)
    assert sources.split() == CHECKED
    check = makefile.split("\ncheck:", 1)[1].split("\n\n", 1)[0]
    assert "-m mypy" in check, "make check runs the type checker"


def test_the_type_checker_is_pinned():
    dev = CONFIG["project"]["optional-dependencies"]["dev"]
    assert any(re.fullmatch(r"mypy==[\d.]+", d) for d in dev), dev


def test_every_ignore_names_its_code_and_a_reason():
    bare = []
    for folder in CHECKED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if IGNORE.search(line) and not EXPLAINED.search(line):
                    bare.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bare, "a type: ignore without [code] and '  # reason':\n" + "\n".join(bare)


@pytest.mark.timeout(1200)  # uncached: ~19 CPU-s, minutes of wall time on a loaded machine
def test_mypy_passes_on_the_source_folders():
    """The real checker over the real tree (its config from pyproject.toml): no error, no unused ignore."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=1100, check=False
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout

"""Read-only means read-only: a reader refuses a root that holds no store without creating anything, and writes
nothing into a store it reads (what it records goes to the user's cache directory: storage.user_cache)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import analysis
from analysis.query import main as shp_query
from analysis.replay.db import AnalysisError
from storage.parts import Store
from storage.synthetic import SyntheticSpec, write_synthetic_store
from storage.user_cache import reader_dir

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "results" / "paper-local" / "store"
JUDGE = "llm:qwen2.5-coder-1.5b-instruct"  # the store holds two judges' scores


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """This test's user cache directory (where a reader records what it verified and derived)."""
    folder = tmp_path / "user-cache"
    monkeypatch.setenv("SHP_RAY_CACHE", str(folder))
    return folder


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a folder's and a link's kind."""
    out = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here) / name
            rel = str(path.relative_to(root))
            out[rel] = (
                "link"
                if path.is_symlink()
                else "dir"
                if path.is_dir()
                else hashlib.sha256(path.read_bytes()).hexdigest()
            )
    return out


def _refused(capsys, *args: str) -> str:
    """shp-query's one-line refusal (exit 2) of ``args``."""
    capsys.readouterr()
    assert shp_query(list(args)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("form", ["path", "file-uri"])
def test_a_ghost_store_is_refused_and_nothing_is_created(tmp_path, cache, capsys, form) -> None:
    ghost = tmp_path / "nowhere" / "none"
    root = str(ghost) if form == "path" else f"file://{ghost}"
    assert "no store at" in _refused(capsys, "--store", root, "SELECT 1")
    assert "no store at" in _refused(capsys, "--store", root, "--verify")
    assert "no store at" in _refused(capsys, "--store", root, "--signals", "check")
    assert "no store at" in _refused(capsys, "--store", root, "--write-init")
    with pytest.raises(AnalysisError, match="no store at"):
        analysis.connect(root)
    assert sorted(os.listdir(tmp_path)) == [] and not cache.exists()


def test_a_store_that_is_a_link_to_the_root_folder_is_refused(tmp_path, cache, capsys) -> None:
    link = tmp_path / "store"
    link.symlink_to("/")
    before = sorted(os.listdir("/"))  # (as root, the old code made /_cache/derived/... here)
    for root in (str(link), f"file://{link}"):
        assert "no store at" in _refused(capsys, "--store", root, "SELECT 1")
    assert "no store at" in _refused(capsys, "--store", str(link), "--verify")
    assert sorted(os.listdir("/")) == before and not cache.exists()


def test_an_empty_folder_is_no_store(tmp_path, cache, capsys) -> None:
    (tmp_path / "empty").mkdir()
    err = _refused(capsys, "--store", str(tmp_path / "empty"), "SELECT 1")
    assert f"no store at {tmp_path / 'empty'}: it holds no table folder" in err
    assert os.listdir(tmp_path / "empty") == [] and not cache.exists()


def test_reading_the_shipped_store_changes_nothing_in_it(cache, capsys) -> None:
    """The git-tracked store of the paper's run: queried, verified and opened, its folder is byte for byte what
    it was and `git status` is clean; what the reader recorded is in the user's cache directory."""
    before = _tree(SHIPPED)
    query = ["--store", str(SHIPPED), "--judge", JUDGE, "SELECT count(*) FROM policy_summary"]
    assert shp_query(query) == 0
    assert shp_query(query) == 0  # the kept file read back
    assert shp_query(["--store", str(SHIPPED), "--verify"]) == 0
    capsys.readouterr()
    assert _tree(SHIPPED) == before
    mine = reader_dir(Store(SHIPPED))
    assert mine.is_relative_to(cache) and (mine / "verified-parts.jsonl").is_file()
    assert len(list((mine / "derived").glob("replay_inputs-*.hmac-*.duckdb"))) == 1
    if shutil.which("git") and (ROOT / ".git").exists():
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", str(SHIPPED)],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert status.stdout == ""


def test_the_folder_of_a_store_that_is_gone_is_removed(tmp_path, cache, monkeypatch) -> None:
    """What a reader recorded about a store lives in the user's cache until the store is gone: the next file kept
    (for any store) removes it, so the cache does not only grow."""
    import storage.user_cache as user_cache

    first, second = tmp_path / "first", tmp_path / "second"
    for root in (first, second):
        write_synthetic_store(root, SyntheticSpec(n_trajectories=2, rounds=2, seed=1))
    analysis.connect(first).close()
    gone = reader_dir(Store(first))
    assert (gone / "derived").is_dir()
    shutil.rmtree(first)
    monkeypatch.setattr(user_cache, "_pruned", set())  # (once per process: this one pruned before)
    analysis.connect(second).close()
    assert not gone.exists() and (reader_dir(Store(second)) / "derived").is_dir()

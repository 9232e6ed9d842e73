"""A full disk: one line naming the path, no temp file left, and no reply paid for twice.

The disk is a real one: a small tmpfs mounted for the test (root only; skipped where mounting is not
allowed) and unmounted in the fixture's teardown, whatever happened. The sweep runs for real (Ray,
the simulated OpenAI-compatible server on 127.0.0.1 counting the calls it answers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from shp_ray.providers.sim.server import SimServer
from storage.cache import ResponseCache
from storage.parts import Store, WriteFailed
from storage.schemas import FAILURES
from tests.test_sweep import BIN

SIZE_KB = 400


@contextlib.contextmanager
def mounted(folder: Path, size_kb: int) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` at ``folder``; unmounted on the way out (a failed assertion included)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root needed): {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted(tmp_path / "disk", SIZE_KB) as disk:
        yield disk


def fill(disk: Path, leave_kb: int) -> None:
    """Take the disk's space but ``leave_kb``."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(0, free - leave_kb * 1024))


def failures(n: int) -> pa.Table:
    rows = [{"gen_id": "g", "scenario_id": f"s{i}", "round": 1, "stage": "writer", "error_type": "E"} for i in range(n)]
    rows = [r | {"message": os.urandom(100).hex(), "created_at": datetime.now(UTC)} for r in rows]
    return pa.Table.from_pylist(rows, schema=FAILURES)


def _temps(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.startswith("_tmp-") or p.name.endswith(".partial")]


def test_a_part_that_does_not_fit_is_one_error_naming_its_folder_and_leaves_no_temp_file(small_disk):
    store = Store(small_disk / "store")
    store.write("failures", failures(1))
    fill(small_disk, leave_kb=8)
    with pytest.raises(WriteFailed) as err:
        store.write("failures", failures(200))  # ~40 KB that do not compress
    assert str(err.value) == f"no space left on device writing {small_disk / 'store' / 'failures' / 'gen_id=g'}"
    assert err.value.advice == "free space and rerun"
    assert _temps(small_disk) == []
    assert len(store.parts("failures")) == 1  # what was written before is whole and still there


def test_a_cache_on_a_full_disk_refuses_the_record_with_one_error_naming_the_file(small_disk, caplog):
    cache = ResponseCache(small_disk / "cache" / "responses.sqlite")
    cache.space_wait_s = 0  # no space comes back here: the put fails at once
    fill(small_disk, leave_kb=0)
    with pytest.raises(WriteFailed) as err, caplog.at_level(logging.WARNING):
        for i in range(200):  # SQLite fills its free pages first: the disk is full within a few records
            cache.put(f"k{i}", {"content": "x" * 4096})
    assert err.value.path == str(small_disk / "cache" / "responses.sqlite")
    assert err.value.reason == "no space left on device"
    (lost,) = [r.getMessage() for r in caplog.records if "could not be kept" in r.getMessage()]
    assert (
        lost
        == "1 paid record of responses.sqlite could not be kept (no space left on device): a rerun pays for it again"
    )
    cache.close()


def test_a_reply_that_finds_the_disk_full_waits_in_memory_and_is_written_when_space_returns(small_disk):
    cache = ResponseCache(small_disk / "cache" / "responses.sqlite")
    cache.space_wait_s = 600  # bounded by the event below, not by this
    fill(small_disk, leave_kb=0)
    stored = 0
    while not cache.unkept:  # until one record finds no room (SQLite fills its free pages first)
        done = threading.Thread(target=cache.put, args=(f"k{stored}", {"content": os.urandom(2048).hex()}))
        done.start()
        while done.is_alive() and not cache.unkept:
            done.join(0.01)
        stored += not cache.unkept
    waiting = f"k{stored}"
    assert cache.get(waiting) is not None  # answered from memory meanwhile: a retry would not pay again
    (small_disk / "filler").unlink()  # space returns
    done.join(60)
    assert not done.is_alive() and cache.unkept == {}
    cache.close()
    with contextlib.closing(sqlite3.connect(str(small_disk / "cache" / "responses.sqlite"))) as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM responses")}
    assert keys == {f"k{i}" for i in range(stored + 1)}  # every record, the one that waited too


def test_a_cache_that_cannot_be_opened_on_a_full_disk_says_the_disk_is_full(small_disk):
    # What a run does first (shp_ray.generation.generate): before any call is paid. SQLite says
    # "disk I/O error" when its shared memory file finds no room; the disk is named as full.
    fill(small_disk, leave_kb=0)
    with pytest.raises(WriteFailed) as err:
        ResponseCache(small_disk / "store" / "_cache" / "responses.sqlite")
    assert str(err.value) == f"no space left on device writing {small_disk / 'store' / '_cache' / 'responses.sqlite'}"


def _responses(cache: Path) -> int:
    with contextlib.closing(sqlite3.connect(str(cache / "responses.sqlite"))) as conn:
        return int(conn.execute("SELECT count(*) FROM responses").fetchone()[0])


@pytest.mark.integration
def test_a_store_on_a_full_disk_ends_the_sweep_in_one_line_and_the_rerun_pays_nothing_again(
    small_disk, tmp_path, ray_address
):
    # The store fills up when the run writes its trajectories: every reply was paid for by then, and each
    # was kept in the response cache (on another disk) before the loop used it.
    fill(small_disk, leave_kb=64)
    store, cache = small_disk / "store", tmp_path / "cache"
    with SimServer() as sim:
        args = [
            str(BIN / "shp-sweep"), "provider=openai", f"provider.base_url={sim.base_url}", "provider.model=sim-model",
            "provider.api_key_env=", "dataset.limit=6", "generation.max_rounds=3", "report.enabled=false",
            f"store.path={store}", f"store.cache_dir={cache}", f"hydra.run.dir={tmp_path / 'run'}",
            f"ray.address={ray_address}",
        ]  # fmt: skip
        env = {**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0"}
        out = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        paid = sim.stats["ok"]

        assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
        said = [line for line in out.stderr.splitlines() if "no space left on device" in line]
        assert len(said) == 1, out.stderr
        assert f"no space left on device writing {store}/" in said[0]
        assert said[0].endswith("; free space and rerun: 0 trajectories kept")
        assert "Traceback" not in out.stdout + out.stderr and "OSError" not in out.stdout + out.stderr
        assert _temps(small_disk) == []
        assert paid > 1 and _responses(cache) == paid - 1  # every call but the (uncached) preflight was kept

        subprocess.run(["mount", "-o", f"remount,size={8 * SIZE_KB}k", str(small_disk)], check=True)
        again = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert "6/6 trajectories, 6 generated now (0 paid calls)" in again.stdout
        assert sim.stats["ok"] - paid == 1  # the preflight; no reply paid for twice


def test_the_tmpfs_is_unmounted_even_when_the_test_fails(tmp_path):
    folder = tmp_path / "disk"
    with pytest.raises(AssertionError), mounted(folder, 64):
        assert os.path.ismount(folder)
        raise AssertionError("a failing test")
    assert not os.path.ismount(folder)

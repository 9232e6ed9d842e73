"""``shp-bench objectstore``: the store on S3, read by DuckDB two ways, against the same store on disk.

Writes a SYNTHETIC store (``storage.synthetic``, with its signals; ``--generations`` of them), uploads it
to an S3-compatible server -- moto's, started on 127.0.0.1 for the run, or the one ``AWS_ENDPOINT_URL``
names (with the AWS_* credentials) -- and times, each in a FRESH process, two journeys:

- ``full``: ``analysis.connect(store)`` with the 65 cells of ``shp-bench replay``, then the replay of every
  cell over every trajectory, streamed;
- ``one_gen``: ``analysis.connect(ReplayScope(store, gen_id=G))`` (a sweep job's scope: one partition folder) and its
  replay; on the ``full`` connection, ``pushdown_s``: a projection + filter of one generation,
  ``SELECT count(*), sum(writer_prompt_tokens) FROM round_parts WHERE gen_id = G``, and ``embeddings_s``:
  one round's embeddings of that generation;

for each reader:

- ``datasets`` (what ``analysis.connect`` does): each table a ``pyarrow.dataset`` registered with the
  connection (:mod:`analysis.replay.sources`);
- ``fsspec``: DuckDB's own ``read_parquet`` over the ``s3://`` parts, through pyarrow's S3 filesystem wrapped
  by fsspec (``ArrowFSWrapper``) and registered with ``con.register_filesystem``, its file infos served from
  the same one listing and DuckDB's Parquet metadata cache on (its best case here);
- ``local``: the same store on disk (globs), for reference.

The verified-parts record is warmed first (``first_open_s``: the one open that reads every part), so the
journeys time reading, not verification. Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the measuring process, not by the CLI
    import duckdb

READERS = ("datasets", "fsspec", "local")


def _fsspec_sources():  # noqa: ANN202 - the alternative reader, built only in the measuring process
    import pyarrow.fs as pafs
    from fsspec.implementations.arrow import ArrowFSWrapper

    from analysis import sql
    from analysis.replay.sources import TableSources, fields

    class ListedFS(ArrowFSWrapper):
        """pyarrow's S3 filesystem as fsspec sees it; sizes and mtimes from the one listing (no HEAD each)."""

        cachable = False  # one per connection, never fsspec's shared instance

        def __init__(self, fs: pafs.FileSystem, listing: list[pafs.FileInfo]) -> None:
            super().__init__(fs)
            self.known = {i.path: {"name": i.path, "size": i.size, "type": "file", "mtime": i.mtime} for i in listing}

        def info(self, path: str, **kwargs: object) -> dict:
            return self.known.get(self._strip_protocol(path)) or super().info(path, **kwargs)

        def modified(self, path: str):  # noqa: ANN201
            return self.info(path)["mtime"]

    class FsspecSources(TableSources):
        def __init__(self, store, con=None) -> None:  # noqa: ANN001
            super().__init__(store, con)
            con.register_filesystem(ListedFS(self.store.fs, self.store._listing or []))  # a snapshot: listed
            con.execute(sql.query("bench_parquet_metadata_cache"))

        def of(self, table: str, gen_id: str | None = None) -> str:
            infos = self.store.part_infos(table) if gen_id is None else self.store.part_infos(table, gen_id)
            return sql.table_source([f"s3://{i.path}" for i in infos], fields(table))

    return FsspecSources


def measure(reader: str, root: str, gen: str, rounds: int) -> dict[str, Any]:
    """The timed part, in this (fresh) process."""
    import analysis
    import analysis.replay.db
    from analysis import sql
    from bench.measure import replay_policies
    from storage.parts import Store

    if reader == "fsspec":
        analysis.replay.db.TableSources = _fsspec_sources()  # type: ignore[misc]  # swapped in this process only
    policies = replay_policies(rounds)

    def replay(**scope: Any) -> tuple[float, float, int, duckdb.DuckDBPyConnection]:
        t0 = time.perf_counter()
        con = analysis.connect(analysis.ReplayScope(Store(root), policies=policies, **scope))
        t1 = time.perf_counter()
        rows = sum(b.num_rows for b in con.sql(sql.query("bench_replay")).to_arrow_reader(batch_size=1 << 20))
        return t1 - t0, time.perf_counter() - t1, rows, con

    connect_s, replay_s, rows, con = replay()
    t0 = time.perf_counter()
    pushed = con.execute(sql.query("bench_objectstore_pushdown"), [gen]).fetchall()
    pushdown_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    con.execute(sql.query("bench_objectstore_embeddings"), [gen]).fetchall()
    embeddings_s = time.perf_counter() - t0
    con.close()
    one_connect_s, one_replay_s, one_rows, one = replay(gen_id=gen)
    one.close()
    return {
        "reader": reader,
        "full_connect_s": round(connect_s, 3),
        "full_replay_s": round(replay_s, 3),
        "full_s": round(connect_s + replay_s, 3),
        "full_rows": rows,
        "one_gen_s": round(one_connect_s + one_replay_s, 3),
        "one_gen_rows": one_rows,
        "pushdown_s": round(pushdown_s, 3),
        "pushdown_rows": pushed[0][0],
        "embeddings_s": round(embeddings_s, 3),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _moto(port: int) -> subprocess.Popen:
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    if not Path(exe).exists():
        raise SystemExit("shp-bench objectstore: moto_server not found (pip install 'moto[server]'), or set AWS_*")
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("shp-bench objectstore: moto_server did not start")


def _run(reader: str, root: str, gen: str, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.objectstore", "--measure", reader, root, "--gen", gen]
    proc = subprocess.run([*cmd, "--rounds", str(rounds)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"measuring {reader} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(n: int, rounds: int, generations: int, repeats: int, workdir: Path) -> dict[str, Any]:
    import pyarrow.fs as pafs

    from analysis.replay import signals_store
    from storage.parts import Store
    from storage.schemas import TABLES
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    local = workdir / "store"
    t0 = time.perf_counter()
    for g in range(generations):
        share = n // generations + (1 if g < n % generations else 0)
        spec = SyntheticSpec(n_trajectories=share, rounds=rounds, seed=g, gen_id=f"synthetic-gen-{g:02d}")
        write_synthetic_store(local, spec)
    signals_store.build(Store(local))
    synth_s = time.perf_counter() - t0
    env = {**os.environ, "XDG_CACHE_HOME": str(workdir / "xdg")}  # the remote store's record: fresh
    server = None
    if not os.environ.get("AWS_ENDPOINT_URL"):
        port = _free_port()
        server = _moto(port)
        env.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="bench")
        env["AWS_SECRET_ACCESS_KEY"] = "bench"  # moto accepts any key
        env.setdefault("AWS_REGION", "us-east-1")
    try:
        from storage import objectstore

        bucket = f"shp-bench-{uuid.uuid4().hex[:8]}"
        root = f"s3://{bucket}/store"
        fs, _ = objectstore.filesystem(root, env)
        if server is not None:
            pafs.S3FileSystem(
                access_key="bench", secret_key="bench", endpoint_override=env["AWS_ENDPOINT_URL"],
                allow_bucket_creation=True,
            ).create_dir(bucket)  # fmt: skip
        t0 = time.perf_counter()
        for table in TABLES:
            if (local / table).is_dir():
                pafs.copy_files(str(local / table), f"{bucket}/store/{table}", destination_filesystem=fs)
        upload_s = time.perf_counter() - t0
        code = "import analysis,sys; analysis.connect(sys.argv[1], policies=[]).close()"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, root], check=True, env=env, capture_output=True)
        first_open_s = time.perf_counter() - t0
        gen = "synthetic-gen-00"
        runs = [
            _run(reader, root if reader != "local" else str(local), gen, rounds, env)
            for _ in range(repeats)
            for reader in READERS
        ]
    finally:
        if server is not None:
            server.kill()
            server.wait()
    stored_mb = sum(f.stat().st_size for f in local.rglob("*.parquet")) / 1e6
    return {
        "trajectories": n,
        "rounds": rounds,
        "generations": generations,
        "parts": len(list(local.rglob("*.parquet"))),
        "store_mb": round(stored_mb, 1),
        "server": "moto_server on 127.0.0.1 (in-memory, one process)" if server else env["AWS_ENDPOINT_URL"],
        "synth_s": round(synth_s, 1),
        "upload_s": round(upload_s, 1),
        "first_open_s": round(first_open_s, 2),
        "runs": runs,
        "process": "fresh (each reader's journeys timed in a new interpreter)",
        "data": "synthetic (storage.synthetic; not a model's output)",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shp-bench objectstore", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories", "-n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--generations", type=int, default=10, help="split the trajectories over this many generations")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each reader (alternating)")
    ap.add_argument("--measure", nargs=2, metavar=("READER", "ROOT"), help=argparse.SUPPRESS)  # the fresh process
    ap.add_argument("--gen", default="synthetic-gen-00", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1], args.gen, args.rounds)), flush=True)
        return 0
    if min(args.trajectories, args.rounds, args.generations, args.repeats) < 1:
        ap.error("--trajectories, --rounds, --generations and --repeats must be >= 1")
    with tempfile.TemporaryDirectory(prefix="shp-bench-objectstore-") as tmp:
        out = run(args.trajectories, args.rounds, args.generations, args.repeats, Path(tmp))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

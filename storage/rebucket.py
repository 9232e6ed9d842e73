"""A store's scenario-hash buckets (:mod:`storage.buckets`): making a store bucketed, and reading one bucket.

    python -m storage.compact ROOT --buckets [N]    # write the layout file, move the parts written before it

:func:`rebucket` writes ``<root>/_layout.json`` first, so every writer from then on writes into the buckets, then
moves each part of a bucketed table that lies outside a bucket folder: its rows are written again, split by bucket
(hash-named parts, as any write), and only then is the old part deleted. A kill in between leaves rows stored
twice, which a reader reads once (``analysis.replay.uniqueness``); the stored replay inputs (``trajectory_inputs``) of
the moved parts are deleted, not moved: they name the parts they were read from, which are gone (a reader computes
them from the parts, as for any store without them).

:func:`bucket_view` is a listed store that holds one bucket's parts of the bucketed tables and every part of the
others: what one replay task opens (``analysis.replay.ray_replay``). A store with parts outside the buckets (one
written before it had buckets, or never bucketed: the default) is replayed in :func:`replay_groups` instead: sets of
parts that share no scenario with any other set, found from the parts' scenario ids (a stray part joins the bucket
of each scenario it holds, and every other part holding one of them), so each set holds whole trajectories and
replays alone, as a bucket does; :func:`parts_view` is the listed store of one set.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

import pyarrow.compute as pc
import pyarrow.fs as pafs

from storage import buckets
from storage.parts import Store
from storage.schemas import rounds_schema


def _bucket(store: Store, path: str) -> int | None:
    """The bucket folder ``path`` lies in (None: a part outside buckets, or of a table that has none)."""
    folders = path[len(store.path) + 1 :].split("/")[:-1]  # <table>/<column>=<value>/bucket=<nn>/<part>
    if len(folders) != 3 or folders[0] not in buckets.BUCKETED or not buckets.is_bucket_folder(folders[2]):
        return None
    return buckets.bucket_of_folder(folders[2])


def outside(store: Store) -> list[str]:
    """The parts of the bucketed tables that lie outside a bucket folder (written before the store had buckets)."""
    return [p for t in sorted(buckets.BUCKETED) for p in store.parts(t) if _bucket(store, p) is None]


def store_buckets(store: Store) -> list[int]:
    """The buckets that hold parts."""
    return sorted({b for t in buckets.BUCKETED for p in store.parts(t) if (b := _bucket(store, p)) is not None})


def rebucket(store: Store, count: int = buckets.BUCKETS) -> dict[str, int]:
    """Make ``store`` bucketed into ``count`` buckets and move its parts into them; returns what was moved."""
    if not isinstance(count, int) or not 1 <= count <= 9999:
        raise ValueError(f"--buckets: need an integer in [1, 9999], got {count!r}")
    if store.buckets not in (0, count):
        raise ValueError(f"{store.uri} is bucketed into {store.buckets} already; its parts cannot move to {count}")
    store.put_bytes(f"{store.path}/{buckets.LAYOUT_FILE}", json.dumps({"buckets": count}).encode())
    store._buckets = count
    moved = {"parts_moved": 0, "rows_moved": 0, "inputs_parts_deleted": 0}
    for path in outside(store):
        table = path[len(store.path) + 1 :].split("/", 1)[0]
        if table != "trajectory_inputs":
            rows = store.read_part(table, path)
            schema = rounds_schema(rows.schema.field("embedding").type.list_size) if table == "rounds" else None
            store.write(table, rows, schema)
            moved["parts_moved"] += 1
            moved["rows_moved"] += rows.num_rows
        else:
            moved["inputs_parts_deleted"] += 1
        store.fs.delete_file(path)
    return moved


class BucketView(Store):
    """A listed store holding one bucket of the bucketed tables (and all of the others); read-only."""

    def snapshot(self) -> Store:
        return self  # listed already: listing again would bring the other buckets back

    def globs(self, name: str, partition: object = None) -> list[str]:
        # By name: a pattern of the folders would match other buckets' parts on a local disk.
        return self.parts(name) if partition is None else self.parts(name, partition)

    def __reduce__(self) -> tuple:
        # Sent to a Ray task as its root and listing: the filesystem is made again there, from that node's
        # environment (credentials never travel with the task), and the parts are not listed again.
        listing = [(i.path, i.size, i.mtime_ns) for i in self._listing or ()]
        return _restore, (self.uri, listing, self.buckets)


def _restore(uri: str, listing: list[tuple[str, int | None, int | None]], count: int) -> BucketView:
    view = object.__new__(BucketView)
    view.__dict__.update(Store(uri).__dict__)
    view._listing = [pafs.FileInfo(p, pafs.FileType.File, size=size, mtime_ns=ns) for p, size, ns in listing]
    view._buckets = count
    return view


def bucket_view(store: Store, bucket: int) -> BucketView:
    """``store`` (listed once here, unless it is listed already) narrowed to ``bucket``."""
    listed = store if store._listing is not None else store.snapshot()
    view = object.__new__(BucketView)
    view.__dict__.update(listed.__dict__)
    assert listed._listing is not None
    view._listing = [
        i for i in listed._listing if _bucket(store, i.path) in (None, bucket) and not _outside_bucketed(store, i)
    ]
    return view


def _outside_bucketed(store: Store, info: pafs.FileInfo) -> bool:
    """A part of a bucketed table outside the buckets: no view holds it (the caller refuses such a store)."""
    table = info.path[len(store.path) + 1 :].split("/", 1)[0]
    return table in buckets.BUCKETED and _bucket(store, info.path) is None


def _table(store: Store, path: str) -> str:
    return path[len(store.path) + 1 :].split("/", 1)[0]


def parts_view(store: Store, paths: Iterable[str]) -> BucketView:
    """``store`` (listed) narrowed to ``paths`` among the bucketed tables' parts (every part of the other tables)."""
    assert store._listing is not None
    keep = set(paths)
    view = object.__new__(BucketView)
    view.__dict__.update(store.__dict__)
    view._listing = [i for i in store._listing if i.path in keep or _table(store, i.path) not in buckets.BUCKETED]
    return view


def replay_groups(store: Store, most: int) -> list[list[str]]:
    """The bucketed tables' parts of ``store`` (listed) in at most ``most`` sets, no scenario in two of them (so
    each holds whole trajectories: its rounds, signals and replay inputs), about even in bytes. Reads the scenario
    ids of the parts outside bucket folders only: a bucket folder's parts hold its scenarios and no other."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    size: dict[str, int] = defaultdict(int)
    owner: dict[str, str] = {}  # scenario -> the first unit holding it
    for table in sorted(buckets.BUCKETED):
        for info in store.part_infos(table):
            b = _bucket(store, info.path)
            unit = f"bucket={b}" if b is not None else info.path
            size[info.path] = info.size or 0
            parent[info.path] = find(unit)
            if b is not None:
                continue
            ids = pc.unique(store.read_part(table, info.path, ["scenario_id"])["scenario_id"]).to_pylist()
            for sid in ids:
                if store.buckets:  # a bucketed store's stray rows belong with their bucket's
                    parent[find(unit)] = find(f"bucket={buckets.bucket_of(sid, store.buckets)}")
                other = owner.setdefault(sid, unit)
                parent[find(unit)] = find(other)
    sets: dict[str, list[str]] = defaultdict(list)
    for path in size:
        sets[find(path)].append(path)
    groups: list[list[str]] = [[] for _ in range(max(1, min(most, len(sets))))]
    load = [0] * len(groups)
    for paths in sorted(sets.values(), key=lambda ps: (-sum(size[p] for p in ps), ps)):
        i = load.index(min(load))
        groups[i] += sorted(paths)
        load[i] += sum(size[p] for p in paths)
    return [g for g in groups if g]

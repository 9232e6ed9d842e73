"""Damaged parts moved aside: ``<root>/_quarantine/<table>/``, each with a ``.reason.txt`` beside it.

:func:`quarantine` (``shp-query --store S --quarantine``) moves each damaged part out of its table
folder in one rename, into a folder no reader globs; the store is readable again. The reason file
(written first, so a part in quarantine always has one) says what was wrong and what a rerun of the
sweep does about the rows lost: it regenerates exactly the trajectories that were lost
(``storage.resume.done_scenarios`` no longer sees them; the response cache means no paid call is
repeated).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage.parts import Store
from storage.verify import PartCheck, display, verify_store

QUARANTINE_DIR = "_quarantine"
REASON_SUFFIX = ".reason.txt"


@dataclass(frozen=True)
class Quarantined:
    table: str
    source: str
    dest: str
    problems: tuple[str, ...]
    restores: str  # what a rerun does about what was lost


def _lost(store: Store, table: str, path: str, rows: int | None) -> str:
    """What a rerun of the sweep does about the rows of a quarantined part (read what can be read)."""
    held = f"{rows} rows" if rows is not None else "rows that cannot be counted"
    if table == "rounds":
        try:
            t = pq.read_table(path, columns=["gen_id", "scenario_id"], filesystem=store.fs)
            pairs = sorted(set(zip(t["gen_id"].to_pylist(), t["scenario_id"].to_pylist(), strict=True)))
        except Exception:  # noqa: BLE001 - the part is damaged: say what is known
            return (
                f"{held} of trajectories that cannot be read back: a rerun of the sweep regenerates the "
                "trajectories its scenarios lack (the response cache repays no call)"
            )
        ids = ", ".join(s for _, s in pairs[:8]) + (", ..." if len(pairs) > 8 else "")
        gens = ", ".join(sorted({g if len(g) <= 20 else g[:12] + "..." for g, _ in pairs}))
        return (
            f"{len(pairs)} trajectories of generation {gens} ({ids}): a rerun of the sweep regenerates "
            "exactly them (the response cache repays no call)"
        )
    return {
        "judgments": f"{held}: a rerun of the sweep judges those drafts again (the judge cache repays no call)",
        "feedback_embeddings": f"{held}: a rerun of the sweep embeds those critiques again (locally, no paid call)",
        "scenarios": f"{held}: rewritten only when their trajectories are generated again",
        "generations": f"{held}: rewritten only when their generation runs again",
        "failures": f"{held} of failure history (not regenerated; a rerun records its own)",
        "manifests": f"{held} of run history (not regenerated; a rerun records its own)",
        "results": f"{held} of earlier jobs' results (not regenerated; a rerun writes its own)",
    }.get(table, held)


def _write_text(store: Store, path: str, text: str) -> None:
    with store.fs.open_output_stream(path) as out:
        out.write(text.encode())


def quarantine(store: Store, checks: Sequence[PartCheck] | None = None, *, recheck: bool = False) -> list[Quarantined]:
    """Move every damaged part to ``<root>/_quarantine/<table>/`` (one rename each), a reason file beside it."""
    checks = verify_store(store, use_record=not recheck) if checks is None else checks
    moved = []
    for c in checks:
        if c.ok:
            continue
        folder = f"{store.path}/{QUARANTINE_DIR}/{c.table}"
        store.fs.create_dir(folder, recursive=True)
        base = c.path.rsplit("/", 1)[-1]
        dest, n = f"{folder}/{base}", 1
        while store.fs.get_file_info(dest).type != pafs.FileType.NotFound:
            dest, n = f"{folder}/{base}.{n}", n + 1
        restores = _lost(store, c.table, c.path, c.rows)
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        reason = (
            f"quarantined {when} by storage.quarantine (shp-query --quarantine)\n"
            f"table: {c.table}\nfrom: {display(store, c.path)}\nchecksum: {c.checksum or '-'}\n"
            + "".join(f"problem: {p}\n" for p in c.problems)
            + f"lost: {restores}\n"
        )
        _write_text(store, dest + REASON_SUFFIX, reason)  # first: a part in quarantine always has its reason
        store.fs.move(c.path, dest)  # a rename: the part leaves the table folder in one step
        moved.append(Quarantined(c.table, c.path, dest, c.problems, restores))
    return moved

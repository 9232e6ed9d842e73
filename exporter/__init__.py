"""``shp-export``: a store's trajectories in a format other tools read (``--format inspect``: an inspect_ai log, for
``inspect view`` and ``read_eval_log``), whole or cut at a policy's stop. A generated run's rounds carry, besides
the ``scores`` table, their answer's EM / F1 and the judge's IS (``--judge`` names it when the store has several);
an imported one's carry the scores it was imported with (so an export imports back the same).

An app of its own (as ``sweeps`` and ``bench``): ``--policy`` reads the replay (``analysis``), which the importer
beside the generation (``shp_ray.importer``) may not import.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from exporter.inspect_eval import EvalHeader, sample, write_eval
from exporter.trajectories import generation_of, replayed, trajectories
from storage.parts import Store, StoreError, open_store
from storage.root_check import StoreUnusable

FORMATS = ("inspect",)


def export(store: Store, out: str, gen: str | None = None, policy: str | None = None,
           judge: str | None = None) -> tuple[int, int]:  # fmt: skip
    """Write the generation's trajectories (cut at ``policy``'s stops) to ``out``; (samples, rounds) written.
    The file appears whole or not at all (written beside it, then renamed)."""
    if not Path(out).parent.is_dir():
        raise StoreError(f"{out}: the folder {Path(out).parent} does not exist")
    store = open_store(store)  # a root that holds no store: refused, nothing created
    row = generation_of(store, gen)
    generated = json.loads(row["config_json"] or "{}").get("kind") != "imported"
    if judge and not (policy or generated):
        raise StoreError(f"--judge: generation {row['gen_id'][:12]} is imported (its scores are the file's); "
                         "a judge applies with --policy")  # fmt: skip
    read = replayed(store, row["gen_id"], policy, judge, generated) if policy or generated else None
    trajs = trajectories(store, row["gen_id"], read.stops if read else None, read.measures if read else None)
    if not trajs:
        raise StoreError(f"no trajectory of generation {row['gen_id'][:12]} to export")
    model = row["model"] or "unknown"
    samples = [sample(t, model) for t in trajs]
    task = f"shp-ray {row['gen_id'][:12]}" + (f" {policy}" if policy else "")
    meta = {"gen_id": row["gen_id"], "store": str(store.uri), "policy": policy, "max_rounds": row["max_rounds"],
            "judge": read.judge if read else None}  # fmt: skip
    head = EvalHeader(task, model, row["created_at"], meta)
    target = Path(out)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            write_eval(f, head, samples)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as an open() would make it, not mkstemp's owner-only mode
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(samples), sum(len(t.rounds) for t in trajs)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="shp-export",
        description="Export a store's trajectories (one generation) to a file other tools read: --format inspect "
        "writes an inspect_ai .eval log (inspect view, read_eval_log), one sample per trajectory.",
    )
    ap.add_argument("store", help="store root")
    ap.add_argument("out", help="the file to write (OUT.eval)")
    ap.add_argument("--format", choices=FORMATS, default="inspect", help="the file's format (default: inspect)")
    ap.add_argument("--gen", help="the generation (its id or a prefix); needed when the store holds several")
    ap.add_argument("--policy", help="each trajectory's rounds up to this policy's stop (the replay's), not all")
    ap.add_argument(
        "--judge", help="the judge whose IS is exported (a generated run) and --policy replays (default: the only one)"
    )
    args = ap.parse_args(argv)
    if not args.out.endswith(".eval"):
        ap.error(f"{args.out}: an inspect_ai log is written as a .eval file")
    try:
        n, rounds = export(Store(args.store), args.out, args.gen, args.policy, args.judge)
    except (StoreError, StoreUnusable, OSError) as exc:
        print(f"shp-export: {exc}", file=sys.stderr)
        return 2
    cut = f", each up to {args.policy}'s stop" if args.policy else ""
    print(f"exported {n} trajectories ({rounds} rounds{cut}) from {args.store} to {args.out} (inspect_ai log)")
    return 0


def entry() -> None:
    raise SystemExit(main())

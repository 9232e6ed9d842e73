"""The replay on Ray: one DuckDB per scenario-hash bucket, as a Ray task, and the per-policy aggregates added up.

    con = analysis.connect("s3://bucket/store", ray_address="auto")   # or shp-query --ray auto
    con.sql("SELECT * FROM policy_summary").show()

A bucketed store (:mod:`storage.buckets`; ``python -m storage.compact ROOT --buckets`` makes one) holds each
trajectory's rounds, signals and replay inputs in one bucket folder per generation, so a bucket replays alone:
each task opens :func:`analysis.connect` over a :func:`storage.rebucket.bucket_view` of the store (that bucket's
parts of the bucketed tables, all of the judgments, scenarios and generations). A store with parts outside the
buckets -- every store a generation writes unless it was made bucketed, a run killed and resumed included -- is
replayed in sets of parts that share no scenario (:func:`storage.rebucket.replay_groups`, from the scenario ids of
its unbucketed parts, read once by the driver), each as a bucket. Each task replays every policy and returns
its share of ``policy_summary`` (``ray_bucket_summary.sql``: sums and counts, and the paired IS difference's sum
and M2). The driver adds the shares up (``ray_policy_summary.sql``) into the ``policy_summary`` the single-node
replay computes, up to the order of floating-point additions (tests/test_ray_replay.py). Nothing in
policy_summary needs more; a statistic that does not add up (a median, a bootstrap, the Wilcoxon test) needs the
rows themselves: :meth:`RayReplay.rows` is that explicit second pass, one more task per bucket returning a query's
rows (e.g. the paired differences of one policy), concatenated on the driver.

Where a task runs: the store is listed once, by the driver, and each task is handed its bucket's part listing (no
listing of its own). A local store is read on the nodes of the driver's host (its disk); an object store on every
live node with CPUs, the buckets dealt out in turn, each pinned to its node (soft: a dead node's bucket runs
elsewhere).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import cycle
from typing import Any

import pyarrow as pa
from duckdb import DuckDBPyConnection as Connection

from analysis import sql
from analysis.errors import AnalysisError
from analysis.replay.sandbox import lock_down, new_connection
from analysis.replay.scope import ReplayScope
from analysis.sql.tost_table import detectable_margins
from storage.parts import Store
from storage.rebucket import bucket_view, outside, parts_view, replay_groups, store_buckets


@dataclass(frozen=True)
class RayReplay:
    """The store's buckets and where each is replayed, with the options every task opens its bucket with."""

    scope: ReplayScope  # its store listed once
    buckets: tuple[int, ...]  # the bucket numbers (or, for a store with parts outside buckets, the sets' numbers)
    views: tuple[Store, ...]  # what each task opens: its bucket's (or set's) parts and all of the other tables'
    nodes: tuple[str, ...]  # the node each bucket is pinned to, in bucket order
    options: dict[str, Any]  # analysis.connect's read_only, materialize, validate
    opener: tuple[Callable[..., Any], Callable[..., Any]]  # analysis.replay.db's connect and setup_of (db imports this)

    def _run(self, job: Any, *args: Any) -> list[Any]:  # noqa: ANN401 - a Ray remote function's arguments
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(num_cpus=1, max_retries=1)(job)
        refs = [
            remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True)).remote(
                replace(self.scope, store=view), self.options, self.opener, *args
            )
            for view, node in zip(self.views, self.nodes, strict=True)
        ]
        return ray.get(refs)

    def summaries(self) -> tuple[pa.Table, Any]:
        """Every bucket's share of policy_summary (one table), and the first bucket's analysis.replay.db.Setup."""
        shares = self._run(_bucket_summary)
        return pa.concat_tables([t for t, _ in shares]), shares[0][1]

    def rows(self, statement: str) -> pa.Table:
        """The second pass: ``statement`` (a query over the views) run in every bucket, its rows concatenated."""
        return pa.concat_tables(self._run(_bucket_rows, statement))


def _bucket_summary(scope: ReplayScope, options: dict[str, Any], opener: tuple) -> tuple[pa.Table, Any]:
    connect, setup_of = opener
    con = connect(scope, **options)
    try:
        return con.sql(bucket_summary_sql()).to_arrow_table(), setup_of(con)
    finally:
        con.close()


def _bucket_rows(scope: ReplayScope, options: dict[str, Any], opener: tuple, statement: str) -> pa.Table:
    con = opener[0](scope, **options)
    try:
        return con.sql(statement).to_arrow_table()
    finally:
        con.close()


def _reasons() -> Sequence[str]:
    return tuple(sql.REASON_CODES.values())


def bucket_summary_sql() -> str:
    shares = ", ".join(f"sum((r.reason = {sql.quote(r)})::INTEGER) AS stopped_{r}" for r in _reasons())
    return sql.query("ray_bucket_summary", shares=shares)


def combined_summary_sql(delta: float) -> str:
    shares = ", ".join(f"sum(stopped_{r}) / nullif(sum(n_reason), 0) AS share_{r}" for r in _reasons())
    verdict = sql.policy_verdict_sql(delta)  # the bound and the TOST plan as the single-node summary computes them
    return sql.query("ray_policy_summary", shares=shares, verdict=verdict, delta=sql.double(delta))


def join_ray(address: str) -> None:
    """Join the cluster at ``address`` (``auto``, ``host:port``, ``ray://...``) unless this process is in one."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AnalysisError(f"--ray {address}: could not join the cluster: {said}") from None


def readers(store: Store) -> list[str]:
    """The nodes that can read ``store``: those with CPUs (on the driver's host only, for a local store), the
    driver's node first."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    host = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == here), None)
    if store.local:
        nodes = [n for n in nodes if n["NodeManagerAddress"] == host]
    found = sorted((n["NodeID"] for n in nodes), key=lambda node: (node != here, node))
    if not found:
        raise AnalysisError(f"no live Ray node with CPUs can read {store.uri}")
    return found


TASKS_PER_NODE = 2  # sets of an unbucketed store per node that reads it (a task per set)


def plan(scope: ReplayScope, options: dict[str, Any], opener: tuple) -> RayReplay:
    """The buckets of ``store`` (listed once) dealt out over the nodes that can read it; a store with parts outside
    buckets in sets of parts that share no scenario (:func:`storage.rebucket.replay_groups`), each replayed as a
    bucket."""
    store = scope.store
    listed = store if store._listing is not None else store.snapshot()
    if not listed.parts("rounds"):
        raise AnalysisError(f"{store.uri} holds no rounds: nothing to replay on Ray")
    nodes_found = readers(listed)
    if outside(listed):
        groups = replay_groups(listed, TASKS_PER_NODE * len(nodes_found))
        found = tuple(range(len(groups)))
        views = tuple(parts_view(listed, g) for g in groups)
    else:
        found = tuple(store_buckets(listed))
        views = tuple(bucket_view(listed, b) for b in found)
    nodes = tuple(node for _, node in zip(found, cycle(nodes_found), strict=False))
    return RayReplay(replace(scope, store=listed), found, views, nodes, options, opener)


def connect(scope: ReplayScope, ray_address: str, options: dict[str, Any], opener: tuple) -> tuple[Connection, Any]:
    """An in-memory connection holding ``policy_summary`` combined from every bucket's replay (and the buckets'
    shares, ``bucket_summaries``), and its Setup (``inputs='ray'``). ``scope``: the resolved
    :class:`analysis.replay.scope.ReplayScope`, every task opening its bucket with it (its store narrowed to the bucket)
    and ``options`` (analysis.connect's read_only, materialize, validate) through ``opener`` (analysis.replay.db's
    connect and setup_of)."""
    store, delta = scope.store, scope.delta
    join_ray(ray_address)
    shares, setup = plan(scope, options, opener).summaries()
    con = new_connection(scope.memory_limit)
    try:
        con.register("bucket_summaries", shares)
        con.execute(sql.t95_table_sql())
        con.execute(sql.tost_plan_sql(detectable_margins()))
        con.execute(sql.create("policy_summary", combined_summary_sql(delta), table=True))
        if options.get("read_only", True):
            lock_down(con, store)
    except BaseException:
        con.close()
        raise
    return con, replace(setup, store=store.uri, inputs="ray")

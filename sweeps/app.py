"""``shp-sweep``: the Hydra app. One job = generate what is missing, replay its cells, report.

    shp-sweep                                   # the embedded default: llama.cpp + SmolLM2-135M
    shp-sweep -m halting.eps=0.02,0.04,0.06 halting.k=1,2,3
    shp-sweep -m +sweep=ablation7 provider=sim
    shp-sweep provider=openai provider.base_url=http://127.0.0.1:8000/v1 provider.model=M \\
              provider.api_key_env=MY_KEY provider.rpm=600

Add ``hydra/launcher=ray`` to run the jobs of a multirun concurrently on Ray.

Exit status: 0 only when every job replayed all of its scenarios. A job that stopped early (a dead
endpoint, a refused key, a server that died) or lost scenarios for good prints why and what to do,
and the command exits 1 -- in a multirun after the other jobs ran. ``allow_partial=true`` accepts a
job whose failed scenarios are left out of the replay.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

import conf.schema  # noqa: F401  (registers the config tree)
from conf.resolve import ConfigError, to_job
from conf.spec import JobSpec
from shp_ray.generation.cluster import RayUnavailable
from shp_ray.generation.datasets import DatasetError
from shp_ray.generation.guard import GenerationAborted
from shp_ray.generation.interrupt import exit_status, listening, requested
from shp_ray.providers.llama import EmbeddedLLMError
from shp_ray.providers.registry import describe_provider
from shp_ray.redaction import redact_text
from sweeps import command_line
from sweeps import job as sweep_job
from sweeps.plan import describe, gate, make_plan, take_confirm
from sweeps.redact_callback import SNAPSHOT_FILES, protect_process
from sweeps.summary import write_job

log = logging.getLogger("shp_ray.sweep")


def _job_tag() -> tuple[str, Path]:
    hc = HydraConfig.get()
    overrides = ",".join(redact_text(o) for o in hc.overrides.task) or "(defaults)"  # printed and stored
    return overrides, Path(hc.runtime.output_dir)


def _num(value: object, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _power(row: dict) -> str:
    """The TOST's power at this N and the N it needs for 0.8 ("-": no test, e.g. zero variance)."""
    if row.get("degenerate") or row.get("tost_power") is None:
        return "-"
    return f"{row['tost_power']:.2f}/N{row['n_needed']}"


def _map(row: dict) -> dict:
    """A row's scores map as a dict (Arrow gives a map as (key, value) pairs unless asked for dicts)."""
    value = row.get("scores")
    return dict(value) if isinstance(value, list) else value or {}


def _scores(summary: list[dict], primary: str) -> tuple[list[str], list[str]]:
    """The scores of the summary's rows (policy_summary's scores map), the primary first, and those left out: no
    value anywhere, their scorer having failed on every draft (a column of dashes would say nothing)."""
    names = sorted({name for row in summary for name in _map(row)})
    failed = [n for n in names if all((_map(row).get(n) or {}).get("mean") is None for row in summary)]
    return sorted((n for n in names if n not in failed), key=lambda name: name != primary), failed


def _outcomes(row: dict, scores: list[str], has_is: bool, has_f1: bool) -> str:
    """Each outcome's columns: every score at the stop and its paired difference, IS and dIS, answer F1."""
    said = ""
    for name in scores:
        value = _map(row).get(name) or {}
        said += f"{_num(value.get('mean'), '.3f'):>{max(7, len(name) + 1)}}"
        said += f"{_num(value.get('delta'), '+.3f'):>{max(8, len(name) + 2)}}"
    if has_is:
        said += f"{_num(row['mean_is'], '.3f'):>7}{_num(row['delta_is'], '+.3f'):>8}"
    return said + (f"{_num(row.get('mean_f1'), '.3f'):>7}" if has_f1 else "")


def _print_table(result: sweep_job.JobResult) -> None:
    from analysis.report.costs import usd  # analysis is loaded by the job already ("-": unpriced, never $0)
    from analysis.report.data import answers_known
    from analysis.report.power import warning

    # Every outcome the store has: the scores (a code run's hidden tests, a user's scorer, an import's), the judge's
    # IS, answer F1 where the tasks have gold answers; the verdict is on the primary outcome. A stopping rule is
    # judged by correctness where it exists, never by the judge's IS alone.
    primary, summary = result.primary, result.summary
    scores, failed = _scores(summary, primary)
    has_is, has_f1 = any(r.get("n_is") for r in summary), answers_known(summary)  # F1: as the report decides
    outcome = "".join(f"{n:>{max(7, len(n) + 1)}}{'d' + n:>{max(8, len(n) + 2)}}" for n in scores)
    outcome += f"{'IS':>7}{'dIS':>8}" * has_is + f"{'F1':>7}" * has_f1
    head = (
        f"{'policy':<18}{'n':>5}{'rounds':>8}{'op_tokens':>11}{'$live':>10}{'$batch':>10}{'saving':>8}"
        f"{outcome}  non-inferior  power/N_needed"
    )
    for split in dict.fromkeys(row.get("split") for row in summary):  # a table per split, never pooled
        rows = [row for row in summary if row.get("split") == split]
        print(f"\nsplit {split or '(none recorded)'}, N = {max(int(row['n']) for row in rows)} trajectories")
        print(head + "\n" + "-" * len(head))
        for row in rows:
            lead = row if primary == "is" else _map(row).get(primary) or {}
            print(
                f"{row['policy']:<18}{row['n']:>5}{_num(row['mean_rounds'], '.2f'):>8}"
                f"{_num(row['mean_operational_tokens'], '.0f'):>11}"
                f"{usd(row.get('mean_operational_cost_live_usd'), '-'):>10}"
                f"{usd(row.get('mean_operational_cost_batch_usd'), '-'):>10}{_num(row['token_saving'], '.0%'):>8}"
                f"{_outcomes(row, scores, has_is, has_f1)}  {_num(lead.get('non_inferior'), ''):<12}  {_power(lead)}"
            )
    said = [f"{n}: its mean at the stop (d{n} paired against fixed_k{{depth}})" for n in scores]
    said += [f"{n}: left out (its scorer failed on every draft; the scores table holds the errors)" for n in failed]
    said += [f"IS by the judge {result.judge!r}"] if has_is else ["IS: left out (no judge scored these drafts)"]
    no_f1 = "F1: left out (no reference answers, or no returned draft states an Answer: line)"
    said += ["F1: HotpotQA answer F1 (strict reading)"] if has_f1 else [no_f1]
    print(f"saving{' and dIS are' if has_is else ' is'} against fixed_k{{depth}}; " + "; ".join(said))
    if primary != "is":  # (on IS, as ever: a QA run's table reads as it always has)
        print(f"non-inferior, power/N_needed: the paired TOST (margin δ) on {primary}, the primary outcome")
    print(
        "$live / $batch: the operational tokens per question in US dollars if every call were live / batch "
        f"({'-' if not result.prices else result.prices.removeprefix('prices: ')})"
    )
    for said_line in result.unpriced:
        print(f"WARNING: {said_line}")
    warned = warning(summary)
    if warned and has_is:
        print(warned)


# The primary config by the location of the project's own package (never by the module name `conf`, which a
# folder of the user's could answer to): sweeps/__init__.py has bound it.
CONFIG_DIR = str(Path(conf.schema.__file__).resolve().parent)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def main(cfg: DictConfig) -> dict:
    try:
        confirm = take_confirm(cfg)  # +confirm=true: not a setting of the job
        job = to_job(cfg)
        sweep_job.check_folders(job)  # a store or report folder that cannot be written: nothing runs
    except ConfigError as exc:
        said = redact_text(str(exc))  # a rule may echo the value (a base_url with a password)
        _refused(f"invalid config: {said}")
    if _planned(job, confirm):
        _leave_no_run_folder()  # a dry run writes nothing (docs/sweeps.md): not even Hydra's run folder
        return {"dry_run": True}
    tag, output_dir = _job_tag()
    command = "shp-sweep " + " ".join(shlex.quote(redact_text(a)) for a in sys.argv[1:])
    try:
        snap = sweep_job.snapshot(cfg)
        with listening():  # every Ctrl-C recorded: one a library swallows still ends the job (exit 130)
            result = sweep_job.run(job, output_dir=output_dir, job_tag=tag, config_snapshot=snap, command=command)
    except DatasetError as exc:  # raised before any call or write: nothing generated, no manifest row
        _refused(f"invalid tasks: {redact_text(str(exc))}")
    except (GenerationAborted, EmbeddedLLMError, RayUnavailable, sweep_job.JobFailed) as exc:
        _fail(tag, job.store.root, exc)
    except KeyboardInterrupt:
        _interrupted(job)
    if requested():  # the Ctrl-C was swallowed on its way up: the job ran on, but the user asked to stop
        _interrupted(job)
    print(
        f"\njob {tag}: {result.trajectories}/{result.scenarios} trajectories, "
        f"{result.generated} generated now ({result.generation_calls} paid calls), {result.failed} failed"
        + (f", on {len(result.nodes)} Ray nodes" if len(result.nodes) > 1 else "")
        + (
            f"; {result.lost_workers} workers lost with their node, {result.resubmitted} trajectories run again"
            if result.lost_workers
            else ""
        )
    )
    print(f"drafts by: {describe_provider(job.provider.kind, job.provider.model)} (model {job.provider.model})")
    _print_table(result)
    if result.report:
        print(f"report: {result.report}")
        print(f"html:   {result.html} (open it from disk: no server needed)")
    store = redact_text(result.store)  # a store URI may carry credentials (s3://KEY:SECRET@bucket)
    print(f"store:  {store}")
    from analysis import sql  # loaded by the job already; imported here, like sweeps.job, only once needed

    query = sql.query("sweep_explore_example")
    print(f'explore: shp-query --store {store} "{query}"')
    done = sweep_job.as_dict(result)
    if HydraConfig.get().mode == RunMode.MULTIRUN:  # the sweep's one summary reads it (sweeps.summary_callback)
        write_job(output_dir, [redact_text(o) for o in HydraConfig.get().overrides.task], done)
    return done


def _to_log_file(said: str) -> None:
    """An error into the job's log file only: the console hears it once, from the SystemExit that follows."""
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, said, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def _refused(said: str, log_it: bool = True) -> NoReturn:
    """A job refused before any work: the one line on the console (and in the job's log file, where one stays),
    exit 1; a single run leaves no run folder behind (:func:`_leave_no_run_folder`)."""
    if log_it:
        _to_log_file(said)
    _leave_no_run_folder()
    raise SystemExit(f"shp-sweep: {said}")


def _leave_no_run_folder() -> None:
    """Remove the run folder Hydra made for this job (``runs/<date>/<time>/``) and the parents that are left empty,
    up to the working directory: a run that did nothing leaves nothing. Only in a single run (a multirun's folder
    records the sweep and its other jobs), only that folder, only when it holds nothing but Hydra's own files (the
    ``.hydra`` snapshots and the job's log); never the working directory itself."""
    hc = HydraConfig.get()
    if hc.mode != RunMode.RUN:
        return
    folder, cwd = Path(hc.runtime.output_dir).resolve(), Path(hc.runtime.cwd).resolve()
    snap, job_log = folder / ".hydra", folder / f"{hc.job.name}.log"
    if folder == cwd or folder in cwd.parents or folder.is_symlink() or not folder.is_dir():
        return
    try:
        own = [p for p in folder.iterdir() if p not in (snap, job_log)]
        kept = list(snap.iterdir()) if snap.is_dir() and not snap.is_symlink() else []
    except OSError:
        return
    if own or any(p.name not in SNAPSHOT_FILES or p.is_symlink() or not p.is_file() for p in kept):
        return  # something not Hydra's: the folder is the user's to keep
    for handler in list(logging.getLogger().handlers):  # the job's log file is open: closed before it goes
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).resolve().parent == folder:
            logging.getLogger().removeHandler(handler)
            handler.close()
    try:
        for path in [*kept, job_log]:
            path.unlink(missing_ok=True)
        if snap.is_dir():
            snap.rmdir()
        folder.rmdir()
        for parent in folder.parents:  # runs/<date>/, runs/: only inside the working directory, only if empty
            if cwd not in parent.parents:
                break
            parent.rmdir()  # refuses a folder that is not empty: a parent holding other runs stays
    except OSError:
        return


def _planned(job: JobSpec, confirm: bool) -> bool:
    """Print (dry run) or log the job's plan; stop a plan past the gates without +confirm=true. True: dry run."""
    try:
        planned = make_plan(job)
    except DatasetError as exc:  # a tasks file that fails its checks: nothing runs
        _refused(f"invalid tasks: {redact_text(str(exc))}")
    if planned.refused:  # a report.primary the job cannot have: said before any call, not after the replay
        _refused(f"invalid config: {redact_text(planned.refused)}")
    block = describe(planned, job)
    if job.dry_run:
        print(block)
    else:
        log.info("%s", block)
    why = gate(planned, job)
    if why and not confirm:
        _refused(why, log_it=False)  # the plan, logged above, is in the log file of a multirun's job
    return job.dry_run


def _fail(tag: str, shown: str, exc: Exception) -> None:
    """Say once what failed and what to do; exit 1 (in a multirun: after the other jobs ran)."""
    print(f"\nshp-sweep: job {tag} FAILED ({type(exc).__name__}): {exc}\nstore: {shown}", file=sys.stderr)
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        raise sweep_job.JobFailed(str(exc))  # the launcher records it and goes on; Hydra exits 1 at the end
    raise SystemExit(1)


def _interrupted(job: JobSpec | None) -> None:
    """Ctrl-C or SIGTERM: one line, exit 130 or 143. Parts are whole or absent and paid calls are cached, so a
    rerun resumes."""
    kept = "no trajectories stored"
    if job is not None:
        from storage.cache import cached_replies  # loaded by the job already
        from storage.resume import done_scenarios

        gen_id = job.generation.gen_id(job.provider.kind, job.provider.model)
        stored = len(done_scenarios(job.store, gen_id))
        replies = cached_replies(job.caches)
        kept = f"{stored} trajectories stored, {replies} replies cached"
    print(
        f"\ninterrupted: {kept}; run the same command to resume (a cached reply is not paid for again)",
        file=sys.stderr,
    )
    raise SystemExit(exit_status())


def entry() -> None:
    if {"--help", "-h"} & set(sys.argv[1:]):  # our own text, no secret in it: printed as written
        print(command_line.help_text())  # the groups and presets; Hydra's own flags: --hydra-help
        return
    protect_process()  # before Hydra parses sys.argv: its own errors quote an override (a password in a URL)
    argv = sys.argv[1:]
    typos = command_line.option_typos(argv) or command_line.unknown_keys(argv) or command_line.wrong_values(argv)
    if typos:  # a mistyped option, preset, key or value: one line each, not Hydra's stack of its internals
        print("\n".join(typos), file=sys.stderr)
        raise SystemExit(1)
    try:
        main()  # hydra.main reads sys.argv itself
    except KeyboardInterrupt:  # before a job started (composing the config, starting up)
        _interrupted(None)
    except SystemExit as exc:
        if exc.code not in (0, None):  # Hydra refused an override, or a job failed: name a mistyped key's nearest
            for said in command_line.suggestions(sys.argv[1:]):
                print(said, file=sys.stderr)
        raise

"""``shp-bench generate``: how fast the embedded model writes in a real sweep, next to what llama.cpp's
own benchmarks say the engine does on this machine.

``--reference``: llama.cpp's benchmarks on the model and threads the embedded server uses, built
from the same source and flags (scripts/build_llama_bin.sh). ``llama-batched-bench`` decodes B
sequences together (B = 1, 2, 4, 8: what the server's slots do) and gives prompt and generated
tokens/s at each; ``llama-bench`` gives the one-sequence figures as a cross-check.

The sweep (``--tasks 0``: none): the HumanEval code loop (``--tasks`` problems x
``--rounds`` rounds, the visible tests as the critic) through the embedded server, as ``shp-sweep``
runs it (a fresh store, no response cache), and its calls/hour and tokens/s over the generation's
wall time. With ``--reference`` too, both in one invocation, and the two side by side
(:func:`against_engine`: ``ratio`` of generated tokens/s, ``work_ratio`` of the time for all the tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

BATCHES = (1, 2, 4, 8)


def _run_json_lines(cmd: list[str]) -> list[dict]:
    from shp_ray.providers.llama import SERVER_ENV

    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env={**os.environ, **SERVER_ENV})
    if out.returncode != 0:
        raise SystemExit(f"shp-bench generate: {Path(cmd[0]).name} failed ({out.returncode}): {out.stderr[-600:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def reference(alias: str, threads: int, prompt: int, gen: int, batches: tuple[int, ...] = BATCHES) -> dict:
    """llama.cpp's own figures for ``alias`` on ``threads`` threads: prompt and generated tokens/s."""
    from shp_ray.providers.llama import model_path, server_binary

    model = str(model_path(alias))
    t = str(threads)
    # -npl: sequences decoded together; each gets its own prompt of `prompt` tokens, then `gen` tokens.
    ctx = str(max(batches) * (prompt + gen) + 64)
    rows = _run_json_lines([
        str(server_binary("llama-batched-bench")), "-m", model, "-t", t, "-tb", t, "-c", ctx,
        "-npp", str(prompt), "-ntg", str(gen), "-npl", ",".join(map(str, batches)), "--output-format", "jsonl",
    ])  # fmt: skip
    single = _run_json_lines([
        str(server_binary("llama-bench")), "-m", model, "-t", t, "-p", str(prompt), "-n", str(gen), "-r", "2",
        "-o", "jsonl",
    ])  # fmt: skip
    one = {("pp" if r["n_prompt"] else "tg"): round(float(r["avg_ts"]), 2) for r in single}
    return {
        "model": alias,
        "threads": threads,
        "prompt_tokens": prompt,
        "gen_tokens": gen,
        "batched": {
            str(r["pl"]): {
                "pp_tokens_per_s": round(float(r["speed_pp"]), 2),
                "tg_tokens_per_s": round(float(r["speed_tg"]), 2),
            }
            for r in rows
        },
        "single": {"pp_tokens_per_s": one.get("pp"), "tg_tokens_per_s": one.get("tg")},
    }


def _speeds(row: dict) -> dict[str, float]:
    return {"pp_tokens_per_s": round(float(row["speed_pp"]), 2), "tg_tokens_per_s": round(float(row["speed_tg"]), 2)}


def sweep(a: argparse.Namespace) -> dict:
    """The HumanEval code loop through the embedded server, as shp-sweep runs it, in a fresh store."""
    root = Path(tempfile.mkdtemp(prefix="shp-bench-generate-"))
    try:
        return _sweep_into(a, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # a benchmark leaves nothing behind


def _sweep_into(a: argparse.Namespace, root: Path) -> dict:
    from hydra import compose, initialize_config_module

    from conf.resolve import to_job
    from shp_ray.generation.datasets import select
    from sweeps.job import ensure_generation, with_tasks

    overrides = [
        "dataset=humaneval", f"dataset.limit={a.tasks}", f"generation.max_rounds={a.rounds}",
        f"provider.model={a.model}", "report.enabled=false",
        f"store.path={root / 'store'}", f"generation.workers={a.workers}",
    ]  # fmt: skip
    overrides += [f"generation.max_tokens={a.max_tokens}"] if a.max_tokens else []
    overrides += [f"provider.n_threads={a.threads}"] if a.threads else []
    overrides += [f"provider.parallel={a.parallel}"] if a.parallel else []
    with initialize_config_module(config_module="conf", version_base="1.3"):
        job = to_job(compose(config_name="config", overrides=overrides))
    job, tasks = with_tasks(job)
    scenarios = select(tasks, job.split, job.limit)
    summary = ensure_generation(job, job.store, scenarios, "bench-generate", "shp-bench generate")
    if summary is None or summary.generated == 0:
        raise SystemExit("shp-bench generate: the sweep generated nothing (see its log above)")
    rounds = job.store.read("rounds")
    tokens = {c: sum(v or 0 for v in rounds[c].to_pylist()) for c in rounds.column_names if c.endswith("_tokens")}
    prompt = tokens.get("writer_prompt_tokens", 0) + tokens.get("critic_prompt_tokens", 0)
    gen = tokens.get("writer_completion_tokens", 0) + tokens.get("critic_completion_tokens", 0)
    secs = summary.generation_s
    opts = job.provider_options
    return {
        "model": a.model,
        "tasks": a.tasks,
        "rounds": a.rounds,
        "generated": summary.generated,
        "failed": summary.failed,
        "calls": summary.paid_calls,
        "generation_s": round(secs, 1),
        "calls_per_hour": round(summary.paid_calls / secs * 3600, 1),
        "prompt_tokens_per_s": round(prompt / secs, 2),
        "gen_tokens_per_s": round(gen / secs, 2),
        "prompt_tokens": prompt,
        "gen_tokens": gen,
        "threads": getattr(opts, "n_threads", None),  # the embedded server's (None: another kind)
        "parallel": getattr(opts, "parallel", 1),  # the server's slots (1: a server without slots)
    }


def against_engine(run: dict, ref: dict) -> dict[str, float | None]:
    """The sweep beside the engine at the sweep's batch size (its slots).

    ``ratio``: generated tokens/s over llama-batched-bench's (the issue's figure; the sweep's wall time also
    evaluates its prompts, so a prompt-heavy loop stays well below 1 at the engine's limit). ``work_ratio``:
    the time the engine needs for the sweep's tokens -- its prompt tokens at the engine's prompt speed plus its
    generated tokens at its generation speed -- over the sweep's wall time; 1 is the engine's pace, above 1
    the slots' prompt reuse saved more than the loop's tests and embedding cost."""
    speeds = ref["batched"].get(str(run["parallel"]), {})
    tg, pp = speeds.get("tg_tokens_per_s"), speeds.get("pp_tokens_per_s")
    engine_s = run["prompt_tokens"] / pp + run["gen_tokens"] / tg if tg and pp else None
    return {
        "reference_gen_tokens_per_s": tg,
        "ratio": round(run["gen_tokens_per_s"] / tg, 3) if tg else None,
        "work_ratio": round(engine_s / run["generation_s"], 3) if engine_s and run["generation_s"] else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="shp-bench generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="an embedded model's alias")
    p.add_argument("--tasks", type=int, default=20, help="HumanEval problems (0: no sweep, the reference alone)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--reference", action="store_true", help="llama.cpp's own benchmark on the same model/threads")
    p.add_argument("--threads", type=int, default=0, help="the server's threads (default: the config's)")
    p.add_argument("--parallel", type=int, default=0, help="the server's slots (default: the config's)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=0, help="per call (default: the config's)")
    p.add_argument("--ref-prompt", type=int, default=256, help="reference: prompt tokens per sequence")
    p.add_argument("--ref-gen", type=int, default=64, help="reference: generated tokens per sequence")
    a = p.parse_args(argv)
    out: dict[str, Any] = {"bench": "generate", "machine_note": "2 shared cores; figures depend on load"}
    if a.tasks > 0:
        out["sweep"] = sweep(a)
    if a.reference:
        from shp_ray.providers.llama import LlamaOptions

        threads = a.threads or LlamaOptions().n_threads
        ref = reference(a.model, threads, a.ref_prompt, a.ref_gen)
        out["reference"] = ref
        if "sweep" in out:
            out.update(against_engine(out["sweep"], ref))
    print(json.dumps(out, sort_keys=True))
    return 0

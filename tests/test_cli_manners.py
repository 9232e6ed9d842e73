"""How shp-sweep speaks to a person: Ctrl-C is one line and exit 130 with the completed trajectories kept,
a mistyped key gets the nearest known one, --help lists the config groups and presets, Hydra's own hints
reach the user unredacted."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.parts import Store
from storage.resume import done_scenarios
from storage.verify import require_sound

BIN = Path(sys.executable).parent
SWEEP = str(BIN / "shp-sweep")


def _responses(store: Path) -> int:
    """Completed calls in the store's response cache (each is committed as it arrives)."""
    try:
        with sqlite3.connect(f"file:{store / '_cache' / 'responses.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM responses").fetchone()[0]
    except sqlite3.Error:
        return 0


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT handled as in a terminal's foreground job, here and in the processes started in the block.

    A test runner started in the background (``nohup pytest &`` from a script) ignores SIGINT and its
    children inherit that: the sweep then rightly ignores the test's Ctrl-C and runs to its end.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # exec resets a handler to SIG_DFL
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SWEEP, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.integration
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_keeps_what_is_done_and_says_so_in_one_line(tmp_path, sig, status) -> None:
    """Ctrl-C, and SIGTERM (how a background run is stopped: ``kill PID``, a scheduler), keep the whole
    trajectories and say so."""
    store = tmp_path / "store"
    args = [
        SWEEP, "provider=sim", "dataset.limit=8", "generation.max_rounds=3", "provider.sim_latency_s=0.3",
        "generation.workers=1", "generation.concurrency=1", "generation.embedder=fake-hash", "report.enabled=false",
        f"store.path={store}", f"hydra.run.dir={tmp_path / 'run'}",
    ]  # fmt: skip
    with _interruptible():
        sweep = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        # One trajectory at a time, 5 calls each (3 Writer + 2 Critic): 7 completed calls = the first
        # trajectory done and the second under way.
        deadline = time.monotonic() + 240
        while _responses(store) < 7 and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sweep.poll() is None, "the sweep ended before it could be interrupted"
        sweep.send_signal(sig)
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == status, stdout[-2000:] + stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    kept = done_scenarios(Store(store), next(p.name for p in (store / "rounds").iterdir()).split("=", 1)[1])
    assert 1 <= len(kept) < 8
    said = [line for line in stderr.splitlines() if line.startswith("interrupted:")]
    expected = f"interrupted: {len(kept)} trajectories stored, {_responses(store)} replies cached; run the same command"
    assert len(said) == 1 and said[0].startswith(expected), stderr[-3000:]
    require_sound(Store(store))  # every part whole and verified: nothing half-written
    leftovers = [p for p in store.rglob("*") if p.is_file() and (".partial" in p.name or p.name.startswith("_tmp"))]
    assert leftovers == []


def test_a_ctrl_c_that_a_library_swallows_is_still_heard() -> None:
    """What ``shp-sweep`` relies on when Ray, asyncio or a callback loses the KeyboardInterrupt on its way up."""
    import asyncio

    from shp_ray.generation import interrupt

    async def swallows() -> str:
        try:
            signal.raise_signal(signal.SIGINT)  # delivered to this thread, handled before it returns
            await asyncio.sleep(0)
        except BaseException:  # noqa: BLE001 - the library that loses the interrupt
            return "swallowed"
        return "not interrupted"

    with _interruptible():
        before = signal.getsignal(signal.SIGINT)
        with interrupt.listening():
            assert asyncio.run(swallows()) == "swallowed"
            assert interrupt.requested()
            with pytest.raises(KeyboardInterrupt):
                interrupt.check()  # what the generation loops ask each time they wake
        assert signal.getsignal(signal.SIGINT) is before  # the previous handler is back
        with interrupt.listening():
            assert not interrupt.requested()  # the next job starts unasked
            interrupt.check()
    outer = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupt.listening():  # started in the background: a Ctrl-C is not ours to take
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, outer)


def test_a_mistyped_key_gets_the_nearest_known_one(tmp_path) -> None:
    out = _sweep("provider=sim", "halting.epss=0.1", f"store.path={tmp_path / 'store'}", cwd=tmp_path)
    assert out.returncode == 1
    # one line, said before Hydra (whose own message is 8 lines of its internals)
    assert out.stderr.strip() == "shp-sweep: `halting.epss` is no key of the config; did you mean `halting.eps`?"
    group = _sweep("provder=sim", cwd=tmp_path)
    assert group.returncode == 1 and group.stderr.strip().splitlines() == [
        "shp-sweep: `provder` is no key of the config; did you mean `provider`?"
    ], group.stderr
    assert not (tmp_path / "store").exists() and not (tmp_path / "runs").exists()  # nothing ran


def test_a_value_of_the_wrong_type_is_one_line_before_hydra(tmp_path) -> None:
    out = _sweep("provider=sim", "generation.max_rounds=abc", f"store.path={tmp_path / 'store'}", cwd=tmp_path)
    assert out.returncode == 1
    # Hydra's own message: seven lines of its internals; the value is not repeated (it may be a secret)
    assert out.stderr.strip() == "shp-sweep: `generation.max_rounds` takes an integer; the value given is not one"
    assert not (tmp_path / "store").exists() and not (tmp_path / "runs").exists()  # nothing ran


def test_only_refused_values_are_named() -> None:
    from sweeps.command_line import wrong_values

    assert wrong_values(["report.enabled=maybe", "halting.eps=0.02", "-m", "generation.max_rounds=2,3"]) == [
        "shp-sweep: `report.enabled` takes true or false; the value given is not one"
    ]
    # a group's keys, interpolations, sweeps and unknown keys are left to their own checks (and to Hydra)
    assert wrong_values(["provider.timeout_s=${oc.env:T}", "generation.max_roundz=abc", "provider=sim"]) == []
    assert wrong_values(["--config-dir", "my-conf", "generation.max_rounds=abc"]) == []


def test_a_confirmation_is_never_called_a_mistyped_key() -> None:
    # +confirm=true is a yes for one command, not a schema key: a job that fails after it must not blame it
    from sweeps.command_line import suggestions

    assert suggestions(["+confirm=true", "provider=sim"]) == []
    assert suggestions(["+confirmm=true"]) == ["shp-sweep: `confirmm` is no key of the config; did you mean `confirm`?"]


def test_help_lists_the_groups_and_presets_one_line_each(tmp_path) -> None:
    out = _sweep("--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for preset in ("ablation7", "demo", "eps_k", "paper"):
        [line] = [s for s in lines if s.strip().startswith(f"+sweep={preset} ")]
        assert len(line.split("  ", 1)[-1].strip()) > 10  # a description, on the same line
    for group in ("provider", "dataset", "judge", "prices", "prompts", "score", "generation", "halting", "store"):
        assert any(s.strip().startswith(f"{group}") for s in lines), group
    for flag in ("dry_run=", "allow_large=", "allow_partial=", "progress=", "+confirm="):
        [line] = [s for s in lines if s.strip().startswith(flag)]
        assert len(line.strip().split("  ", 1)[-1].strip()) > 10, line  # described on its line
    assert "provider=llama|openai|sim" in out.stdout.replace(" ", "")
    assert "score=" in out.stdout and "python" in out.stdout and "shp-wc-v3" in out.stdout
    assert "<redacted>" not in out.stdout  # our own text, never passed through the redactor


def test_a_mistyped_option_or_preset_is_one_line_with_the_nearest(tmp_path) -> None:
    for typo, said in [
        ("+sweep=ablaton7", "no sweep preset of that name; did you mean `+sweep=ablation7`?"),
        ("provider=smi", "no provider option of that name; did you mean `provider=sim`?"),
    ]:
        said = f"shp-sweep: `{typo}`: {said}"
        out = _sweep(typo, f"store.path={tmp_path / 'store'}", cwd=tmp_path)
        assert out.returncode == 1 and out.stderr.strip() == said and out.stdout == "", out.stdout + out.stderr
    # a user's own option (in --config-dir) and the sweep syntax are not typos
    from sweeps.command_line import option_typos

    user = tmp_path / "mine"
    (user / "prompts").mkdir(parents=True)
    (user / "prompts" / "my-loop.yaml").write_text("name: my-loop\n")
    assert option_typos(["--config-dir", str(user), "prompts=my-loop", "-m", "provider=sim,openai"]) == []
    assert option_typos(["prompts=my-loop"]) != [] and option_typos(["+sweep=[paper,ablation7]"]) == []
    assert option_typos(["-m", "provider=choice(sim,openai)", "dataset=${oc.env:DS}"]) == []


def test_a_config_error_is_printed_once_and_a_set_scorer_blames_no_key(tmp_path) -> None:
    out = _sweep("provider=sim", "provider.rpm=-5", f"store.path={tmp_path / 'store'}", cwd=tmp_path)
    both = out.stdout + out.stderr
    assert out.returncode == 1 and both.count("provider.rpm: ") == 1, both
    assert not (tmp_path / "runs").exists()  # refused before any work: no run folder left (below)
    missing = tmp_path / "absent.py"
    out = _sweep(
        "provider=sim", "score=python", f"score.target={missing}:score", "prompts.file=none.yaml", cwd=tmp_path
    )
    assert out.returncode == 1 and "did you mean" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("shp-sweep: invalid config: "), out.stderr
    from sweeps.command_line import suggestions

    assert suggestions(["score.target=my.py:fn", "score.name=x", "prompts.file=p.yaml", "dataset.split_map={}"]) == []


def test_a_refused_config_leaves_no_run_folder(tmp_path) -> None:
    """A config refused before any work leaves nothing: Hydra's run folder (runs/<date>/<time>/: .hydra/ and the
    job's log) goes, and so do the parents it leaves empty; other runs, and a folder holding a file of the user's,
    stay."""
    out = _sweep("generation.max_rounds=0", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.count("generation.max_rounds") == 1, out.stderr
    assert out.stderr.strip().startswith("shp-sweep: invalid config: generation.max_rounds")
    assert list(tmp_path.iterdir()) == []  # an empty folder stays empty
    earlier = tmp_path / "runs" / "2020-01-01" / "00-00-00"
    earlier.mkdir(parents=True)
    (earlier / "app.log").write_text("an earlier run\n")
    assert _sweep("generation.max_rounds=0", cwd=tmp_path).returncode == 1
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "runs", "runs/2020-01-01", "runs/2020-01-01/00-00-00", "runs/2020-01-01/00-00-00/app.log"
    ]  # fmt: skip
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's\n")
    assert _sweep("generation.max_rounds=0", f"hydra.run.dir={mine}", cwd=tmp_path).returncode == 1
    assert (mine / "notes.txt").read_text() == "the user's\n" and (mine / ".hydra").is_dir()  # not ours to remove
    plan = _sweep("provider=sim", "dataset.limit=1", f"store.path={tmp_path / 'store'}", "dry_run=true", cwd=mine)
    assert plan.returncode == 0 and plan.stdout.startswith("plan: "), plan.stderr
    assert not (mine / "runs").exists() and not (tmp_path / "store").exists()  # a dry run writes nothing


def test_a_primary_outcome_the_job_cannot_have_is_refused_before_any_call(tmp_path) -> None:
    """report.primary is checked against the outcomes the config and the store give, before generation (a dry run
    too): one line naming them and the nearest, exit 1, nothing generated."""
    store = tmp_path / "store"
    for args, said in [
        (["dataset=humaneval", "report.primary=hiden_pass"],  # the lexical judge cannot score code: no IS
         "it has: hidden_pass, visible_pass; did you mean `hidden_pass`?"),
        (["report.primary=IS", "dry_run=true"], "it has: is; did you mean `is`?"),
    ]:  # fmt: skip
        out = _sweep("provider=sim", "dataset.limit=2", *args, f"store.path={store}", cwd=tmp_path)
        name = args[1 if args[0].startswith("dataset") else 0].split("=")[1]
        want = f"shp-sweep: invalid config: report.primary={name}: this job has no such outcome; {said}"
        assert out.returncode == 1 and out.stderr.strip() == want and out.stdout == "", out.stdout + out.stderr
    assert not store.exists()  # no call, no part: refused before generation
    ok = _sweep("provider=sim", "dataset=humaneval", "report.primary=visible_pass", "dry_run=true", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("plan: "), ok.stderr


def test_hydras_hint_for_a_forgotten_multirun_flag_reaches_the_user_intact(tmp_path) -> None:
    out = _sweep("provider=sim", "halting.eps=0.02,0.04", cwd=tmp_path)
    assert out.returncode == 1
    assert "key=[value1,value2]" in out.stderr, out.stderr
    assert "<redacted>" not in out.stderr
    assert "--multirun" in out.stderr


def test_the_redactor_still_hides_secrets_next_to_hints() -> None:
    from storage.manifest import redact_text

    hint = "1. To use it as a list, use key=[value1,value2]"
    assert redact_text(hint) == hint
    assert redact_text("http://h/v1?key=S3CRETPASS") == "http://h/v1?key=<redacted>"
    assert redact_text("provider.key=S3CRETPASS") == "provider.key=<redacted>"
    assert redact_text("Bearer abcdefgh12345") == "Bearer <redacted>"


def test_each_command_names_its_own_flag(tmp_path, capsys) -> None:
    import pyarrow as pa

    import analysis
    from analysis.errors import AnalysisError
    from analysis.query import main as query
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    write_synthetic_store(tmp_path, SyntheticSpec(n_trajectories=5, rounds=2))
    other = Store(tmp_path).read("judgments")
    other = other.set_column(other.schema.get_field_index("judge"), "judge", pa.array(["other"] * other.num_rows))
    Store(tmp_path).write("judgments", other)  # two judges: which one gives IS must be chosen

    assert query(["--store", str(tmp_path), "SELECT 1"]) == 2
    said = capsys.readouterr().err
    assert "several judges" in said and "choose one with --judge" in said and "judge=" not in said, said
    with pytest.raises(AnalysisError, match="choose one with judge=$"):  # the Python API's own spelling
        analysis.connect(tmp_path)
    assert query(["--store", str(tmp_path), "--judge", "other", "SELECT count(*) AS n FROM judgments"]) == 0


def _help_of(main: object, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)  # type: ignore[operator]
    out = capsys.readouterr()
    assert done.value.code == 0, out.err[-2000:]
    return out.out + out.err


def test_every_command_and_benchmark_prints_its_help(capsys) -> None:
    """``--help`` of each console script and of each ``shp-bench`` benchmark prints its usage: argparse formats
    every help string with ``%``, so a literal percent sign in one breaks the whole page."""
    from analysis.query import main as query
    from bench import BENCHMARKS
    from bench import main as bench
    from shp_ray.importer.cli import main as importer
    from shp_ray.providers.sim.server import main as serve

    page = _help_of(query, ["--help"], capsys)
    assert "--memory-limit" in page and "(default 25% of this" in page.replace("\n", " ").replace("  ", " ")
    for main in (importer, serve):
        assert _help_of(main, ["--help"], capsys).startswith("usage:")
    assert bench(["--help"]) == 0
    listed = capsys.readouterr().err
    assert all(name in listed for name in BENCHMARKS)
    for name in BENCHMARKS:
        assert _help_of(bench, [name, "--help"], capsys).startswith(f"usage: shp-bench {name}"), name


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run a command with a pseudo-terminal as its stdin, stdout and stderr; (exit status, what it wrote)."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed (the process and its children are gone)
                break
            if not data:
                break
            chunks.append(data)
        return proc.wait(timeout=300), b"".join(chunks).decode("utf-8", "replace")
    finally:
        proc.kill()
        os.close(master)


@pytest.mark.integration
def test_the_progress_line_is_live_on_a_terminal_and_logged_without_one(tmp_path, ray_address) -> None:
    import os
    import re

    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"TERM": "xterm", "COLUMNS": "240"}
    common = ["provider=sim", "dataset.limit=4", "generation.max_rounds=2", "generation.embedder=fake-hash",
              "report.enabled=false", f"ray.address={ray_address}"]  # fmt: skip
    status, said = _on_a_terminal(
        [SWEEP, *common, f"store.path={tmp_path / 'tty'}", f"hydra.run.dir={tmp_path / 'run-tty'}"], tmp_path, env
    )
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", said)  # the live line's cursor moves
    assert status == 0, shown[-3000:]
    [last] = [line for line in shown.splitlines() if line.startswith("generate 4/4 trajectories")][-1:]
    assert "paid calls" in last and "tok/s paid" in last and "429s" in last and "ETA" in last, last
    assert "generate: " not in shown  # drawn, not logged

    piped = subprocess.run(
        [SWEEP, *common, f"store.path={tmp_path / 'piped'}", f"hydra.run.dir={tmp_path / 'run-piped'}"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr[-3000:]
    logged = [line for line in piped.stdout.splitlines() if "generate: " in line]
    assert logged and "generate: 0/4 trajectories" in logged[0] and "generate: 4/4 trajectories" in logged[-1], logged
    assert "\x1b[" not in piped.stdout + piped.stderr  # no terminal: no cursor moves


def test_help_names_every_key_of_the_small_sections() -> None:
    """--help's line of a small section names each of its keys (report.primary, the outcome a report leads with,
    and store.cache_dir were missing); generation's many keys are left to `--cfg job`."""
    from hydra.core.config_store import ConfigStore

    from sweeps.command_line import help_text

    schema = ConfigStore.instance().load("schema.yaml").node
    lines = help_text().splitlines()
    for section in ("halting", "weights", "replay", "report", "store", "ray"):
        [line] = [s for s in lines if s.strip().startswith(f"{section}.*")]
        missing = [key for key in schema[section] if key not in line]
        assert not missing, (section, missing)

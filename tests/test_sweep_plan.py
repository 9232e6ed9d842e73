"""The plan before paying: ``dry_run=true`` calls nothing and its call count is what the run then makes;
a plan past the gates (hours on the embedded model, dollars on a paid endpoint) asks for +confirm=true.

The simulated server over real HTTP counts the calls; the runs are real ``shp-sweep`` processes."""

from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_module

from conf.resolve import to_job
from shp_ray.providers.sim.server import SimServer
from sweeps.plan import describe, make_plan
from tests.test_sweep import SMALL, shp_sweep

pytestmark = pytest.mark.integration


def _planned_calls(text: str) -> int:
    found = re.search(r"^\s*calls: ([\d,]+)", text, re.M)
    assert found, text[-2000:]
    return int(found.group(1).replace(",", ""))


def _plan_of(*overrides: str):
    with initialize_config_module(config_module="conf", version_base="1.3"):
        job = to_job(compose(config_name="config", overrides=list(overrides)))
    return make_plan(job), job


def test_dry_run_calls_nothing_and_plans_the_calls_the_run_makes(tmp_path, ray_address):
    store = tmp_path / "store"
    with SimServer() as sim:
        args = ["provider=sim", f"provider.base_url={sim.base_url}", *SMALL, f"store.path={store}",
                "report.enabled=false"]  # fmt: skip
        dry = shp_sweep(*args, "dry_run=true", f"hydra.run.dir={tmp_path / 'dry'}")
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert sim.stats["requests"] == 0  # no preflight, no call
        assert not store.exists()  # no manifest row, no store folder
        assert "3 to generate" in dry.stdout and "simulated server" in dry.stdout
        planned = _planned_calls(dry.stdout)

        run = shp_sweep(*args, f"hydra.run.dir={tmp_path / 'run'}", f"ray.address={ray_address}")
        assert run.returncode == 0, run.stderr[-3000:]
        made = sim.stats["requests"]
    assert made > 0 and abs(planned - made) <= 0.05 * made, (planned, made)
    assert _planned_calls(run.stdout + run.stderr) == planned  # the real run logged the same plan first

    # The store now holds the generation: the same job plans no call; a changed temperature plans a new
    # generation and names the stored one it differs from.
    same, _ = _plan_of("provider=sim", *SMALL, f"store.path={store}")
    assert (same.stored, same.to_generate, same.calls) == (3, 0, 0)
    other, job = _plan_of("provider=sim", *SMALL, f"store.path={store}", "generation.temperature=0.3")
    assert other.to_generate == 3 and other.calls == planned
    assert "nearest stored generation" in describe(other, job) and "temperature" in other.notes[0]
    # An LLM judge switched on over the stored drafts: a call per distinct draft, no generation.
    judged, _ = _plan_of("provider=sim", "judge=llm", *SMALL, f"store.path={store}")
    assert judged.to_generate == 0 and 0 < judged.rejudge_calls <= 3 * 3 and judged.calls == judged.rejudge_calls


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["dataset.limit=null"], "on the embedded model (over 2 h)"),  # 889 questions x 6 rounds on SmolLM2
        (
            [
                "provider=openai",
                "provider.base_url=http://127.0.0.1:9/v1",
                "provider.model=gpt-4o",
                "dataset.limit=800",
            ],
            "may cost up to $",
        ),  # fmt: skip
    ],
)
def test_a_plan_past_the_gates_asks_for_confirm(tmp_path, overrides, said):
    args = [*overrides, f"store.path={tmp_path / 'store'}", "dry_run=true", f"hydra.run.dir={tmp_path / 'r'}"]
    stopped = shp_sweep(*args)
    assert stopped.returncode != 0
    assert said in stopped.stderr and "+confirm=true" in stopped.stderr
    assert "Traceback" not in stopped.stderr and len(stopped.stderr.strip().splitlines()) == 1
    assert "calls:" in stopped.stdout  # the plan was printed before the stop
    confirmed = shp_sweep(*args, "+confirm=true")
    assert confirmed.returncode == 0, confirmed.stderr[-2000:]
    assert not (tmp_path / "store").exists()


def test_the_demo_plan_is_under_the_gates(tmp_path):
    # a store of its own: the checkout's runs/demo/store holds the demo's trajectories once `make demo` has run
    plan, job = _plan_of("+sweep=demo", "dry_run=true", f"store.path={tmp_path / 'store'}")
    assert plan.calls == 4 * (3 + 2) + 1  # writer x3, critic x2 per question, one preflight
    assert plan.seconds is not None and plan.seconds < 600
    from sweeps.plan import gate

    assert gate(plan, job) is None

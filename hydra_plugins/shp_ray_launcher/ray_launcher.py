"""``hydra/launcher=ray``: each multirun job is a Ray task on this node of a cluster (or this machine).

Jobs join one Ray instance, so they share its named actors -- above all the
one rate limiter per endpoint -- and a generation needed by several jobs is
produced once (sweeps.job locks it). A job task reserves no CPU by default:
it orchestrates; the heavy work runs in the actors it starts. ``max_calls=1``
gives every job a fresh worker process, so Hydra's global state cannot leak
from one job into the next.
"""

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

import sweeps  # noqa: F401  (first: a worker binds the project's own `conf` before it unpickles the config store)

log = logging.getLogger(__name__)


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.shp_ray_launcher.ray_launcher.RayLauncher"
    address: str | None = None  # null = start Ray here; "auto" = join a running cluster
    num_cpus: int = 2  # when starting Ray here
    max_parallel: int = 4  # jobs in flight at once
    job_num_cpus: float = 0.0


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="shp-ray")


def _execute(
    hydra_context: HydraContext,
    task_function: TaskFunction,
    config: DictConfig,
    singleton_state: dict[Any, Any],
    cwd: str,
) -> JobReturn:
    # A fresh worker process: restore the driver's Hydra state and working directory first.
    os.chdir(cwd)
    Singleton.set_state(singleton_state)
    setup_globals()
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


class RayLauncher(Launcher):
    def __init__(
        self, address: str | None = None, num_cpus: int = 2, max_parallel: int = 4, job_num_cpus: float = 0.0
    ) -> None:
        if max_parallel < 1:
            raise ValueError(f"hydra.launcher.max_parallel must be >= 1, got {max_parallel}")
        self.address, self.num_cpus = address, num_cpus
        self.max_parallel, self.job_num_cpus = max_parallel, job_num_cpus
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from shp_ray.generation.generate import start_ray
        from sweeps.redact_callback import redact_file

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        # Hydra wrote multirun.yaml verbatim before launching: redact it before the first job starts.
        redact_file(Path(str(self.config.hydra.sweep.dir)) / "multirun.yaml")
        started = start_ray(self.address, self.num_cpus)
        try:
            # Every job runs on this node: a job is a driver of the store, and the store's SQLite caches
            # and file locks hold across the processes of one host, not across hosts. Its actors spread.
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            remote = ray.remote(num_cpus=self.job_num_cpus, max_calls=1, max_retries=0, scheduling_strategy=here)  # type: ignore[call-overload]  # ray omits NodeAffinity
            task = remote(_execute)
            state, cwd = Singleton.get_state(), os.getcwd()
            log.info(f"Launching {len(job_overrides)} jobs on Ray ({self.max_parallel} at a time)")
            refs: dict[Any, int] = {}
            results: list[JobReturn | None] = [None] * len(job_overrides)
            for i, overrides in enumerate(job_overrides):
                idx = initial_job_idx + i
                log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
                sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                with open_dict(sweep_config):
                    sweep_config.hydra.job.id = f"ray_{idx}"
                    sweep_config.hydra.job.num = idx
                if len(refs) >= self.max_parallel:
                    self._collect(ray, refs, results, wait_for=1)
                refs[task.remote(self.hydra_context, self.task_function, sweep_config, state, cwd)] = i
            self._collect(ray, refs, results, wait_for=len(refs))
        finally:
            if started:
                ray.shutdown()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        done = [r for r in results if r is not None]
        for i, ret in enumerate(done):
            # Jobs print in their Ray workers; say here where each one's output went.
            outcome = "done" if ret.status == JobStatus.COMPLETED else f"FAILED: {ret._return_value!r}"
            print(f"job #{initial_job_idx + i} ({','.join(ret.overrides or [])}): {outcome} -> {ret.working_dir}")
        return done

    @staticmethod
    def _collect(ray: Any, refs: dict[Any, int], results: list[JobReturn | None], wait_for: int) -> None:
        if not refs:
            return
        done, _ = ray.wait(list(refs), num_returns=wait_for)
        for ref in done:
            results[refs.pop(ref)] = ray.get(ref)

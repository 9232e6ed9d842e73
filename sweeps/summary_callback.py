"""At the end of every multirun (any launcher): the sweep's one summary, from the rows each job left.

Registered in ``conf/config.yaml`` under ``hydra.callbacks``; Hydra calls ``on_multirun_end`` in the
driver once the launcher has returned every job, so the rows are read from the sweep folder, where each
job (in this process or a Ray worker) wrote them (:func:`sweeps.summary.write_job`).
"""

from __future__ import annotations

import logging
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from sweeps.redact_callback import sweep_dir
from sweeps.summary_page import PAGE, summarise

log = logging.getLogger("shp_ray.sweep")


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        folder = sweep_dir(config)
        if folder is None or not folder.is_dir():
            return
        try:
            text = summarise(folder)
        except (OSError, ValueError, KeyError) as exc:  # the jobs' results stand; only the summary is missing
            log.warning("sweep summary not written (%s: %s)", type(exc).__name__, exc)
            return
        if text is not None:
            print(f"\nsweep summary: every job x policy ({folder})\n{text}")
            print(f"summary: {folder / 'summary.md'}, {folder / 'summary.png'}, {folder / PAGE}")

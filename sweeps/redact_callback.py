"""Keep the config's secrets (a password in ``provider.base_url``, a token in a query string, a key named
like a secret) out of what Hydra writes and what the process logs and prints.

Registered in ``conf/config.yaml`` under ``hydra.callbacks``; Hydra instantiates it right after the config
is composed, before any job starts, and calls it in every job's process (a Ray worker too).

- ``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``: Hydra's own copies are switched off
  (``hydra.output_subdir: null``) and this callback writes the same three files, redacted, when the job
  starts (``on_job_start``): the unredacted files never exist. If Hydra's copies are switched back on
  (``hydra.output_subdir=.hydra``), they are replaced (atomically) by redacted ones when the job starts.
- ``multirun.yaml``: Hydra's sweeper writes it before the first job; it is replaced by a redacted copy
  when a job starts (the first one closes the window) and again when the sweep ends.
- Log records (console and the job's ``.log`` file, Hydra's own lines listing each job's overrides
  included): redacted when they are made (a ``logging`` record factory), whatever handler writes them.
- ``sys.stdout`` / ``sys.stderr``: every write passes through :func:`shp_ray.redaction.redact_text`
  (``sweeps.app.entry`` installs it before Hydra parses the command line, so Hydra's own error messages
  about an override are covered too).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

from shp_ray.redaction import redact_text
from storage.manifest import redact

SNAPSHOT_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


# --- log records and the standard streams ----------------------------------------------------------


def _redacting_factory(make: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: the handler reports it as usual
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            clean = redact_text(text)
            if clean != text:
                record.exc_text = clean  # formatters print exc_text when it is set
        return record

    factory.redacts_secrets = True  # type: ignore[attr-defined]  # a mark on the function: installed once
    return factory


class RedactingStream:
    """A text stream whose writes are redacted; everything else is the wrapped stream's."""

    redacts_secrets = True

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def protect_process() -> None:
    """Redact log records and ``sys.stdout``/``sys.stderr`` in this process from now on (idempotent)."""
    make = logging.getLogRecordFactory()
    if not getattr(make, "redacts_secrets", False):
        logging.setLogRecordFactory(_redacting_factory(make))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not getattr(stream, "redacts_secrets", False):
            setattr(sys, name, RedactingStream(stream))


# --- the files Hydra writes -------------------------------------------------------------------------


def _plain(cfg: Any) -> Any:
    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    return cfg


def redacted_yaml(cfg: Any) -> str:
    """``cfg`` (a DictConfig, ListConfig or plain container) as Hydra writes it, secrets redacted;
    interpolations stay unresolved, as in Hydra's own files."""
    return OmegaConf.to_yaml(OmegaConf.create(redact(_plain(cfg))))


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` in one step: a reader sees the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_snapshot(config: DictConfig, subdir: str) -> Path:
    """The job's ``config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, redacted, in <output_dir>/<subdir>."""
    out = Path(str(config.hydra.runtime.output_dir)) / subdir
    task = _plain(config)
    task.pop("hydra", None)
    hydra_cfg = HydraConfig.instance().cfg if HydraConfig.initialized() else None
    write_atomic(out / "config.yaml", redacted_yaml(task))
    write_atomic(
        out / "hydra.yaml", redacted_yaml(OmegaConf.masked_copy(config, "hydra") if hydra_cfg is None else hydra_cfg)
    )
    write_atomic(out / "overrides.yaml", redacted_yaml(config.hydra.overrides.task))
    return out


def redact_file(path: Path) -> bool:
    """Rewrite a Hydra YAML file redacted if it holds a secret; True if it was rewritten."""
    try:
        original = OmegaConf.load(path)
    except FileNotFoundError:
        return False
    plain = _plain(original)
    if redact(plain) == plain:
        return False
    write_atomic(path, redacted_yaml(plain))
    return True


def sweep_dir(config: DictConfig) -> Path | None:
    """The multirun's sweep folder (absolute: a job may have changed its working directory)."""
    value = OmegaConf.select(config, "hydra.sweep.dir")
    if value is None:
        return None
    path = Path(str(value))
    cwd = OmegaConf.select(config, "hydra.runtime.cwd")
    return path if path.is_absolute() or cwd is None else Path(str(cwd)) / path


class RedactSecrets(Callback):
    """See the module docstring. ``output_subdir``: where each job's redacted snapshot goes (null: none)."""

    def __init__(self, output_subdir: str | None = ".hydra") -> None:
        self.output_subdir = output_subdir
        protect_process()

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        protect_process()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        protect_process()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        protect_process()  # a Ray worker: a fresh process that unpickled this callback
        native = config.hydra.output_subdir  # Hydra's own copies, if switched back on: replace them
        for subdir in dict.fromkeys(s for s in (native, self.output_subdir) if s is not None):
            write_snapshot(config, str(subdir))
        if config.hydra.mode == RunMode.MULTIRUN:
            self._redact_multirun_yaml(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._redact_multirun_yaml(config)

    @staticmethod
    def _redact_multirun_yaml(config: DictConfig) -> None:
        folder = sweep_dir(config)
        if folder is not None:
            redact_file(folder / "multirun.yaml")

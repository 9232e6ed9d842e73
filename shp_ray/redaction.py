"""What a message, a log line, a report or a stored config may show of a secret: the one redaction of the
project (store URIs, endpoint URLs, Hydra overrides, command lines, error texts).

A room of its own at the bottom of the house (it imports nothing of ours), so that storage, the providers,
analysis and the apps all redact with the same rules and the same marker.
"""

from __future__ import annotations

import re

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

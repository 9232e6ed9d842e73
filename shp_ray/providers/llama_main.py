"""The embedded server's entry point: ``llama_cpp.server``, with a prompt cache whose size is what it holds.

llama-cpp-python's RAM prompt cache evicts by the llama.cpp state size alone, but each entry also
holds a copy of the logits buffer (n_batch x n_vocab floats: ~300 MB for Qwen2.5's 152k vocabulary),
so a "2 GB" cache grew past 18 GB here and the machine ran out of memory. Counting every array an
entry holds makes ``--cache_size`` the bound it says it is. The server is otherwise unchanged.
"""

from __future__ import annotations

import runpy

from llama_cpp import llama_cache


def _held_bytes(cache: llama_cache.LlamaRAMCache) -> int:
    return sum(s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes for s in cache.cache_state.values())


llama_cache.LlamaRAMCache.cache_size = property(_held_bytes)  # type: ignore[assignment, method-assign]

if __name__ == "__main__":
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)

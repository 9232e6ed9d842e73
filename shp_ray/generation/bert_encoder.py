"""A sentence-transformers model of the plain BERT kind (a BERT encoder, mean pooling) run with torch alone.

The default embedding model, all-MiniLM-L6-v2, is such a model. Loading it through sentence-transformers
imports transformers and scikit-learn: about 6 s of CPU before the first text, paid by every embedding
actor of every run. This module reads the same folder -- ``config.json``, ``model.safetensors``,
``tokenizer.json``, the pooling and sequence-length settings -- and computes the same forward pass, so a
run starts with torch's import alone. :func:`fits` accepts only the layout it computes exactly; any other
model goes through sentence-transformers (``shp_ray.generation.embedder``), and the tests hold the two
equal on the real model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_PLAIN = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling")
_NORMALIZE = "sentence_transformers.models.Normalize"


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def fits(folder: str | Path) -> bool:
    """True when ``folder`` holds a model this module computes exactly: a BERT with absolute positions and
    erf GELU, mean pooling alone, then (optionally) normalisation; weights in safetensors, a fast tokenizer."""
    root = Path(folder)
    try:
        modules = sorted(_json(root / "modules.json"), key=lambda m: m["idx"])
        kinds = [m["type"] for m in modules]
        if tuple(kinds[:2]) != _PLAIN or kinds[2:] not in ([], [_NORMALIZE]):
            return False
        config = _json(root / "config.json")
        pooling = _json(root / modules[1]["path"] / "config.json")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return False
    means_only = pooling.get("pooling_mode_mean_tokens") is True and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
    )
    return (
        modules[0].get("path", "") == ""  # the encoder's files in the folder itself, not in a sub-folder
        and config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and means_only
        and (root / "model.safetensors").is_file()
        and (root / "tokenizer.json").is_file()
    )


def hidden_size(folder: str | Path) -> int:
    """The size of the vectors the model in ``folder`` gives (for a folder :func:`fits` accepts)."""
    return int(_json(Path(folder) / "config.json")["hidden_size"])


class BertEncoder:
    """Mean-pooled BERT sentence vectors (not normalised: the caller normalises), float32 on the CPU."""

    def __init__(self, folder: str | Path) -> None:
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        root = Path(folder)
        config = _json(root / "config.json")
        st = root / "sentence_bert_config.json"
        self.max_length = int(_json(st).get("max_seq_length", 512)) if st.is_file() else 512
        self.max_length = min(self.max_length, int(config["max_position_embeddings"]))
        self.dim = hidden_size(root)
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        weights = load_file(str(root / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self.w = {k[len(prefix) :]: v.float() for k, v in weights.items() if k.startswith(prefix)}
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()
        self.torch = torch

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self.torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                chunk = texts[start : start + batch_size]
                out[start : start + len(chunk)] = self._batch(chunk).numpy()
        return out

    def _batch(self, texts: list[str]):  # noqa: ANN202 - a torch tensor (b, dim)
        torch = self.torch
        encodings = self.tokenizer.encode_batch(texts)
        n = max(len(e.ids) for e in encodings)
        ids = torch.zeros((len(texts), n), dtype=torch.long)
        mask = torch.zeros((len(texts), n), dtype=torch.long)
        for i, e in enumerate(encodings):
            ids[i, : len(e.ids)] = torch.tensor(e.ids)
            mask[i, : len(e.ids)] = 1
        return self._forward(ids, mask)

    def _forward(self, ids, mask):  # noqa: ANN001, ANN202 - torch tensors
        import torch.nn.functional as F  # noqa: N812 - torch's own spelling

        w, h, eps = self.w, self.dim, self.eps
        b, n = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = F.layer_norm(x, (h,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        # Padding takes no attention: the most negative float32 added before the softmax, as BERT does.
        blocked = (1.0 - mask[:, None, None, :].float()) * self.torch.finfo(self.torch.float32).min
        per_head = h // self.heads

        def heads(t):  # noqa: ANN001, ANN202
            return t.view(b, n, self.heads, per_head).transpose(1, 2)

        def dense(t, name):  # noqa: ANN001, ANN202
            return F.linear(t, w[name + ".weight"], w[name + ".bias"])

        def norm(t, name):  # noqa: ANN001, ANN202
            return F.layer_norm(t, (h,), w[name + ".weight"], w[name + ".bias"], eps)

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (heads(dense(x, f"{p}attention.self.{m}")) for m in ("query", "key", "value"))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked)
            context = context.transpose(1, 2).reshape(b, n, h)
            x = norm(dense(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            x = norm(dense(F.gelu(dense(x, p + "intermediate.dense")), p + "output.dense") + x, p + "output.LayerNorm")
        m = mask.unsqueeze(-1).float()
        return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)

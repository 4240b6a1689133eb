"""Reproducer: "index out of range in Embedding" (deadends/pytorch/embedding-index-error/pt2-linux).

A tokenizer with 120 ids feeding an nn.Embedding built for 100: ids 100-119 are out of range.
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/embedding-index-error/pt2-linux).

    python repro.py --list
    python repro.py --variant baseline-vocab-larger-than-table --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-vocab-larger-than-table": "ids up to 119 looked up in nn.Embedding(100, 8)",
    "workaround1-num-embeddings-vocab": "nn.Embedding(len(vocab)=120, 8)",
    "workaround2-literal-padding-idx": "nn.Embedding(100, 8, padding_idx=0), ids unchanged",
    "workaround2-oov-to-padding-idx": "ids >= 100 mapped to a reserved id 0, nn.Embedding(100, 8, padding_idx=0)",
    "deadend1-bigger-table": "nn.Embedding(1000, 8): a table far larger than the vocabulary",
    "deadend2-clip-ids": "ids clamped to 99 (the last row)",
    "control-ids-in-range": "only ids below 100",
}
NOT_WRITTEN = []

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
VOCAB = 120  # what the tokenizer produces
TABLE = 100  # what the model was built for


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    dtype = DTYPES[precision]
    try:  # capability: an embedding lookup with backward in this dtype here
        probe = nn.Embedding(4, 2).to(device=device, dtype=dtype)
        probe(torch.tensor([1, 2], device=device)).float().sum().backward()
    except RuntimeError as exc:
        raise Unsupported(
            "nn.Embedding with backward in %s on %s is not implemented here: %s"
            % (dtype, device, exc)
        )
    torch.manual_seed(0)
    tokens = (
        [[3, 99, 42], [1, 7, 50]]
        if variant == "control-ids-in-range"
        else [[3, 99, 105], [119, 7, 50]]
    )
    ids = torch.tensor(tokens, device=device)  # 105 and 119 are beyond the table of 100
    size, padding_idx = TABLE, None
    if variant == "workaround1-num-embeddings-vocab":
        size = VOCAB
    elif variant == "workaround2-literal-padding-idx":
        padding_idx = 0
    elif variant == "workaround2-oov-to-padding-idx":
        padding_idx = 0
        ids = torch.where(ids >= TABLE, torch.zeros_like(ids), ids)
    elif variant == "deadend1-bigger-table":
        size = 1000
    elif variant == "deadend2-clip-ids":
        ids = ids.clamp(max=TABLE - 1)
    emb = nn.Embedding(size, 8, padding_idx=padding_idx).to(device=device, dtype=dtype)
    out = emb(ids)
    out.float().sum().backward()
    vectors = out.detach().float().reshape(-1, 8)
    flat = [i for row in tokens for i in row]  # the tokenizer's ids, before any remapping
    # distinct tokens must not share one vector, unless the variant deliberately maps
    # unknown tokens to a padding id (then they share the padding vector, which is zero)
    clashes = []
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            if flat[a] != flat[b] and torch.equal(vectors[a], vectors[b]):
                both_oov = flat[a] >= TABLE and flat[b] >= TABLE
                if not (padding_idx is not None and both_oov):
                    clashes.append((flat[a], flat[b]))
    return {
        "shape": {
            "ok": tuple(out.shape) == (2, 3, 8),
            "detail": "output shape %s" % (tuple(out.shape),),
        },
        "known_tokens_keep_their_own_vector": {
            "ok": not clashes,
            "detail": "token pairs sharing one vector: %s (ids %s looked up in a table of %d)"
            % (clashes, flat, size),
        },
        "gradient_reaches_table": {
            "ok": emb.weight.grad is not None and emb.weight.grad.float().abs().sum().item() > 0,
            "detail": "sum |grad| of the table: %s"
            % (None if emb.weight.grad is None else emb.weight.grad.float().abs().sum().item()),
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))

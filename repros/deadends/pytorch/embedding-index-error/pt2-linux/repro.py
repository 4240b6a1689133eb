"""Reproducer: "index out of range in Embedding" (deadends/pytorch/embedding-index-error/pt2-linux).

A tokenizer with 120 ids feeding an nn.Embedding built for 100: ids 100-119 are out of range.
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/embedding-index-error/pt2-linux).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
VOCAB = 120  # what the tokenizer produces
TABLE = 100  # what the model was built for
OUT_OF_RANGE = [[3, 99, 105], [119, 7, 50]]  # 105 and 119 are beyond the table of 100


def look_up(device, precision, tokens=OUT_OF_RANGE, size=TABLE, padding_idx=None, remap=None):
    """The ``tokens`` looked up in nn.Embedding(size, 8, padding_idx) (after ``remap(ids)``)."""
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
    ids = torch.tensor(tokens, device=device)
    if remap is not None:
        ids = remap(ids)
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
        # rows no id the tokenizer produces can address are memory spent for nothing
        "table_fits_vocabulary": {
            "ok": size <= VOCAB,
            "detail": "nn.Embedding(%d, 8) for a vocabulary of %d ids: %d rows (%d bytes) no id "
            "reaches"
            % (
                size,
                VOCAB,
                max(size - VOCAB, 0),
                max(size - VOCAB, 0) * 8 * emb.weight.element_size(),
            ),
        },
        "gradient_reaches_table": {
            "ok": emb.weight.grad is not None and emb.weight.grad.float().abs().sum().item() > 0,
            "detail": "sum |grad| of the table: %s"
            % (None if emb.weight.grad is None else emb.weight.grad.float().abs().sum().item()),
        },
    }


def baseline_vocab_larger_than_table(device, precision):
    return look_up(device, precision)


def workaround1_num_embeddings_vocab(device, precision):
    return look_up(device, precision, size=VOCAB)


def workaround2_literal_padding_idx(device, precision):
    return look_up(device, precision, padding_idx=0)


def workaround2_oov_to_padding_idx(device, precision):
    def to_padding(ids):
        return torch.where(ids >= TABLE, torch.zeros_like(ids), ids)

    return look_up(device, precision, padding_idx=0, remap=to_padding)


def deadend1_bigger_table(device, precision):
    return look_up(device, precision, size=1000)


def deadend2_clip_ids(device, precision):
    return look_up(device, precision, remap=lambda ids: ids.clamp(max=TABLE - 1))


def control_ids_in_range(device, precision):
    return look_up(device, precision, tokens=[[3, 99, 42], [1, 7, 50]])


VARIANTS = {
    "baseline-vocab-larger-than-table": baseline_vocab_larger_than_table,
    "workaround1-num-embeddings-vocab": workaround1_num_embeddings_vocab,
    "workaround2-literal-padding-idx": workaround2_literal_padding_idx,
    "workaround2-oov-to-padding-idx": workaround2_oov_to_padding_idx,
    "deadend1-bigger-table": deadend1_bigger_table,
    "deadend2-clip-ids": deadend2_clip_ids,
    "control-ids-in-range": control_ids_in_range,
}

"""Chunk tables shared by the chunked kernels: equal-length tables equal the varlen ones, and the cached
tables stay usable for autograd when first built under inference mode."""
import torch
import torch.nn.functional as F

from relin.kernels.common.backend import backend
from relin.kernels.common.chunk_tables import equal_length_chunks, varlen_chunks
from relin.kernels.gated_delta_rule import chunk_gated_delta_rule

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_equal_length_tables_match_varlen_tables():
    for batch, seq_len in ((1, 1), (3, 64), (2, 65), (4, 200)):
        cu_seqlens, chunk_indices, chunk_offsets = equal_length_chunks(batch, seq_len, 64, torch.device("cpu"))
        assert cu_seqlens.tolist() == [n * seq_len for n in range(batch + 1)]
        expected_indices, expected_offsets = varlen_chunks(cu_seqlens, 64, torch.device("cpu"))
        assert torch.equal(chunk_indices, expected_indices)
        assert torch.equal(chunk_offsets, expected_offsets)


def test_tables_cached_under_inference_mode_serve_a_later_backward():
    """The first call of a shape caches its tables; if that call ran under inference_mode, the ops must
    still be able to save them for a later backward (inference tensors cannot be saved)."""
    B, T, H, D = 1, 37, 1, 16  # a shape no other test uses, so this test builds the cache entry
    equal_length_chunks.cache_clear()
    r = lambda *shape: torch.randn(*shape, device=DEVICE)  # noqa: E731
    x = dict(q=r(B, T, H, D), k=F.normalize(r(B, T, H, D), dim=-1), v=r(B, T, H, D), g=F.logsigmoid(r(B, T, H)),
             beta=r(B, T, H).sigmoid())
    with backend("triton"):
        with torch.inference_mode():
            chunk_gated_delta_rule(**x)
        leaves = {name: t.clone().requires_grad_() for name, t in x.items()}
        o, _ = chunk_gated_delta_rule(**leaves)
        o.sum().backward()
    assert all(leaf.grad is not None and torch.isfinite(leaf.grad).all() for leaf in leaves.values())

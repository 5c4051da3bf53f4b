"""Chunk tables shared by the chunked kernels: equal-length tables equal the varlen ones, and the cached
tables stay usable for autograd when first built under inference mode."""
import pytest
import torch
import torch.nn.functional as F

from relin.kernels.common import chunk_tables as tables_module
from relin.kernels.common.chunk_tables import CHUNK_SIZE, chunk_tables, sequence_bounds
from relin.kernels.gated_delta_rule import chunk_gated_delta_rule

from .conftest import CUDA

DEVICE = "cuda" if CUDA else "cpu"


def test_equal_length_tables_match_varlen_tables():
    for batch, seq_len in ((1, 1), (3, 64), (2, 65), (4, 200)):
        tables = chunk_tables(batch, seq_len, None, torch.device("cpu"))
        bounds = [n * seq_len for n in range(batch + 1)]
        assert tables.cu_seqlens.tolist() == bounds
        expected = chunk_tables(1, batch * seq_len, bounds, torch.device("cpu"))
        assert torch.equal(tables.chunk_indices, expected.chunk_indices)
        assert torch.equal(tables.chunk_offsets, expected.chunk_offsets)
        assert (tables.num_chunks, tables.num_seqs) == (expected.num_chunks, expected.num_seqs)


def test_varlen_tables_list_every_chunk_of_every_sequence():
    bounds = [0, 1, 1, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 1]
    tables = chunk_tables(1, bounds[-1], bounds, torch.device("cpu"))
    assert tables.chunk_indices.tolist() == [[0, 0], [2, 0], [3, 0], [3, 1]]
    assert tables.chunk_offsets.tolist() == [0, 1, 1, 2, 4]


@pytest.mark.parametrize("cu_seqlens, message", [
    (torch.tensor([0, 5, 3, 8]), "must rise from 0 to T = 8"),
    (torch.tensor([1, 8]), "must rise from 0 to T = 8"),
    (torch.tensor([0.0, 8.0]), "integer tensor"),
])
def test_bad_cu_seqlens_name_the_argument(cu_seqlens, message):
    with pytest.raises(ValueError, match=message):
        sequence_bounds(cu_seqlens, 8, 1)


def test_tables_cached_under_inference_mode_serve_a_later_backward():
    """The first call of a shape caches its tables; if that call ran under inference_mode, the ops must
    still be able to save them for a later backward (inference tensors cannot be saved)."""
    B, T, H, D = 1, 37, 1, 16  # a shape no other test uses, so this test builds the cache entry
    tables_module._equal_length.cache_clear()
    r = lambda *shape: torch.randn(*shape, device=DEVICE)  # noqa: E731
    x = dict(q=r(B, T, H, D), k=F.normalize(r(B, T, H, D), dim=-1), v=r(B, T, H, D), g=F.logsigmoid(r(B, T, H)),
             beta=r(B, T, H).sigmoid())
    with torch.inference_mode():
        chunk_gated_delta_rule(**x, backend="triton")
    leaves = {name: t.clone().requires_grad_() for name, t in x.items()}
    o, _ = chunk_gated_delta_rule(**leaves, backend="triton")
    o.sum().backward()
    assert all(leaf.grad is not None and torch.isfinite(leaf.grad).all() for leaf in leaves.values())

"""Decode attention over a static cache: the split-K Triton kernel vs the fp32 reference, grouped heads, awkward
head dims and lengths, left padding, slots outside the filled range never read, and CUDA-graph replay."""
import pytest
import torch

from relin.kernels.flash_decoding import decode_attention, naive_decode_attention

from .conftest import CUDA, assert_close, gpu

DEVICE = "cuda" if CUDA else "cpu"
RATIOS = {torch.float32: 1e-5, torch.bfloat16: 0.01}


def make_cache(B, H, H_kv, T_max, D, dtype, length, start=None, poison=True):
    """Random queries and a cache whose slots outside ``[start, length)`` hold NaN (a kernel that reads them fails)."""
    q = torch.randn(B, H, D, device=DEVICE).to(dtype)
    k = torch.randn(B, H_kv, T_max, D, device=DEVICE).to(dtype)
    v = torch.randn(B, H_kv, T_max, D, device=DEVICE).to(dtype)
    if poison:
        slots = torch.arange(T_max, device=DEVICE)
        first = torch.zeros(B, dtype=torch.long, device=DEVICE) if start is None else start
        outside = (slots[None, :] >= length) | (slots[None, :] < first[:, None])          # [B, T_max]
        k.masked_fill_(outside[:, None, :, None], float("nan"))
        v.masked_fill_(outside[:, None, :, None], float("nan"))
    return q, k, v


def reference(q, k, v, length, start):
    """The fp32 reference on the filled slots only (the poisoned ones zeroed: they are masked anyway)."""
    return naive_decode_attention(q.float(), k.float().nan_to_num(0.0), v.float().nan_to_num(0.0), length, start)


def check(B, H, H_kv, T_max, D, dtype, filled, start=None):
    length = torch.tensor(filled, device=DEVICE)
    q, k, v = make_cache(B, H, H_kv, T_max, D, dtype, filled, start)
    out = decode_attention(q, k, v, length, start, backend="triton")
    assert out.dtype == dtype and out.shape == (B, H, D)
    assert_close(f"o G={H // H_kv} D={D} T={filled}/{T_max} {dtype}", reference(q, k, v, length, start), out,
                 RATIOS[dtype])


@pytest.mark.parametrize("groups", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_heads_match_the_reference(groups, dtype):
    check(B=2, H=2 * groups, H_kv=2, T_max=200, D=32, dtype=dtype, filled=131)


@pytest.mark.parametrize("D", [16, 24, 100])
@pytest.mark.parametrize("filled", [1, 64, 65, 256])
def test_awkward_head_dims_and_lengths(D, filled):
    check(B=1, H=4, H_kv=2, T_max=256, D=D, dtype=torch.float32, filled=filled)


def test_left_padding_and_rows_with_nothing_filled():
    start = torch.tensor([0, 37, 90], device=DEVICE)
    length = torch.tensor(90, device=DEVICE)
    q, k, v = make_cache(3, 4, 1, 128, 32, torch.float32, 90, start)
    out = decode_attention(q, k, v, length, start, backend="triton")
    assert_close("o left-padded", reference(q, k, v, length, start), out, RATIOS[torch.float32])
    assert out[2].abs().max().item() == 0.0, "a row whose first real slot is at length has nothing to attend"


def test_torch_path_is_the_reference_and_bad_inputs_name_the_argument():
    length = torch.tensor(5, device=DEVICE)
    q, k, v = make_cache(1, 4, 2, 16, 8, torch.float32, 5, poison=False)
    torch.testing.assert_close(decode_attention(q, k, v, length, backend="torch"),
                               naive_decode_attention(q, k, v, length))
    with pytest.raises(ValueError, match="multiple of H_kv"):
        decode_attention(q[:, :3], k, v, length)
    with pytest.raises(ValueError, match="0-d int64"):
        decode_attention(q, k, v, torch.tensor([5], device=DEVICE))
    with pytest.raises(ValueError, match="k_cache must be"):
        decode_attention(q, k[..., :4], v, length)


@gpu
@pytest.mark.parametrize("groups", [1, 2, 4, 8])
@pytest.mark.parametrize("D", [64, 128, 256, 80])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_sweep_up_to_32k(groups, D, dtype):
    for filled in (1, 17, 1000, 8191, 32768):
        check(B=2, H=2 * groups, H_kv=2, T_max=32768, D=D, dtype=dtype, filled=filled)


@gpu
def test_gpu_left_padding_at_length():
    start = torch.tensor([0, 4000, 12345, 16384], device=DEVICE)
    check(B=4, H=16, H_kv=8, T_max=16384, D=128, dtype=torch.bfloat16, filled=16384, start=start)


@gpu
def test_graph_replay_follows_the_device_length():
    B, H, H_kv, T_max, D = 4, 16, 4, 4096, 128
    q, k, v = make_cache(B, H, H_kv, T_max, D, torch.bfloat16, T_max, poison=False)
    length = torch.tensor(10, device=DEVICE)
    decode_attention(q, k, v, length)                       # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = decode_attention(q, k, v, length)
    for filled in (10, 11, 3000, 4096):
        length.fill_(filled)
        graph.replay()
        assert_close(f"graph T={filled}", reference(q, k, v, length, None), out, RATIOS[torch.bfloat16])

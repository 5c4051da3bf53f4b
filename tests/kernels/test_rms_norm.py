"""The one-pass RMSNorm kernel against its fp32 reference: alone, after the residual add, gated, awkward widths,
strided heads (sliced out of a fused projection), bf16 and fp32; and the reference against the module's math."""
import pytest
import torch
import torch.nn.functional as F

from relin.kernels.fused_norm import naive_rms_norm, rms_norm

from .conftest import CUDA, assert_close, gpu

DEVICE = "cuda" if CUDA else "cpu"
RATIOS = {torch.float32: 1e-5, torch.bfloat16: 0.01}


def module_math(x, w, eps, residual=None, gate=None):
    """Qwen3RMSNorm / fla's FusedRMSNormGated as written in PyTorch, independently of the reference."""
    if residual is not None:
        x = residual + x
    dtype = x.dtype
    h = x.float()
    y = w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)
    return (y.float() * F.silu(gate.float())).to(dtype) if gate is not None else y


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("D", [16, 100, 128, 2048, 3000])
def test_plain_norm_matches_the_reference(dtype, D):
    x = (3 * torch.randn(5, 3, D, device=DEVICE)).to(dtype)
    w = (1 + 0.3 * torch.randn(D, device=DEVICE)).to(dtype)
    out = rms_norm(x, w, 1e-6, backend="triton")
    assert out.dtype == dtype and out.shape == x.shape
    assert_close(f"y D={D} {dtype}", naive_rms_norm(x, w, 1e-6), out, RATIOS[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_residual_add_is_fused_and_returned(dtype):
    x, res = (torch.randn(7, 1, 96, device=DEVICE).to(dtype) for _ in range(2))
    w = torch.rand(96, device=DEVICE).to(dtype)
    y, summed = rms_norm(x, w, 1e-5, residual=res, backend="triton")
    y_ref, summed_ref = naive_rms_norm(x, w, 1e-5, residual=res)
    # The interpreter's bf16 casts truncate; on a GPU the sum equals PyTorch's bit for bit (tested below).
    assert_close(f"residual + x {dtype}", summed_ref, summed, RATIOS[dtype])
    assert_close(f"y after the add {dtype}", y_ref, y, RATIOS[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gated_norm_over_heads_sliced_from_a_fused_projection(dtype):
    B, H, D = 3, 4, 24
    proj = torch.randn(B, 5 * H * D + 7, device=DEVICE).to(dtype)                 # [..., o | gate | other]
    o = proj[:, :H * D].view(B, H, D)
    gate = proj[:, 2 * H * D:3 * H * D].view(B, H, D)
    assert not o.is_contiguous() and not gate.is_contiguous()
    w = (1 + 0.2 * torch.randn(D, device=DEVICE)).to(dtype)
    out = rms_norm(o, w, 1e-6, gate=gate, backend="triton")
    assert out.is_contiguous() and out.shape == (B, H, D)
    # Three bf16 roundings, which the interpreter truncates: twice the single-rounding bound.
    assert_close(f"gated y {dtype}", naive_rms_norm(o.contiguous(), w, 1e-6, gate=gate.contiguous()), out,
                 2 * RATIOS[dtype])


def test_leading_dims_that_do_not_flatten_are_copied_not_misread():
    x = torch.randn(4, 6, 32, device=DEVICE).transpose(0, 1)                    # [6, 4, 32], rows out of order
    w = torch.randn(32, device=DEVICE)
    assert_close("transposed rows", naive_rms_norm(x, w, 1e-6), rms_norm(x, w, 1e-6, backend="triton"), 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_is_the_modules_math(dtype):
    x, res, gate = (torch.randn(2, 3, 40).to(dtype) for _ in range(3))
    w = torch.randn(40).to(dtype)
    assert torch.equal(naive_rms_norm(x, w, 1e-6), module_math(x, w, 1e-6))
    assert torch.equal(naive_rms_norm(x, w, 1e-6, gate=gate), module_math(x, w, 1e-6, gate=gate))
    assert torch.equal(naive_rms_norm(x, w, 1e-6, residual=res)[0], module_math(x, w, 1e-6, residual=res))


def test_gradients_flow_through_the_reference_where_the_kernel_has_no_backward():
    x, gate = (torch.randn(3, 2, 48, device=DEVICE, requires_grad=True) for _ in range(2))
    w = torch.randn(48, device=DEVICE, requires_grad=True)
    (rms_norm(x, w, 1e-6, gate=gate, backend="triton") ** 2).sum().backward()
    grads = [t.grad.clone() for t in (x, gate, w)]
    for t in (x, gate, w):
        t.grad = None
    (naive_rms_norm(x, w, 1e-6, gate=gate) ** 2).sum().backward()
    for name, got, want in zip(("x", "gate", "weight"), grads, (x.grad, gate.grad, w.grad)):
        assert torch.equal(got, want), name


def test_bad_arguments_are_one_line_errors():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match=r"weight must be \[D\] = \[8\]"):
        rms_norm(x, torch.ones(7), 1e-6)
    with pytest.raises(ValueError, match="gate must have x's shape"):
        rms_norm(x, torch.ones(8), 1e-6, gate=torch.ones(2, 4))
    with pytest.raises(ValueError, match="a residual or a gate, not both"):
        rms_norm(x, torch.ones(8), 1e-6, residual=x, gate=x)


@gpu
@pytest.mark.parametrize("D", [16, 24, 64, 80, 128, 256, 2048, 4096, 5000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_head_and_model_widths_on_the_gpu(D, dtype):
    x, res, gate = (torch.randn(33, 2, D, device="cuda").to(dtype) for _ in range(3))
    w = torch.randn(D, device="cuda").to(dtype)
    assert_close(f"y D={D}", naive_rms_norm(x, w, 1e-6), rms_norm(x, w, 1e-6), RATIOS[dtype])
    assert_close(f"gated D={D}", naive_rms_norm(x, w, 1e-6, gate=gate), rms_norm(x, w, 1e-6, gate=gate),
                 RATIOS[dtype])
    y, summed = rms_norm(x, w, 1e-6, residual=res)
    assert torch.equal(summed, res + x)
    assert_close(f"add+norm D={D}", naive_rms_norm(x, w, 1e-6, residual=res)[0], y, RATIOS[dtype])

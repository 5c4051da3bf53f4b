"""One step of the short convolution: the kernel against its fp32 reference (strided inputs from a fused
projection, padding steps, widths 2 to 5, state shifted in place), and the reference against the module's
convolution over a whole sequence fed one token at a time."""
import pytest
import torch

from relin.kernels.short_conv import naive_short_conv_step, short_conv_step
from relin.layers.short_conv import ShortConvolution

from .conftest import CUDA, assert_close, gpu

DEVICE = "cuda" if CUDA else "cpu"
RATIOS = {torch.float32: 1e-5, torch.bfloat16: 0.01}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("W", [2, 3, 4, 5])
@pytest.mark.parametrize("activation", ["silu", "none"])
def test_step_matches_the_reference_and_shifts_the_state(dtype, W, activation):
    B, C = 3, 300
    proj = torch.randn(B, C + 50, device=DEVICE).to(dtype)
    x = proj[:, 20:20 + C]                                          # a slice of a wider row
    weight = torch.randn(C, W, device=DEVICE)
    state = torch.randn(B, C, W - 1, device=DEVICE).to(dtype)
    real = torch.tensor([1.0, 0.0, 1.0], device=DEVICE)
    ref_state = state.clone()
    y_ref = naive_short_conv_step(x, ref_state, weight, activation, real)
    y = short_conv_step(x, state, weight, activation, real, backend="triton")
    assert y.dtype == dtype and y.shape == (B, C)
    assert_close(f"y W={W} {dtype} {activation}", y_ref, y, RATIOS[dtype])
    assert torch.equal(state, ref_state), "the state holds the last W-1 inputs, the padding step's as zero"
    assert state[1, :, -1].abs().max() == 0


def test_reference_steps_reproduce_the_module_over_a_sequence():
    torch.manual_seed(0)
    conv = ShortConvolution(24, 4, "silu")
    with torch.no_grad():
        conv.weight.normal_()
    x = torch.randn(2, 9, 24)
    with torch.no_grad():
        y_full, state_full = conv(x)
    state = torch.zeros(2, 24, 3)
    steps = [naive_short_conv_step(x[:, t], state, conv.weight.detach()) for t in range(9)]
    assert_close("stepwise", y_full, torch.stack(steps, 1), 1e-6)
    assert torch.allclose(state, state_full)


def test_bad_arguments_are_one_line_errors():
    x, w = torch.randn(2, 8), torch.randn(8, 4)
    with pytest.raises(ValueError, match=r"state must be \[B, C, W-1\] = \[2, 8, 3\]"):
        short_conv_step(x, torch.zeros(2, 8, 4), w)
    with pytest.raises(ValueError, match="activation: expected one of silu, none"):
        short_conv_step(x, torch.zeros(2, 8, 3), w, "gelu")


@gpu
@pytest.mark.parametrize("C", [64, 1000, 6144])
def test_wide_rows_on_the_gpu(C):
    x = torch.randn(16, 3 * C, device="cuda", dtype=torch.bfloat16)[:, C:2 * C]
    w = torch.randn(C, 4, device="cuda")
    state = torch.randn(16, C, 3, device="cuda", dtype=torch.bfloat16)
    ref_state = state.clone()
    assert_close(f"y C={C}", naive_short_conv_step(x, ref_state, w), short_conv_step(x, state, w), 0.01)
    assert torch.equal(state, ref_state)

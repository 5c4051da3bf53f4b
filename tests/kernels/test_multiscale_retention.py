"""multiscale_diag_retention (LIA-MTR eqs. 3-5): Triton and chunked PyTorch paths vs the fp32 loop."""
import math

import pytest
import torch

from relin.kernels.multiscale_retention import (
    multiscale_diag_retention,
    multiscale_diag_retention_step,
    naive_multiscale_diag_retention,
)

from .conftest import CUDA, assert_close, gpu

DEVICE = "cuda" if CUDA else "cpu"
DTYPES = [torch.float32, torch.bfloat16] if CUDA else [torch.float32]
# fla's test_gdn ratios for half-precision inputs; fp32 inputs must agree far more tightly.
RATIOS = {torch.float32: dict(o=1e-5, ht=1e-5, dq=1e-5, dk=1e-5, dv=1e-5, dh0=1e-5, dgate=1e-5, dmix=1e-5),
          torch.bfloat16: dict(o=0.005, ht=0.005, dq=0.008, dk=0.008, dv=0.008, dh0=0.008, dgate=0.02, dmix=0.02)}
GRAD_NAMES = ("dq", "dk", "dv", "dgate", "dmix", "dh0")


def make_inputs(B, T, C, S, gate_per_channel, dtype, with_initial_state):
    """LIA-MTR-like inputs: positive keys (ELU+1), sigmoid gate, softmax mixer, log-linear λ in [0.70, 0.995]."""
    def rand(*shape):
        return torch.randn(*shape, device=DEVICE)

    inputs = dict(
        q=rand(B, T, C).to(dtype),
        k=(torch.nn.functional.elu(rand(B, T, C)) + 1).to(dtype),
        v=rand(B, T, C).to(dtype),
        gate=torch.sigmoid(rand(B, T, C if gate_per_channel else 1)).to(dtype),
        mix=torch.softmax(rand(B, T, S), -1).to(dtype),
    )
    log_decays = torch.linspace(math.log(math.log(1 / 0.70)), math.log(math.log(1 / 0.995)), S, device=DEVICE)
    log_decays = -log_decays.exp()
    initial_state = rand(B, S, C) if with_initial_state else None
    return inputs, log_decays, initial_state


def run(fn, inputs, log_decays, initial_state, do, dht, **kwargs):
    """Forward and backward with given cotangents; returns o, final state and the gradients by name."""
    leaves = {name: x.detach().clone().requires_grad_() for name, x in inputs.items()}
    h0 = initial_state.detach().clone().requires_grad_() if initial_state is not None else None
    o, ht = fn(*leaves.values(), log_decays, initial_state=h0, output_final_state=True, **kwargs)
    torch.autograd.backward([o, ht], [do, dht])
    grads = {"d" + name: x.grad for name, x in leaves.items()}
    if h0 is not None:
        grads["dh0"] = h0.grad
    return o, ht, grads


def check_against_reference(impl, T, gate_per_channel, with_initial_state, dtype, B=2, C=48, S=8, **kwargs):
    inputs, log_decays, h0 = make_inputs(B, T, C, S, gate_per_channel, dtype, with_initial_state)
    do = torch.randn(B, T, C, device=DEVICE).to(dtype)
    dht = torch.randn(B, S, C, device=DEVICE)
    ref_o, ref_ht, ref_grads = run(naive_multiscale_diag_retention, inputs, log_decays, h0, do, dht)
    o, ht, grads = run(impl, inputs, log_decays, h0, do, dht, **kwargs)
    ratios = RATIOS[dtype]
    assert o.dtype == dtype and ht.dtype == torch.float32
    assert_close("o", ref_o, o, ratios["o"])
    assert_close("ht", ref_ht, ht, ratios["ht"])
    assert set(grads) == set(ref_grads)
    for name in GRAD_NAMES:
        if name in ref_grads:
            assert grads[name].dtype == ref_grads[name].dtype
            assert_close(name, ref_grads[name], grads[name], ratios[name])


def triton_op(*args, **kwargs):
    return multiscale_diag_retention(*args, backend="triton", **kwargs)


def torch_op(*args, **kwargs):
    return multiscale_diag_retention(*args, backend="torch", **kwargs)


# T = 150 (three blocks) runs on a GPU; under the CPU interpreter it costs 10 s a case, and 75 already spans two.
CASES = pytest.mark.parametrize("T", [1, 63, 75, 150] if torch.cuda.is_available() else [1, 63, 75])
GATES = pytest.mark.parametrize("gate_per_channel", [True, False], ids=["gate_channel", "gate_token"])
STATES = pytest.mark.parametrize("with_initial_state", [True, False], ids=["h0", "no_h0"])


@CASES
@GATES
@STATES
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_triton_matches_reference(T, gate_per_channel, with_initial_state, dtype):
    check_against_reference(triton_op, T, gate_per_channel, with_initial_state, dtype)


@CASES
@GATES
@STATES
def test_torch_path_matches_reference(T, gate_per_channel, with_initial_state):
    check_against_reference(torch_op, T, gate_per_channel, with_initial_state, torch.float32)


@pytest.mark.parametrize("C,S", [(16, 1), (24, 3), (7, 32)])
def test_small_and_odd_channel_counts(C, S):
    """Channel counts below and between the channel blocks, one scale and the most the kernels hold."""
    check_against_reference(triton_op, 75, True, True, DTYPES[0], C=C, S=S)


@gpu
@pytest.mark.parametrize("C", [16, 24, 100, 256, 1000])
@pytest.mark.parametrize("S", [1, 3, 8, 32])
def test_channel_and_scale_sweep(C, S):
    """Channel counts around the 256-wide channel block and scale counts up to MAX_SCALES, bf16, with several
    T blocks (block_len 32), a partial last block and an initial state."""
    check_against_reference(triton_op, 150, C % 2 == 0, True, torch.bfloat16, C=C, S=S, block_len=32)


def test_too_many_scales_fail_at_the_call():
    inputs, log_decays, _ = make_inputs(1, 4, 8, 33, True, torch.float32, False)
    with pytest.raises(ValueError, match="^mix has S = 33 scales: the Triton kernels support 1 to 32$"):
        triton_op(*inputs.values(), log_decays)


@pytest.mark.parametrize("T", [37, 63] if torch.cuda.is_available() else [37])
def test_blocked_equals_single_pass(T):
    inputs, log_decays, h0 = make_inputs(2, T, 40, 5, True, torch.float32, True)
    do, dht = torch.randn(2, T, 40, device=DEVICE), torch.randn(2, 5, 40, device=DEVICE)
    single = run(triton_op, inputs, log_decays, h0, do, dht, block_len=256)
    for block_len in (4, 32):
        blocked = run(triton_op, inputs, log_decays, h0, do, dht, block_len=block_len)
        assert_close("o", single[0], blocked[0], 1e-5)
        assert_close("ht", single[1], blocked[1], 1e-5)
        for name in GRAD_NAMES:
            assert_close(name, single[2][name], blocked[2][name], 1e-5)


@pytest.mark.parametrize("impl", [triton_op, torch_op], ids=["triton", "torch"])
def test_step_matches_chunked(impl):
    T = 37
    inputs, log_decays, h0 = make_inputs(2, T, 24, 4, False, torch.float32, True)
    o, ht = impl(*inputs.values(), log_decays, initial_state=h0, output_final_state=True)
    state, steps = h0, []
    for t in range(T):
        o_t, state = multiscale_diag_retention_step(*(x[:, t] for x in inputs.values()), log_decays, state)
        steps.append(o_t)
    assert_close("o", torch.stack(steps, 1), o, 1e-5)
    assert_close("ht", state, ht, 1e-5)


@pytest.mark.parametrize("impl", [triton_op, torch_op], ids=["triton", "torch"])
def test_continuing_from_final_state_equals_one_call(impl):
    inputs, log_decays, _ = make_inputs(1, 90, 16, 3, True, torch.float32, False)
    whole, no_state = impl(*inputs.values(), log_decays)
    first, state = impl(*(x[:, :40] for x in inputs.values()), log_decays, output_final_state=True)
    second, _ = impl(*(x[:, 40:] for x in inputs.values()), log_decays, initial_state=state)
    assert no_state is None
    assert_close("o", whole, torch.cat([first, second], 1), 1e-5)


def test_bad_shapes_name_the_argument():
    inputs, log_decays, _ = make_inputs(1, 8, 16, 3, True, torch.float32, False)
    with pytest.raises(ValueError, match="gate has shape"):
        multiscale_diag_retention(*list(inputs.values())[:3], inputs["gate"][..., :4], inputs["mix"], log_decays)
    with pytest.raises(ValueError, match="log_decays has shape"):
        multiscale_diag_retention(*inputs.values(), log_decays[:2])
    with pytest.raises(ValueError, match="initial_state has shape"):
        multiscale_diag_retention(*inputs.values(), log_decays, initial_state=torch.zeros(1, 3, 15))

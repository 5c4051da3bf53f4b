"""Gated delta rule (OPAL's Gated DeltaNet): Triton and chunked PyTorch paths vs the fp32 token loop."""
import pytest
import torch
import torch.nn.functional as F

from relin.kernels.gated_delta_rule import (
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    gdn_gates,
    naive_gdn_gates,
    naive_recurrent_gated_delta_rule,
)

from .conftest import CUDA, assert_close, gpu

DEVICE = "cuda" if CUDA else "cpu"
# fp32 Triton products are exact (ieee) but slow to compile on a GPU; the interpreter covers them.
DTYPES = [torch.bfloat16] if CUDA else [torch.float32]
# Small heads under the CPU interpreter; the sizes the models use on a GPU.
HEADS, DK, DV = (2, 32, 16) if DEVICE == "cpu" else (4, 128, 64)
# fla's test_gdn ratios for half-precision inputs; fp32 inputs must agree far more tightly.
RATIOS = {torch.float32: dict(o=1e-4, ht=1e-4, dq=1e-4, dk=1e-4, dv=1e-4, dh0=1e-4, dg=1e-4, dbeta=1e-4),
          torch.bfloat16: dict(o=0.005, ht=0.005, dq=0.008, dk=0.008, dv=0.008, dh0=0.008, dg=0.02, dbeta=0.02)}
GRAD_NAMES = ("dq", "dk", "dv", "dg", "dbeta", "dh0")
# Head dims the GPU sweep covers, each as K and as V at least once (pairs keep the compile count down).
SWEEP_DIMS = [(16, 16), (16, 256), (24, 48), (32, 100), (48, 24), (64, 32), (100, 64), (128, 128), (256, 16),
              (256, 256)]


def make_inputs(B, T, N, dtype, with_initial_state, l2norm_in_kernel, gate_logit_normalizer=1.0, heads=HEADS,
                dk=DK, dv=DV):
    """GDN-like inputs: unit-norm keys (unless the op normalises them), sigmoid beta, log-sigmoid gates."""
    k = torch.randn(B, T, heads, dk, device=DEVICE)
    inputs = dict(
        q=torch.randn(B, T, heads, dk, device=DEVICE),
        k=k if l2norm_in_kernel else F.normalize(k, dim=-1),
        v=torch.randn(B, T, heads, dv, device=DEVICE),
        g=F.logsigmoid(torch.randn(B, T, heads, device=DEVICE)) / gate_logit_normalizer,
        beta=torch.rand(B, T, heads, device=DEVICE).sigmoid(),
    )
    inputs = {name: x.to(dtype) for name, x in inputs.items()}
    initial_state = torch.randn(N, heads, dk, dv, device=DEVICE) if with_initial_state else None
    return inputs, initial_state


def run(op, inputs, initial_state, do, dht, **kwargs):
    """Forward and backward of ``op`` on fresh leaves; returns (o, final state, {gradient name: tensor})."""
    leaves = {name: x.detach().clone().requires_grad_() for name, x in inputs.items()}
    h0 = None if initial_state is None else initial_state.detach().clone().requires_grad_()
    o, ht = op(**leaves, initial_state=h0, output_final_state=True, **kwargs)
    ((o.float() * do).sum() + (ht * dht).sum()).backward()
    grads = {f"d{name}": x.grad for name, x in leaves.items()}
    if h0 is not None:
        grads["dh0"] = h0.grad
    return o, ht, grads


def reference(inputs, initial_state, do, dht, **kwargs):
    """The fp32 token loop, on the CPU (a per-token loop with autograd is very slow on a GPU)."""
    cpu = {name: x.detach().cpu().float() for name, x in inputs.items()}
    h0 = None if initial_state is None else initial_state.cpu()
    if kwargs.get("cu_seqlens") is not None:
        kwargs = dict(kwargs, cu_seqlens=kwargs["cu_seqlens"].cpu())
    o, ht, grads = run(naive_recurrent_gated_delta_rule, cpu, h0, do.cpu(), dht.cpu(), **kwargs)
    return o.to(DEVICE), ht.to(DEVICE), {name: g.to(DEVICE) for name, g in grads.items()}


def assert_matches(ref, out, dtype, dg_atol=1e-6):
    ratios = RATIOS[dtype]
    assert_close("o", ref[0], out[0], ratios["o"])
    assert_close("ht", ref[1], out[1], ratios["ht"])
    for name in GRAD_NAMES:
        if name in ref[2]:
            assert_close(name, ref[2][name], out[2][name], ratios[name], err_atol=dg_atol if name == "dg" else 1e-6)


def check_against_reference(backend, dtype, B, T, with_initial_state, l2norm_in_kernel, cu_seqlens=None, **dims):
    """One shared loss through the fp32 token loop and through ``backend``: output, final state, every gradient."""
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    inputs, h0 = make_inputs(B, T, N, dtype, with_initial_state, l2norm_in_kernel, **dims)
    do = torch.randn(B, T, inputs["v"].shape[2], inputs["v"].shape[3], device=DEVICE)
    dht = torch.randn(N, *inputs["v"].shape[2:3], inputs["k"].shape[3], inputs["v"].shape[3], device=DEVICE)
    kwargs = dict(use_qk_l2norm_in_kernel=l2norm_in_kernel, cu_seqlens=cu_seqlens)
    ref = reference(inputs, h0, do, dht, **kwargs)
    out = run(chunk_gated_delta_rule, inputs, h0, do, dht, backend=backend, **kwargs)
    assert out[0].dtype == dtype and out[1].dtype == torch.float32
    assert_matches(ref, out, dtype)


BACKENDS = ["triton", "torch"]
# (T, initial state, l2norm in kernel): lengths 1, below, above and many chunks of 64.
CASES = [(1, True, False), (63, False, True), (75, True, True), (200, True, False)]
if DEVICE == "cuda":
    CASES += [(500, True, True), (1000, False, False)]


# The PyTorch path computes in fp32 whatever comes in: half precision concerns the Triton kernels only.
BACKEND_DTYPES = [("triton", dtype) for dtype in DTYPES] + [("torch", torch.float32)]


@pytest.mark.parametrize("T,with_initial_state,l2norm_in_kernel", CASES)
@pytest.mark.parametrize("backend,dtype", BACKEND_DTYPES)
def test_chunk_matches_reference(backend, dtype, T, with_initial_state, l2norm_in_kernel):
    check_against_reference(backend, dtype, 2, T, with_initial_state, l2norm_in_kernel)


@pytest.mark.parametrize("dk,dv", [(16, 16), (16, 7), (24, 33)])
def test_small_and_odd_head_dims(dk, dv):
    """K = 16 and V not a power of two (zero-padded to 64-wide tiles: narrower ones faulted on the H200)."""
    check_against_reference("triton", DTYPES[0], 2, 75, True, False, heads=2, dk=dk, dv=dv)


@gpu
@pytest.mark.parametrize("dk,dv", SWEEP_DIMS)
def test_head_dim_sweep(dk, dv):
    """Every head dim the kernels accept, as K and as V, with a partial last chunk, B > 1 and an initial state,
    then packed sequences of awkward lengths (one empty)."""
    check_against_reference("triton", torch.bfloat16, 2, 75, True, False, heads=2, dk=dk, dv=dv)
    cu_seqlens = torch.tensor([0, 15, 15, 100, 164], dtype=torch.long, device=DEVICE)
    check_against_reference("triton", torch.bfloat16, 1, 164, True, True, cu_seqlens=cu_seqlens, heads=2, dk=dk,
                            dv=dv)


# (B, T, initial state, l2norm in kernel, cu_seqlens, K, V): one token, a partial chunk, packed sequences (one
# empty), odd head dims, the widest key tile.
INFERENCE_CASES = [(2, 1, True, False, None, DK, DV), (2, 75, True, True, None, DK, DV),
                   (1, 164, False, True, [0, 15, 15, 100, 164], DK, DV), (2, 75, True, False, None, 16, 7),
                   (1, 75, True, False, None, 200, 16)]
if DEVICE == "cuda":
    INFERENCE_CASES += [(2, T, init, l2, None, DK, DV) for T, init, l2 in CASES]


@pytest.mark.parametrize("B,T,with_initial_state,l2norm_in_kernel,cu_seqlens,dk,dv", INFERENCE_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_without_gradients_matches_reference(dtype, B, T, with_initial_state, l2norm_in_kernel, cu_seqlens,
                                                     dk, dv):
    """The forward outside autograd (no input requires a gradient, and under ``torch.no_grad``) against the token
    loop, and equal to the training forward."""
    cu = None if cu_seqlens is None else torch.tensor(cu_seqlens, dtype=torch.long, device=DEVICE)
    N = B if cu is None else cu.numel() - 1
    inputs, h0 = make_inputs(B, T, N, dtype, with_initial_state, l2norm_in_kernel, dk=dk, dv=dv)
    kwargs = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=l2norm_in_kernel,
                  cu_seqlens=cu)
    ref = naive_recurrent_gated_delta_rule(**{n: x.cpu().float() for n, x in inputs.items()},
                                           **dict(kwargs, initial_state=None if h0 is None else h0.cpu(),
                                                  cu_seqlens=None if cu is None else cu.cpu()))
    o, ht = chunk_gated_delta_rule(**inputs, backend="triton", **kwargs)
    with torch.no_grad():
        o_off, ht_off = chunk_gated_delta_rule(**{n: x.requires_grad_() for n, x in inputs.items()},
                                               backend="triton", **kwargs)
    o_train, ht_train = chunk_gated_delta_rule(**inputs, backend="triton", **kwargs)
    assert o_train.requires_grad and not o.requires_grad
    ratios = RATIOS[dtype]
    for name, out, state in (("no input requires grad", o, ht), ("no_grad", o_off, ht_off)):
        assert out.dtype == dtype and state.dtype == torch.float32
        assert_close(f"o ({name})", ref[0].to(DEVICE), out, ratios["o"])
        assert_close(f"ht ({name})", ref[1].to(DEVICE), state, ratios["ht"])
        assert_close(f"o ({name}) vs training forward", o_train.detach(), out, ratios["o"])
        assert_close(f"ht ({name}) vs training forward", ht_train.detach(), state, ratios["ht"])


def test_head_dims_beyond_the_kernels_fail_at_the_call():
    inputs, _ = make_inputs(1, 8, 1, torch.float32, False, False, dk=16, dv=16)
    for name, x in (("K", dict(q=inputs["q"].repeat(1, 1, 1, 17), k=inputs["k"].repeat(1, 1, 1, 17))),
                    ("V", dict(v=inputs["v"].repeat(1, 1, 1, 17)))):
        with pytest.raises(ValueError, match=rf"^{name} \(.*\) = 272: the Triton kernels support 1 to 256$"):
            chunk_gated_delta_rule(**dict(inputs, **x), backend="triton")


def test_chunk_long_sequence_torch_path():
    """500 steps (eight chunks, a ragged last one) through the CPU path; the GPU covers it for Triton."""
    check_against_reference("torch", torch.float32, 1, 500, True, True)


@pytest.mark.parametrize("gate_logit_normalizer,zero_gate_fraction", [(0.02, 0.0), (1.0, 0.5), (50.0, 0.0)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_chunk_gate_stress(backend, gate_logit_normalizer, zero_gate_fraction):
    """Gates from strongly negative (about -35 per step) to about 0, and gates of exactly 0."""
    dtype = DTYPES[-1]
    B, T = 1, 130
    inputs, h0 = make_inputs(B, T, B, dtype, True, False, gate_logit_normalizer)
    inputs["g"] = inputs["g"].masked_fill(torch.rand_like(inputs["g"], dtype=torch.float32) < zero_gate_fraction, 0)
    do = torch.randn(B, T, HEADS, DV, device=DEVICE)
    dht = torch.randn(B, HEADS, DK, DV, device=DEVICE)
    ref = reference(inputs, h0, do, dht)
    out = run(chunk_gated_delta_rule, inputs, h0, do, dht, backend=backend)
    # dg is a difference of q·dq and k·dk terms that cancel almost exactly under ~-35 gates: in fp32 its
    # relative error reached 1.1e-4 at a max abs error of 1.8e-6, so dg takes an absolute floor here, as fla's
    # gate tests and the decayed-linear-attention tests do
    assert_matches(ref, out, dtype, dg_atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_chunk_varlen_matches_separate_sequences(backend):
    """Packed sequences (cu_seqlens) equal separate runs: no state bleeds across a boundary."""
    dtype = DTYPES[0]
    cu_seqlens = torch.tensor([0, 15, 100, 164, 230], dtype=torch.long, device=DEVICE)
    N, T = cu_seqlens.numel() - 1, int(cu_seqlens[-1])
    inputs, h0 = make_inputs(1, T, N, dtype, True, True)
    do = torch.randn(1, T, HEADS, DV, device=DEVICE)
    dht = torch.randn(N, HEADS, DK, DV, device=DEVICE)
    same = 1e-5 if dtype == torch.float32 else 1e-3
    packed = run(chunk_gated_delta_rule, inputs, h0, do, dht, cu_seqlens=cu_seqlens, use_qk_l2norm_in_kernel=True,
                 backend=backend)
    for n in range(N):
        s, e = int(cu_seqlens[n]), int(cu_seqlens[n + 1])
        piece = {name: x[:, s:e] for name, x in inputs.items()}
        o, ht, grads = run(chunk_gated_delta_rule, piece, h0[n:n + 1], do[:, s:e], dht[n:n + 1],
                           use_qk_l2norm_in_kernel=True, backend=backend)
        assert_close(f"o[{n}]", o, packed[0][:, s:e], same)
        assert_close(f"ht[{n}]", ht, packed[1][n:n + 1], same)
        for name in GRAD_NAMES:
            part = packed[2][name][n:n + 1] if name == "dh0" else packed[2][name][:, s:e]
            assert_close(f"{name}[{n}]", grads[name], part, same)
    ref = reference(inputs, h0, do, dht, cu_seqlens=cu_seqlens, use_qk_l2norm_in_kernel=True)
    assert_matches(ref, packed, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T,with_initial_state,l2norm_in_kernel,varlen", [
    (1, True, True, False), (1, False, False, True), (40, True, False, False), (40, True, True, True)])
def test_fused_recurrent_matches_reference_and_chunk(T, with_initial_state, l2norm_in_kernel, varlen, dtype):
    """The decoding path equals the reference and the chunked op (forward; it has no Triton backward)."""
    B = 1 if varlen else 2
    cu_seqlens = torch.tensor([0, T, 3 * T], dtype=torch.long, device=DEVICE) if varlen else None
    N = 2
    inputs, h0 = make_inputs(B, T * (3 if varlen else 1), N, dtype, with_initial_state, l2norm_in_kernel)
    kwargs = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=l2norm_in_kernel,
                  cu_seqlens=cu_seqlens)
    cpu_kwargs = dict(kwargs, initial_state=None if h0 is None else h0.cpu(),
                      cu_seqlens=None if cu_seqlens is None else cu_seqlens.cpu())
    ref_o, ref_ht = naive_recurrent_gated_delta_rule(
        **{name: x.cpu().float() for name, x in inputs.items()}, **cpu_kwargs)
    with torch.no_grad():
        o, ht = fused_recurrent_gated_delta_rule(**inputs, **kwargs, backend="triton")
        chunk_o, chunk_ht = chunk_gated_delta_rule(**inputs, **kwargs, backend="triton")
    ratio = 1e-5 if dtype == torch.float32 else 0.005
    assert o.dtype == dtype and ht.dtype == torch.float32
    assert_close("o", ref_o.to(DEVICE), o, ratio)
    assert_close("ht", ref_ht.to(DEVICE), ht, ratio)
    assert_close("o vs chunk", chunk_o, o, 2 * RATIOS[dtype]["o"])
    assert_close("ht vs chunk", chunk_ht, ht, 2 * RATIOS[dtype]["ht"])


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_fused_recurrent_final_state_in_place_overwrites_the_initial_state(backend):
    inputs, h0 = make_inputs(2, 1, 2, DTYPES[0], True, True)
    with torch.no_grad():
        o, ht = fused_recurrent_gated_delta_rule(**inputs, initial_state=h0.clone(), output_final_state=True,
                                                 use_qk_l2norm_in_kernel=True, backend=backend)
        state = h0.clone()
        o_in_place, ht_in_place = fused_recurrent_gated_delta_rule(
            **inputs, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True,
            final_state_in_place=True, backend=backend)
    assert ht_in_place is state
    assert_close("o in place", o, o_in_place, 1e-6)
    assert_close("ht in place", ht, ht_in_place, 1e-6)
    with pytest.raises(ValueError, match="final_state_in_place"):
        fused_recurrent_gated_delta_rule(**inputs, final_state_in_place=True, backend=backend)


def test_fused_recurrent_reads_heads_sliced_from_a_fused_projection():
    """q, k and v as slices of one [B, 3·H·K] row (the decode step's fused projection) read in place."""
    B, H, K = 3, HEADS, DK
    qkv = torch.randn(B, 1, 3 * H * K + 5, device=DEVICE).to(DTYPES[0])
    q, k, v = (qkv[..., i * H * K:(i + 1) * H * K].view(B, 1, H, K) for i in range(3))
    g = F.logsigmoid(torch.randn(B, 1, H, device=DEVICE))
    beta = torch.rand(B, 1, H, device=DEVICE)
    h0 = torch.randn(B, H, K, K, device=DEVICE)
    with torch.no_grad():
        o, ht = fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                                 use_qk_l2norm_in_kernel=True, backend="triton")
        ref_o, ref_ht = naive_recurrent_gated_delta_rule(
            q.contiguous().float(), k.contiguous().float(), v.contiguous().float(), g, beta, K ** -0.5, h0, True, True)
    assert_close("o from slices", ref_o.to(DEVICE), o, RATIOS[DTYPES[0]]["o"])
    assert_close("ht from slices", ref_ht.to(DEVICE), ht, RATIOS[DTYPES[0]]["ht"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gates_kernel_matches_the_layer_expression(dtype):
    """g = −exp(A_log)·softplus(a + dt_bias), β = scale·σ(b), zero on padding; a and b sliced from one row, and
    a + dt_bias past softplus' threshold of 20."""
    B, H = 5, 7
    proj = (8 * torch.randn(B, 1, 2 * H + 3, device=DEVICE)).to(dtype)
    a, b = proj[..., :H], proj[..., H + 1:2 * H + 1]
    A_log, dt_bias = torch.randn(H, device=DEVICE), torch.randn(H, device=DEVICE)
    dt_bias[0] = 25.0
    real = torch.tensor([[1.0], [0.0], [1.0], [1.0], [0.0]], device=DEVICE)
    g, beta = gdn_gates(a, b, A_log, dt_bias, 2.0, real, backend="triton")
    expected_g = -A_log.exp() * F.softplus(a.float() + dt_bias) * real[..., None]
    expected_beta = 2.0 * torch.sigmoid(b.float()) * real[..., None]
    assert g.dtype == beta.dtype == torch.float32 and g.shape == (B, 1, H)
    assert_close("g", expected_g, g, 1e-5)
    assert_close("beta", expected_beta, beta, 1e-5)
    g_ref, beta_ref = naive_gdn_gates(a, b, A_log, dt_bias, 2.0, real)
    assert torch.equal(g_ref, expected_g) and torch.equal(beta_ref, expected_beta)


def test_fused_recurrent_triton_refuses_gradients():
    inputs, _ = make_inputs(1, 3, 1, torch.float32, False, False)
    inputs["q"].requires_grad_()
    with pytest.raises(NotImplementedError, match="no Triton backward"):
        fused_recurrent_gated_delta_rule(**inputs, backend="triton")


@pytest.mark.parametrize("op", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_bad_shapes_name_the_argument(op):
    inputs, _ = make_inputs(2, 8, 2, torch.float32, False, False)
    with pytest.raises(ValueError, match=r"v must be \[B, T, H, V\]"):
        op(**dict(inputs, v=inputs["v"][:, :4]))
    with pytest.raises(ValueError, match="batch size B = 1"):
        op(**inputs, cu_seqlens=torch.tensor([0, 8], device=DEVICE))
    with pytest.raises(ValueError, match=r"initial_state must be \[N, H, K, V\]"):
        op(**inputs, initial_state=torch.zeros(3, HEADS, DK, DV, device=DEVICE))
    with pytest.raises(ValueError, match="T = 0 tokens"):
        op(**{name: x[:, :0] for name, x in inputs.items()})
    with pytest.raises(ValueError, match="backend='cuda'"):
        op(**inputs, backend="cuda")


# Segmented serial passes (segments.py): gates that let every carry stop after a chunk, gates too weak for any
# carry to stop (every segment falls back to its transition), exact zeros among strong gates (some of each),
# packed sequences with an empty one, and keys longer than 1 (transitions that can grow: the bound's log term).
SEGMENT_CASES = {"strong gates": dict(), "weak gates": dict(gate_logit_normalizer=50.0),
                 "zero gates": dict(zero_gate_fraction=0.7), "packed": dict(cu_seqlens=[0, 15, 15, 150, 200, 333]),
                 "long keys": dict(key_scale=2.0)}


def segmented_inputs(B, T, N, dtype, gate_logit_normalizer=1.0, zero_gate_fraction=0.0, key_scale=1.0):
    inputs, h0 = make_inputs(B, T, N, dtype, True, False, gate_logit_normalizer)
    g = inputs["g"].float()
    inputs["g"] = g.masked_fill(torch.rand_like(g) < zero_gate_fraction, 0).to(dtype)
    inputs["k"] = (inputs["k"].float() * key_scale).to(dtype)
    return inputs, h0


@pytest.mark.parametrize("case", SEGMENT_CASES)
def test_segmented_passes_match_whole_sequences(case, monkeypatch):
    """Every output and gradient with the serial passes on segments of one and of two chunks equals the passes over
    whole sequences (to rounding), and the fp32 token loop."""
    options = dict(SEGMENT_CASES[case])
    cu = options.pop("cu_seqlens", None)
    cu = None if cu is None else torch.tensor(cu, dtype=torch.long, device=DEVICE)
    B, T = (1, int(cu[-1])) if cu is not None else (2, 200 if DEVICE == "cpu" else 1000)
    N = B if cu is None else cu.numel() - 1
    dtype = DTYPES[0]
    inputs, h0 = segmented_inputs(B, T, N, dtype, **options)
    do = torch.randn(B, T, HEADS, DV, device=DEVICE)
    dht = torch.randn(N, HEADS, DK, DV, device=DEVICE)
    outs = {}
    for chunks in ("0", "1", "2"):
        monkeypatch.setenv("RELIN_GDN_CP", chunks)
        outs[chunks] = run(chunk_gated_delta_rule, inputs, h0, do, dht, cu_seqlens=cu, backend="triton")
    ref = reference(inputs, h0, do, dht, cu_seqlens=cu)
    # Where the carries stop early the two share their rounding; where segments fall back to their transitions
    # (weak gates) the entering states are rounded on another path, so in bf16 the two are two results each ~3e-3
    # from the fp32 loop: there the segments must be as close to the loop as the whole-sequence passes are.
    same = 1e-5 if dtype == torch.float32 else None if case == "weak gates" else 2e-3
    for chunks in ("1", "2"):
        assert_matches(ref, outs[chunks], dtype)
        for name, exact, whole, split in (
                ("o", ref[0], outs["0"][0], outs[chunks][0]), ("ht", ref[1], outs["0"][1], outs[chunks][1]),
                *((n, ref[2][n], outs["0"][2][n], outs[chunks][2][n]) for n in GRAD_NAMES)):
            if same is not None:
                assert_close(f"{name} on segments of {chunks} chunk(s)", whole, split, same)
            else:
                err_split, err_whole = relative_rms(exact, split), relative_rms(exact, whole)
                assert err_split <= 1.05 * err_whole + 1e-6, \
                    f"{name} on {chunks}-chunk segments: {err_split:.3e} from the fp32 loop, whole {err_whole:.3e}"


def relative_rms(ref: torch.Tensor, out: torch.Tensor) -> float:
    ref, out = ref.detach().double().cpu(), out.detach().double().cpu()
    return ((ref - out).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()


def test_segment_plan_rule(monkeypatch):
    """FlashQLA's Hopper rule on 132 SMs at gdn_public's cells (H = 16), the override, and the segments' layout."""
    from relin.kernels.gated_delta_rule.segments import chunks_per_segment, segment_plan
    cpu = torch.device("cpu")
    monkeypatch.delenv("RELIN_GDN_CP", raising=False)  # auto by default
    assert [chunks_per_segment(n, 16, cpu) for n in ([4096], [16384], [32768], [65536], [4096] * 8)] == \
        [None, 16, 32, 32, None]  # (1, 4K): the extra launches cost more than they save
    monkeypatch.setenv("RELIN_GDN_CP", "auto")
    assert chunks_per_segment([65536], 16, cpu) == 32
    assert chunks_per_segment([17000, 8192, 4100, 2048, 1000, 300, 100, 28], 16, cpu) == 32
    assert chunks_per_segment([256], 16, cpu) is None  # 4 chunks: nothing to split
    monkeypatch.setenv("RELIN_GDN_CP", "0")
    assert chunks_per_segment([65536], 16, cpu) is None
    monkeypatch.setenv("RELIN_GDN_CP", "3")
    with pytest.raises(ValueError, match="RELIN_GDN_CP='3'"):
        chunks_per_segment([65536], 16, cpu)
    monkeypatch.setenv("RELIN_GDN_CP", "2")
    plan = segment_plan(1, 333, [0, 15, 15, 150, 333], 2, cpu)
    assert plan.cu_seqlens.tolist() == [0, 15, 15, 143, 150, 278, 333]
    assert plan.chunk_offsets.tolist() == [0, 1, 1, 3, 4, 6, 7]
    assert plan.info.tolist() == [[0, 0, 0], [1, 1, 1], [2, 2, 3], [2, 2, 3], [3, 4, 5], [3, 4, 5]]
    assert plan.first.tolist() == [0, 1, 2, 4] and plan.last.tolist() == [0, 1, 3, 5]
    assert (plan.num_segments, plan.chunks, plan.max_segments) == (6, 2, 2)

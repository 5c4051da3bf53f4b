"""Decayed linear attention: Triton and chunked-PyTorch paths against the fp32 per-token reference.

On CPU the Triton kernels run under TRITON_INTERPRET=1 (small H, D, fp32, tight tolerances); on CUDA the
same tests use larger heads and bf16 with fla's tolerances.
"""
import pytest
import torch
import torch.nn.functional as F

from relin.kernels.common.triton_utils import tile
from relin.kernels.decayed_linear_attn import (
    chunk_decayed_linear_attn,
    fused_recurrent_decayed_linear_attn,
    naive_recurrent_decayed_linear_attn,
)
from relin.kernels.decayed_linear_attn.triton_fwd import VALUE_TILE, low_operands

from .conftest import CUDA, assert_close, gpu

DEVICE = "cuda" if CUDA else "cpu"
DTYPE = torch.bfloat16 if CUDA else torch.float32
H, K, V = (4, 256, 128) if CUDA else (2, 32, 16)  # K = 2V as with Hedgehog features
# fla's half-precision ratios (notes/kernels.md); fp32 under the interpreter is exact to rounding
HALF_TOL = dict(o=0.005, state=0.005, dq=0.008, dk=0.008, dv=0.008, dh0=0.008, dz0=0.008, dg=0.02)
TOL = HALF_TOL if CUDA else dict(o=1e-4, state=1e-4, dq=1e-4, dk=1e-4, dv=1e-4, dh0=1e-4, dz0=1e-4, dg=1e-4)
# absolute floor below which a max error passes: at T = 1 some gradients are analytically ~0 (dg with no
# initial state; dq, dk when normalized), so only rounding is left to compare
ATOL = 1e-3 if CUDA else 5e-5
BACKENDS = ["triton", "torch"]
# Head dims the GPU sweep covers, each as K and as V at least once (pairs keep the compile count down).
SWEEP_DIMS = [(16, 16), (16, 256), (24, 48), (32, 100), (48, 24), (64, 32), (100, 64), (128, 128), (256, 16),
              (256, 256)]


def make_inputs(B, T, heads=H, k_dim=K, v_dim=V, gate="logsigmoid", normalize=False, initial_state=False,
                gate_logit_normalizer=1.0, mask_p=0.0, num_states=None):
    """fp32 leaf tensors on the CPU; positive (softmax) features when normalized, as Hedgehog produces."""
    q, k = torch.randn(B, T, heads, k_dim), torch.randn(B, T, heads, k_dim)
    if normalize:
        q, k = q.softmax(-1), k.softmax(-1)
    inputs = dict(q=q, k=k, v=torch.randn(B, T, heads, v_dim))
    if gate is not None:
        g = F.logsigmoid(torch.randn(B, T, heads)) / gate_logit_normalizer
        inputs["g"] = g.masked_fill(torch.rand(B, T, heads) < mask_p, 0.0)
    if initial_state:
        N = num_states or B
        S0 = torch.randn(N, heads, k_dim, v_dim)
        inputs["initial_state"] = (S0.abs(), torch.rand(N, heads, k_dim) + 0.5) if normalize else S0
    return inputs


def leaves(inputs, device, dtype):
    """Copies that require grad: q, k, v in dtype, g and states fp32, all on device."""
    out = {}
    for name, x in inputs.items():
        if name == "initial_state" and isinstance(x, tuple):
            out[name] = tuple(s.detach().to(device).clone().requires_grad_() for s in x)
        else:
            cast = dtype if name in ("q", "k", "v") else torch.float32
            out[name] = x.detach().to(device=device, dtype=cast).clone().requires_grad_()
    return out


def flat_state(state):
    return list(state) if isinstance(state, tuple) else [state]


def run(fn, inputs, device, dtype, normalize, cotangents, **kwargs):
    """Forward with a final state, backward of <o, do> + <state, dstate>; everything returned on the CPU."""
    x = leaves(inputs, device, dtype)
    o, state = fn(**x, normalize=normalize, output_final_state=True, **kwargs)
    do, dstate = cotangents(o, state)
    loss = (o.float() * do.to(device)).sum()
    loss = loss + sum((s * d.to(device)).sum() for s, d in zip(flat_state(state), dstate))
    loss.backward()
    results = dict(o=o, state=torch.cat([s.reshape(-1) for s in flat_state(state)]))
    for name in ("q", "k", "v", "g"):
        if name in x:
            results["d" + name] = x[name].grad
    if "initial_state" in x:
        grads = [s.grad for s in flat_state(x["initial_state"])]
        results["dh0"] = grads[0]
        if normalize:
            results["dz0"] = grads[1]
    return {name: t.detach().float().cpu() for name, t in results.items()}


class Cotangents:
    """Random do and dstate, drawn at first use and then reused, so several runs share one loss."""

    def __init__(self, do=None, dstate=None):
        self.do, self.dstate = do, dstate

    def __call__(self, o, state):
        if self.do is None:
            self.do = torch.randn(o.shape)
            self.dstate = [torch.randn(s.shape) for s in flat_state(state)]
        return self.do, self.dstate


def compare(ref, out, dg_atol=ATOL, tol=TOL):
    """fla's metric per tensor; dg alone may take fla's simple_gla absolute floor (it is a difference of
    q·dq and k·dk that cancel almost exactly when the decay is strong)."""
    for name in ref:
        assert_close(name, ref[name], out[name], tol[name], err_atol=dg_atol if name == "dg" else ATOL)


def reference(inputs, normalize, cotangents, **kwargs):
    return run(naive_recurrent_decayed_linear_attn, inputs, "cpu", torch.float32, normalize, cotangents, **kwargs)


def reference_per_sequence(inputs, normalize, cotangents, bounds):
    """The fp32 reference once per packed sequence, outputs and states concatenated as the op returns them."""
    def packed(q, k, v, g=None, normalize=False, initial_state=None, output_final_state=True):
        outputs, states = [], []
        for n, (bos, eos) in enumerate(zip(bounds[:-1], bounds[1:])):
            state = tuple(s[n:n + 1] for s in initial_state) if normalize else initial_state[n:n + 1]
            o, final = naive_recurrent_decayed_linear_attn(
                q[:, bos:eos], k[:, bos:eos], v[:, bos:eos], None if g is None else g[:, bos:eos],
                normalize=normalize, initial_state=state, output_final_state=True)
            outputs.append(o)
            states.append(flat_state(final))
        return torch.cat(outputs, 1), [torch.cat(parts) for parts in zip(*states)]

    def op(**kwargs):
        o, states = packed(**kwargs)
        return o, (tuple(states) if normalize else states[0])

    return run(op, inputs, "cpu", torch.float32, normalize, cotangents)


def check_against_reference(inputs, kernel_backend, normalize=False, dg_atol=ATOL, **kwargs):
    """One shared loss through the fp32 reference on the CPU and through ``kernel_backend`` on DEVICE."""
    cot = Cotangents()
    ref = reference(inputs, normalize, cot, **kwargs)
    out = run(chunk_decayed_linear_attn, inputs, DEVICE, DTYPE, normalize, cot, backend=kernel_backend, **kwargs)
    compare(ref, out, dg_atol=dg_atol)


def low_precision_inputs(inputs, dtype=DTYPE):
    """Round q, k, v to the test dtype first, so the reference sees exactly what the kernel sees."""
    return {n: (x.to(dtype).float() if n in ("q", "k", "v") else x) for n, x in inputs.items()}


@pytest.mark.parametrize("kernel_backend", BACKENDS)
@pytest.mark.parametrize("T", [1, 63, 75, 500])
@pytest.mark.parametrize("gate", [None, "logsigmoid"])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("initial_state", [False, True])
def test_chunk_matches_reference(kernel_backend, T, gate, normalize, initial_state):
    batch = 1 if T > 100 else 2  # the long case once: the interpreter and the reference loop are slow on CPU
    inputs = low_precision_inputs(make_inputs(batch, T, gate=gate, normalize=normalize, initial_state=initial_state))
    check_against_reference(inputs, kernel_backend, normalize)


@pytest.mark.parametrize("kernel_backend", BACKENDS)
def test_dg_vanishes_at_first_token_without_initial_state(kernel_backend):
    """With S_0 = 0 the first decay of a sequence scales nothing, so dg there is 0 exactly. The chunked dg
    cancels terms of size Σ|S_T ⊙ dS_T| (the final-state term at the end of a short sequence): they must
    cancel to fp32 rounding. Summing dL/dG over the whole sequence left ~1e-5 of that on the GPU (tf32)."""
    lengths = [1, 64, 1, 65]
    cu_seqlens = torch.tensor([0] + lengths).cumsum(0)
    inputs = low_precision_inputs(make_inputs(1, sum(lengths)))
    cot = Cotangents()
    out = run(chunk_decayed_linear_attn, inputs, DEVICE, DTYPE, False, cot, cu_seqlens=cu_seqlens.to(DEVICE),
              backend=kernel_backend)
    N = len(lengths)
    final_term = (out["state"].reshape(N, H, K * V) * cot.dstate[0].reshape(N, H, K * V)).abs().sum(-1)
    first_dg = out["dg"][0, cu_seqlens[:-1]]  # [N, H]
    assert (first_dg.abs() <= 1e-6 * final_term).all(), \
        f"dg at first tokens {first_dg.tolist()} vs cancelled term sizes {final_term.tolist()}"


@pytest.mark.parametrize("gate", [None, "logsigmoid"])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("T, initial_state", [(150, True), (1, False)])
def test_triton_bf16_matches_reference(gate, normalize, T, initial_state):
    """bf16 tensor-core dots (widened to fp32 under the interpreter) within fla's half-precision ratios.
    T = 1 from a zero state is the normalized gradient's worst case: o = v up to 1e-6, so dq and dk are
    differences of terms ~1/(q·k) that cancel almost exactly (see decayed_linear_attn.triton_bwd)."""
    inputs = low_precision_inputs(make_inputs(2, T, k_dim=2 * K, v_dim=V, gate=gate, normalize=normalize,
                                              initial_state=initial_state), torch.bfloat16)
    cot = Cotangents()
    ref = reference(inputs, normalize, cot)
    out = run(chunk_decayed_linear_attn, inputs, DEVICE, torch.bfloat16, normalize, cot, backend="triton")
    # The interpreter truncates fp32 to bf16 where the GPU rounds to nearest: at T = 1, where o sits just below v,
    # every stored output then loses one bf16 unit (2^-8 relative) in the same direction.
    compare(ref, out, dg_atol=1e-3, tol=HALF_TOL if CUDA else dict(HALF_TOL, o=0.01))


def test_low_operands_policy_needs_64_wide_key_tiles(monkeypatch):
    """16-bit computed operands only where the H200 tests passed with them (K >= 64), never for fp32 inputs, and
    never under the interpreter (it truncates fp32 to bf16 where the GPU rounds to nearest)."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert [low_operands(torch.bfloat16, k) for k in (20, 63, 64, 256)] == [False, False, True, True]
    assert not low_operands(torch.float32, 256)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not low_operands(torch.bfloat16, 256)


def test_feature_tiles_are_powers_of_two_from_64():
    """Masked 64-wide tiles serve small head dims (narrower ones faulted on the H200 at 8 warps); all of V up to
    VALUE_TILE in one tile of the output and dv kernels."""
    assert [tile(v, VALUE_TILE) for v in (1, 16, 36, 72, 128, 129)] == [64, 64, 64, 128, 128, 128]
    assert [tile(k, 64) for k in (16, 100, 256)] == [64, 64, 64]


@gpu
@pytest.mark.parametrize("k_dim, v_dim", SWEEP_DIMS)
@pytest.mark.parametrize("normalize", [False, True])
def test_head_dim_sweep(k_dim, v_dim, normalize):
    """Every head dim, as K and as V, decayed and not, with a partial last chunk, B > 1 and an initial state; then
    packed sequences of awkward lengths (one empty)."""
    for gate in (None, "logsigmoid"):
        inputs = low_precision_inputs(make_inputs(2, 75, heads=2, k_dim=k_dim, v_dim=v_dim, gate=gate,
                                                  normalize=normalize, initial_state=True))
        check_against_reference(inputs, "triton", normalize)
    lengths = [15, 0, 85, 64]
    cu_seqlens = torch.tensor([0] + lengths).cumsum(0)
    inputs = low_precision_inputs(make_inputs(1, sum(lengths), heads=2, k_dim=k_dim, v_dim=v_dim, normalize=normalize,
                                              initial_state=True, num_states=len(lengths)))
    cot = Cotangents()
    out = run(chunk_decayed_linear_attn, inputs, DEVICE, DTYPE, normalize, cot, cu_seqlens=cu_seqlens.to(DEVICE),
              backend="triton")
    ref = reference_per_sequence(inputs, normalize, cot, cu_seqlens.tolist())
    compare(ref, out)


@pytest.mark.parametrize("kernel_backend", BACKENDS)
@pytest.mark.parametrize("gate_logit_normalizer, mask_p", [(0.01, 0.0), (0.1, 0.5), (10.0, 0.0), (1.0, 0.9)])
def test_gate_stress(kernel_backend, gate_logit_normalizer, mask_p):
    inputs = low_precision_inputs(make_inputs(1, 150, initial_state=True, gate_logit_normalizer=gate_logit_normalizer,
                                              mask_p=mask_p))
    check_against_reference(inputs, kernel_backend, dg_atol=max(ATOL, 2e-4))


@pytest.mark.parametrize("kernel_backend", BACKENDS)
@pytest.mark.parametrize("k_dim, v_dim", [(16, 16), (16, 7), (20, 36), (100, 72)])
@pytest.mark.parametrize("normalize", [False, True])
def test_odd_head_dims_and_custom_scale(kernel_backend, k_dim, v_dim, normalize):
    """K = 16 and odd V (masked 64-wide tiles), K, V not powers of two, K < V, and more than one 64-wide tile
    along K and V."""
    inputs = low_precision_inputs(make_inputs(1, 90, heads=1, k_dim=k_dim, v_dim=v_dim, normalize=normalize,
                                              initial_state=True))
    check_against_reference(inputs, kernel_backend, normalize, scale=0.3)


def unflatten_states(flat, N, normalize):
    """Undo ``run``'s flattening of the final state: [S [N, H, K, V]] or [S, z [N, H, K]]."""
    S = flat[:N * H * K * V].reshape(N, H, K, V)
    return [S, flat[N * H * K * V:].reshape(N, H, K)] if normalize else [S]


@pytest.mark.parametrize("kernel_backend", BACKENDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_varlen_equals_per_sequence(kernel_backend, normalize):
    lengths = [15, 64, 0, 1, 130, 70]
    cu_seqlens = torch.tensor([0] + lengths).cumsum(0)
    inputs = low_precision_inputs(make_inputs(1, sum(lengths), normalize=normalize, initial_state=True,
                                              num_states=len(lengths)))
    cot = Cotangents()
    out = run(chunk_decayed_linear_attn, inputs, DEVICE, DTYPE, normalize, cot, cu_seqlens=cu_seqlens.to(DEVICE),
              backend=kernel_backend)
    initial_states = flat_state(inputs["initial_state"])
    final_states = unflatten_states(out["state"], len(lengths), normalize)
    state_grads = [out["dh0"], out["dz0"]] if normalize else [out["dh0"]]
    for n, (bos, eos) in enumerate(zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist())):
        if bos == eos:  # an empty sequence passes its state and the state's gradient straight through
            for s0, s1, ds0, ds1 in zip(initial_states, final_states, state_grads, cot.dstate):
                assert_close("empty sequence state", s0[n], s1[n], TOL["state"])
                assert_close("empty sequence state gradient", ds1[n], ds0[n], TOL["dh0"])
            continue
        seq = {name: x[:, bos:eos] for name, x in inputs.items() if name in ("q", "k", "v", "g")}
        seq["initial_state"] = tuple(s[n:n + 1] for s in initial_states) if normalize else initial_states[0][n:n + 1]
        ref = reference(seq, normalize, Cotangents(cot.do[:, bos:eos], [d[n:n + 1] for d in cot.dstate]))
        got = dict(o=out["o"][:, bos:eos], state=torch.cat([s[n].reshape(-1) for s in final_states]),
                   dq=out["dq"][:, bos:eos], dk=out["dk"][:, bos:eos], dv=out["dv"][:, bos:eos],
                   dg=out["dg"][:, bos:eos], dh0=out["dh0"][n:n + 1])
        if normalize:
            got["dz0"] = out["dz0"][n:n + 1]
        compare(ref, got)


@pytest.mark.parametrize("kernel_backend", BACKENDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_chunk_equals_recurrent_decoding(kernel_backend, normalize):
    """Prefill with the chunked op, then decode token by token: equals one chunked call on everything."""
    T, prefix = 80, 67
    x = {n: t.to(DEVICE, DTYPE if n in ("q", "k", "v") else torch.float32)
         for n, t in make_inputs(2, T, normalize=normalize).items()}
    with torch.no_grad():
        full, full_state = chunk_decayed_linear_attn(**x, normalize=normalize, output_final_state=True,
                                                     backend=kernel_backend)
        step = lambda sl, state: {n: t[:, sl] for n, t in x.items()} | dict(initial_state=state)  # noqa: E731
        o_prefix, state = chunk_decayed_linear_attn(**step(slice(0, prefix), None), normalize=normalize,
                                                    output_final_state=True, backend=kernel_backend)
        outputs = [o_prefix]
        for t in range(prefix, T):
            o_t, state = fused_recurrent_decayed_linear_attn(**step(slice(t, t + 1), state), normalize=normalize,
                                                             output_final_state=True, backend=kernel_backend)
            outputs.append(o_t)
    assert_close("o", full.float(), torch.cat(outputs, dim=1).float(), TOL["o"])
    for name, a, b in zip(("S", "z"), flat_state(full_state), flat_state(state)):
        assert_close(name, a, b, TOL["state"])


@pytest.mark.parametrize("normalize", [False, True])
def test_recurrent_gradients_match_reference(normalize):
    inputs = make_inputs(2, 20, normalize=normalize, initial_state=True)
    cot = Cotangents()
    ref = reference(inputs, normalize, cot)
    out = run(fused_recurrent_decayed_linear_attn, inputs, DEVICE, torch.float32, normalize, cot)
    for name in ref:
        assert_close(name, ref[name], out[name], 1e-4)


@pytest.mark.parametrize("kernel_backend", BACKENDS)
def test_mamba2_ssd_identity(kernel_backend):
    """SSD(x, dt, A, B, C) (Dao & Gu 2024, eq. 16, scalar A per head) = op(q=C, k=B, v=x·dt, g=dt·A, scale=1)."""
    batch, T, heads, P, N = 2, 70, 3, 16, 32
    x, B, C = torch.randn(batch, T, heads, P), torch.randn(batch, T, heads, N), torch.randn(batch, T, heads, N)
    dt = F.softplus(torch.randn(batch, T, heads) - 1.0)
    A = -torch.rand(heads) * 4
    h = torch.zeros(batch, heads, N, P)
    ys = []
    for t in range(T):
        A_bar = torch.exp(dt[:, t] * A)  # [batch, heads]
        h = A_bar[..., None, None] * h + (dt[:, t, :, None, None] * B[:, t, :, :, None] * x[:, t, :, None, :])
        ys.append(torch.einsum("bhn,bhnp->bhp", C[:, t], h))
    y_ssd = torch.stack(ys, dim=1)
    y, _ = chunk_decayed_linear_attn(C.to(DEVICE), B.to(DEVICE), (x * dt[..., None]).to(DEVICE),
                                     g=(dt * A).to(DEVICE), scale=1.0, backend=kernel_backend)
    assert_close("y", y_ssd, y.cpu(), 1e-4)


@pytest.mark.parametrize("kwargs, message", [
    (dict(g=torch.zeros(2, 10)), "g must be the log decay"),
    (dict(initial_state=torch.zeros(2, 2, 8, 4)), "initial state S must be"),
    (dict(normalize=True, initial_state=torch.zeros(2, 2, 8, 8)), "must be the pair"),
    (dict(cu_seqlens=torch.tensor([0, 4, 10])), "B = 1"),
])
def test_bad_input_names_the_argument(kwargs, message):
    q = torch.randn(2, 10, 2, 8)
    with pytest.raises(ValueError, match=message):
        chunk_decayed_linear_attn(q, q, torch.randn(2, 10, 2, 8), **kwargs)

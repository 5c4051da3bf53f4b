"""Seed 000's Theorem 2 and Lemma 2 as the run checks them: the state-norm probe on hand-made recurrences (a constant
injection u, whose state after N steps is u (1 − λ^N) / (1 − λ) in closed form), and Lemma 2's reduction under each
reading of the state."""
import math

import pytest
import torch

from relin.config.lia_mtr import BridgeConfig, MTRConfig
from relin.eval import lemma2
from relin.eval.bridge_state import state_norms
from relin.layers.bridges import Bridge


def constant_tokens(n: int, d: int = 8) -> torch.Tensor:
    return torch.linspace(-1, 1, d).expand(1, n, d).contiguous()


@pytest.mark.parametrize("state", ["diagonal", "head_matrix"])
@pytest.mark.parametrize("n", [10, 200, 3000])
def test_state_norm_of_a_constant_injection_is_the_geometric_sum(state, n):
    """No gate, the same token N times: ||M_{N,s}|| = ||u|| (1 − λ_s^N) / (1 − λ_s), so the ratio to Theorem 2's bound
    is 1 − λ_s^N (at most 1, reaching it as N grows)."""
    bridge = Bridge("lia_mtr", 8, 8, BridgeConfig(mtr=MTRConfig(num_scales=3, gate="none", state=state, num_heads=2)),
                    backend="torch")
    found = state_norms(bridge, constant_tokens(n))
    lam = bridge.mixer.log_decays.double().exp()
    closed = [found["injection"] * (1 - decay ** n) / (1 - decay) for decay in lam.tolist()]
    assert found["per_scale"] == pytest.approx(closed, rel=1e-4)
    assert found["bound_ratio"] == pytest.approx(max(1 - decay ** n for decay in lam.tolist()), rel=1e-4)
    assert found["bound_ratio"] <= 1 + 1e-6


def test_a_gated_state_stays_under_theorem_2s_bound_on_random_tokens():
    torch.manual_seed(0)
    for state in ("diagonal", "head_matrix"):
        bridge = Bridge("lia_mtr", 8, 8, BridgeConfig(mtr=MTRConfig(state=state, num_heads=2)), backend="torch")
        for n in (64, 2048):
            assert state_norms(bridge, torch.randn(2, n, 8))["bound_ratio"] <= 1 + 1e-6


def test_linear_attention_and_softmax_caches_grow_with_n_and_the_mlp_has_no_state():
    """Ungated linear attention sums N equal outer products (norm ∝ N); softmax attention caches N equal rows
    (norm ∝ √N); the MLP carries nothing."""
    torch.manual_seed(0)
    grow = {}
    for name in ("linear_attn", "mha"):
        bridge = Bridge(name, 8, 8, BridgeConfig(attention_heads=2), backend="torch")
        a, b = (state_norms(bridge, constant_tokens(n))["norm"] for n in (100, 400))
        grow[name] = math.log(b / a) / math.log(4)
    assert grow["linear_attn"] == pytest.approx(1.0, abs=1e-4) and grow["mha"] == pytest.approx(0.5, abs=1e-4)
    assert state_norms(Bridge("mlp2x_gelu", 8, 8), constant_tokens(10)) is None


def test_lemma_2_holds_for_the_head_matrix_state_and_not_for_the_diagonal_at_equal_width():
    """S = 1, λ = 1, no gate: the head_matrix bridge is linear attention; the diagonal bridge's query maps span its
    width C = d, linear attention's d²; the diagonal with d² channels is linear attention again."""
    found = lemma2.lemma2_checks(d=6)
    assert found["head_matrix_error"] < 1e-5
    assert found["expanded_diagonal_error"] < 1e-5
    assert found["map_dimensions"] == {"linear_attention": 36, "diagonal": 6, "width": 6, "keys_x_values": 36}


def test_the_lemma_2_comparison_can_fail():
    """The same comparison with a decay below one (not the reduction) is far from linear attention."""
    w = lemma2._weights(6, 0)
    bridge = lemma2._reduced(6, "head_matrix", 6)
    with torch.no_grad():
        for name, proj in (("q", bridge.q_proj), ("k", bridge.k_proj), ("v", bridge.v_proj), ("o", bridge.o_proj)):
            proj.weight.copy_(w[name] * (6 ** 0.5 if name == "q" else 1.0))
        bridge.log_decays.fill_(math.log(0.9))
        x = torch.randn(2, 64, 6, dtype=torch.float64)
        err = lemma2._relative_error(bridge(x.float()), lemma2.linear_attention(x, w))
    assert err > 0.1

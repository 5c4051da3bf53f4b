"""The LIA-MTR bridge against a step-by-step fp64 loop of eqs. 1-5, its decays against the paper's
half-lives, and the baselines behind the same interface."""

import pytest
import torch
import torch.nn.functional as F

from relin.config.lia_mtr import BridgeConfig, MTRConfig
from relin.errors import ConfigError
from relin.layers.bridges import Bridge, scan_permutation
from relin.layers.mtr_bridge import MTRBridge, decay_constants, half_lives


def loop_eqs_1_to_5(bridge: MTRBridge, x: torch.Tensor) -> torch.Tensor:
    """Eqs. 1-5 one token at a time in float64, from the bridge's own weights; without a gate g ≡ 1, and with
    the normaliser N_{t,s} = λ_s N_{t-1,s} + g k, n = Σ α N, y = W_o(q ⊙ m / (n + ε))."""
    W = {name: p.detach().double() for name, p in bridge.named_parameters()}
    x = x.double()
    B, N, _ = x.shape
    lam = bridge.log_decays.double().exp()
    taps = W["conv.weight"].shape[1]
    S, C = lam.shape[0], W["q_proj.weight"].shape[0]
    M = torch.zeros(B, S, C, dtype=torch.float64)
    Z = torch.zeros(B, S, C, dtype=torch.float64)
    ys = []
    for t in range(N):
        window = [x[:, t - taps + 1 + i] if t - taps + 1 + i >= 0 else torch.zeros_like(x[:, 0]) for i in range(taps)]
        x_conv = sum(W["conv.weight"][:, i] * window[i] for i in range(taps))
        q = x[:, t] @ W["q_proj.weight"].T                                       # (1)
        k = F.elu(x[:, t] @ W["k_proj.weight"].T) + 1
        v = x[:, t] @ W["v_proj.weight"].T
        g = (torch.sigmoid(x_conv @ W["g_proj.weight"].T + W["g_proj.bias"]) if "g_proj.weight" in W
             else torch.ones(B, 1, dtype=torch.float64))                          # (2)
        alpha = torch.softmax(x_conv @ W["mix_proj.weight"].T + W["mix_proj.bias"], -1)
        M = lam[None, :, None] * M + (g * k * v)[:, None, :]                      # (3)
        m = (alpha[:, :, None] * M).sum(1)                                        # (4)
        if bridge.normalize:
            Z = lam[None, :, None] * Z + (g * k)[:, None, :]
            m = m / ((alpha[:, :, None] * Z).sum(1) + 1e-6)
        ys.append((q * m) @ W["o_proj.weight"].T)                                 # (5)
    return torch.stack(ys, 1)


def loop_head_matrix(bridge: MTRBridge, x: torch.Tensor) -> torch.Tensor:
    """The head_matrix reading one token at a time in float64, from the bridge's own weights: per head h and scale s
    M_{t,s,h} = λ_s M_{t-1,s,h} + (g_t ⊙ k_{t,h}) v_{t,h}ᵀ (a K x V matrix), o_{t,h} = Σ_s α_{t,s} M_{t,s,h}ᵀ q_{t,h}
    / √K (the kernel's scale), y = W_o o."""
    W = {name: p.detach().double() for name, p in bridge.named_parameters()}
    x = x.double()
    B, N, _ = x.shape
    lam = bridge.log_decays.double().exp()
    taps, H = W["conv.weight"].shape[1], bridge.num_heads
    S, C = lam.shape[0], W["q_proj.weight"].shape[0]
    D = C // H
    M = torch.zeros(B, S, H, D, D, dtype=torch.float64)
    ys = []
    for t in range(N):
        window = [x[:, t - taps + 1 + i] if t - taps + 1 + i >= 0 else torch.zeros_like(x[:, 0]) for i in range(taps)]
        x_conv = sum(W["conv.weight"][:, i] * window[i] for i in range(taps))
        q = (x[:, t] @ W["q_proj.weight"].T).view(B, H, D) / D ** 0.5
        k = F.elu(x[:, t] @ W["k_proj.weight"].T) + 1
        v = (x[:, t] @ W["v_proj.weight"].T).view(B, H, D)
        g = (torch.sigmoid(x_conv @ W["g_proj.weight"].T + W["g_proj.bias"]) if "g_proj.weight" in W
             else torch.ones(B, 1, dtype=torch.float64))
        alpha = torch.softmax(x_conv @ W["mix_proj.weight"].T + W["mix_proj.bias"], -1)
        kg = (g * k).view(B, H, D)
        M = lam[None, :, None, None, None] * M + (kg[..., :, None] * v[..., None, :])[:, None]
        o = torch.einsum("bs,bhk,bshkv->bhv", alpha, q, M)
        ys.append(o.reshape(B, C) @ W["o_proj.weight"].T)
    return torch.stack(ys, 1)


def randomise(module: torch.nn.Module, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)


@pytest.mark.parametrize("gate", ["token", "channel"])
@pytest.mark.parametrize("N", [1, 37, 130])
def test_bridge_equals_fp64_loop_of_eqs_1_to_5(gate, N):
    torch.manual_seed(0)
    bridge = MTRBridge(12, 20, MTRConfig(num_scales=5, gate=gate, conv_size=3))
    randomise(bridge)  # a random (not identity) conv and nonzero gate/mixer biases
    x = torch.randn(2, N, 12)
    ours, ref = bridge(x).double(), loop_eqs_1_to_5(bridge, x)
    # fp32 inside the kernel's chunked path against an fp64 loop: relative error at fp32 rounding
    err = ((ours - ref).norm() / ref.norm()).item()
    assert err < 1e-5, f"relative error {err:.2e} vs fp64 loop: eqs. 1-5 differ beyond fp32 rounding"


@pytest.mark.parametrize("gate", ["token", "channel", "none"])
@pytest.mark.parametrize("N", [1, 37, 130])
def test_head_matrix_bridge_equals_its_fp64_step_loop(gate, N):
    """The head_matrix reading (a per-head K x V state per scale) against its recurrence one token at a time."""
    torch.manual_seed(0)
    bridge = MTRBridge(12, 20, MTRConfig(num_scales=3, gate=gate, conv_size=3, state="head_matrix", num_heads=3))
    randomise(bridge, seed=5)
    x = torch.randn(2, N, 12)
    ours, ref = bridge(x).double(), loop_head_matrix(bridge, x)
    err = ((ours - ref).norm() / ref.norm()).item()
    assert err < 1e-5, f"relative error {err:.2e} vs the fp64 loop of the head_matrix state"


def test_both_readings_by_name_equal_their_fp64_step_loops():
    """The Table I and NIAH bridges of both readings, built by name from one config: lia_mtr is eqs. 1-5's diagonal
    state, lia_mtr_head_matrix the K x V state; each equals its own loop and not the other's."""
    x = torch.randn(2, 50, 12)
    bridges = {name: Bridge(name, 12, 20, BridgeConfig(mtr=MTRConfig(conv_size=3, num_heads=2))).mixer
               for name in ("lia_mtr", "lia_mtr_head_matrix")}
    for name, bridge in bridges.items():
        randomise(bridge, seed=7)
    loops = {"lia_mtr": loop_eqs_1_to_5, "lia_mtr_head_matrix": loop_head_matrix}
    for name, bridge in bridges.items():
        ours = bridge(x).double()
        for other, loop in loops.items():
            ref = loop(bridge, x)
            err = ((ours - ref).norm() / ref.norm()).item()
            assert (err < 1e-5) == (other == name), f"{name} against the loop of {other}: relative error {err:.2e}"


@pytest.mark.parametrize("name", ["lia_mtr_no_gate", "lia_mtr_one_scale", "lia_mtr_half_life", "lia_mtr_normalized"])
def test_each_ablation_equals_the_fp64_loop_of_its_equations(name):
    """Each named ablation is LIA-MTR with one option changed (relin.config.lia_mtr.MTR_ABLATIONS), and its
    output is the step-by-step loop of its own equations."""
    from relin.config.lia_mtr import MTR_ABLATIONS

    bridge = Bridge(name, 12, 20, BridgeConfig(mtr=MTRConfig(conv_size=3))).mixer
    change = MTR_ABLATIONS[name]
    assert bridge.g_proj is None if change == {"gate": "none"} else bridge.g_proj.out_features == 1
    assert bridge.log_decays.numel() == (1 if change == {"num_scales": 1} else 4)
    assert bridge.normalize == (change == {"normalize": True})
    randomise(bridge, seed=3)
    x = torch.randn(2, 45, 12)
    ours, ref = bridge(x).double(), loop_eqs_1_to_5(bridge, x)
    err = ((ours - ref).norm() / ref.norm()).item()
    assert err < 1e-5, f"{name}: relative error {err:.2e} against its equations"


def test_the_normaliser_makes_m_an_average_of_the_values():
    """With the normaliser and equal values v at every step, m_t / n_t = v whatever the gates and decays."""
    bridge = MTRBridge(6, 6, MTRConfig(normalize=True, conv_size=2))
    randomise(bridge, seed=4)
    with torch.no_grad():
        bridge.v_proj.weight.zero_()
        bridge.v_proj.weight[:, 0] = 1.0          # v_t = x_t[0] on every channel
        bridge.o_proj.weight.copy_(torch.eye(6))
        bridge.q_proj.weight.copy_(torch.eye(6))
    x = torch.randn(1, 30, 6)
    x[..., 0] = 2.5
    torch.testing.assert_close(bridge(x), 2.5 * x, rtol=1e-4, atol=1e-4)


def test_fp64_loop_catches_a_wrong_decay():
    """The comparison can fail: a bridge whose decays differ from the loop's gives a large error."""
    bridge = MTRBridge(8, 8, MTRConfig(num_scales=3))
    randomise(bridge)
    x = torch.randn(1, 40, 8)
    ref = loop_eqs_1_to_5(bridge, x)
    bridge.log_decays.mul_(0.5)
    assert ((bridge(x).double() - ref).norm() / ref.norm()).item() > 1e-2


@pytest.mark.parametrize("spacing", ["log_lambda", "log_half_life"])
@pytest.mark.parametrize("S", [2, 4, 8])
def test_half_lives_equal_the_papers(spacing, S):
    decays = decay_constants(S, 0.70, 0.995, spacing)
    lives = half_lives(decays)
    assert round(lives[0].item(), 2) == 1.94 and round(lives[-1].item(), 2) == 138.28
    assert torch.all(lives[1:] > lives[:-1])
    if spacing == "log_lambda":
        steps = decays.log().diff()
    else:
        steps = lives.log().diff()
    assert torch.allclose(steps, steps[0].expand_as(steps)), f"{spacing}: not evenly spaced"


def test_bridge_buffer_holds_the_fixed_decays():
    bridge = MTRBridge(8, 8, MTRConfig(num_scales=8))
    assert not bridge.log_decays.requires_grad and "log_decays" in bridge.state_dict()
    assert round(half_lives(bridge.log_decays.double().exp())[-1].item(), 2) == 138.28  # fp32 buffer


def test_head_matrix_state_equals_per_head_linear_attention_with_s_decays():
    torch.manual_seed(1)
    bridge = MTRBridge(8, 6, MTRConfig(num_scales=2, state="head_matrix", num_heads=2))
    randomise(bridge)
    x = torch.randn(1, 9, 8)
    W = {n: p.detach().double() for n, p in bridge.named_parameters()}
    lam = bridge.log_decays.double().exp()
    xd = x.double()
    q, k, v = xd @ W["q_proj.weight"].T, F.elu(xd @ W["k_proj.weight"].T) + 1, xd @ W["v_proj.weight"].T
    xc = sum(W["conv.weight"][:, i] * F.pad(xd, (0, 0, 3 - i, 0))[:, :9] for i in range(4))
    g = torch.sigmoid(xc @ W["g_proj.weight"].T + W["g_proj.bias"])
    a = torch.softmax(xc @ W["mix_proj.weight"].T + W["mix_proj.bias"], -1)
    out = torch.zeros(1, 9, 8, dtype=torch.float64)
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        for t in range(9):
            for s in range(2):
                state = sum(lam[s] ** (t - j) * torch.outer(g[0, j] * k[0, j, sl], v[0, j, sl]) for j in range(t + 1))
                out[0, t, sl] += a[0, t, s] * (q[0, t, sl] / 2.0) @ state
    ref = out @ W["o_proj.weight"].T
    assert torch.allclose(bridge(x).double(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["lia_mtr", "mlp2x_gelu", "mha", "linear_attn"])
def test_every_bridge_maps_patches_to_llm_width_and_is_causal_where_it_mixes(name):
    torch.manual_seed(0)
    bridge = Bridge(name, 16, 24, BridgeConfig(mtr=MTRConfig(num_scales=3), attention_heads=4))
    x = torch.randn(2, 25, 16)
    y = bridge(x)
    assert y.shape == (2, 25, 24)
    x2 = x.clone()
    x2[:, 10:] += 1.0
    assert torch.allclose(bridge(x2)[:, :10], y[:, :10], atol=1e-5), "a later patch changed an earlier output"


def test_naive_and_sdpa_mha_agree():
    torch.manual_seed(0)
    a = Bridge("mha", 16, 8, BridgeConfig(mha_impl="naive"))
    b = Bridge("mha", 16, 8, BridgeConfig(mha_impl="sdpa"))
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 33, 16)
    assert torch.allclose(a(x), b(x), atol=1e-5)


def test_unknown_bridge_scan_order_or_option_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="unknown 'mlp3x'.*lia_mtr") as err:
        Bridge("mlp3x", 8, 8)
    assert len(str(err.value).splitlines()) == 1
    spec = Bridge("lia_mtr", 8, 8).spec()
    assert Bridge.from_spec(spec).spec() == spec, "a saved bridge rebuilds from its own spec"
    for options, key in (({**spec["options"], "scan_order": "spiral"}, "bridge.scan_order"),
                         ({**spec["options"], "atention_heads": 4}, "atention_heads"),
                         ({**spec["options"], "mtr": {"num_scale": 2}}, "bridge.mtr.num_scale")):
        with pytest.raises(ConfigError, match=key) as err:
            Bridge.from_spec({**spec, "options": options})
        assert len(str(err.value).splitlines()) == 1


def test_scan_orders_permute_the_grid_and_write_back_in_raster_order():
    assert scan_permutation(9, "snake").tolist() == [0, 1, 2, 5, 4, 3, 6, 7, 8]
    assert scan_permutation(9, "column").tolist() == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    torch.manual_seed(0)
    raster = Bridge("mlp2x_gelu", 8, 8, BridgeConfig(scan_order="raster"))
    snake = Bridge("mlp2x_gelu", 8, 8, BridgeConfig(scan_order="snake"))
    snake.load_state_dict(raster.state_dict())
    x = torch.randn(1, 16, 8)
    assert torch.allclose(raster(x), snake(x)), "a per-patch bridge must not depend on the scan order"


def test_the_bridge_factory_builds_every_row_of_the_table():
    """Every bridge the config can name (a row of relin.config.lia_mtr.BRIDGES) builds its row's mixer with its
    variant's options; the factory knows every mixer a row may name, and an unknown name is one ConfigError."""
    from relin.config.lia_mtr import BRIDGE_NAMES, BRIDGES, MIXERS
    from relin.layers import bridges

    assert tuple(bridges.MIXERS) == MIXERS
    kinds = {"mtr": MTRBridge, "mlp2x_gelu": bridges.MLPBridge, "mha": bridges.MHABridge,
             "linear_attn": bridges.LinearAttentionBridge}
    for name in BRIDGE_NAMES:
        row, mixer = BRIDGES[name], Bridge(name, 8, 8).mixer
        assert type(mixer) is kinds[row.mixer], f"{name}: {type(mixer).__name__}, expected its row's {row.mixer}"
        if row.mixer == "mtr":
            built = MTRBridge(8, 8, MTRConfig(**row.variant))
            assert mixer.state_dict().keys() == built.state_dict().keys(), f"{name}: not its variant's layers"
            assert torch.equal(mixer.log_decays, built.log_decays), f"{name}: not its variant's decays"
            assert (mixer.state, mixer.normalize) == (built.state, built.normalize), f"{name}: not its variant"
    with pytest.raises(ConfigError, match="unknown 'lia_mtr_nothing'"):
        Bridge("lia_mtr_nothing", 8, 8)


def test_a_bridge_row_is_checked():
    """A row naming an unknown mixer, a variant of a mixer that reads no mtr options, an unknown option or an invalid
    combination is refused when the table is read."""
    from relin.config.lia_mtr import BridgeRow, check_bridges

    for row, message in ((BridgeRow("gru", "x"), "unknown mixer 'gru'"),
                         (BridgeRow("mha", "x", variant={"gate": "none"}), "only an mtr mixer"),
                         (BridgeRow("mtr", "x", variant={"gates": "none"}), "'gates' is not an option"),
                         (BridgeRow("mtr", "x", variant={"state": "head_matrix", "normalize": True}), "normalize")):
        with pytest.raises((ValueError, ConfigError), match=message):
            check_bridges({"lia_mtr_new": row})


def test_a_config_may_name_every_bridge_and_no_other():
    """``BridgeName`` (the type of every bridges list, hence the schema's enum) is BRIDGE_NAMES, not a copy of it."""
    from typing import get_args

    import yaml

    from relin.config.lia_mtr import BRIDGE_NAMES, BridgeName

    from ..workflow.conftest import ROOT

    assert get_args(BridgeName) == BRIDGE_NAMES
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "params.schema.yaml").read_text())
    lia = schema["properties"]["lia_mtr"]["properties"]
    for bridges in (lia["bridges"], lia["niah"]["properties"]["bridges"]):
        assert tuple(bridges["items"]["enum"]) == BRIDGE_NAMES

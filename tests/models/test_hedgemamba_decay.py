"""HedgeMamba as the seed and its rivals wrote it (issue #47, items 3-4): the near-identity decay init is exact to
1e-4 and leaves Λ a gradient a plain AdamW moves; stage 2's SiLU unlock; the ablation of eqs. 9-10's
normalisation; Mamba-in-the-Llama's initialisation read step by step against their code; the arms' budgets."""
import copy
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from relin.config.hedgemamba import FinetuneConfig, MambaBlockConfig
from relin.config.teacher import TeacherModelConfig
from relin.config.train import TrainConfig
from relin.errors import ConfigError
from relin.layers.hedgemamba import NEAR_IDENTITY_A_LOG, HedgeMamba
from relin.models.convert.hedgemamba import hedgemamba_from_hedgehog, split_fused_qkv
from relin.models.convert.mamba_in_llama import mamba_in_llama_from_teacher
from relin.models.teachers import build_teacher, load_pretrained
from relin.stages.hedgemamba.finetune import arm_budget, unlock, unlock_conv_activation

from ..train.toydata import word_tokenizer
from .test_hedgemamba import moved_hedgehog

# initializer_range 0.3: logits up to ~8, toward a trained model's (the default DAG's stage-1 model reads 16.9); at
# 0.1 the logits stay near 3 and every gradient, A_log's too, is a few times smaller than a trained model's.
TEACHER = TeacherModelConfig(family="gpt_neox", hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                             intermediate_size=96, rotary_pct=0.25, initializer_range=0.3)
PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


@pytest.fixture(scope="module")
def teacher():
    return build_teacher(TEACHER, word_tokenizer(), seed=0).eval()


@pytest.fixture(scope="module")
def hedgehog(teacher):
    return moved_hedgehog(teacher)


def _ids(steps, batch=3, seed=1):
    return torch.randint(4, 28, (batch, steps), generator=torch.Generator().manual_seed(seed))


def _finetune_lr() -> float:
    return float(yaml.safe_load(PARAMS.read_text())["hedgemamba"]["finetune"]["train"]["lr"])


def _one_adamw_step(model, ids) -> tuple[torch.Tensor, torch.Tensor]:
    """One stock ``torch.optim.AdamW`` step at stage 2's lr on CE; returns A_log before and after, ``[layers, H]``."""
    unlock(model, FinetuneConfig(), "model")
    assert not any(hasattr(p, "optimizer_settings") for p in model.parameters()), "plain: no group of its own"
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=_finetune_lr(),
                                  betas=(0.9, 0.95), weight_decay=0.0)
    before = torch.stack([layer.mamba.A_log.detach().clone() for layer in model.model.layers])
    F.cross_entropy(model(ids).logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).backward()
    optimizer.step()
    return before, torch.stack([layer.mamba.A_log.detach() for layer in model.model.layers])


def test_near_identity_init_is_exact_and_a_plain_adamw_step_moves_the_decay(hedgehog):
    """≤ 1e-4 in logits at 300 tokens and at the longest row the model takes (1024); then one AdamW step at
    params.yaml's stage-2 lr moves every layer's A_log by more than lr times its value (Adam's step is ~lr, A_log
    = -ln 2: ~1.4 lr), where from the exact init (A_log = -20, gradient ~1e-10 < AdamW's eps) it moves ~1e-2 lr."""
    mamba = hedgemamba_from_hedgehog(hedgehog, decay="near_identity").eval()
    assert mamba.config.max_position_embeddings == 1024
    for ids in (_ids(300), _ids(1024, batch=1)):
        with torch.no_grad():
            expected = hedgehog(ids).logits
            gap = (mamba(ids).logits - expected).abs().max().item()
        assert gap <= 1e-4 and expected.abs().max().item() > 5.0, (gap, ids.shape)

    before, after = _one_adamw_step(mamba.train(), _ids(300))
    assert torch.all(before == NEAR_IDENTITY_A_LOG)
    relative = ((after - before).abs() / before.abs()).amax(-1)             # per layer, its largest head
    assert relative.min().item() > _finetune_lr(), relative
    # Adam's step in units of lr, |g| / (|g| + eps): most heads' gradients are well above AdamW's eps
    assert ((after - before).abs() / _finetune_lr()).median().item() > 0.5

    exact_before, exact_after = _one_adamw_step(hedgemamba_from_hedgehog(hedgehog).train(), _ids(300))
    assert ((exact_after - exact_before).abs() / exact_before.abs()).max().item() < 1e-4


def test_near_identity_half_life_is_far_beyond_every_row(hedgehog):
    block = hedgemamba_from_hedgehog(hedgehog, decay="near_identity").model.layers[0].mamba
    rate = block.A_log.exp() * F.softplus(block.dt_bias)
    assert torch.all(math.log(2) / rate > 1e6)                                  # tokens; rows are ≤ 1024


def test_silu_unlock_is_off_by_default_and_breaks_exactness_when_on(hedgehog, tmp_path):
    """Stage 2's SiLU after the conv (§3.2's original Mamba branches): ``keep`` leaves the exact model as it is;
    ``silu`` changes the logits (SiLU(v) ≈ v/2 near 0) and is in the config a saved model is rebuilt from."""
    ids = _ids(64)
    mamba = hedgemamba_from_hedgehog(hedgehog, decay="near_identity").eval()
    unlock_conv_activation(mamba)
    with torch.no_grad():
        expected = hedgehog(ids).logits
        assert (mamba(ids).logits - expected).abs().max().item() <= 1e-4
        unlock_conv_activation(mamba, "silu")
        unlocked = mamba(ids).logits
    assert (unlocked - expected).abs().max().item() > 0.1
    assert mamba.config.hedgemamba["conv_activation"] == "silu"
    mamba.save_pretrained(tmp_path / "silu", safe_serialization=True)
    with torch.no_grad():
        assert torch.equal(load_pretrained(str(tmp_path / "silu")).eval()(ids).logits, unlocked)


def test_normalisation_ablation_is_eq_8_and_changes_the_output(hedgehog):
    """``norm="none"``: the block at init is eq. 8's Y_φ = (φ(Q)φ(K)ᵀ ⊙ M) V (no shift of φ(q), no division), not
    eq. 9's normalised rows; the model's logits move far from the (normalised) Hedgehog model's."""
    ratio = hedgemamba_from_hedgehog(hedgehog, decay="near_identity").eval()
    plain = hedgemamba_from_hedgehog(hedgehog, decay="near_identity", norm="none").eval()
    assert plain.config.hedgemamba["norm"] == "none"
    block = plain.model.layers[1].mamba
    u = torch.randn(2, 9, 48, generator=torch.Generator().manual_seed(3))
    heads = (2, 9, 4, 12)
    with torch.no_grad():
        out, _ = block(u)
        x, b, c = (proj(u).view(heads) for proj in (block.x_proj, block.B_proj, block.C_proj))
        scores = torch.einsum("bihf,bjhf->bhij", block.feature_map_C(c), block.feature_map_B(b)).tril()
        expected = block.out_proj(torch.einsum("bhij,bjhd->bihd", scores, x).reshape(2, 9, -1))
        normalised, _ = ratio.model.layers[1].mamba(u)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert (out - normalised).abs().max().item() > 1.0
    ids = _ids(40)
    with torch.no_grad():
        assert (plain(ids).logits - hedgehog(ids).logits).abs().max().item() > 0.1


def _mamba2_reference_init(num_heads: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """``jxiw/MambaInLlama@60d64dc:mamba2/hybrid_mamba_layer.py``'s ``Mamba2.__init__``, line by line (defaults
    dt_min 0.001, dt_max 0.1, dt_init_floor 1e-4, A_init_range (1, 16), D ones per head)."""
    dt_min, dt_max, dt_init_floor = 0.001, 0.1, 1e-4
    dt = torch.exp(torch.rand(num_heads, generator=generator) * (math.log(dt_max) - math.log(dt_min))
                   + math.log(dt_min))
    dt = torch.clamp(dt, min=dt_init_floor)
    inv_dt = dt + torch.log(-torch.expm1(-dt))
    A = torch.empty(num_heads, dtype=torch.float32).uniform_(1, 16, generator=generator)
    return {"dt_bias": inv_dt, "A_log": torch.log(A), "D": torch.ones(num_heads)}


def _mamba2_reference_forward(block: HedgeMamba, u: torch.Tensor) -> torch.Tensor:
    """Their ``Mamba2.forward`` read sequentially: causal depthwise conv with bias, SiLU, split [x, B, C] per head
    (ngroups = nheads, d_state = headdim), h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_tᵀ, y_t = C_tᵀ h_t + D x_t, then
    ``RMSNormGated(norm_before_gate=False)``: RMSNorm_h(y ⊙ SiLU(z)) · w, and out_proj."""
    batch, steps, _ = u.shape
    heads, dim = block.num_heads, block.head_dim
    xbc = torch.cat([block.x_proj(u), block.B_proj(u), block.C_proj(u)], -1).transpose(1, 2)
    xbc = F.conv1d(xbc, block.conv.weight[:, None, :], block.conv_bias, padding=block.conv.weight.shape[1] - 1,
                   groups=xbc.shape[1])[..., :steps]
    x, b, c = (t.reshape(batch, steps, heads, dim) for t in F.silu(xbc.transpose(1, 2)).chunk(3, -1))
    dt = F.softplus(block.dt_proj(u) + block.dt_bias)                                   # [B, T, H]
    a = -torch.exp(block.A_log)
    h = torch.zeros(batch, heads, dim, dim)
    ys = []
    for t in range(steps):
        write = dt[:, t, :, None, None] * b[:, t, :, :, None] * x[:, t, :, None, :]          # Δ_t B_t x_tᵀ
        h = torch.exp(dt[:, t] * a)[..., None, None] * h + write
        ys.append(torch.einsum("bhn,bhnp->bhp", c[:, t], h) + block.D[:, None] * x[:, t])
    y = torch.stack(ys, 1) * F.silu(block.z_proj(u)).reshape(batch, steps, heads, dim)
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * block.norm_weight.view(heads, dim)
    return block.out_proj(y.reshape(batch, steps, -1))


def test_mamba_in_llama_init_follows_their_recipe_step_by_step(teacher):
    mil = mamba_in_llama_from_teacher(teacher, seed=0)
    assert {k: v for k, v in mil.config.hedgemamba.items() if k != "decay_init"} == {
        "conv_size": 4, "conv_activation": "silu", "feature_maps": False, "norm": "gated_rms", "conv_bias": True}
    heads, width = TEACHER.num_attention_heads, TEACHER.hidden_size
    for i, layer in enumerate(mil.model.layers):
        block, attention = layer.mamba, teacher.gpt_neox.layers[i].attention
        # step 2: x <- v, B <- k, C <- q, out <- o, weights and biases, the fused projection split per head
        qkv = split_fused_qkv(attention.query_key_value.weight, attention.query_key_value.bias, heads)
        for name, proj in (("C_proj", "q_proj"), ("B_proj", "k_proj"), ("x_proj", "v_proj")):
            assert torch.equal(getattr(block, name).weight, qkv[f"{proj}.weight"])
            assert torch.equal(getattr(block, name).bias, qkv[f"{proj}.bias"])
        assert torch.equal(block.out_proj.weight, attention.dense.weight)
        assert torch.equal(block.out_proj.bias, attention.dense.bias)
        # step 1: no feature map, d_state = head_dim
        assert block.feature_map_B is None and not any("feature_map" in n for n, _ in block.named_parameters())
        # step 3: z and dt rows at nn.Linear's default init (|w| ≤ 1/√C), no gate bias
        bound = 1 / math.sqrt(width)
        assert block.z_proj.weight.abs().max() <= bound and block.dt_proj.weight.abs().max() <= bound
        assert block.dt_proj.weight.abs().min() > 0 and torch.all(block.z_proj.bias == 0)
        # step 4: Δ in [1e-3, 0.1], A in [1, 16], D = 1
        assert torch.all((F.softplus(block.dt_bias) >= 1e-3 - 1e-9) & (F.softplus(block.dt_bias) <= 0.1 + 1e-9))
        assert torch.all((block.A_log.exp() >= 1 - 1e-6) & (block.A_log.exp() <= 16 + 1e-5))
        assert torch.all(block.D == 1)
        # step 5: nn.Conv1d's default init (U(±1/√K)) with its bias, then SiLU; step 6: RMSNormGated weight 1
        assert block.conv.weight.abs().max() <= 0.5 and block.conv_bias.abs().max() <= 0.5
        assert not torch.equal(block.conv.weight[:, -1], torch.ones(block.conv.weight.shape[0]))
        assert block.conv_activation == "silu" and block.norm == "gated_rms" and torch.all(block.norm_weight == 1)
    # step 7: everything outside the mixers is the teacher's
    mlp = teacher.gpt_neox.layers[2].mlp.dense_h_to_4h.weight
    assert torch.equal(mil.model.layers[2].mlp.dense_h_to_4h.weight, mlp)

    # step 4, the same draws in the same order as theirs
    g_ours, g_theirs = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    block = mil.model.layers[0].mamba
    with torch.no_grad():
        block.reset_ssm(g_ours)
    for name, value in _mamba2_reference_init(heads, g_theirs).items():
        assert torch.equal(getattr(block, name).detach(), value), name
    # step 6: the block computes their forward
    u = torch.randn(2, 11, width, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(block(u)[0], _mamba2_reference_forward(block, u), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("options", [{"norm": "none"}, {"norm": "gated_rms", "feature_maps": False, "conv_bias": True}],
                         ids=["eq8", "mamba2"])
def test_cached_decoding_equals_a_full_forward_for_every_block_form(options):
    torch.manual_seed(0)
    block = HedgeMamba(48, 4, 12, MambaBlockConfig(conv_activation="silu"), **options).eval()
    with torch.no_grad():
        block.dt_proj.weight.normal_(0, 0.3)
        block.A_log.fill_(-1.0)
        if block.conv_bias is not None:
            block.conv_bias.normal_(0, 0.3)
    u = torch.randn(2, 13, 48, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full, _ = block(u)
        out, state = block(u[:, :5], use_cache=True)
        pieces = [out]
        for t in range(5, 13):
            out, state = block(u[:, t:t + 1], state=state, use_cache=True)
            pieces.append(out)
    torch.testing.assert_close(torch.cat(pieces, 1), full, rtol=1e-4, atol=1e-4)
    assert (state.normalizer is None) == (options["norm"] != "ratio")


def test_every_arm_gets_the_same_all_parameter_updates_and_rows():
    """At params.yaml's shapes (stage 1: 100 x 16 rows, φ only; stage 2: 200 x 16): a control from the teacher
    makes 200 all-parameter updates of 24 rows (12 x 2 accumulated), 4800 rows like HedgeMamba's 1600 + 3200."""
    match, finetune = TrainConfig(steps=100, batch_size=16), TrainConfig(steps=200, batch_size=16)
    for variant in ("random", "no_match", "mamba_in_llama"):
        budget = arm_budget(variant, match, finetune)
        assert (budget.steps, budget.batch_size, budget.grad_accum) == (200, 12, 2)
    assert arm_budget("hedgemamba", match, finetune) is finetune and arm_budget("hedgehog", match, finetune) is finetune
    with pytest.raises(ConfigError, match="equal updates"):
        arm_budget("random", TrainConfig(steps=3, batch_size=1), TrainConfig(steps=2, batch_size=1))


def test_the_decay_group_stays_a_named_variant(hedgehog):
    model = hedgemamba_from_hedgehog(copy.deepcopy(hedgehog))
    unlock(model, FinetuneConfig(decay_lr_scale=100.0), "decay_group")
    tagged = {n for n, p in model.named_parameters() if hasattr(p, "optimizer_settings")}
    assert tagged == {f"model.layers.{i}.mamba.{p}" for i in range(3) for p in ("A_log", "dt_bias")}
    with pytest.raises(ValueError, match="decay_optimizer"):
        unlock(model, FinetuneConfig(), "lr100")

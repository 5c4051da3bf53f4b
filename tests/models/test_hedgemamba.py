"""HedgeMamba's layers and conversions on a GPT-NeoX teacher with several layers and heads and partial
rotary: the hybrid's GPT-NeoX block reproduces the teacher, the Hedgehog layer is normalised linear
attention with learnable φ, the HedgeMamba model at initialisation gives the Hedgehog model's logits,
cached decoding equals a full forward, and save -> load gives the same logits and generates."""
import math

import pytest
import torch
import torch.nn.functional as F

from relin.config.hedgemamba import HedgehogLayerConfig
from relin.config.teacher import TeacherModelConfig
from relin.errors import InputError
from relin.layers.hedgehog import HedgehogFeatureMap
from relin.layers.hedgemamba import GATE_IDENTITY_BIAS
from relin.models.convert.hedgemamba import (
    attention_from_teacher,
    hedgehog_from_teacher,
    hedgemamba_from_hedgehog,
    random_mamba_from_teacher,
    split_fused_qkv,
)
from relin.models.hybrid import HybridCache
from relin.models.teachers import build_teacher, load_pretrained

from ..train.toydata import word_tokenizer

TEACHER = TeacherModelConfig(family="gpt_neox", hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                             intermediate_size=96, rotary_pct=0.25, initializer_range=0.1)


@pytest.fixture(scope="module")
def teacher():
    return build_teacher(TEACHER, word_tokenizer(), seed=0).eval()


def moved_hedgehog(teacher):
    """A Hedgehog model whose feature maps have moved away from the identity (as after stage 1)."""
    model = hedgehog_from_teacher(teacher).eval()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, HedgehogFeatureMap):
                module.weight.add_(0.2 * torch.randn(module.weight.shape, generator=g))
                module.bias.add_(0.2 * torch.randn(module.bias.shape, generator=g))
    return model


@pytest.fixture(scope="module")
def hedgehog(teacher):
    return moved_hedgehog(teacher)


def _inputs(seed=0, batch=3, steps=21, left_pad=(0, 4, 7)):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 28, (batch, steps), generator=g)
    mask = torch.ones(batch, steps, dtype=torch.long)
    for row, pad in enumerate(left_pad[:batch]):
        mask[row, :pad] = 0
    return ids, mask


def test_split_fused_qkv_takes_each_heads_rows():
    heads, dim, width = 2, 3, 5
    weight = torch.arange(3 * heads * dim * width, dtype=torch.float32).view(3 * heads * dim, width)
    bias = torch.arange(3 * heads * dim, dtype=torch.float32)
    parts = split_fused_qkv(weight, bias, heads)
    # GPT-NeoX: rows [h·3D, (h+1)·3D) are head h's q, k, v of D rows each
    assert torch.equal(parts["k_proj.weight"][dim:2 * dim], weight[3 * dim + dim:3 * dim + 2 * dim])
    assert torch.equal(parts["v_proj.bias"][:dim], bias[2 * dim:3 * dim])


def test_gpt_neox_block_reproduces_the_teacher(teacher):
    ids, mask = _inputs()
    expected = teacher(ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
    logits = attention_from_teacher(teacher).eval()(ids, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(logits[real], expected[real], rtol=0, atol=1e-5)


def test_hedgehog_layer_is_normalised_linear_attention_with_its_feature_maps(hedgehog):
    layer = hedgehog.model.layers[1].linear_attn
    x = torch.randn(2, 9, 48, generator=torch.Generator().manual_seed(1))
    rope = hedgehog.model.rotary(torch.arange(9)[None].expand(2, -1), x.dtype)
    with torch.no_grad():
        out, _ = layer(x, rope)
        q, k, v, _, _ = layer.projections(x, rope)
        fq, fk = layer.feature_map_q(q), layer.feature_map_k(k)
        scores = torch.einsum("bihf,bjhf->bhij", fq, fk).tril()
        rows = scores / scores.sum(-1, keepdim=True)
        expected = layer.o_proj(torch.einsum("bhij,bjhd->bihd", rows, v).reshape(2, 9, -1))
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    y = torch.randn(1, 1, 4, 12)
    z = torch.einsum("bthd,hed->bthe", y, layer.feature_map_q.weight) + layer.feature_map_q.bias
    assert torch.equal(layer.feature_map_k(y)[..., :12], (torch.einsum("bthd,hed->bthe", y, layer.feature_map_k.weight)
                                                           + layer.feature_map_k.bias).exp())
    # the query map is shifted by its largest |y| per token and head: a factor the normalisation divides out
    torch.testing.assert_close(layer.feature_map_q(y)[..., :12], (z - z.abs().amax(-1, keepdim=True)).exp())


def test_hedgehog_rows_stay_finite_where_exp_overflows(hedgehog):
    """Queries of magnitude 100 (exp(100) overflows fp32): the layer's output equals the unshifted map's in fp64."""
    layer = hedgehog.model.layers[1].linear_attn
    x = torch.randn(1, 7, 48, generator=torch.Generator().manual_seed(2))
    rope = hedgehog.model.rotary(torch.arange(7)[None], x.dtype)
    with torch.no_grad():
        layer.feature_map_q.weight.mul_(100.0 / layer.projections(x, rope)[0].abs().max())
        out, _ = layer(x, rope)
        q, k, v, _, _ = (t.double() for t in layer.projections(x, rope))
        fmap = layer.feature_map_q
        y = torch.einsum("bthd,hed->bthe", q, fmap.weight.double()) + fmap.bias.double()
        fq, fk = torch.cat([y.exp(), (-y).exp()], -1), layer.feature_map_k(k.float()).double()
        scores = torch.einsum("bihf,bjhf->bhij", fq, fk).tril()
        expected = torch.einsum("bhij,bjhd->bihd", scores / scores.sum(-1, keepdim=True), v)
        expected = layer.o_proj(expected.float().reshape(1, 7, -1))
    assert y.abs().max() > 90  # past fp32's exp range
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


def test_feature_maps_start_at_the_identity(teacher):
    fmap = hedgehog_from_teacher(teacher).model.layers[0].linear_attn.feature_map_k
    x = torch.randn(1, 3, 4, 12)
    assert torch.equal(fmap(x), torch.cat([x.exp(), (-x).exp()], -1))
    soft = HedgehogFeatureMap(4, 12, "softmax")
    torch.testing.assert_close(soft(x), torch.cat([x.softmax(-1), (-x).softmax(-1)], -1))


def test_hedgemamba_at_init_gives_the_hedgehog_logits(hedgehog):
    mamba = hedgemamba_from_hedgehog(hedgehog).eval()
    assert mamba.config.mixer_types == ["hedgemamba"] * 3 and mamba.config.block == "gpt_neox"
    ids, mask = _inputs(seed=4, steps=70)
    real = mask.bool()
    with torch.no_grad():
        expected = hedgehog(ids, attention_mask=mask).logits[real]
        logits = mamba(ids, attention_mask=mask).logits[real]
    assert (logits - expected).abs().max().item() < 1e-4
    assert expected.abs().max().item() > 0.5    # not a vacuous comparison of near-zero logits
    assert F.silu(torch.tensor(GATE_IDENTITY_BIAS)).item() == 1.0


def test_hedgemamba_init_is_not_exact_after_rope_nor_for_a_random_block(teacher, hedgehog):
    ids, mask = _inputs(seed=6)
    real = mask.bool()
    post = hedgehog_from_teacher(teacher, hedgehog=HedgehogLayerConfig(feature_position="post_rope")).eval()
    with torch.no_grad():
        gap = (hedgemamba_from_hedgehog(post)(ids, attention_mask=mask).logits
               - post(ids, attention_mask=mask).logits)[real].abs().max()
        random_gap = (random_mamba_from_teacher(teacher)(ids, attention_mask=mask).logits
                      - hedgehog(ids, attention_mask=mask).logits)[real].abs().max()
    assert gap > 1e-3 and random_gap > 1e-2


def test_cached_decoding_equals_a_full_forward(hedgehog):
    ids, mask = _inputs(seed=1)
    real = mask.bool()
    mamba = hedgemamba_from_hedgehog(hedgehog).eval()
    with torch.no_grad():
        for layer in mamba.model.layers:      # off the identity: conv taps, gate, decay, Δ and D all matter
            for name in ("conv.weight", "z_proj.weight", "dt_proj.weight", "A_log", "D"):
                param = layer.mamba.get_parameter(name)
                param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(2)) * 0.3 + (
                    -1.0 if name == "A_log" else 0.0))
    post = hedgehog_from_teacher(build_teacher(TEACHER, word_tokenizer(), seed=1),
                                 hedgehog=HedgehogLayerConfig(feature_position="post_rope")).eval()
    for model in (hedgehog, mamba, post):
        with torch.no_grad():
            full = model(ids, attention_mask=mask).logits
            out = model(ids[:, :11], attention_mask=mask[:, :11], use_cache=True)
            pieces, cache = [out.logits], out.cache
            for t in range(11, ids.shape[1]):
                out = model(ids[:, t:t + 1], attention_mask=mask[:, :t + 1], cache=cache, use_cache=True)
                pieces.append(out.logits)
                cache = out.cache
        torch.testing.assert_close(torch.cat(pieces, 1)[real], full[real], rtol=0, atol=2e-5)
        assert isinstance(cache, HybridCache) and cache.seen == ids.shape[1]
        assert cache.nbytes()["kv"] == 0 and cache.nbytes()["recurrent"] > 0


def test_state_is_constant_in_size_whatever_the_context(hedgehog):
    mamba = hedgemamba_from_hedgehog(hedgehog).eval()
    sizes = []
    for steps in (8, 64):
        ids, mask = _inputs(seed=2, batch=2, steps=steps, left_pad=(0, 3))
        with torch.no_grad():
            sizes.append(mamba(ids, attention_mask=mask, use_cache=True).cache.nbytes()["recurrent"])
    assert sizes[0] == sizes[1]


def test_save_load_same_logits_and_generate(hedgehog, tmp_path):
    mamba = hedgemamba_from_hedgehog(hedgehog).eval()
    for name, model in (("hedgehog", hedgehog), ("hedgemamba", mamba)):
        model.save_pretrained(tmp_path / name, safe_serialization=True)
        loaded = load_pretrained(str(tmp_path / name)).eval()
        assert loaded.config.mixer_types == model.config.mixer_types
        ids, mask = _inputs(seed=3)
        with torch.no_grad():
            torch.testing.assert_close(loaded(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits,
                                       rtol=0, atol=0)
        out = loaded.generate(ids, attention_mask=mask, max_new_tokens=5)
        assert out.shape == (3, ids.shape[1] + 5) and torch.equal(out[:, :ids.shape[1]], ids)


def test_a_qwen3_teacher_is_one_line():
    qwen = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                            num_key_value_heads=2, head_dim=16, intermediate_size=64),
                         word_tokenizer())
    with pytest.raises(InputError, match="HedgeMamba converts gpt_neox"):
        hedgehog_from_teacher(qwen)


def test_identity_decay_rounds_to_one_in_fp32():
    assert torch.exp(torch.tensor(-math.exp(-20.0) * 1.0, dtype=torch.float32)).item() == 1.0


def _one_step(model, lr):
    from relin.config.train import TrainConfig
    from relin.train.torch_backend import adamw

    optimizer = adamw(model, TrainConfig(lr=lr, weight_decay=0.0))  # stage 2's (params.yaml)
    ids, mask = _inputs(seed=3)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith(("A_log", "dt_bias"))}
    loss = F.cross_entropy(model(ids, attention_mask=mask).logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    optimizer.step()
    return {n: (p.detach() - before[n]).abs().max().item() for n, p in model.named_parameters() if n in before}


def test_stage_2_moves_the_decay_and_its_step_from_the_exact_init(hedgehog):
    """At A_log = -20 the gradient of A_log is ~1e-12: stage 2's optimizer settings move A_log and dt_bias by more
    than 1e-3 · lr in one step; the default AdamW leaves A_log within float32 rounding of -20."""
    import copy

    from relin.config.hedgemamba import FinetuneConfig
    from relin.stages.hedgemamba.finetune import unlock

    lr = 1e-3
    tuned = hedgemamba_from_hedgehog(copy.deepcopy(hedgehog)).train()
    unlock(tuned, FinetuneConfig())
    moved = _one_step(tuned, lr)
    assert len(moved) == 2 * TEACHER.num_hidden_layers and min(moved.values()) > 1e-3 * lr, moved
    plain = hedgemamba_from_hedgehog(copy.deepcopy(hedgehog)).train()
    stuck = {n: d for n, d in _one_step(plain, lr).items() if n.endswith("A_log")}
    assert max(stuck.values()) < 1e-3 * min(d for n, d in moved.items() if n.endswith("A_log")), stuck


def test_the_mil_initialisation_copies_the_teachers_projections_exactly(teacher):
    """Mamba-in-the-Llama's control: C <- q, B <- k, x <- v, out <- o of each layer, the feature maps untrained."""
    from relin.models.convert.hedgemamba import split_fused_qkv

    mil = hedgemamba_from_hedgehog(hedgehog_from_teacher(teacher))
    heads = TEACHER.num_attention_heads
    for i, layer in enumerate(mil.model.layers):
        attention = teacher.gpt_neox.layers[i].attention
        qkv = split_fused_qkv(attention.query_key_value.weight, attention.query_key_value.bias, heads)
        for mamba_name, proj in (("C_proj", "q_proj"), ("B_proj", "k_proj"), ("x_proj", "v_proj")):
            block = getattr(layer.mamba, mamba_name)
            assert torch.equal(block.weight, qkv[f"{proj}.weight"]) and torch.equal(block.bias, qkv[f"{proj}.bias"])
        assert torch.equal(layer.mamba.out_proj.weight, attention.dense.weight)
        fmap = layer.mamba.feature_map_B
        assert torch.equal(fmap.weight, torch.eye(fmap.weight.shape[-1]).expand_as(fmap.weight)), "φ at its init"

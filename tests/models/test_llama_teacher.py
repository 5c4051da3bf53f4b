"""A Llama teacher (a pretrained checkpoint's class, e.g. SmolLM2) through both conversions: the hybrid's llama
block reproduces ``LlamaForCausalLM`` (grouped key/value heads, tied embeddings, left padding), OPAL's conversion
and HedgeMamba's copy its weights, HedgeMamba's initialisation stays exact, and what the block cannot build is one
line."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from relin.config.hedgemamba import HedgehogLayerConfig
from relin.config.opal import GDNConfig
from relin.errors import InputError
from relin.models.convert.hedgemamba import (
    attention_from_teacher,
    hedgehog_from_teacher,
    hedgemamba_from_hedgehog,
    random_mamba_from_teacher,
)
from relin.models.convert.mamba_in_llama import mamba_in_llama_from_teacher
from relin.models.convert.opal import convert
from relin.models.hybrid import HybridConfig

from .test_hedgemamba import moved_hedgehog


def llama_config(**overrides) -> LlamaConfig:
    values = dict(vocab_size=40, hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=6,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=128, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, tie_word_embeddings=True,
                  initializer_range=0.1, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaConfig(**{**values, **overrides})


@pytest.fixture(scope="module")
def teacher():
    torch.manual_seed(0)
    return LlamaForCausalLM(llama_config()).eval()


def _inputs(batch=3, steps=21, left_pad=(0, 4, 7)):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 40, (batch, steps), generator=g)
    mask = torch.ones(batch, steps, dtype=torch.long)
    for row, pad in enumerate(left_pad):
        mask[row, :pad] = 0
    return ids, mask


def _teacher_logits(teacher, ids, mask):
    return teacher(ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits


def test_the_llama_block_reproduces_the_teacher_in_both_conversions(teacher):
    ids, mask = _inputs()
    expected, real = _teacher_logits(teacher, ids, mask), mask.bool()
    for hybrid in (convert(teacher, ["attention"] * 3), attention_from_teacher(teacher)):
        assert hybrid.config.block == "llama" and not hybrid.config.qk_norm
        logits = hybrid.eval()(ids, attention_mask=mask).logits
        torch.testing.assert_close(logits[real], expected[real], rtol=0, atol=2e-5)


def test_opal_keeps_the_attention_and_converts_the_rest(teacher):
    hybrid = convert(teacher, ["gdn", "attention", "gdn"]).eval()
    source = teacher.state_dict()
    kept = hybrid.model.layers[1].self_attn
    assert torch.equal(kept.k_proj.weight, source["model.layers.1.self_attn.k_proj.weight"])
    gdn = hybrid.model.layers[0].linear_attn
    # the grouped k rows repeated per query head: head 5 reads kv head 5 // 3 = 1
    k = source["model.layers.0.self_attn.k_proj.weight"].view(2, 8, 48)
    assert torch.equal(gdn.k_proj.weight.view(6, 8, 48)[5], k[1])
    ids, mask = _inputs()
    prompt, new = ids[:, :12], torch.ones(3, 12, dtype=torch.long)
    out = hybrid.generate(prompt, attention_mask=new, max_new_tokens=5)
    assert out.shape == (3, 17)


def test_hedgemamba_from_a_llama_teacher_is_exact_at_init(teacher):
    ids, mask = _inputs(left_pad=(0, 0, 0))
    hedgehog = moved_hedgehog(teacher)
    assert hedgehog.config.num_key_value_heads == hedgehog.config.num_attention_heads == 6
    mamba = hedgemamba_from_hedgehog(hedgehog).eval()
    expected = hedgehog(ids, attention_mask=mask).logits
    torch.testing.assert_close(mamba(ids, attention_mask=mask).logits, expected, rtol=0, atol=1e-4)
    # the controls build on the same teacher with the same shape
    for control in (random_mamba_from_teacher(teacher), mamba_in_llama_from_teacher(teacher)):
        assert control.config.mixer_types == ["hedgemamba"] * 3
        assert torch.isfinite(control.eval()(ids, attention_mask=mask).logits).all()


def test_identity_feature_maps_read_the_teachers_projections(teacher):
    hedgehog = hedgehog_from_teacher(teacher, hedgehog=HedgehogLayerConfig())
    v = teacher.state_dict()["model.layers.2.self_attn.v_proj.weight"].view(2, 8, 48)
    layer = hedgehog.model.layers[2].linear_attn
    assert torch.equal(layer.v_proj.weight.view(6, 8, 48)[2], v[0])
    assert torch.equal(layer.q_proj.weight, teacher.state_dict()["model.layers.2.self_attn.q_proj.weight"])


def test_what_the_llama_block_cannot_build_is_one_line(teacher):
    with pytest.raises(InputError, match=r"attention_bias=True .*expected no biases"):
        HybridConfig.from_teacher(llama_config(attention_bias=True), ["attention"] * 3)
    scaled = llama_config(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})
    with pytest.raises(InputError, match="rope_type='linear'"):
        HybridConfig.from_teacher(scaled, ["attention"] * 3)
    with pytest.raises(InputError, match="opal.gdn.qk_norm: a llama teacher has no q/k norms"):
        convert(teacher, ["gdn", "attention", "gdn"], gdn=GDNConfig(qk_norm=True))

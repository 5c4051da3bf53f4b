"""Teacher builders (both architectures) and loading from a local ``save_pretrained`` directory."""
import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.data.tokenizer import load_tokenizer
from relin.errors import InputError
from relin.models.teachers import build_teacher, load_pretrained

from ..train.toydata import word_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer()


@pytest.mark.parametrize("family, cls", [("qwen3", "Qwen3ForCausalLM"), ("gpt_neox", "GPTNeoXForCausalLM")])
def test_builds_architecture_with_tokenizer_vocab_and_shapes(tokenizer, family, cls):
    cfg = TeacherModelConfig(family=family, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                             num_key_value_heads=2 if family == "qwen3" else 4, head_dim=12, intermediate_size=96)
    model = build_teacher(cfg, tokenizer)
    assert type(model).__name__ == cls
    assert model.config.vocab_size == len(tokenizer) == 28
    assert model.config.num_hidden_layers == 3 and model.config.hidden_size == 48
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.get_input_embeddings().weight.shape == (28, 48)
    ids = torch.randint(0, 28, (2, 9))
    assert model(input_ids=ids).logits.shape == (2, 9, 28)


def test_qwen3_uses_grouped_kv_heads_and_neox_partial_rotary(tokenizer):
    qwen = build_teacher(TeacherModelConfig(family="qwen3", num_attention_heads=4, num_key_value_heads=2,
                                            head_dim=16, hidden_size=32), tokenizer)
    attn = qwen.model.layers[0].self_attn
    assert attn.q_proj.out_features == 4 * 16 and attn.k_proj.out_features == 2 * 16
    neox = build_teacher(TeacherModelConfig(family="gpt_neox", rotary_pct=0.5, hidden_size=32,
                                            num_attention_heads=4), tokenizer)
    assert neox.config.rope_parameters["partial_rotary_factor"] == 0.5


@pytest.mark.parametrize("family", ["qwen3", "gpt_neox"])
def test_initializer_range_sets_the_weight_scale(tokenizer, family):
    def weight_std(scale):
        cfg = TeacherModelConfig(family=family, hidden_size=64, head_dim=16, intermediate_size=128,
                                 initializer_range=scale)
        model = build_teacher(cfg, tokenizer)
        assert model.config.initializer_range == scale
        return torch.cat([p.detach().flatten() for n, p in model.named_parameters()
                          if p.dim() == 2 and "embed" not in n]).std().item()

    assert weight_std(0.02) == pytest.approx(0.02, rel=0.05)
    assert weight_std(0.05) == pytest.approx(0.05, rel=0.05)


def test_same_seed_same_weights(tokenizer):
    cfg = TeacherModelConfig(family="qwen3", hidden_size=32, head_dim=8)
    a, b, c = (build_teacher(cfg, tokenizer, seed=seed) for seed in (1, 1, 2))
    assert torch.equal(a.lm_head.weight, b.lm_head.weight) and not torch.equal(a.lm_head.weight, c.lm_head.weight)


@pytest.mark.parametrize("family", ["qwen3", "gpt_neox"])
def test_loads_local_save_pretrained_dir(tokenizer, tmp_path, family):
    model = build_teacher(TeacherModelConfig(family=family, hidden_size=32, head_dim=8), tokenizer).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    assert list(tmp_path.glob("*.safetensors"))
    loaded = load_pretrained(str(tmp_path)).eval()
    ids = torch.randint(0, 28, (1, 7))
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)


def test_missing_or_invalid_model_paths_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match=r"no such directory \(expected a save_pretrained directory"):
        load_pretrained(str(tmp_path / "absent"))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputError, match=r"missing \*\.safetensors"):
        load_pretrained(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(InputError, match="could not load .*damaged or incomplete"):
        load_pretrained(str(tmp_path))


def test_tokenizer_loading(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    assert load_tokenizer(tmp_path).pad_token == "<pad>"
    with pytest.raises(InputError, match="missing: no such directory"):
        load_tokenizer(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a save_pretrained tokenizer directory"):
        load_tokenizer(tmp_path / "empty")

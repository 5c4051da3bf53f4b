"""The hybrid causal LM and OPAL's conversion: exact where it claims to be (attention layers and a
window that covers everything reproduce the teacher), cached decoding equals a full forward for
every layer type, each Gated DeltaNet layer's chunked kernel equals its token-by-token recurrence,
and save -> load -> generate work through the Auto classes."""
import pytest
import torch

from relin.config.opal import SWAConfig, kept_attention_layers
from relin.config.teacher import TeacherModelConfig
from relin.errors import ConfigError
from relin.layers.attention import attention_mask
from relin.models.convert.opal import convert, expand_heads
from relin.models.hybrid import HybridCache
from relin.models.teachers import build_teacher, load_pretrained

from ..train.toydata import word_tokenizer

TEACHER = TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=16, intermediate_size=64)
MIXED = ["gdn", "swa", "gdn", "attention"]


@pytest.fixture(scope="module")
def teacher():
    return build_teacher(TEACHER, word_tokenizer(), seed=0).eval()


def _inputs(seed=0, batch=3, steps=19, left_pad=(0, 4, 7)):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 28, (batch, steps), generator=g)
    mask = torch.ones(batch, steps, dtype=torch.long)
    for row, pad in enumerate(left_pad[:batch]):
        mask[row, :pad] = 0
    return ids, mask


def test_attention_layers_and_a_covering_window_reproduce_the_teacher(teacher):
    ids, mask = _inputs()
    expected = teacher(ids, attention_mask=mask).logits
    real = mask.bool()
    covering = {"swa": SWAConfig(window=64)}
    for types, options in ((["attention"] * 4, {}), (["swa", "swa", "swa", "attention"], covering)):
        logits = convert(teacher, types, **options).eval()(ids, attention_mask=mask).logits
        torch.testing.assert_close(logits[real], expected[real], rtol=0, atol=1e-5)


def test_kept_layers_follow_the_pattern():
    assert kept_attention_layers(36, 4) == list(range(3, 36, 4))
    assert kept_attention_layers(8, 4, [0, 5]) == [0, 5]
    with pytest.raises(ConfigError, match="expected at least one index in"):
        kept_attention_layers(3, 4)


def test_kv_heads_expand_at_head_granularity():
    weight = torch.arange(2 * 3 * 5, dtype=torch.float32).view(6, 5)  # 2 kv heads of head_dim 3
    expanded = expand_heads(weight, kv_heads=2, heads=4)
    assert torch.equal(expanded.view(4, 3, 5)[1], weight.view(2, 3, 5)[0])   # query head 1 -> kv head 0
    assert torch.equal(expanded.view(4, 3, 5)[2], weight.view(2, 3, 5)[1])   # query head 2 -> kv head 1


def test_window_with_sinks_masks_as_specified():
    mask = attention_mask(torch.ones(1, 8, dtype=torch.long), 8, window=3, sinks=1)[0, 0]
    assert mask[7].tolist() == [True, False, False, False, False, True, True, True]
    assert mask[2].tolist() == [True, True, True] + [False] * 5


def test_cached_decoding_equals_a_full_forward(teacher):
    model = convert(teacher, MIXED, swa=SWAConfig(window=5, sinks=2)).eval()
    ids, mask = _inputs(seed=1)
    full = model(ids, attention_mask=mask).logits
    out = model(ids[:, :11], attention_mask=mask[:, :11], use_cache=True)
    pieces, cache = [out.logits], out.cache
    for t in range(11, ids.shape[1]):
        out = model(ids[:, t:t + 1], attention_mask=mask[:, :t + 1], cache=cache, use_cache=True)
        pieces.append(out.logits)
        cache = out.cache
    real = mask.bool()
    torch.testing.assert_close(torch.cat(pieces, 1)[real], full[real], rtol=0, atol=2e-5)
    assert isinstance(cache, HybridCache) and cache.seen == ids.shape[1]


def test_each_gdn_layer_chunked_equals_its_recurrence(teacher):
    model = convert(teacher, MIXED).eval()
    ids, _ = _inputs(seed=2, batch=2, left_pad=(0, 0))
    inputs = {}
    hooks = [layer.linear_attn.register_forward_hook(lambda m, a, kw, o, i=i: inputs.setdefault(i, kw["hidden_states"]
                                                     if "hidden_states" in kw else a[0]), with_kwargs=True)
             for i, layer in enumerate(model.model.layers) if layer.kind == "gdn"]
    with torch.no_grad():
        model(ids)
    for hook in hooks:
        hook.remove()
    assert sorted(inputs) == [0, 2]
    for i, x in inputs.items():
        layer = model.model.layers[i].linear_attn
        with torch.no_grad():
            chunked, _ = layer(x)
            state, steps = None, []
            for t in range(x.shape[1]):
                y, state = layer(x[:, t:t + 1], state=state, use_cache=True)
                steps.append(y)
        torch.testing.assert_close(torch.cat(steps, 1), chunked, rtol=1e-4, atol=1e-5)


def test_save_load_generate(teacher, tmp_path):
    model = convert(teacher, MIXED, swa=SWAConfig(window=5, sinks=2)).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    loaded = load_pretrained(str(tmp_path)).eval()
    ids, mask = _inputs(seed=3)
    torch.testing.assert_close(loaded(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits,
                               rtol=0, atol=0)
    out = loaded.generate(ids, attention_mask=mask, max_new_tokens=6)
    assert out.shape == (3, ids.shape[1] + 6) and torch.equal(out[:, :ids.shape[1]], ids)
    g = torch.Generator().manual_seed(0)
    sampled = loaded.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=True, top_p=0.9, generator=g)
    assert sampled.shape == out.shape


def test_an_unknown_or_flat_layer_option_is_one_clear_error():
    from relin.errors import ConfigError
    from relin.models.hybrid import HybridConfig

    for kwargs, key in (({"gdn": {"conv_sise": 4}}, "gdn.conv_sise"), ({"swa": {"window": "wide"}}, "swa.window"),
                        ({"gdn_conv_size": 4}, "gdn_conv_size"), ({"hedgehog": {"feature_map": "relu"}},
                                                                   "hedgehog.feature_map")):
        with pytest.raises(ConfigError, match=key) as err:
            HybridConfig(num_hidden_layers=1, mixer_types=["gdn"], **kwargs)
        assert len(str(err.value).splitlines()) == 1
    config = HybridConfig(num_hidden_layers=1, mixer_types=["gdn"], gdn={"conv_size": 2})
    assert config.layer("gdn").conv_size == 2 and config.layer("swa").window == SWAConfig().window
    assert HybridConfig(**config.to_dict()).gdn == config.gdn, "the sections survive a save and load"


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(teacher):
    """Recomputing each layer in the backward pass changes memory, not the numbers (fp32, padded rows)."""
    from relin.train.trainable import enable_gradient_checkpointing

    ids, mask = _inputs(seed=3)
    results = []
    for checkpointed in (False, True):
        model = convert(teacher, MIXED).train()
        if checkpointed:
            assert enable_gradient_checkpointing(model) == 1 and model.model.gradient_checkpointing
        loss = model(ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (plain_loss, plain), (loss, grads) = results
    torch.testing.assert_close(loss, plain_loss, rtol=0, atol=1e-6)
    assert grads.keys() == plain.keys() and len(grads) > 10
    for name in plain:
        torch.testing.assert_close(grads[name], plain[name], rtol=1e-4, atol=1e-6, msg=name)


def test_gradient_checkpointing_reaches_a_vlms_llm_and_refuses_a_model_without_layers():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from relin.train.trainable import enable_gradient_checkpointing

    llm = Qwen2ForCausalLM(Qwen2Config(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       num_key_value_heads=1, intermediate_size=32))
    vlm = torch.nn.ModuleDict({"bridge": torch.nn.Linear(4, 16), "llm": llm})
    assert enable_gradient_checkpointing(vlm) == 1 and llm.is_gradient_checkpointing
    with pytest.raises(ConfigError, match="holds no model that supports it"):
        enable_gradient_checkpointing(torch.nn.Linear(4, 4))
